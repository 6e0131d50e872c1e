"""The shared scheduler: scrapy-redis's Scheduler over a leased, lazily seeded pass queue.

scrapy-redis as shipped marks a request seen before it is downloaded and pops
it destructively, so whatever a dying worker held is never fetched; its
dupefilter keeps a fingerprint per request (about 100 bytes each, so ~100 MB
per million ids) and must be deleted by hand before a second pass. Here the
queue is ``PassQueue``: ids come from the pass's cursor in batches, are leased
to this instance until their outcome is committed, and go back to the queue
when the instance dies or stops. The cursor hands each id out once per pass,
which is the dupefilter's job done in a few bytes; ``BaseDupeFilter`` is used.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import redis
from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.queue import Base as RedisQueueBase
from scrapy_redis.scheduler import Scheduler as ScrapyRedisScheduler
from twisted.internet.task import LoopingCall

from productcrawler import signals as our_signals
from productcrawler import stat_keys
from productcrawler.config import CrawlConfig
from productcrawler.passes import redis_pass_for
from productcrawler.passes.redis_pass import Entry, RedisPass
from productcrawler.schedulers.local import RETRY_DELAY

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Ids leased per Redis round trip: small enough that a crash re-fetches little.
LEASE_BATCH = 32
#: Seconds between heartbeats (the TTL is HEARTBEAT_TTL in redis_pass).
HEARTBEAT_INTERVAL = 2.0
#: Seconds between looks at the shared queue once it had nothing for us: the
#: engine asks again only when a download ends or every 5 s, so a retry coming
#: due or the pass finishing elsewhere would be noticed up to 5 s late.
IDLE_POLL_INTERVAL = 0.5
#: Request meta key: leased by this instance's poll; it stays here.
_LEASED_HERE = "_productcrawler_leased_here"


class PassQueue(RedisQueueBase):
    """A scrapy-redis queue whose entries are ``"<product_id>:<retry_times>"``, not pickles."""

    def __init__(self, server: redis.Redis, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer=_NoSerializer)
        self.redis_pass: RedisPass = spider.redis_pass  # type: ignore[attr-defined]
        self._buffer: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._buffer)

    def push(self, request: Request) -> None:
        entry = Entry(request.meta["product_id"], request.meta.get("retry_times", 0))
        self.redis_pass.push(entry, float(request.meta.get(RETRY_DELAY) or 0))

    def pop(self, timeout: int = 0) -> Request | None:
        if not self._buffer:
            self._buffer.extend(self.redis_pass.pop(LEASE_BATCH))
        if not self._buffer:
            return None
        entry = self._buffer.popleft()
        request = self.spider.make_request(entry.product_id)
        if entry.retry_times:
            request.meta["retry_times"] = entry.retry_times
        return request

    def clear(self) -> None:
        self._buffer.clear()


class _NoSerializer:
    """PassQueue encodes entries itself; scrapy-redis insists on a serializer object."""

    @staticmethod
    def loads(data: bytes) -> Any:
        raise NotImplementedError

    @staticmethod
    def dumps(obj: Any) -> bytes:
        raise NotImplementedError


class RedisScheduler(ScrapyRedisScheduler):
    def __init__(self, crawler: Crawler, server: redis.Redis, config: CrawlConfig) -> None:
        super().__init__(
            server,
            persist=True,
            queue_key="%(spider)s",
            queue_cls="productcrawler.schedulers.redis.PassQueue",
            dupefilter=BaseDupeFilter(),
        )
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.redis_pass = redis_pass_for(crawler, config)
        self._unacked: list[int] = []
        self._unpushed: list[Request] = []
        self._ready: deque[Request] = deque()
        self._heartbeat = LoopingCall(self._beat)
        self._poll = LoopingCall(self._poll_queue)
        self._last_beat = (time.time(), 0)
        self._redis_down_logged = False
        crawler.signals.connect(self._committed, signal=our_signals.outcomes_committed)
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisScheduler:
        config = CrawlConfig.from_settings(crawler.settings)
        if config.redis_url is None:
            raise ValueError("RedisScheduler needs REDIS_URL")
        return cls(crawler, redis_pass_for(crawler, config).client, config)

    def open(self, spider: Spider) -> None:
        start = spider.config.start_id  # type: ignore[attr-defined]
        end = spider.config.end_id  # type: ignore[attr-defined]
        joined = self.redis_pass.open(start, end, fresh=getattr(spider, "fresh", False))
        state = self.redis_pass.state()
        logger.info("%s pass %d over ids %d..%d through Redis as instance %s (%d of %d done)",
                    "Joined" if joined else "Started", self.redis_pass.pass_id, start, end,
                    self.redis_pass.instance, state.done if state else 0, end - start + 1)
        spider.redis_pass = self.redis_pass  # type: ignore[attr-defined]
        super().open(spider)
        self._heartbeat.start(HEARTBEAT_INTERVAL, now=False)

    def close(self, reason: str) -> None:
        for task in (self._heartbeat, self._poll):
            if task.running:
                task.stop()
        try:
            self._flush_acks()
            released = self.redis_pass.release()
            self.redis_pass.stop_heartbeat()
            if released:
                logger.info("Gave %d leased ids back to the shared queue", released)
            if self.redis_pass.is_finished():
                self.redis_pass.expire_finished()
        except redis.RedisError as error:
            logger.error("Could not settle with Redis at close (%s); other instances recover "
                         "this instance's leases once its heartbeat expires", error)

    def enqueue_request(self, request: Request) -> bool:
        if request.meta.pop(_LEASED_HERE, False):
            self._ready.append(request)
            return True
        if request.meta.get(RETRY_DELAY):
            self.stats.inc_value(stat_keys.RETRY_DELAYED)
            self.stats.inc_value(stat_keys.RETRY_DELAY_SECONDS, float(request.meta[RETRY_DELAY]))
        self._unpushed.append(request)
        self._push_held()
        return True

    def _push_held(self) -> None:
        """Hand retries to Redis; while it is away they wait here (still leased to us)."""
        while self._unpushed:
            try:
                self.queue.push(self._unpushed[0])
            except redis.RedisError as error:
                self._redis_unavailable(error)
                return
            self._unpushed.pop(0)
            self.stats.inc_value("scheduler/enqueued/redis")

    def next_request(self) -> Request | None:
        if self._ready:
            return self._ready.popleft()
        try:
            request = self.queue.pop()
        except redis.RedisError as error:
            self._redis_unavailable(error)
            return None
        if request is not None:
            self.stats.inc_value("scheduler/dequeued/redis")
            self._redis_back()
        elif not self._poll.running:
            self._poll.start(IDLE_POLL_INTERVAL, now=False)
        return request

    def has_pending_requests(self) -> bool:
        return len(self.queue) > 0 or bool(self._unpushed) or bool(self._ready)

    def _committed(self, products: list[Any], failures: list[Any]) -> None:
        self._unacked.extend(item.product_id for item in products)
        self._unacked.extend(item.product_id for item in failures)
        self._flush_acks()

    def _flush_acks(self) -> None:
        if not self._unacked:
            return
        ids, self._unacked = self._unacked, []
        try:
            self.redis_pass.acknowledge(ids)
        except redis.RedisError as error:
            self._unacked[:0] = ids  # committed, so safe to acknowledge later
            self._redis_unavailable(error)

    def _beat(self) -> None:
        outcomes = {key: self.stats.get_value(stat, 0) for key, stat in
                    (("stored", stat_keys.STORED), ("missing", stat_keys.MISSING), ("failed", stat_keys.FAILED))}
        done = sum(outcomes.values())
        now = time.time()
        rate = (done - self._last_beat[1]) / max(now - self._last_beat[0], 1e-9)
        self._last_beat = (now, done)
        try:
            self._flush_acks()
            self._push_held()
            self.redis_pass.heartbeat({**outcomes, "rate": round(rate, 1), "at": now,
                                       "host": socket.gethostname(), "pid": os.getpid()})
            recovered = self.redis_pass.recover()
            if recovered:
                logger.warning("Recovered %d ids leased by instances that stopped without a goodbye",
                               recovered)
            self._redis_back()
        except redis.RedisError as error:
            self._redis_unavailable(error)

    def _idle(self) -> None:
        """Nothing to do here right now: close only once the whole pass is done."""
        try:
            self._flush_acks()
            if self.redis_pass.is_finished():
                return
            self.redis_pass.recover()
        except redis.RedisError as error:
            self._redis_unavailable(error)
        raise DontCloseSpider

    def _poll_queue(self) -> None:
        """Hand the engine a request from the shared queue, or close once the pass is done.

        Runs while the queue has nothing for us. ``engine.crawl`` is Scrapy's
        public way to wake the engine; the request comes back through
        ``enqueue_request``, which keeps it here.
        """
        engine = self.crawler.engine
        if engine is None or engine.spider is None:
            return
        self._flush_acks()
        request = self.next_request()
        if request is not None:
            self._poll.stop()
            request.meta[_LEASED_HERE] = True
            engine.crawl(request)
            return
        try:
            finished = self.redis_pass.is_finished()
        except redis.RedisError as error:
            self._redis_unavailable(error)
            return
        if finished and engine.spider_is_idle():
            self._poll.stop()
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def _redis_unavailable(self, error: Exception) -> None:
        if not self._redis_down_logged:
            logger.warning("Redis is unreachable (%s); retrying, nothing is lost meanwhile", error)
            self._redis_down_logged = True
        self.stats.inc_value(f"{stat_keys.PREFIX}/redis/errors")

    def _redis_back(self) -> None:
        if self._redis_down_logged:
            logger.info("Redis is reachable again")
            self._redis_down_logged = False
