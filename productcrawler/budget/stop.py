"""The crawl stopping: the budget's waits end at once, their requests given up unsent.

Scrapy's graceful stop (SIGINT, SIGTERM, scrapyd's cancel) and the guard's
stop wait for every request in the downloader to end, and a request the
announced budget holds back may wait for a reset up to
``RATE_LIMIT_HEADERS_MAX_WAIT`` away. Nothing signals the start of a stop
(``crawler.crawling`` turns false, the guard trips), so :class:`StopWatch`
looks every ``STOP_CHECK`` seconds from ``spider_opened`` on; once the crawl
stops, every budget wait ends with :class:`Stopping` and its request is given
up unsent (:data:`~productcrawler.meta.ABANDONED`: no outcome is
recorded for its id, and the next run fetches it).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

#: Seconds between two looks at whether the crawl is stopping: a stop ends the waits within this.
STOP_CHECK = 0.25


class Stopping(Exception):
    """The crawl is stopping: a budget wait ended before its time."""


class StopWatch:
    """Ends the waits of :meth:`sleep` (and fails :meth:`check`) once ``stopping()`` is true."""

    def __init__(self, stopping: Callable[[], bool] | None = None) -> None:
        self._stopping = stopping
        self._event = asyncio.Event()
        self._task: asyncio.Future[None] | None = None
        self._sleeping: set[asyncio.Future[None]] = set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def start(self) -> None:
        """Watch from now on (the crawl is running); without ``stopping``, never stop."""
        if self._stopping is not None and self._task is None:
            self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        assert self._stopping is not None
        while not self._stopping():
            await asyncio.sleep(STOP_CHECK)
        self.stop()

    def stop(self) -> None:
        """Stop now (the crawl is closing): every :meth:`sleep` ends."""
        self._event.set()
        for sleeping in self._sleeping:
            if not sleeping.done():
                sleeping.set_result(None)

    def check(self) -> None:
        if self._event.is_set():
            raise Stopping

    async def wait(self) -> None:
        """Return once the crawl stops."""
        await self._event.wait()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise :class:`Stopping` as soon as the crawl stops."""
        self.check()
        if seconds <= 0:
            return
        # asyncio.sleep's own way (a future and a timer), plus a way for stop() to end it: as cheap.
        loop = asyncio.get_running_loop()
        sleeping: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _wake, sleeping)
        self._sleeping.add(sleeping)
        try:
            await sleeping
        finally:
            timer.cancel()
            self._sleeping.discard(sleeping)
        self.check()

    async def wait_for(self, event: asyncio.Event, timeout: float) -> bool:
        """Whether ``event`` is set within ``timeout`` seconds; :class:`Stopping` if the crawl stops first."""
        self.check()
        waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self._event.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        self.check()
        return event.is_set()

    async def close(self) -> None:
        self.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _wake(sleeping: asyncio.Future[None]) -> None:
    if not sleeping.done():
        sleeping.set_result(None)
