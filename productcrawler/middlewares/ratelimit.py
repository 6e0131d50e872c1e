"""Downloader middleware that holds the crawl to MAX_REQUESTS_PER_SECOND.

Every request that reaches the downloader (retries and redirects included,
since they come back through the scheduler) first takes a slot from a token
bucket of ``MAX_REQUESTS_PER_SECOND`` with capacity ``RATE_LIMIT_BURST``, then
sleeps until that slot without blocking the reactor. Each request reserves its
own future slot (GCRA), so N waiting requests wake at N distinct times and
each sleeps once. With ``REDIS_URL`` set the bucket is shared by all instances
(:mod:`productcrawler.ratelimit.redis_bucket`); otherwise it is in-process.
Register it closest to the downloader (order 950, after HttpCacheMiddleware
so cache hits take no slot): its ``process_request`` runs last, right before
the request is handed to the download slot.

A 429 response halves the effective rate (never below 10 % of the cap),
shared through Redis when there is one; it recovers by 10 % of the cap every
5 s without a new backoff.

Division of labour with AutoThrottle: the bucket is the hard cap, counted on
requests sent, and the 429 backoff is the reaction to overload; AutoThrottle
(enabled in settings.py) only adapts *below* the cap, to latency. Scrapy sends at most one
request per ``slot.delay`` from a download slot whose delay is positive, and
AutoThrottle sets that delay to about latency / AUTOTHROTTLE_TARGET_CONCURRENCY,
so it stays out of the way only while latency < TARGET_CONCURRENCY / rate
(64 ms with 32 at 500/s; 10 ms with the default of 1, i.e. it caps a 10 ms API
at 100/s). It lowers the delay only on 200 responses, so a run of 404s (missing
ids) ratchets it up to the slowest latency / TARGET_CONCURRENCY seen. Keep
DOWNLOAD_DELAY at 0: it is AutoThrottle's minimum delay and caps the slot at
1 / DOWNLOAD_DELAY.

Sizing CONCURRENT_REQUESTS (Little's law): a request waiting for its slot
holds a downloader slot, so concurrency >= rate * (latency + typical token
wait) is needed to sustain the rate; e.g. 500/s at 10 ms latency needs 5 in
flight, and 64 keeps the bucket the limit up to ~120 ms latency. Any surplus
simply waits in the bucket. Keep CONCURRENT_REQUESTS_PER_DOMAIN equal to it,
so a request released by the bucket never queues in the download slot and
leaves later in a clump.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import sleep

from productcrawler import stat_keys
from productcrawler.config import ConfigError, crawl_config, mask_url
from productcrawler.ratelimit.bucket import LATE_TOLERANCE, LocalRateLimiter, TokenBucket
from productcrawler.ratelimit.redis_bucket import RedisTokenBucket, ping

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from productcrawler.ratelimit.bucket import RateLimiter

logger = logging.getLogger(__name__)

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
META_GRANTED_AT = "ratelimit_granted_at"  # when the bucket granted this request's slot
EFFECTIVE_RATE_INTERVAL = 1.0  # seconds between updates of the effective_rate stat


def rate_limit_enabled(settings: BaseSettings) -> bool:
    try:
        return settings.getbool("RATE_LIMIT_ENABLED", True)
    except ValueError:
        raise ConfigError(f"RATE_LIMIT_ENABLED={settings.get('RATE_LIMIT_ENABLED')!r} is not a "
                          "boolean; expected True/False, 1/0, 'true'/'false'") from None


def _check_asyncio(settings: BaseSettings) -> None:
    """The Redis bucket uses redis.asyncio, so it needs the asyncio reactor."""
    reactor = settings.get("TWISTED_REACTOR")
    if settings.getbool("TWISTED_REACTOR_ENABLED", True) and reactor != ASYNCIO_REACTOR:
        raise ConfigError(f"TWISTED_REACTOR={reactor!r}: the shared rate limit (REDIS_URL) "
                          f"needs {ASYNCIO_REACTOR}")


class RateLimitMiddleware:
    """Token-bucket rate limit on every request sent; see the module docstring.

    Attributes for a metrics exporter: ``sent``, ``waiting``, ``rate_factor``,
    ``current_rate`` (cap x factor), ``effective_rate`` (whole crawl),
    ``recent_rate`` (last ~1 s with sends), ``backoffs``, ``late_wakeups``.
    """

    def __init__(self, crawler: Crawler, limiter: RateLimiter) -> None:
        self.crawler: Crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.limiter: RateLimiter = limiter
        self.sent: int = 0
        self.waiting: int = 0
        self.backoffs: int = 0
        self.late_wakeups: int = 0
        self._first_sent_at: float | None = None
        self._last_sent_at: float | None = None
        self.recent_rate: float | None = None
        self._rate_stat_at: float | None = None
        self._rate_stat_sent: int = 0
        self._backoff_logged: bool = False
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not rate_limit_enabled(crawler.settings):
            raise NotConfigured
        config = crawl_config(crawler)
        rate, burst = config.max_requests_per_second, config.rate_limit_burst
        limiter: RateLimiter
        if config.redis_url is None:
            limiter = LocalRateLimiter(TokenBucket(rate, burst))
        else:
            _check_asyncio(crawler.settings)
            ping(config.redis_url)
            limiter = RedisTokenBucket.from_url(config.redis_url, key_prefix=config.redis_key_prefix,
                                                rate=rate, burst=burst)
            logger.debug("Rate limit shared through %s", mask_url(config.redis_url))
        return cls(crawler, limiter)

    @property
    def rate_factor(self) -> float:
        """Fraction of the cap in effect (below 1 after 429 backoffs)."""
        return self.limiter.factor

    @property
    def current_rate(self) -> float:
        return self.limiter.rate * self.limiter.factor

    @property
    def effective_rate(self) -> float | None:
        """Requests sent per second between the first and the latest send."""
        if self._first_sent_at is None or self._last_sent_at is None:
            return None
        span = self._last_sent_at - self._first_sent_at
        return (self.sent - 1) / span if span > 0 else None

    def spider_opened(self) -> None:
        logger.info("Rate limit: %g requests/second, burst %g, %s",
                    self.limiter.rate, self.limiter.burst, self.limiter)

    async def spider_closed(self) -> None:
        self._set_effective_rate()
        await self.limiter.close()

    async def process_request(self, request: Request) -> None:
        entered = time.monotonic()
        self.waiting += 1
        slept = False
        try:
            while True:
                reservation = await self.limiter.acquire()
                delay = reservation.at - time.monotonic()
                if delay > 0:
                    slept = True
                    await sleep(delay)
                if time.monotonic() - reservation.at <= LATE_TOLERANCE:
                    break
                # Woken too late (event-loop lag): sending now could crowd the
                # slots granted after this one, so take a new slot instead.
                self.late_wakeups += 1
                self.stats.inc_value(stat_keys.RATELIMIT_LATE_WAKEUPS)
        finally:
            self.waiting -= 1
        now = time.monotonic()
        request.meta[META_GRANTED_AT] = reservation.granted_at
        if slept:
            self.stats.inc_value(stat_keys.RATELIMIT_WAITS)
        self.stats.inc_value(stat_keys.RATELIMIT_WAIT_SECONDS, now - entered, start=0.0)
        self._record_send(now)

    def _record_send(self, now: float) -> None:
        self.sent += 1
        if self._first_sent_at is None:
            self._first_sent_at = now
        self._last_sent_at = now
        if self._rate_stat_at is None:
            self._rate_stat_at = now
        elif now - self._rate_stat_at >= EFFECTIVE_RATE_INTERVAL:
            self.recent_rate = (self.sent - self._rate_stat_sent) / (now - self._rate_stat_at)
            self._rate_stat_at, self._rate_stat_sent = now, self.sent
            self._set_effective_rate()

    def _set_effective_rate(self) -> None:
        rate = self.effective_rate
        if rate is not None:
            self.stats.set_value(stat_keys.RATELIMIT_EFFECTIVE_RATE, round(rate, 3))

    async def process_response(self, request: Request, response: Response) -> Response:
        if response.status == 429 and "cached" not in response.flags:
            self.stats.inc_value(stat_keys.RATELIMIT_429)
            if await self.limiter.backoff(request.meta.get(META_GRANTED_AT)):
                self._log_backoff(request)
        return response

    def _log_backoff(self, request: Request) -> None:
        self.backoffs += 1
        self.stats.inc_value(stat_keys.RATELIMIT_BACKOFFS)
        args = (request.url, self.current_rate, self.rate_factor * 100)
        if self._backoff_logged:
            logger.debug("Rate limit: 429 for %s; backing off to %.1f requests/second "
                         "(%.0f %% of the cap)", *args, extra={"spider": self.crawler.spider})
            return
        self._backoff_logged = True
        logger.warning("Rate limit: 429 Too Many Requests for %s; backing off to %.1f "
                       "requests/second (%.0f %% of the cap) (no more backoff messages will be "
                       "shown, see the %s stat)", *args, stat_keys.RATELIMIT_BACKOFFS,
                       extra={"spider": self.crawler.spider})
