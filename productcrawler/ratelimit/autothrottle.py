"""AutoThrottle's contract, paced by the token bucket instead of a timer per request.

Scrapy's AutoThrottle sets the download slot's delay to about ``latency /
AUTOTHROTTLE_TARGET_CONCURRENCY``; a slot with a positive delay releases one
request per ``callLater``, one event-loop turn per request, a large share of
this crawl's CPU (docs/design-notes.md#autothrottle-paces-the-bucket). This
extension keeps the same settings and the same rule -- after each response
the target delay is ``latency / AUTOTHROTTLE_TARGET_CONCURRENCY``, the new
delay the mean of the old one and the target but never below the target,
clamped to ``[DOWNLOAD_DELAY, AUTOTHROTTLE_MAX_DELAY]``, and not lowered by a
non-200 -- but hands ``1 / delay`` to the rate limiter as its *pace*: the
token bucket grants slots at ``min(cap, pace)`` per second, and the download
slot keeps no delay. The API is one host, so one delay per crawl stands for
AutoThrottle's one per download slot. ``AUTOTHROTTLE_START_DELAY`` is the
first delay (0: start at the cap), ``AUTOTHROTTLE_DEBUG`` logs each change.

It replaces ``scrapy.extensions.throttle.AutoThrottle`` (disabled in
settings.py); ``AUTOTHROTTLE_ENABLED`` switches it. With the rate limit off
(``RATE_LIMIT_ENABLED=False``) there is no bucket to pace, and it does nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from productcrawler.config import ConfigError
from productcrawler.ratelimit.middleware import RateLimitMiddleware

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class BucketAutoThrottle:
    """Feeds AutoThrottle's latency-based target rate into the rate limiter; see the module."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("AUTOTHROTTLE_ENABLED"):
            raise NotConfigured
        self.crawler: Crawler = crawler
        self.debug: bool = settings.getbool("AUTOTHROTTLE_DEBUG")
        self.target_concurrency: float = settings.getfloat("AUTOTHROTTLE_TARGET_CONCURRENCY")
        if self.target_concurrency <= 0:
            raise ConfigError(f"AUTOTHROTTLE_TARGET_CONCURRENCY={self.target_concurrency!r} must be "
                              "greater than 0")
        self.min_delay: float = settings.getfloat("DOWNLOAD_DELAY")
        self.max_delay: float = settings.getfloat("AUTOTHROTTLE_MAX_DELAY")
        self.delay: float = max(self.min_delay, settings.getfloat("AUTOTHROTTLE_START_DELAY"))
        self._limit: RateLimitMiddleware | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @property
    def pace(self) -> float | None:
        """Requests per second the bucket may grant; None: no ceiling below the cap."""
        return 1.0 / self.delay if self.delay > 0 else None

    def spider_opened(self) -> None:
        # The rate limit it paces, found once the engine (and the downloader's middlewares) exist.
        self._limit = self.crawler.get_downloader_middleware(RateLimitMiddleware)
        self._apply()

    def response_downloaded(self, response: Response, request: Request) -> None:
        latency = request.meta.get("download_latency")
        if latency is None or request.meta.get("autothrottle_dont_adjust_delay", False) is True:
            return
        target = latency / self.target_concurrency
        delay = max(target, (self.delay + target) / 2.0)
        delay = min(max(self.min_delay, delay), self.max_delay)
        # Error pages are small and fast: they must not lower the delay.
        if response.status != 200 and delay <= self.delay:
            return
        if self.debug:
            logger.info("AutoThrottle: delay %5d ms (%+d) | latency %5d ms | pace %s/s",
                        delay * 1000, (delay - self.delay) * 1000, latency * 1000,
                        "%.1f" % (1 / delay) if delay > 0 else "cap")
        self.delay = delay
        self._apply()

    def _apply(self) -> None:
        limit = self._limit
        if limit is not None:
            limit.limiter.set_pace(self.pace)
