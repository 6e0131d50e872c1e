"""Scrapy's downloader, without the hand-offs a request pays for on its way to the download handler.

Scrapy's :class:`~scrapy.core.downloader.Downloader` queues every request in
its download slot and starts a new task to send it, even when the slot has a
free place and no delay: per response a Deferred, a Future made from it, a task
and two turns of the event loop, on top of ``fetch``'s own ``inlineCallbacks``
wrapper. For this crawl (one API host, no download delay:
the token bucket paces requests at the handler) that is every request.

:class:`LeanDownloader` (the ``DOWNLOADER`` setting, a documented extension
point) sends a request from the task that ``fetch`` started, through Scrapy's
own ``_download`` (the same signals and slot bookkeeping). When its slot is
full (``CONCURRENT_REQUESTS_PER_DOMAIN``/``_PER_IP``, ``DOWNLOAD_SLOTS``) the
request waits, first come first served, and a place is taken the moment it is
given: Scrapy's queue counts a request as transferring only once its new task
runs, so on the asyncio reactor a burst gets past a slot's concurrency (6 at
once through a slot of 2 in ``tests/test_downloader.py``); this one holds it.
A slot with a delay (``DOWNLOAD_DELAY``, ``DOWNLOAD_SLOTS``) takes Scrapy's
path unchanged, and so does a request that finds its slot full on a reactor
without asyncio (Twisted's own): there is no loop to wait on, and there
Scrapy's queue starts a download the moment it gives it a place.
A delay given to a slot at run time (``slot.delay``, as AutoThrottle sets it)
while requests wait in its line spaces them as Scrapy's queue would: one place
at a time, each ``download_delay()`` after the last request the slot sent.
"""

from __future__ import annotations

import asyncio
import warnings
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.downloader import Downloader, Slot
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.utils.asyncio import call_later, is_asyncio_available
from scrapy.utils.defer import deferred_from_coro

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred


class LeanDownloader(Downloader):
    """Scrapy's downloader; requests go from the task that fetches them, through a strict slot."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        #: Requests waiting for a place in a full slot, and the future that gives them one.
        self._waiting: dict[Slot, deque[tuple[Request, asyncio.Future[None]]]] = {}

    def fetch(self, request: Request, spider: Any = None) -> Deferred[Response | Request]:
        if spider is not None:  # as Scrapy's fetch() does
            warnings.warn("Passing a spider to Downloader.fetch() is deprecated", ScrapyDeprecationWarning,
                          stacklevel=2)
        # Counted at once (the engine asks needs_backout() right after this call), uncounted when done.
        self.active.add(request)
        fetched = deferred_from_coro(self.middleware.download_async(self._enqueue_request, request))
        return fetched.addBoth(self._fetched, request)

    def _fetched(self, result: Any, request: Request) -> Any:
        self.active.discard(request)
        return result

    async def _enqueue_request(self, request: Request) -> Response:
        key, slot = self._get_slot(request)
        if slot.latercall or slot.download_delay():
            return await super()._enqueue_request(request)
        if slot.free_transfer_slots() <= 0 and not is_asyncio_available():
            # Twisted's own reactor: no asyncio loop to wait on, and Scrapy's queue is strict there
            # (it starts a download the moment it gives the request a place).
            return await super()._enqueue_request(request)
        request.meta[self.DOWNLOAD_SLOT] = key
        slot.active.add(request)
        try:
            self.signals.send_catch_log(signal=signals.request_reached_downloader, request=request,
                                        spider=self.crawler.spider)
            if slot.free_transfer_slots() <= 0 or slot in self._waiting:
                await self._wait_for_place(slot, request)
            slot.lastseen = monotonic()
            return await self._download(slot, request)
        finally:
            slot.active.remove(request)

    async def _wait_for_place(self, slot: Slot, request: Request) -> None:
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(slot, deque())
        entry = (request, place)
        waiting.append(entry)
        try:
            await place
        except BaseException:
            if not place.cancelled():  # given a place, then cancelled before sending: pass it on
                slot.transferring.discard(request)
                self._process_queue(slot)
            elif entry in waiting:  # (_process_queue passes over a cancelled one and drops it)
                waiting.remove(entry)
                if not waiting and self._waiting.get(slot) is waiting:
                    del self._waiting[slot]
            raise

    def _process_queue(self, slot: Slot) -> None:
        waiting = self._waiting.get(slot)
        if waiting and not slot.latercall:
            self._give_places(slot, waiting)
        if waiting is not None and not waiting:
            del self._waiting[slot]
        super()._process_queue(slot)  # blocked by a latercall set here, as Scrapy's own is

    def _give_places(self, slot: Slot, waiting: deque[tuple[Request, asyncio.Future[None]]]) -> None:
        """Free places to the first in line; with a delay (given while they waited), Scrapy's pacing:
        one place, then a latercall (Scrapy's ``_latercall``, back here) when the delay has run."""
        now = monotonic()
        delay = slot.download_delay()
        while waiting and slot.free_transfer_slots() > 0:
            if delay and (penalty := delay - now + slot.lastseen) > 0:
                slot.latercall = call_later(penalty, self._latercall, slot)
                return
            request, place = waiting.popleft()
            if place.done():  # cancelled while it waited: its task is on its way out
                continue
            slot.transferring.add(request)  # taken now, not when its task next runs
            slot.lastseen = now
            place.set_result(None)
