"""The rate limit on every request sent: MAX_REQUESTS_PER_SECOND, held at the wire.

Every request sent to the API (retries and redirects included, since they come
back through the scheduler) takes a slot from a token bucket of
``MAX_REQUESTS_PER_SECOND`` with capacity ``RATE_LIMIT_BURST``, and waits for
it without blocking the reactor. With ``REDIS_URL`` set the bucket is shared
by all instances (:mod:`productcrawler.ratelimit.redis_bucket`); otherwise it
is in-process.

Where the wait happens matters. Taken here, in ``process_request``, a slot
would say when a request could leave the middleware, not when it reaches the
socket: requests that wait afterwards (for the event loop, in the download
slot's queue) would leave together (docs/design-notes.md#the-rate-limit-waits-at-the-wire).
So this component only builds
and owns the limiter; the wait is :meth:`RateLimitMiddleware.wait_for_slot`,
called by the download handler
(:class:`productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler`) right
before it hands the request to aiohttp, with no suspension point between the
check and the write on a pooled connection; when aiohttp has to open a
connection first, the handler checks the slot again once it has one
(:meth:`RateLimitMiddleware.take_new_slot`). A request that finds its slot
stale by then (past the slot's ``deadline``: a stalled reactor, a GC pause, a
slow Redis call) gives it up and takes a new one, so passed slots are lost and
the API never sees a catch-up. The middleware stays for the 429 backoff, the
stats and the attributes a metrics exporter reads; it refuses to start with a
download handler that does not pace.

A 429 response halves the effective rate (never below 10 % of the cap),
shared through Redis when there is one; it recovers by 10 % of the cap every
5 s without a new backoff. When the API announces its budget in its headers
(``RATE_LIMIT_HEADERS``, :mod:`productcrawler.budget`), each request is first
let through by that budget (:class:`~productcrawler.budget.middleware.BudgetGateMiddleware`),
then takes its slot: the budget only lowers the pace below the cap. This
middleware reads every answer for the budget; a 429 that carries the budget
sets the pace from it and does not halve the rate.

Division of labour with AutoThrottle: the bucket is the hard cap, counted on
requests sent, and the 429 backoff is the reaction to overload; AutoThrottle
(enabled in settings.py) only adapts *below* the cap, to latency, and does it
through the bucket: :mod:`productcrawler.ratelimit.autothrottle` turns its
delay (about latency / AUTOTHROTTLE_TARGET_CONCURRENCY) into the limiter's
pace, so the download slot keeps no delay and no timer runs per request.
Keep DOWNLOAD_DELAY at 0: it is AutoThrottle's minimum delay, and Scrapy
would also apply it as a slot delay.

A request waiting for its slot holds a downloader slot, so CONCURRENT_REQUESTS
is sized from the rate and the latency
(docs/design-notes.md#concurrency-from-littles-law).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object

from productcrawler import stat_keys
from productcrawler.budget.limited import is_rate_limited
from productcrawler.budget.middleware import BudgetGateMiddleware
from productcrawler.config import ConfigError, mask_url
from productcrawler.config.crawler import crawl_config
from productcrawler.meta import RATELIMIT_GRANTED_AT
from productcrawler.per_crawler import downloader_middleware
from productcrawler.ratelimit import new_limiter
from productcrawler.ratelimit.redis_bucket import ping
from productcrawler.ratelimit.wait import wait_for_fresh_slot
from productcrawler.redis_connection import crawler_redis
from productcrawler.redis_keys import Keys
from productcrawler.stat_keys import add_seconds

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from productcrawler.budget.pacer import BudgetPacer
    from productcrawler.ratelimit.bucket import RateLimiter, Reservation

logger = logging.getLogger(__name__)

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
EFFECTIVE_RATE_INTERVAL = 1.0  # seconds between updates of the effective_rate stat
PACING_HANDLER = "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler"

def check_handlers(settings: BaseSettings) -> None:
    """The wait happens in the download handler: one that does not pace would send unthrottled.

    A handler that paces says so with a true ``paces_requests`` class attribute
    (:class:`~productcrawler.ratelimit.handler.PacedDownloadMixin` sets it): the
    handler module imports this one, so this one does not import it.
    """
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        if path and not getattr(load_object(path), "paces_requests", False):
            raise ConfigError(f"DOWNLOAD_HANDLERS[{scheme!r}]={path!r}: the rate limit "
                              f"(MAX_REQUESTS_PER_SECOND) is applied by the download handler; use "
                              f"{PACING_HANDLER} or a subclass of "
                              "productcrawler.ratelimit.handler.PacedDownloadMixin")


def _check_asyncio(settings: BaseSettings) -> None:
    """The Redis bucket uses redis.asyncio, so it needs the asyncio reactor."""
    reactor = settings.get("TWISTED_REACTOR")
    if settings.getbool("TWISTED_REACTOR_ENABLED", True) and reactor != ASYNCIO_REACTOR:
        raise ConfigError(f"TWISTED_REACTOR={reactor!r}: the shared rate limit (REDIS_URL) "
                          f"needs {ASYNCIO_REACTOR}")


class RateLimitMiddleware:
    """Token-bucket rate limit on every request sent; see the module docstring.

    Attributes for a metrics exporter: ``sent``, ``waiting`` (requests waiting
    for a slot right now, a gauge), ``rate_factor``, ``current_rate`` (cap x
    factor), ``effective_rate`` (whole crawl), ``recent_rate`` (last ~1 s with
    sends), ``backoffs``, ``late_wakeups`` (slots given up because they were
    stale when their request could be sent; a stat), and the limiter's
    ``expired_slots`` (leased from Redis but stale before a request took them:
    no request was ready; the stat ``productcrawler/ratelimit/expired_slots``).
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
        config = crawl_config(crawler)
        if not config.rate.enabled:
            raise NotConfigured
        check_handlers(crawler.settings)
        client = None
        if config.redis.url is not None:
            _check_asyncio(crawler.settings)
            ping(config.redis.url)
            client = crawler_redis(crawler, config.redis.url)
            logger.debug("Rate limit shared through %s", mask_url(config.redis.url))
        return cls(crawler, new_limiter(client, Keys(config.redis.key_prefix).rate_bucket,
                                        config.rate.max_requests_per_second, config.rate.burst))

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

    @property
    def budget(self) -> BudgetPacer | None:
        """The announced budget's pacer, whose answers this middleware reads; None without one."""
        gate = downloader_middleware(self.crawler, BudgetGateMiddleware)
        return None if gate is None else gate.pacer

    def spider_opened(self) -> None:
        logger.info("Rate limit: %g requests/second, burst %g, %s",
                    self.limiter.rate, self.limiter.burst, self.limiter)

    async def spider_closed(self) -> None:
        self._set_effective_rate()

    async def wait_for_slot(self, request: Request) -> float:
        """Return when ``request`` may be sent: at its slot, and before the slot goes stale.

        Returns the slot's deadline (``time.monotonic()`` time): a handler that
        still has to wait for something before writing the request (a
        connection) must check it again and, if it has passed, call
        :meth:`take_new_slot`. The caller must send at once, with no ``await``
        in between (see the module docstring).
        """
        entered = time.monotonic()
        reservation, slept = await self._wait()
        now = time.monotonic()
        request.meta[RATELIMIT_GRANTED_AT] = reservation.granted_at
        if slept:
            self.stats.inc_value(stat_keys.RATELIMIT_WAITS)
        add_seconds(self.stats, stat_keys.RATELIMIT_WAIT_SECONDS, now - entered)
        self._record_send(now)
        return reservation.deadline

    async def take_new_slot(self, request: Request) -> float:
        """Give up the stale slot of a request that could not be written in time, and wait for a new one.

        For a request whose slot passed its deadline after :meth:`wait_for_slot`
        returned, while the handler waited for a connection: sent now, it would
        leave together with requests whose slots came later. Counted as a late
        wake-up and in ``productcrawler/ratelimit/late_connections``; the send
        was counted by :meth:`wait_for_slot` already. Returns the new deadline.
        """
        entered = time.monotonic()
        self._late_wakeup()
        self.stats.inc_value(stat_keys.RATELIMIT_LATE_CONNECTIONS)
        reservation, _ = await self._wait()
        request.meta[RATELIMIT_GRANTED_AT] = reservation.granted_at
        add_seconds(self.stats, stat_keys.RATELIMIT_WAIT_SECONDS, time.monotonic() - entered)
        return reservation.deadline

    async def _wait(self) -> tuple[Reservation, bool]:
        """A slot that has come and is not stale yet, and whether the wait slept."""
        self.waiting += 1
        try:
            return await wait_for_fresh_slot(self.limiter, self._late_wakeup)
        finally:
            self.waiting -= 1

    def _late_wakeup(self) -> None:
        self.late_wakeups += 1
        self.stats.inc_value(stat_keys.RATELIMIT_LATE_WAKEUPS)

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
        if self.limiter.expired_slots:
            self.stats.set_value(stat_keys.RATELIMIT_EXPIRED_SLOTS, self.limiter.expired_slots)

    async def process_response(self, request: Request, response: Response) -> Response:
        if "cached" in response.flags:
            return response
        budget = self.budget
        announced = budget is not None and await budget.observe(request, response)
        if is_rate_limited(response):  # a 429, or a 403 that says it is one
            self.stats.inc_value(stat_keys.RATELIMIT_429)
            if announced:
                self.stats.inc_value(stat_keys.BUDGET_429)
            elif await self.limiter.backoff(request.meta.get(RATELIMIT_GRANTED_AT)):
                self._log_backoff(request)
        return response

    def process_exception(self, request: Request, exception: BaseException) -> None:
        budget = self.budget
        if budget is not None:
            budget.done(request)

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
