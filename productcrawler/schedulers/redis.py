"""The shared scheduler: scrapy-redis's Scheduler over a leased, lazily seeded pass queue.

scrapy-redis as shipped marks a request seen before it is downloaded and pops
it destructively, so whatever a dying worker held is never fetched; its
dupefilter keeps a fingerprint per request (about 100 bytes each, so ~100 MB
per million ids) and must be deleted by hand before a second pass. Here the
queue is ``PassQueue``: ids come from the pass's cursor in batches, are leased
to this instance until their outcome is committed, and go back to the queue
when the instance dies or stops. The cursor hands each id out once per pass,
which is the dupefilter's job done in a few bytes; ``BaseDupeFilter`` is used.

Scrapy calls a scheduler synchronously from the reactor thread, and Redis is
a network hop away, so no Redis call runs there: every one (opening the pass,
lease, push, acknowledge, heartbeat, pass state) runs in a thread, one at a
time and in order (a ``DeferredLock``), and the engine is served from a local
buffer of leased ids that is refilled before it runs dry. A call that fails
(Redis away) is tried again by the next heartbeat or poll, not at once.
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
from scrapy.dupefilters import BaseDupeFilter
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.queue import Base as RedisQueueBase
from scrapy_redis.scheduler import Scheduler as ScrapyRedisScheduler
from twisted.internet.defer import DeferredList, DeferredLock
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThread

from productcrawler import signals as our_signals
from productcrawler import stat_keys
from productcrawler.config import CrawlConfig, crawl_config
from productcrawler.instruments import instruments_for
from productcrawler.passes import redis_pass_for
from productcrawler.passes.redis_pass import FINISHED, LOST, REPLACED, Entry
from productcrawler.schedulers.local import RESEND_NOW, RETRY_DELAY

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

#: Ids leased per Redis round trip: small enough that a crash re-fetches little.
LEASE_BATCH = 32
#: Lease more once the local buffer is down to this many ids, so that the
#: engine never waits for Redis while the pass has ids left.
REFILL_BELOW = LEASE_BATCH
#: Seconds between heartbeats (the TTL is HEARTBEAT_TTL in redis_pass).
HEARTBEAT_INTERVAL = 2.0
#: Seconds between looks at the shared queue once it had nothing for us: the
#: engine asks again only when a download ends or every 5 s, so a retry coming
#: due or the pass finishing elsewhere would be noticed up to 5 s late.
IDLE_POLL_INTERVAL = 0.5
#: Request meta key: leased by this instance and handed to the engine by the
#: scheduler itself; it stays here.
_LEASED_HERE = "_productcrawler_leased_here"


class PassQueue(RedisQueueBase):
    """A scrapy-redis queue over the ids this instance has leased, kept in memory.

    Entries are ``"<product_id>:<retry_times>"`` in Redis, not pickles; the
    scheduler leases them (in a thread) and ``extend`` adds them here.
    """

    def __init__(self, server: redis.Redis, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer=_NoSerializer)
        self._buffer: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._buffer)

    def extend(self, entries: list[Entry]) -> None:
        self._buffer.extend(entries)

    def push(self, request: Request) -> None:
        raise NotImplementedError("RedisScheduler pushes retries to the pass itself")

    def pop(self, timeout: int = 0) -> Request | None:
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
    queue: PassQueue

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
        self.redis_pass = redis_pass_for(crawler)
        self.finished = False
        self.lost = False  # the pass vanished from Redis: stopping, exit 1
        self._redis = DeferredLock()  # one Redis call at a time, in order
        self._in_flight: dict[str, Deferred[None]] = {}  # at most one call of each kind
        self._closing = False
        self._unacked: list[int] = []
        self._unpushed: list[Request] = []
        self._starved = False  # the engine asked and got nothing
        self._ready: deque[Request] = deque()
        self._heartbeat = LoopingCall(self._beat)
        self._poll = LoopingCall(self._poll_queue)
        self._last_beat = (time.time(), 0)
        self._redis_down_logged = False
        self._call_duration = instruments_for(crawler).redis_call_duration
        crawler.signals.connect(self._committed, signal=our_signals.outcomes_committed)
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisScheduler:
        config = crawl_config(crawler)
        if config.redis_url is None:
            raise ValueError("RedisScheduler needs REDIS_URL")
        return cls(crawler, redis_pass_for(crawler).client, config)

    def open(self, spider: Spider) -> Deferred[None]:
        # Scrapy waits for this Deferred before the spider's start().
        start = spider.config.start_id  # type: ignore[attr-defined]
        end = spider.config.end_id  # type: ignore[attr-defined]
        d = self._in_thread(self._open_pass, start, end, getattr(spider, "fresh", False))
        d.addCallback(self._opened, spider)
        return d

    def _open_pass(self, start: int, end: int, fresh: bool) -> tuple[bool, int]:
        joined = self.redis_pass.open(start, end, fresh=fresh)
        return joined, self.redis_pass.done_count()

    def _opened(self, result: tuple[bool, int], spider: Spider) -> None:
        joined, done = result
        logger.info("%s pass %d over ids %d..%d through Redis as instance %s (%d of %d done)",
                    "Joined" if joined else "Started", self.redis_pass.pass_id, self.redis_pass.start_id,
                    self.redis_pass.end_id, self.redis_pass.instance, done, self.redis_pass.total)
        spider.redis_pass = self.redis_pass  # type: ignore[attr-defined]
        super().open(spider)
        self._lease()
        self._heartbeat.start(HEARTBEAT_INTERVAL, now=False)

    def close(self, reason: str) -> Deferred[Any]:
        for task in (self._heartbeat, self._poll):
            if task.running:
                task.stop()
        self._closing = True  # no new calls: what is left is _settle's
        # Once the calls in flight and their callbacks are done (a failed
        # acknowledgement puts its ids back), settle the rest in one go.
        d: Deferred[Any] = DeferredList(list(self._in_flight.values()))
        d.addCallback(lambda _: self._in_thread(self._settle, self._take_unacked(), self._take_unpushed(),
                                                self.lost))
        d.addErrback(lambda failure: logger.error(
            "Could not settle with Redis at close (%s); other instances recover this instance's "
            "leases once its heartbeat expires", failure.value))
        return d

    def _settle(self, acknowledge: list[int], push: list[tuple[Entry, float]], lost: bool) -> None:
        """At close, in a thread: acknowledge and push what is left, give back every lease."""
        if lost:
            # Nothing to give back to: what we held is owed by whatever pass runs next.
            self.redis_pass.stop_heartbeat()
            return
        if acknowledge:
            self.redis_pass.acknowledge(acknowledge)
        self._push_entries(push)
        released = self.redis_pass.release()
        self.redis_pass.stop_heartbeat()
        if released:
            logger.info("Gave %d leased ids back to the shared queue", released)
        if self.redis_pass.is_finished():
            self.redis_pass.expire_finished()

    def _in_thread(self, function: Callable[..., Any], *args: Any) -> Deferred[Any]:
        return self._redis.run(deferToThread, self._timed, function, *args)

    def _timed(self, function: Callable[..., Any], *args: Any) -> Any:
        """In the thread: the call's own time, not its wait for the lock."""
        with self._call_duration.time():
            return function(*args)

    def _call(self, kind: str, function: Callable[..., Any], *args: Any, done: Callable[[Any], None],
              failed: Callable[[Failure], None] | None = None, then: Callable[[], None] | None = None) -> None:
        """Run ``function`` in a thread unless a call of this ``kind`` is in flight or we close.

        ``done`` gets its result; after a success, with the call no longer in
        flight, ``then`` runs (to send what came in meanwhile). A failure is
        not retried here: the next heartbeat or poll tries again.
        """
        if kind in self._in_flight or self._closing:
            return

        def succeeded(result: Any) -> bool:
            done(result)
            return True

        d = self._in_thread(function, *args)
        d.addCallbacks(succeeded, failed or self._redis_unavailable)
        d.addErrback(self._unexpected)
        d.addBoth(self._call_over, kind, then)
        self._in_flight[kind] = d

    def _call_over(self, succeeded: bool | None, kind: str, then: Callable[[], None] | None) -> None:
        del self._in_flight[kind]
        if succeeded and then is not None:
            then()

    @staticmethod
    def _unexpected(failure: Failure) -> None:
        logger.error("The Redis scheduler failed", exc_info=(failure.type, failure.value, failure.tb))

    # requests in

    def enqueue_request(self, request: Request) -> bool:
        if request.meta.pop(_LEASED_HERE, False):
            self._ready.append(request)
            return True
        if request.meta.pop(RESEND_NOW, False) and not request.meta.get(RETRY_DELAY):
            self._ready.append(request)  # still leased to us, and its meta says which proxy failed
            return True
        if request.meta.get(RETRY_DELAY):
            self.stats.inc_value(stat_keys.RETRY_DELAYED)
            self.stats.inc_value(stat_keys.RETRY_DELAY_SECONDS, float(request.meta[RETRY_DELAY]))
        self._unpushed.append(request)
        self._push_held()
        return True

    def _push_held(self) -> None:
        """Hand retries to Redis; while it is away they wait here (still leased to us)."""
        if not self._unpushed or "push" in self._in_flight or self._closing:
            return
        requests = self._unpushed
        entries = self._entries(requests)
        self._unpushed = []

        def pushed(count: int) -> None:
            self.stats.inc_value("scheduler/enqueued/redis", count)
            self._redis_back()

        def failed(failure: Failure) -> None:
            self._unpushed[:0] = requests[self._count_pushed(failure):]
            self._redis_unavailable(failure)

        self._call("push", self._push_entries, entries, done=pushed, failed=failed, then=self._push_held)

    @staticmethod
    def _entries(requests: list[Request]) -> list[tuple[Entry, float]]:
        return [(Entry(r.meta["product_id"], r.meta.get("retry_times", 0)), float(r.meta.get(RETRY_DELAY) or 0))
                for r in requests]

    def _take_unpushed(self) -> list[tuple[Entry, float]]:
        requests, self._unpushed = self._unpushed, []
        return self._entries(requests)

    def _push_entries(self, entries: list[tuple[Entry, float]]) -> int:
        for done, (entry, delay) in enumerate(entries):
            try:
                self.redis_pass.push(entry, delay)
            except redis.RedisError as error:
                error.pushed = done  # type: ignore[attr-defined]
                raise
        return len(entries)

    @staticmethod
    def _count_pushed(failure: Failure) -> int:
        return getattr(failure.value, "pushed", 0)

    # requests out

    def next_request(self) -> Request | None:
        if self._ready:
            return self._ready.popleft()
        request = self._pop_leased()
        if len(self.queue) < REFILL_BELOW:
            self._lease()
        if request is None:
            self._starved = True
            if not self._poll.running:
                self._poll.start(IDLE_POLL_INTERVAL, now=False)
        return request

    def _pop_leased(self) -> Request | None:
        request = self.queue.pop()
        if request is not None:
            self.stats.inc_value("scheduler/dequeued/redis")
        return request

    def has_pending_requests(self) -> bool:
        return len(self.queue) > 0 or bool(self._unpushed) or bool(self._ready)

    def _lease(self) -> None:
        if not self.finished and not self.lost:
            self._call("lease", self._lease_or_check, LEASE_BATCH, done=self._leased)

    def _lease_or_check(self, count: int) -> tuple[list[Entry], str | None]:
        """In a thread: lease up to ``count`` ids; with none to lease, what became of the pass?"""
        entries = self.redis_pass.pop(count)
        return entries, None if entries else self.redis_pass.status()

    def _leased(self, result: tuple[list[Entry], str | None]) -> None:
        entries, status = result
        self._redis_back()
        self.queue.extend(entries)
        self._pass_status(status)
        if self._starved and (entries or self.finished):
            self._wake_engine()

    def _pass_status(self, status: str | None) -> None:
        """Act on what Redis says of our pass: over (finished or replaced), or lost."""
        if status in (FINISHED, REPLACED):
            self.finished = True
        elif status == LOST and not self.lost:
            self._pass_lost()

    def _pass_lost(self) -> None:
        """The pass vanished from Redis: stop, exit 1; never call it complete.

        Rebuilding it here would mean trusting one instance's view of what is
        done while the others may be rebuilding too; stopping is safe: every
        committed outcome is in the database, and the next run starts a pass.
        """
        self.lost = True
        logger.error("The pass %d vanished from Redis (a restart without persistence, a flush or a failover "
                     "to an empty replica?); stopping. Stored outcomes are kept; run the crawl again to "
                     "start a new pass", self.redis_pass.pass_id)
        self.stats.set_value(stat_keys.EXIT_REASON, "redis_pass_lost")
        for task in (self._heartbeat, self._poll):
            if task.running:
                task.stop()
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            deferred_from_coro(engine.close_spider_async(reason="redis_pass_lost"))

    def _wake_engine(self) -> None:
        """The engine got nothing last time it asked: hand it a request, or close a finished crawl.

        ``engine.crawl`` is Scrapy's public way to wake the engine; the request
        comes back through ``enqueue_request``, which keeps it here.
        """
        engine = self.crawler.engine
        if engine is None or engine.spider is None:
            return
        request = self._pop_leased()
        if request is not None:
            self._starved = False
            if self._poll.running:
                self._poll.stop()
            request.meta[_LEASED_HERE] = True
            engine.crawl(request)
        elif self.finished and engine.spider_is_idle():
            if self._poll.running:
                self._poll.stop()
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def _poll_queue(self) -> None:
        self._flush_acks()
        self._push_held()
        if self.finished:
            self._wake_engine()
        elif self._holds_nothing():
            # Whatever Redis still counts as leased to us came from a lease
            # whose reply was lost (connection cut after the script ran): give
            # it back to the queue, or the pass would wait for it forever.
            self._call("release", self.redis_pass.release, done=self._released, then=self._lease)
        elif len(self.queue) < REFILL_BELOW:
            self._lease()

    def _holds_nothing(self) -> bool:
        """Nothing of ours is anywhere but Redis: no request, no outcome to acknowledge, no call."""
        engine = self.crawler.engine
        return (engine is not None and engine.spider_is_idle() and not self._unacked
                and not self._in_flight)

    def _released(self, count: int) -> None:
        self._redis_back()
        if count:
            logger.warning("Gave back %d ids leased to this instance but never received (a Redis "
                           "reply lost mid-call); they are fetched again", count)

    # outcomes

    def _committed(self, products: list[Any], failures: list[Any]) -> None:
        self._unacked.extend(item.product_id for item in products)
        self._unacked.extend(item.product_id for item in failures)
        self._flush_acks()

    def _flush_acks(self) -> None:
        if not self._unacked or "ack" in self._in_flight or self._closing:
            return
        ids = self._take_unacked()

        def acknowledged(done: int) -> None:
            self._redis_back()
            # -1: our pass is not the current one (replaced, or lost): the next
            # lease or heartbeat finds out which and acts on it.
            if done >= self.redis_pass.total:
                self.finished = True

        def failed(failure: Failure) -> None:
            self._unacked[:0] = ids  # committed, so safe to acknowledge later
            self._redis_unavailable(failure)

        self._call("ack", self.redis_pass.acknowledge, ids, done=acknowledged, failed=failed,
                   then=self._flush_acks)

    def _take_unacked(self) -> list[int]:
        ids, self._unacked = self._unacked, []
        return ids

    # liveness

    def _beat(self) -> None:
        outcomes = {key: self.stats.get_value(stat, 0) for key, stat in
                    (("stored", stat_keys.STORED), ("missing", stat_keys.MISSING), ("failed", stat_keys.FAILED))}
        done = sum(outcomes.values())
        now = time.time()
        rate = (done - self._last_beat[1]) / max(now - self._last_beat[0], 1e-9)
        self._last_beat = (now, done)
        self._flush_acks()
        self._push_held()
        status = {**outcomes, "rate": round(rate, 1), "at": now, "host": socket.gethostname(), "pid": os.getpid()}
        self._call("beat", self._beat_in_thread, status, done=self._beaten)

    def _beat_in_thread(self, status: dict[str, Any]) -> tuple[int, str]:
        pass_status = self.redis_pass.status()
        if pass_status == LOST:
            return 0, pass_status  # no heartbeat into keys of a pass that is gone
        self.redis_pass.heartbeat(status)
        recovered = self.redis_pass.recover()
        self.redis_pass.done_count()  # refreshes the count the progress line and metrics show
        return recovered, pass_status

    def _beaten(self, result: tuple[int, str]) -> None:
        recovered, status = result
        self._redis_back()
        if recovered:
            logger.warning("Recovered %d ids leased by instances that stopped without a goodbye", recovered)
        self._pass_status(status)

    def _idle(self) -> None:
        """Nothing to do here right now: close only once the whole pass is done."""
        self._flush_acks()
        if self.finished:
            return
        if self.lost:
            raise DontCloseSpider  # closing already, with its own reason
        if not self._poll.running:
            self._poll.start(IDLE_POLL_INTERVAL, now=False)
        raise DontCloseSpider

    def _redis_unavailable(self, failure: Failure) -> None:
        if not failure.check(redis.RedisError):
            logger.error("Redis call failed", exc_info=(failure.type, failure.value, failure.tb))
            return
        if not self._redis_down_logged:
            logger.warning("Redis is unreachable (%s); retrying, nothing is lost meanwhile", failure.value)
            self._redis_down_logged = True
            self.stats.set_value(stat_keys.REDIS_OUTAGE, 1)
        self.stats.inc_value(stat_keys.REDIS_ERRORS)

    def _redis_back(self) -> None:
        if self._redis_down_logged:
            logger.info("Redis is reachable again")
            self._redis_down_logged = False
            self.stats.set_value(stat_keys.REDIS_OUTAGE, 0)
