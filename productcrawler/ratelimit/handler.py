"""The download handler that takes each request's rate-limit slot right before sending it.

The token bucket's slot has to hold where the API counts requests: on the
wire. :class:`PacedDownloadMixin` waits for the slot (and gives up stale ones,
see :meth:`~productcrawler.ratelimit.middleware.RateLimitMiddleware.wait_for_slot`)
as the first thing a download does, then calls the handler's own
``download_request``. In the aiohttp handler nothing between that call
and aiohttp writing the request to a pooled connection suspends, so no other
code can run in between and bunch requests up; ``download_latency`` (which
AutoThrottle reads) is still measured from after the wait.

A request that reaches the handler has passed every downloader middleware, so
every request actually sent takes a slot (retries, requests through a proxy),
and a cache hit takes none.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from productcrawler.download_handler import LeanAiohttpDownloadHandler
from productcrawler.middlewares.request_timing import SENT_AT
from productcrawler.ratelimit.middleware import rate_limit_enabled, rate_limit_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

logger = logging.getLogger(__name__)


class PacedDownloadMixin:
    """Waits for the crawler's rate-limit slot before the download handler sends a request."""

    crawler: Crawler
    _unpaced_logged: bool = False

    async def download_request(self, request: Request) -> Response:
        limit = rate_limit_of(self.crawler)
        if limit is not None:
            await limit.wait_for_slot(request)
            if SENT_AT in request.meta:  # metrics on: the latency starts at the send, not the wait
                request.meta[SENT_AT] = time.monotonic()
        elif not self._unpaced_logged and rate_limit_enabled(self.crawler.settings):
            self._unpaced_logged = True
            logger.error("RATE_LIMIT_ENABLED is on but RateLimitMiddleware is not in "
                         "DOWNLOADER_MIDDLEWARES: requests are sent without a rate limit")
        return await super().download_request(request)  # type: ignore[misc]


class PacedAiohttpDownloadHandler(PacedDownloadMixin, LeanAiohttpDownloadHandler):
    """The lean aiohttp download handler (productcrawler/download_handler.py), paced by the rate limit."""
