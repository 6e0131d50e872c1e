"""The crawl's scheduler: the pass's ids become requests, and retries and outcomes go back to it.

One scheduler for both passes (``base.Pass``): the database pass of a single
process and the Redis pass shared by many. It implements Scrapy's
``BaseScheduler`` directly, not scrapy-redis's (whose queue pops and pickles
requests, whose dupefilter keeps a fingerprint per id and whose scheduler
calls Redis synchronously on the reactor thread): docs/design-notes.md#the-pass-scheduler-not-scrapy-rediss.
The Scrapy side and the pass side are one state machine (leased, ready,
unpushed, unacknowledged), so they share this module; ``calls.py`` holds the
calls to the pass.

How ids flow:

- **Out**: positions are leased from the pass a batch at a time, ahead of need,
  into a local buffer with their ids (the pass's ``ids`` source maps them);
  ``next_request`` turns the next one into a request with the spider's
  ``make_request``. The spider hands out nothing itself.
- **Retries**: a request that comes back (the retry middleware's, with
  ``meta["retry_delay"]``) is pushed back to the pass, which holds it until
  it is due (the database pass in memory, the Redis pass in a sorted set
  scored by the Redis server's clock) and leases it again, to any instance.
- **Done**: once the pipeline has committed a batch of outcomes
  (``outcomes_committed``), their positions are acknowledged to the pass, in
  one call per batch. Outcomes carry ids, so the positions of the ids in
  flight are kept here (a file may list an id twice: one position each).
- **Idle**: with nothing leased the scheduler looks at the pass every
  ``poll_interval`` and wakes the engine when an id comes; the crawl closes
  only once the pass has nothing more to hand out (or it was replaced, or lost).

Calls to the pass never make Scrapy wait: ``calls.py``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro

from productcrawler import signals as our_signals
from productcrawler import stat_keys
from productcrawler.config.parsers import HEARTBEAT_INTERVAL
from productcrawler.instruments import crawl_instruments
from productcrawler.meta import (
    LISTED_ON,
    PASS_LEASED_HERE,
    PASS_POSITION,
    PRODUCT_ID,
    REDIS_PASS_LOST,
    RESEND_NOW,
    RETRY_DELAY,
)
from productcrawler.passes.base import FINISHED, LOST, REPLACED, Entry
from productcrawler.passes.calls import PassCalls
from productcrawler.passes.crawler import crawl_pass
from productcrawler.passes.listing import ListingPages
from productcrawler.retry.scheduler import DelayingScheduler
from productcrawler.stat_keys import add_seconds
from productcrawler.storage.pipeline import StoragePipeline

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IDelayedCall

    from productcrawler.ids import ProductId
    from productcrawler.passes.base import Pass

logger = logging.getLogger(__name__)

#: Ids leased per call: small enough that a crash re-fetches little.
LEASE_BATCH = 32
#: Listing pages leased per call, and held at most (leased or in flight) by one instance: a page
#: is 100-250 products, and more would let one instance take a whole numbered listing into its
#: downloader's queue (where requests wait for the rate limit) before another joins in.
PAGE_LEASE_BATCH = 2
PAGES_HELD = 4
#: Lease more once the local buffer is down to this many ids, so that the
#: engine never waits for the pass while it has ids left.
REFILL_BELOW = LEASE_BATCH


@runtime_checkable
class PassSpider(Protocol):
    """A spider a pass drives (``ProductsSpider``): it builds the request of an id the pass hands out."""

    def make_request(self, product_id: int | str) -> Request: ...


class PassScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler, crawl_pass: Pass) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.crawl_pass = crawl_pass
        self.spider: PassSpider | None = None
        self.finished = False  # the pass has nothing more to hand out
        self.lost = False  # the pass vanished from Redis: stopping, exit 1
        self._leased: deque[tuple[Entry, ProductId]] = deque()
        self._ready: deque[Request] = deque()  # requests that stay here: re-sends, and the wake-up's
        self._in_flight: dict[ProductId, list[int]] = {}  # id -> its positions with a request out
        self._unacked: list[int] = []  # positions
        self._revealed: dict[int, str] = {}  # listing pages the unacknowledged ones made known: page -> URL
        self._listed_held: dict[Request, IDelayedCall] = {}  # PRODUCT_IDS=list: listed products' delayed retries
        #: A listing pass: positions are pages (acknowledged by their marks), never product ids.
        self._by_page = isinstance(crawl_pass.ids, ListingPages)
        #: Lease this many at a time, and more once the buffer is below it.
        self._refill_below = PAGE_LEASE_BATCH if self._by_page else REFILL_BELOW
        self._unpushed: list[tuple[Entry, float]] = []
        self._starved = False  # the engine asked and got nothing
        self._last_beat = (time.time(), 0)
        self._calls = PassCalls(crawl_pass, crawler.stats, crawl_instruments(crawler).redis_call_duration)
        crawler.signals.connect(self._committed, signal=our_signals.outcomes_committed)
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:  # type: ignore[override]  # other spiders get Scrapy's
        if not isinstance(crawler.spider, PassSpider):
            # Another spider of the project (one-URL commands, benchmarks): no pass.
            return DelayingScheduler.from_crawler(crawler)
        crawl = crawl_pass(crawler)
        # Built after the item pipelines (the engine opens the spider): the rows it writes carry this pass.
        storage = crawler.get_item_pipeline(StoragePipeline)
        if storage is not None:
            storage.stamp_with(crawl)
        return cls(crawler, crawl)

    # opening and closing

    def open(self, spider: Spider) -> Deferred[None]:
        # Scrapy waits for this before it reads the spider's start().
        return deferred_from_coro(self._open(spider))

    async def _open(self, spider: Spider) -> None:
        self.spider = spider  # type: ignore[assignment]  # a PassSpider: from_crawler chose this scheduler for it
        logger.info("%s", await self.crawl_pass.open(fresh=getattr(spider, "fresh", False)))
        self._lease_soon()
        if self.crawl_pass.instance is not None:
            self._calls.every("beat", HEARTBEAT_INTERVAL, self._beat)

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        await self._calls.close()  # no new calls: what is left is settled here
        for call in self._listed_held.values():
            if call.active():
                call.cancel()
        try:
            if not self.lost:
                if self._unacked:
                    await self.crawl_pass.acknowledge(*self._take_unacked())
                if self._unpushed:
                    retries, self._unpushed = self._unpushed, []
                    await self.crawl_pass.push(retries)
            await self.crawl_pass.close(reason, lost=self.lost)
        except Exception as error:
            if not self.crawl_pass.is_unavailable(error):
                raise
            if self.crawl_pass.instance is None:
                logger.error("Could not settle the pass at close (%s); the next run resumes it", error)
            else:
                logger.error("Could not settle with Redis at close (%s); other instances recover this "
                             "instance's leases once its heartbeat expires", error)

    # Only with something to do: a call that reached the store is what says it is back.
    def _acknowledge_soon(self) -> None:
        if self._unacked:
            self._calls.start("ack", self._flush_acks)

    def _push_soon(self) -> None:
        if self._unpushed:
            self._calls.start("push", self._push_held)

    def _lease_soon(self) -> None:
        if self._by_page and len(self._leased) + len(self._in_flight) >= PAGES_HELD:
            return  # a page's commit asks again
        if not self.finished and not self.lost:
            self._calls.start("lease", self._lease_more)

    # requests in

    def enqueue_request(self, request: Request) -> bool:
        if request.meta.pop(PASS_LEASED_HERE, False) or PRODUCT_ID not in request.meta:
            self._ready.append(request)
            return True
        if LISTED_ON in request.meta:  # PRODUCT_IDS=list: a listed product, not a position of the pass
            return self._hold_listed(request)
        if request.meta.pop(RESEND_NOW, False) and not request.meta.get(RETRY_DELAY):
            self._ready.append(request)  # still leased to us, and its meta says which proxy failed
            return True
        delay = float(request.meta.pop(RETRY_DELAY, 0) or 0)
        if delay > 0:
            self.stats.inc_value(stat_keys.RETRY_DELAYED)
            add_seconds(self.stats, stat_keys.RETRY_DELAY_SECONDS, delay)
        position = request.meta[PASS_POSITION]
        self._settled(request.meta[PRODUCT_ID], position)
        self._unpushed.append((Entry(position, request.meta.get("retry_times", 0)), delay))
        self._push_soon()
        return True

    def _hold_listed(self, request: Request) -> bool:
        """A listed product's request stays here, after its retry's delay if it has one."""
        delay = float(request.meta.pop(RETRY_DELAY, 0) or 0)
        if delay <= 0:
            self._ready.append(request)
            return True
        self.stats.inc_value(stat_keys.RETRY_DELAYED)
        add_seconds(self.stats, stat_keys.RETRY_DELAY_SECONDS, delay)
        from twisted.internet import reactor  # the running one: installed by Scrapy before the crawl

        self._listed_held[request] = reactor.callLater(delay, self._release_listed, request)
        return True

    def _release_listed(self, request: Request) -> None:
        del self._listed_held[request]
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            request.meta[PASS_LEASED_HERE] = True
            engine.crawl(request)

    async def _push_held(self) -> None:
        """Hand the held retries to the pass in one call; while it is away they wait here (still leased to us)."""
        while self._unpushed:
            retries = self._unpushed[:]  # more may be held while the call is out: the next round takes them
            await self.crawl_pass.push(retries)
            del self._unpushed[:len(retries)]
            self.stats.inc_value("scheduler/enqueued/pass", len(retries))
            self.finished = False  # the pass has something to hand out again
        if self._starved:
            self._calls.every("poll", self.crawl_pass.poll_interval, self._poll)

    # requests out

    def next_request(self) -> Request | None:
        if self._ready:
            return self._ready.popleft()
        request = self._from_lease()
        if len(self._leased) < self._refill_below:
            self._lease_soon()
        if request is None:
            self._starved = True
            self._calls.every("poll", self.crawl_pass.poll_interval, self._poll)
        return request

    def _from_lease(self) -> Request | None:
        if not self._leased:
            return None
        entry, product_id = self._leased.popleft()
        request = self.spider.make_request(product_id)  # type: ignore[union-attr]  # a PassSpider, set in open()
        request.meta[PASS_POSITION] = entry.position
        positions = self._in_flight.get(product_id)
        if positions is None:
            self._in_flight[product_id] = [entry.position]
        else:
            positions.append(entry.position)
        if entry.retry_times:
            request.meta["retry_times"] = entry.retry_times
        self.stats.inc_value("scheduler/dequeued/pass")
        return request

    def has_pending_requests(self) -> bool:
        return bool(self._leased or self._ready or self._unpushed or self._listed_held)

    def __len__(self) -> int:
        return len(self._leased) + len(self._ready) + len(self._unpushed) + len(self._listed_held)

    async def _lease_more(self) -> None:
        lease = await self.crawl_pass.lease(self._refill_below)
        ids = self.crawl_pass.ids.ids_at([entry.position for entry in lease.entries])
        self._leased.extend(zip(lease.entries, ids, strict=True))
        if not lease.entries:
            self._pass_status(lease.status)
        if self._starved and (lease.entries or self.finished):
            self._wake_engine()

    def _wake_engine(self) -> None:
        """The engine got nothing last time it asked: hand it a request, or close a finished crawl.

        ``engine.crawl`` is Scrapy's public way to wake the engine; the request
        comes back through ``enqueue_request``, which keeps it here.
        """
        engine = self.crawler.engine
        if engine is None or engine.spider is None:
            return
        request = self._from_lease()
        if request is not None:
            self._starved = False
            self._calls.stop("poll")
            request.meta[PASS_LEASED_HERE] = True
            engine.crawl(request)
        elif self.finished and engine.spider_is_idle():
            self._calls.stop("poll")
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def _poll(self) -> None:
        self._acknowledge_soon()
        self._push_soon()
        if self.finished:
            self._wake_engine()
        elif self._holds_nothing():
            # Whatever the pass still counts as leased to us came from a lease
            # whose reply was lost (connection cut after the script ran): give
            # it back, or the pass would wait for it forever.
            self._calls.start("lease", self._give_back_then_lease)
        elif len(self._leased) < self._refill_below:
            self._lease_soon()

    def _holds_nothing(self) -> bool:
        """Nothing of ours is anywhere but the pass: no request, no outcome to acknowledge, no call."""
        engine = self.crawler.engine
        return (engine is not None and engine.spider_is_idle() and not self._leased and not self._unacked
                and not self._calls.in_flight)

    async def _give_back_then_lease(self) -> None:
        if count := await self.crawl_pass.give_back_lost():
            logger.warning("Gave back %d ids leased to this instance but never received (a Redis "
                           "reply lost mid-call); they are fetched again", count)
        await self._lease_more()

    def _pass_status(self, status: str) -> None:
        """Act on what the pass says of itself: over (finished or replaced), or lost."""
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
                     "start a new pass", self.crawl_pass.pass_id)
        self.stats.set_value(stat_keys.EXIT_REASON, REDIS_PASS_LOST)
        for name in ("beat", "poll"):
            self._calls.stop(name)
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            deferred_from_coro(engine.close_spider_async(reason=REDIS_PASS_LOST))

    # outcomes

    def _committed(self, products: list[Any], failures: list[Any], pages: list[Any] | None = None) -> None:
        if self._by_page:  # a listing pass: its positions are pages; their products are not positions
            for page in pages or ():
                if self._settled(page.page) is not None:
                    self._unacked.append(page.page)
                    self._revealed.update(page.revealed)
            self._lease_soon()
        else:
            for items in (products, failures):
                for item in items:
                    position = self._settled(item.product_id)
                    if position is not None:
                        self._unacked.append(position)
        self._acknowledge_soon()

    def _settled(self, product_id: ProductId, position: int | None = None) -> int | None:
        """The id's request is back (an outcome, or a retry for the pass): its position, no longer in flight."""
        positions = self._in_flight.get(product_id)
        if not positions:
            return None
        if position is None:
            position = positions.pop(0)
        elif position in positions:
            positions.remove(position)
        if not positions:
            del self._in_flight[product_id]
        return position

    async def _flush_acks(self) -> None:
        while self._unacked:
            ids, revealed = self._take_unacked()
            try:
                status = await self.crawl_pass.acknowledge(ids, revealed)
            except Exception:
                self._unacked[:0] = ids  # committed, so safe to acknowledge later
                self._revealed.update(revealed)
                raise
            if status == FINISHED:
                self.finished = True
            elif revealed:
                self.finished = False  # pages the pass did not know of
                self._lease_soon()

    def _take_unacked(self) -> tuple[list[int], dict[int, str]]:
        ids, self._unacked = self._unacked, []
        revealed, self._revealed = self._revealed, {}
        return ids, revealed

    # liveness

    def _beat(self) -> None:
        outcomes = {key: self.stats.get_value(stat, 0) for key, stat in
                    (("stored", stat_keys.STORED), ("missing", stat_keys.MISSING), ("failed", stat_keys.FAILED))}
        done = sum(outcomes.values())
        now = time.time()
        rate = (done - self._last_beat[1]) / max(now - self._last_beat[0], 1e-9)
        self._last_beat = (now, done)
        self._acknowledge_soon()
        self._push_soon()
        status = {**outcomes, "rate": round(rate, 1), "at": now, "host": socket.gethostname(), "pid": os.getpid()}
        self._calls.start("beat", lambda: self._beat_once(status))

    async def _beat_once(self, status: dict[str, Any]) -> None:
        pass_status, recovered = await self.crawl_pass.beat(status)
        if recovered:
            logger.warning("Recovered %d ids leased by instances that stopped without a goodbye", recovered)
        self._pass_status(pass_status)

    def _idle(self) -> None:
        """Nothing to do here right now: close only once the pass has nothing more to hand out."""
        self._acknowledge_soon()
        if self.finished:
            return
        if not self.lost:
            self._starved = True
            self._calls.every("poll", self.crawl_pass.poll_interval, self._poll)
        raise DontCloseSpider  # lost: closing already, with its own reason
