"""The proxies of this crawl as this instance sees them: which one is next, which rest.

``choose()`` hands out the usable proxies (score at or above the minimum, not
resting) in turn. Outcomes are counted here and handed to the health book
(:mod:`productcrawler.proxies.books`) every ``SYNC_INTERVAL`` seconds, or at
once after a failure so that a dead proxy rests within one round trip; each
sync also brings back what other instances did to the shared scores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from productcrawler.proxies.books import SYNC_INTERVAL
from productcrawler.proxies.health import ProxyHealth

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scrapy.statscollectors import StatsCollector

    from productcrawler.config.proxy_urls import Proxy
    from productcrawler.proxies.books import HealthBook, Snapshot

logger = logging.getLogger(__name__)

STATS = "productcrawler/proxy"
#: Seconds after which a probe with no answer no longer holds its proxy back.
PROBE_TIMEOUT = 60.0


def stat(name: str, proxy: Proxy | None = None) -> str:
    """``productcrawler/proxy/<name>``, or ``.../<name>/<label>`` for one proxy."""
    return f"{STATS}/{name}" if proxy is None else f"{STATS}/{name}/{proxy.label}"


class ProxyPool:
    def __init__(self, proxies: Sequence[Proxy], book: HealthBook, minimum: float, stats: StatsCollector, *,
                 fallback: HealthBook | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.proxies = list(proxies)
        self.book = book
        #: While the shared book is unreachable, outcomes also go to this one
        #: (in this process), so that a dead proxy still rests here.
        self.fallback = fallback
        self.minimum = minimum
        self.stats = stats
        self.clock = clock
        self.health = [ProxyHealth() for _ in self.proxies]
        self._deltas = [[0, 0] for _ in self.proxies]
        self._last_reason: list[str | None] = [None] * len(self.proxies)
        self._next = 0
        self._synced = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sync_lock = asyncio.Lock()
        self._redis_down_logged = False
        self._resting: set[int] = set()  # as of the last sync
        # Back from a rest, a proxy gets one request at a time until one works:
        # a proxy still dead then costs one request per rest, not a downloader's worth.
        self._probing: set[int] = set()
        self._probe_sent: dict[int, float] = {}  # index -> when its probe left

    # -- choosing ----------------------------------------------------------

    def usable(self, index: int, now: float) -> bool:
        health = self.health[index]
        if health.score < self.minimum or health.resting(now):
            return False
        return index not in self._probing or now - self._probe_sent.get(index, -PROBE_TIMEOUT) >= PROBE_TIMEOUT

    def choose(self, avoid: int | None = None) -> Proxy | None:
        """The next usable proxy in turn (another than ``avoid`` if there is one)."""
        now = self.clock()
        count = len(self.proxies)
        fallback = None
        for step in range(count):
            index = (self._next + step) % count
            if self.usable(index, now):
                if index == avoid:
                    fallback = index
                    continue
                return self._chosen(index, now)
        return None if fallback is None else self._chosen(fallback, now)

    def _chosen(self, index: int, now: float) -> Proxy:
        self._next = index + 1
        if index in self._probing:
            self._probe_sent[index] = now
        return self.proxies[index]

    def all_refused_credentials(self) -> bool:
        """Every proxy's last failure seen here was a 407 (a rest from another instance: unknown)."""
        return all(reason == "http_407" for reason in self._last_reason)

    def seconds_until_one_is_back(self) -> float:
        now = self.clock()
        return max(0.0, min(h.rest_until for h in self.health) - now)

    async def ready(self) -> None:
        """Returns once the first sync is done (a joining instance sees the rests at once)."""
        if not self._synced.is_set():
            await self._synced.wait()

    # -- outcomes ----------------------------------------------------------

    def succeeded(self, proxy: Proxy) -> None:
        self._deltas[proxy.index][0] += 1
        if self._probing:
            self._probing.discard(proxy.index)
            self._probe_sent.pop(proxy.index, None)

    def answered(self, proxy: Proxy) -> None:
        """Neither a success nor its failure (a truncated body): a probe may go again."""
        self._probe_sent.pop(proxy.index, None)

    def failed(self, proxy: Proxy, reason: str) -> None:
        self._deltas[proxy.index][1] += 1
        self._last_reason[proxy.index] = reason
        self._probe_sent.pop(proxy.index, None)
        self.stats.inc_value(stat("failures", proxy))
        self.stats.inc_value(stat(f"failure_reason/{reason}"))
        self._wake.set()

    # -- syncing -----------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.sync()  # the last successes, for the other instances

    async def _run(self) -> None:
        while True:
            await self.sync()
            try:
                await asyncio.wait_for(self._wake.wait(), SYNC_INTERVAL)
            except TimeoutError:
                pass

    async def sync(self) -> None:
        async with self._sync_lock:
            self._wake.clear()
            deltas = [(d[0], d[1]) for d in self._deltas]
            for d in self._deltas:
                d[0] = d[1] = 0
            try:
                snapshot = await self.book.sync(deltas)
            except Exception as error:  # noqa: BLE001 - Redis away: keep counting, keep the last view
                for d, (successes, failures) in zip(self._deltas, deltas):
                    d[0] += successes
                    d[1] += failures
                self._book_unavailable(error)
                if self.fallback is not None:
                    self._apply(await self.fallback.sync(deltas))
                self._synced.set()
                return
            if self._redis_down_logged:
                self._redis_down_logged = False
                logger.info("Proxy health: the shared book is reachable again")
            self._apply(snapshot)
            self._synced.set()

    def _apply(self, snapshot: Snapshot) -> None:
        now = self.clock()
        for index, new in enumerate(snapshot.health):
            proxy = self.proxies[index]
            resting = new.resting(now)
            if index in snapshot.rested:
                self._log_rest(proxy, new, snapshot.rested[index])
            elif resting and index not in self._resting:
                logger.info("Proxy %s is resting for another %.1fs (rested by another instance)",
                            proxy.label, new.rest_until - now)
            elif not resting and index in self._resting:
                logger.info("Proxy %s: rest over, it gets requests again", proxy.label)
            if resting:
                self._resting.add(index)
                self._probing.add(index)
            else:
                self._resting.discard(index)
            self.stats.set_value(stat("score", proxy), round(new.score, 1))
            self.stats.set_value(stat("resting", proxy), int(new.resting(now)))
        self.health = snapshot.health

    def _log_rest(self, proxy: Proxy, health: ProxyHealth, seconds: float) -> None:
        self.stats.inc_value(stat("rests", proxy))
        if self.stats.get_value(stat("first_rest_at", proxy)) is None:
            self.stats.set_value(stat("first_rest_at", proxy), round(time.time(), 3))
        level = logging.WARNING if health.rests == 1 else logging.INFO
        logger.log(level, "Proxy %s rests for %.1fs (rest %d in a row; last failure: %s); its requests go "
                   "to the other proxies", proxy.label, seconds, health.rests,
                   self._last_reason[proxy.index] or "seen by another instance")

    def _book_unavailable(self, error: Exception) -> None:
        self.stats.inc_value(stat("book_errors"))
        if not self._redis_down_logged:
            self._redis_down_logged = True
            logger.warning("Proxy health: cannot reach the shared book (%s); scores are kept in this "
                           "process meanwhile, retrying every %gs", error, SYNC_INTERVAL)
