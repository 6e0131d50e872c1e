"""The download handler that takes each request's rate-limit slot right before sending it.

The token bucket's slot has to hold where the API counts requests: on the
wire. :class:`PacedDownloadMixin` waits for the slot (and gives up stale ones,
see :meth:`~productcrawler.ratelimit.middleware.RateLimitMiddleware.wait_for_slot`)
as the first thing a download does, then calls the handler's own
``download_request``; ``download_latency`` (which AutoThrottle reads) is
measured from after the wait (and from a new slot's, below). After the wait,
a request the crawl no longer sends (the guard or the proxies stopped it
meanwhile) is given up instead (:meth:`~productcrawler.download.stops.Stops.refuse_unsent`).

Between that call and aiohttp writing the request, one thing can suspend: the
connection. With an idle pooled connection nothing does, but when the pool has
none (it grows while the API holds its answers, and the connections of answers
that came back together are freed only as the reactor gets to them), aiohttp
opens one, which takes at least a turn of the event loop, tens of milliseconds
on a busy one, and requests checked apart could be written together after
their slots have gone stale (tests/test_ratelimit_at_the_wire.py, the API's stall;
docs/design-notes.md#the-rate-limit-waits-at-the-wire). So
:class:`PacedAiohttpDownloadHandler` gets its connections from a
:class:`PacedConnector`, which checks the slot's deadline again once the
connection is in hand: a request whose slot went stale meanwhile takes a new
one, holding its connection, and is written at that slot. From that check to
the write nothing suspends (an empty body goes out with the headers, see
``productcrawler/download/handler.py``), but on Scrapy's own path, taken when
something listens to ``headers_received`` or ``bytes_received``, aiohttp
writes from a task of its own, a turn of the loop after the check.

A request that reaches the handler has passed every downloader middleware, so
every request actually sent takes a slot (retries, requests through a proxy),
and a cache hit takes none.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import aiohttp
from scrapy.core.downloader.handlers._aiohttp import _ClientResponse

from productcrawler.config.crawler import crawl_config
from productcrawler.download.handler import LeanAiohttpDownloadHandler
from productcrawler.download.stops import crawl_stops
from productcrawler.meta import SENT_AT, WRITE_STARTED
from productcrawler.per_crawler import downloader_middleware
from productcrawler.ratelimit.middleware import RateLimitMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)

#: The download under way in this task, once it has its slot: (rate limit, request, the slot's
#: deadline). Set by the pacing mixin right before the handler's own download, read by
#: PacedConnector when aiohttp asks it for a connection: nothing suspends in between.
_SENDING: ContextVar[tuple[RateLimitMiddleware, Request, float] | None] = ContextVar(
    "productcrawler_ratelimit_sending", default=None)


class PacedDownloadMixin:
    """Waits for the crawler's rate-limit slot before the download handler sends a request."""

    crawler: Crawler
    paces_requests: bool = True  # what RateLimitMiddleware checks DOWNLOAD_HANDLERS for
    _unpaced_logged: bool = False

    async def download_request(self, request: Request) -> Response:
        limit = downloader_middleware(self.crawler, RateLimitMiddleware)  # a handler used on its own: none
        stops = crawl_stops(self.crawler)
        if limit is None:
            if not self._unpaced_logged and crawl_config(self.crawler).rate.enabled:
                self._unpaced_logged = True
                logger.error("RATE_LIMIT_ENABLED is on but RateLimitMiddleware is not in "
                             "DOWNLOADER_MIDDLEWARES: requests are sent without a rate limit")
            stops.refuse_unsent(request)
            return await super().download_request(request)  # type: ignore[misc]  # a mixin: the handler it is mixed into has it
        deadline = await limit.wait_for_slot(request)
        stops.refuse_unsent(request)  # checked last: the crawl may have stopped during the wait
        if SENT_AT in request.meta:  # metrics on: the latency starts at the send, not the wait
            request.meta[SENT_AT] = time.monotonic()
        sending = _SENDING.set((limit, request, deadline))
        try:
            return await super().download_request(request)  # type: ignore[misc]  # a mixin: the handler it is mixed into has it
        finally:
            _SENDING.reset(sending)


class PacedConnector(aiohttp.TCPConnector):
    """aiohttp's connector, but a connection that comes after the request's slot went stale waits for a new slot."""

    async def connect(self, req: aiohttp.ClientRequest, traces: list[Any],
                      timeout: aiohttp.ClientTimeout) -> aiohttp.connector.Connection:
        sending = _SENDING.get()
        connection = await super().connect(req, traces, timeout)
        if sending is None:  # not paced (the rate limit is off)
            return connection
        limit, request, deadline = sending
        try:
            if time.monotonic() > deadline:
                while time.monotonic() > deadline:
                    deadline = await limit.take_new_slot(request)
                # The new slot is the send: latency (AutoThrottle's input) and metrics count from it,
                # and a connection aiohttp asks for again (a dropped keep-alive) checks against it.
                request.meta[WRITE_STARTED] = now = time.monotonic()
                if SENT_AT in request.meta:
                    request.meta[SENT_AT] = now
                _SENDING.set((limit, request, deadline))
        except BaseException:
            connection.release()  # unused: back to the pool
            raise
        return connection


class PacedAiohttpDownloadHandler(PacedDownloadMixin, LeanAiohttpDownloadHandler):
    """The lean aiohttp download handler (productcrawler/download/handler.py), paced by the rate limit.

    Its session is Scrapy's but for the connector, a :class:`PacedConnector`
    with the same limits: Scrapy builds its connector inside its handler's
    constructor, so the session is built again around ours, from the settings
    of Scrapy's (which is never used, and closed with the handler).
    """

    connector_class: type[PacedConnector] = PacedConnector

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._scrapy_session = scrapy = self._session
        assert scrapy.connector is not None
        self._session = aiohttp.ClientSession(
            connector=self.connector_class(local_addr=self._bind_address, limit=scrapy.connector.limit,
                                           limit_per_host=scrapy.connector.limit_per_host),
            cookie_jar=scrapy.cookie_jar, auto_decompress=scrapy.auto_decompress,
            skip_auto_headers=scrapy.skip_auto_headers, response_class=_ClientResponse)

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self._scrapy_session.close()
