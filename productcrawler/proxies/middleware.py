"""Downloader middleware that sends each request through one healthy proxy of the pool.

Off (not in the chain at all) unless ``PROXY_URLS`` is set. Registered at 800:
after the retry middleware and before ``TrafficStats`` and the rate limit, so
a request first waits for a usable proxy (and that proxy's own rate, with
``PROXY_MAX_REQUESTS_PER_SECOND``), then takes its global token; on the way
back it sees answers before the retry middleware does.

What counts against a proxy:

* **its own failures**, re-sent at once through another proxy without using
  the id's retries: connection refused or not established, DNS failure of
  the proxy's host, 407 Proxy Authentication Required, and any other refusal
  of a CONNECT tunnel (an https API) but a gateway's 502 or 504. A 407 on
  CONNECT is an exception in aiohttp, not a response: it counts exactly as a
  407 response does (reason ``http_407``, the same stop for wrong credentials);
* **failures that could be the proxy's or the id's** (timeout, connection
  reset or closed mid-answer, 403, 429, 502, 504, a CONNECT answered 502 or
  504): the request is re-sent once through another proxy, again without
  using a retry. If the other proxy
  gets a proper answer the failure followed the proxy, which is then counted
  as failed; if it fails too, the failure follows the id: no proxy is blamed
  and the retry middleware handles it as usual (backoff, retries, ``failed``).

Everything else (any other status, a truncated body) is a success for the
proxy (``blame.py`` tells these cases apart). The API's TLS certificate
refused inside a tunnel (``tls_certificate``) is not the proxy's failure
either: it is passed on, and the guard stops the crawl on it. When every proxy rests after
failures of its own and nothing gets through any of them, the crawl stops
(``outage.py``) rather than wait for ever. Scrapy's ``HttpProxyMiddleware``
stays off: this middleware sets
``meta["proxy"]`` (no credentials in it) and the ``Proxy-Authorization``
header itself, from values computed once at start, and does not pick up an
``http_proxy`` from the environment behind the operator's back.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.asyncio import sleep

from productcrawler.config import burst_for_rate, mask_url
from productcrawler.config.crawler import crawl_config
from productcrawler.download.errors import exception_reason, tunnel_refusal
from productcrawler.download.stops import crawl_stops
from productcrawler.meta import (
    ABANDONED,
    NOT_SENT_NO_PROXY,
    PROXIES_DOWN,
    PROXY_AUTH,
    PROXY_AVOID,
    PROXY_INDEX,
    PROXY_SUSPECT,
    RESEND_NOW,
    RETRY_DELAY,
)
from productcrawler.proxies import GATEWAY_STATUSES, new_book
from productcrawler.proxies.blame import (
    PROXY_FAILURE_REASONS,
    PROXY_FAILURE_STATUSES,
    UNCLEAR_REASONS,
    UNCLEAR_STATUSES,
)
from productcrawler.proxies.books import SYNC_INTERVAL, LocalHealthBook
from productcrawler.proxies.outage import ProxyOutage
from productcrawler.proxies.pool import ProxyPool, stat
from productcrawler.ratelimit import new_limiter
from productcrawler.ratelimit.wait import wait_for_fresh_slot
from productcrawler.redis_connection import crawler_redis
from productcrawler.redis_keys import Keys
from productcrawler.stat_keys import add_seconds

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from productcrawler.config.proxy_urls import Proxy
    from productcrawler.config.sections import GuardConfig, ProxyConfig
    from productcrawler.proxies.books import HealthBook
    from productcrawler.ratelimit.bucket import RateLimiter

logger = logging.getLogger(__name__)


class ProxyMiddleware:
    def __init__(self, crawler: Crawler, config: ProxyConfig, guard: GuardConfig, book: HealthBook,
                 limiters: list[RateLimiter] | None = None) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.proxies = config.proxies
        fallback = (None if isinstance(book, LocalHealthBook)
                    else LocalHealthBook(config.policy, len(config.proxies)))
        self.pool = ProxyPool(config.proxies, book, config.policy.minimum, crawler.stats, fallback=fallback)
        self.limiters = limiters
        self._all_resting_logged = False
        self._answered = False  # any answer but a 407 through any proxy, in this run
        self._stopping = False  # this middleware stopped the crawl: waiters give up
        self.stops = crawl_stops(crawler)
        self.outage = ProxyOutage(config.proxies, enabled=guard.no_answers > 0, seconds=guard.no_answers_seconds)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        crawl = crawl_config(crawler)
        config = crawl.proxies
        if config is None:
            raise NotConfigured
        client = None if crawl.redis.url is None else crawler_redis(crawler, crawl.redis.url)
        keys = Keys(crawl.redis.key_prefix)
        book = new_book(client, keys.proxy_health, [p.key for p in config.proxies], config.policy)
        limiters: list[RateLimiter] | None = None
        rate = config.max_requests_per_second
        if rate is not None:
            burst = burst_for_rate(rate)
            limiters = [new_limiter(client, keys.proxy_bucket(p.key), rate, burst) for p in config.proxies]
        logger.info("Proxy pool: %d proxies (%s), health %s%s", len(config.proxies),
                    ", ".join(p.label for p in config.proxies),
                    book if client is None else f"shared through Redis at {mask_url(crawl.redis.url)}",
                    "" if rate is None else f", at most {rate:g} requests/second each")
        return cls(crawler, config, crawl.guard, book, limiters)

    async def spider_opened(self) -> None:
        self.pool.start()
        await self.pool.ready()

    async def spider_closed(self) -> None:
        await self.pool.stop()

    # -- requests out ------------------------------------------------------

    async def process_request(self, request: Request) -> None:
        await self.pool.ready()
        avoid = request.meta.pop(PROXY_AVOID, None)
        proxy = self.pool.choose(avoid)
        if proxy is None:
            proxy = await self._wait_for_a_proxy(request, avoid)
        if self.limiters is not None:
            await wait_for_fresh_slot(self.limiters[proxy.index])  # the proxy's own rate
        meta = request.meta
        meta["proxy"] = proxy.url
        meta[Downloader.DOWNLOAD_SLOT] = proxy.slot
        meta[PROXY_INDEX] = proxy.index
        if proxy.auth is not None:
            request.headers[b"Proxy-Authorization"] = proxy.auth
        self.stats.inc_value(stat("requests", proxy))

    async def _wait_for_a_proxy(self, request: Request, avoid: int | None) -> Proxy:
        started = time.monotonic()
        self.stats.inc_value(stat("all_resting_waits"))
        if not self._all_resting_logged:
            self._all_resting_logged = True
            logger.warning("All %d proxies are resting: requests wait for the first to come back (in %.1fs); "
                           "no id fails meanwhile (logged once; see the %s stat)", len(self.proxies),
                           self.pool.seconds_until_one_is_back(), stat("all_resting_waits"))
        while (proxy := self.pool.choose(avoid)) is None:
            if self.crawler.crawling and not self._stopping:  # an operator's stop decides the exit itself
                self._stop_if_waiting_cannot_help()
            if not self.crawler.crawling or self._stopping:
                # An operator's stop must not wait for a rest to end (up to
                # PROXY_REST_MAX); the spider records nothing for this id.
                request.meta[ABANDONED] = True
                raise IgnoreRequest(NOT_SENT_NO_PROXY)
            await sleep(min(SYNC_INTERVAL, max(0.01, self.pool.seconds_until_one_is_back())))
        add_seconds(self.stats, stat("all_resting_wait_seconds"), time.monotonic() - started)
        return proxy

    def _stop_if_waiting_cannot_help(self) -> None:
        if not self._answered and self.pool.all_refused_credentials():
            self._stop_for_credentials()
        elif self.stops.watched and (diagnosis := self.outage.diagnosis()):
            self._stop(PROXIES_DOWN, diagnosis)

    def _stop_for_credentials(self) -> None:
        """Every proxy rests after a 407 and none ever answered otherwise: PROXY_URLS is wrong."""
        self._stop(PROXY_AUTH, f"every proxy ({len(self.proxies)}) answered 407 Proxy Authentication Required "
                               f"and none answered anything else; check the credentials in PROXY_URLS "
                               f"({', '.join(p.shown for p in self.proxies)})")

    def _stop(self, kind: str, diagnosis: str) -> None:
        # With GUARD_ENABLED off, wrong credentials still stop (exit 3) rather than wait forever.
        self._stopping = True
        self.stops.stop(kind, diagnosis, logger)

    # -- answers back ------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Request | Response:
        index = request.meta.get(PROXY_INDEX)
        if index is None:
            return response
        proxy = self.proxies[index]
        status = response.status
        if status in PROXY_FAILURE_STATUSES:
            return self._proxy_failed(request, proxy, f"http_{status}")
        self._answered = True
        self.outage.got_through(answer=True)
        if status in UNCLEAR_STATUSES:
            return self._unclear(request, proxy, f"http_{status}") or response
        self._proxy_worked(request, proxy)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        index = request.meta.get(PROXY_INDEX)
        if index is None or request.meta.get(ABANDONED):  # never sent: nothing to say of the proxy
            return None
        proxy = self.proxies[index]
        status = tunnel_refusal(exception)
        if status in PROXY_FAILURE_STATUSES:  # a 407 on CONNECT: exactly as a 407 response
            return self._proxy_failed(request, proxy, f"http_{status}")
        self._answered = True  # not a credentials problem (or not only)
        if status is not None:  # no tunnel: the API was never reached
            if status in GATEWAY_STATUSES:  # the proxy could not reach the API: it, or the API?
                self.outage.got_through(answer=False)
                return self._unclear(request, proxy, f"tunnel_{status}")
            return self._proxy_failed(request, proxy, f"tunnel_{status}")
        reason = exception_reason(exception)
        if reason in PROXY_FAILURE_REASONS:
            return self._proxy_failed(request, proxy, reason)
        self.outage.got_through(answer=False)
        if reason in UNCLEAR_REASONS:
            return self._unclear(request, proxy, reason)
        self.pool.answered(proxy)
        return None  # not the proxy's doing (a truncated body...): the retry middleware's

    def _proxy_worked(self, request: Request, proxy: Proxy) -> None:
        self.pool.succeeded(proxy)
        suspect = request.meta.pop(PROXY_SUSPECT, None)
        if suspect is not None and suspect[0] != proxy.index:
            # The same id got an answer through another proxy: that failure followed the proxy.
            self.pool.failed(self.proxies[suspect[0]], suspect[1])

    def _proxy_failed(self, request: Request, proxy: Proxy, reason: str) -> Request:
        self.pool.failed(proxy, reason)
        self.outage.failed(proxy, reason)
        return self._resend(request, proxy)

    def _unclear(self, request: Request, proxy: Proxy, reason: str) -> Request | None:
        suspect = request.meta.pop(PROXY_SUSPECT, None)
        if suspect is None:
            self.pool.answered(proxy)
            self.stats.inc_value(stat("compared"))
            retry = self._resend(request, proxy)
            retry.meta[PROXY_SUSPECT] = [proxy.index, reason]
            return retry
        # Failed again through another proxy: it follows the id, the retry middleware's case.
        self.pool.answered(proxy)
        self.stats.inc_value(stat("not_blamed"))
        return None

    def _resend(self, request: Request, proxy: Proxy) -> Request:
        """The same attempt again, at once, through another proxy: no retry is used up."""
        retry = request.replace(dont_filter=True)
        meta = retry.meta
        for key in ("proxy", Downloader.DOWNLOAD_SLOT, PROXY_INDEX, RETRY_DELAY):
            meta.pop(key, None)
        meta[PROXY_AVOID] = proxy.index
        meta[RESEND_NOW] = True
        retry.headers.pop(b"Proxy-Authorization", None)
        self.stats.inc_value(stat("resent"))
        return retry
