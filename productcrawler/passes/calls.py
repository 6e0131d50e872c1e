"""The scheduler's calls to its pass: one of each kind in flight, timers, and the store's outage line.

Scrapy calls a scheduler synchronously from the reactor thread, and a pass
may be a network hop away, so the scheduler never waits for one: it starts a
call (a coroutine on the reactor's event loop) and acts on the result when it
comes. At most one call of each kind (lease, push, acknowledge, beat) is in
flight, so calls of one kind stay in order. A call that fails because the
store is away is not retried here: the next beat or poll starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from productcrawler import stat_keys

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from prometheus_client import Histogram
    from scrapy.statscollectors import StatsCollector

    from productcrawler.passes.base import Pass

logger = logging.getLogger(__name__)


class PassCalls:
    def __init__(self, crawl_pass: Pass, stats: StatsCollector, call_duration: Histogram) -> None:
        self.crawl_pass = crawl_pass
        self.stats = stats
        self._call_duration = call_duration
        self._tasks: dict[str, asyncio.Future[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._down_logged = False
        self.closing = False

    @property
    def in_flight(self) -> bool:
        return bool(self._tasks)

    def start(self, kind: str, call: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``call`` unless a call of this kind is in flight or the scheduler closes."""
        if kind not in self._tasks and not self.closing:
            self._tasks[kind] = asyncio.ensure_future(self._guarded(kind, call))

    async def _guarded(self, kind: str, call: Callable[[], Coroutine[Any, Any, None]]) -> None:
        # The histogram is Redis's round trips; a database pass's calls are in memory.
        timed = self._call_duration.time() if self.crawl_pass.instance else contextlib.nullcontext()
        try:
            with timed:
                await call()
        except Exception as error:
            if self.crawl_pass.is_unavailable(error):
                self._unavailable(error)
            else:
                logger.error("The scheduler's %s call failed", kind, exc_info=True)
        else:
            self._back()
        finally:
            del self._tasks[kind]

    def every(self, name: str, interval: float, tick: Callable[[], None]) -> None:
        """Call ``tick`` every ``interval`` seconds until stopped (a no-op if ``name`` runs already)."""
        loop = asyncio.get_event_loop()

        def fire() -> None:
            self._timers[name] = loop.call_later(interval, fire)
            tick()

        if name not in self._timers and not self.closing:
            self._timers[name] = loop.call_later(interval, fire)

    def stop(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    async def close(self) -> None:
        """No new calls or ticks; wait for the calls in flight (and their callbacks) to end."""
        self.closing = True
        for name in list(self._timers):
            self.stop(name)
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _unavailable(self, error: BaseException) -> None:
        if not self._down_logged:
            logger.warning("Redis is unreachable (%s); retrying, nothing is lost meanwhile", error)
            self._down_logged = True
            self.stats.set_value(stat_keys.REDIS_OUTAGE, 1)
        self.stats.inc_value(stat_keys.REDIS_ERRORS)

    def _back(self) -> None:
        if self._down_logged:
            logger.info("Redis is reachable again")
            self._down_logged = False
            self.stats.set_value(stat_keys.REDIS_OUTAGE, 0)
