"""Stop a crawl whose answers (or their absence) say the configuration is wrong, before it records anything.

The guard follows four streaks, each with a threshold (0 turns it off):

==============  ===================================  ====================  =====================
streak          grows with each                      broken by             the message names
==============  ===================================  ====================  =====================
auth            401 or 403 (not a 403 that says the  any 2xx or 404        ``API_KEY``
                rate limit is spent: a budget,
                ``budget/limited.py``)
not a product   200 that is not a product            a product             the keys found and
                (``not_a_product``, ``id_mismatch``,                       ``PRODUCT_FIELDS``
                ``error_envelope``)
404             404                                  a product             ``API_BASE_URL`` and
                                                                           one URL requested
no answer       id given up with no HTTP answer      any HTTP answer       ``API_BASE_URL`` (and
                (a download error after its          (any status)          ``PROXY_URLS``), the
                retries, or one never retried)                             last error and URL
==============  ===================================  ====================  =====================

The outcomes an open streak would produce (``failed`` for 401/403, a
non-product or no answer, ``missing`` for a 404 — which also removes the id's
product row) are held back here, before the storage pipeline. A broken streak lets them
through; a streak that reaches its threshold trips the guard: the crawl stops
(exit code 3), one ERROR line says what was seen and what to check, and every
held outcome is dropped, so those ids stay pending and the next run resumes
the pass. A run of 404s from a wrong URL therefore never removes a stored
product, and a revoked key records no ``failed`` rows. A 404 streak is broken
only by a product (not by any 200), so that no ``missing`` outcome is written
while the answers are not products either.

A 403 through a proxy that the proxy middleware re-sends through another
proxy (productcrawler/proxies/middleware.py) is not counted: it may be the
proxy's (a blocked exit IP), and the re-send's answer is the one that counts.
Nor does such an answer (a 407, a gateway's 502 or 504), or any 502/504
through a proxy (its word that it could not reach the API: an id given up on
one grows it), break the no-answer streak. That one counts ids: a proxy's own
connection failure is re-sent through another proxy without using a retry
and never becomes an outcome (proxies/outage.py follows those), so only what
fails through the proxies as well (timeouts, connections cut) counts. No
answer says nothing of the key, the path or the fields: it neither grows nor
breaks the other streaks.
When its last error is not a download error (a TypeError of a broken handler
or middleware) the message names those components instead, and Redis when the
shared rate limit gave up on it. Once the API has answered in this run, the
streak must also have lasted ``GUARD_NO_ANSWERS_SECONDS``: an API restarting
in the middle of a long crawl is ridden out, its ids held and then written
when it answers again. After an operator's stop nothing grows a streak (the
last attempts in flight still fail; the exit stays 0). URLs' passwords never
reach the ERROR line.

A TLS certificate that failed verification (``tls_certificate``, never
retried) stops the crawl at the first id it ends (``guard_tls_certificate``):
whoever presented it is not proven to be the API, so every answer would be
refused as well; nothing was sent to it, the key included.

The proxy middleware stops the crawl through the crawl's stops
(``download/stops.py``), which call the guard back, when every
proxy rests after a 407 and none ever answered anything else (wrong
credentials in ``PROXY_URLS``), or when every proxy rests after failures of
its own for too long, rather than waiting for them forever.

When nothing is in flight and a streak is still open (the range ended on it,
or every other id waits for a retry) there are too few answers to tell a wrong
configuration from ids that really are missing or forbidden: the held
outcomes are written. The no-answer streak also waits for every retry
scheduled so far to be due (and sent): while the API is down every id waits
for a retry between attempts, and those retries are what decide the streak.
After an operator's stop held outcomes are dropped instead.

The field-drift check (``field_drift.py``, ``GUARD_FIELD_DRIFT``) holds the
run's first products here too, and stops the crawl through :meth:`stop_for`
when a column the last complete pass had is missing from nearly all of them.

One instance serves as the extension (it watches answers) and as the item
pipeline stage (it holds outcomes): ``from_crawler`` returns the crawler's one
guard to both.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

from productcrawler import signals as our_signals
from productcrawler import stat_keys
from productcrawler.budget.limited import is_rate_limited
from productcrawler.config import CrawlConfig
from productcrawler.config.crawler import crawl_config
from productcrawler.download.errors import known_reason
from productcrawler.download.stops import crawl_stops
from productcrawler.guard.field_drift import FieldDrift
from productcrawler.guard.streaks import Streak, certificate_diagnosis, diagnosis
from productcrawler.items import MISSING, FailureItem, PageItem, ProductItem
from productcrawler.meta import (
    AUTH,
    FIELD_DRIFT,
    NO_ANSWER,
    NOT_FOUND,
    NOT_PRODUCT,
    RETRY_DELAY,
    STOP_REASONS,
    STOPPED_EXIT_CODE,
    TLS_CERTIFICATE,
)
from productcrawler.per_crawler import PerCrawler
from productcrawler.proxies import GATEWAY_STATUSES
from productcrawler.proxies.blame import no_answer_from_the_api, resent_through_another_proxy

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from productcrawler.answer.payload import BadResponse

logger = logging.getLogger(__name__)

#: The exit code of a crawl the guard stopped (README, "Exit codes").
EXIT_CODE = STOPPED_EXIT_CODE
NOT_PRODUCT_REASONS = frozenset({"not_a_product", "error_envelope", "id_mismatch"})
_AUTH_STATUSES = frozenset({401, 403})
_BAD_RESPONSE_PREFIX = "bad_response/"
#: Seconds between looks at whether held outcomes wait for answers that won't come.
IDLE_CHECK_INTERVAL = 0.5
#: Seconds a retry may take, once due, to be handed out by the pass again and sent.
RETRY_DUE_SLACK = 1.0


class WholesaleFailureGuard:
    def __init__(self, crawler: Crawler, config: CrawlConfig) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self._auth = Streak(AUTH, config.guard.auth_failures)
        self._not_product = Streak(NOT_PRODUCT, config.guard.not_products)
        self._not_found = Streak(NOT_FOUND, config.guard.not_found)
        self._no_answer = Streak(NO_ANSWER, config.guard.no_answers)
        self._streaks = (self._auth, self._not_product, self._not_found, self._no_answer)
        self.tripped: str | None = None
        self._products = 0  # products seen in this run (a healthy start, for the message)
        self._retries_due = 0.0  # monotonic time by which every retry scheduled so far is due
        self._idle_check = LoopingCall(self._release_if_idle)
        self._proxies = config.proxies is not None
        #: Holds the run's first products until they are known not to have lost a column (GUARD_FIELD_DRIFT).
        self.field_drift = (FieldDrift(crawler, config, lambda text: self.stop_for(FIELD_DRIFT, text))
                            if config.guard.field_drift else None)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WholesaleFailureGuard:
        # One object is both the extension and the item pipeline: the second from_crawler finds the first.
        return _GUARD(crawler)

    # -- watching answers (extension) ------------------------------------------

    def response_downloaded(self, response: Response, request: Request) -> None:
        status = response.status
        if self._no_answer.length and not no_answer_from_the_api(request, status):
            self._release(self._no_answer, reset=True)  # the API answered: it is reachable
        if status < 300:
            if self._auth.length:
                self._release(self._auth, reset=True)
        elif status == 404:
            if self._auth.length:
                self._release(self._auth, reset=True)
            self._grow(self._not_found, request.url, status)
        elif status in _AUTH_STATUSES:
            # A blocked proxy's 403 says nothing about API_KEY; the re-send through another proxy will.
            # Nor does a 403 that says the rate limit is exhausted (GitHub, Best Buy): that is a budget.
            if not resent_through_another_proxy(request, status) and not is_rate_limited(response):
                self._grow(self._auth, request.url, status)

    def bad_response(self, request: Request, error: BadResponse) -> None:
        if error.reason in NOT_PRODUCT_REASONS:
            self._grow(self._not_product, request.url, error)

    def no_answer(self, request: Request, error: BaseException) -> None:
        if known_reason(error) == TLS_CERTIFICATE:
            # Decisive at once: every answer would come from a server that is not proven to be the API.
            if self.tripped is None and self.crawler.crawling:
                self.stop_for(TLS_CERTIFICATE, certificate_diagnosis(error, request.url, self.config,
                                                                     proxies=self._proxies))
            return
        self._grow(self._no_answer, request.url, error)

    def request_scheduled(self, request: Request) -> None:
        # Only what the engine schedules (retries and re-sends), not every request the pass hands out.
        delay = request.meta.get(RETRY_DELAY)
        if delay is not None:
            self._retries_due = max(self._retries_due, monotonic() + delay)

    def _grow(self, streak: Streak, url: str, last: Any) -> None:
        # After an operator's stop the last attempts still fail: they are dropped, not a reason for exit 3.
        if self.tripped is not None or not streak.limit or not self.crawler.crawling:
            return
        if not streak.length:
            streak.started_at = monotonic()
        streak.length += 1
        streak.url, streak.last = url, last
        if streak.length >= streak.limit and self._long_enough(streak):
            self._trip(streak)

    def _long_enough(self, streak: Streak) -> bool:
        """An API that answered in this run must also have been silent for GUARD_NO_ANSWERS_SECONDS."""
        if streak is not self._no_answer or not self._products:
            return True
        return monotonic() - streak.started_at >= self.config.guard.no_answers_seconds

    # -- holding outcomes (item pipeline stage) ----------------------------------

    async def process_item(self, item: Any) -> Any:
        if type(item) is PageItem:
            return await self._page(item)
        if type(item) is ProductItem:
            await self._products_came(item)
            return item
        streak = self._streak_of(item)
        if streak is None:
            return item
        if self.tripped is not None:
            self.stats.inc_value(stat_keys.GUARD_DROPPED)
            raise DropItem(f"not recorded: the guard stopped the crawl ({STOP_REASONS[self.tripped]})",
                           log_level="DEBUG")
        if not streak.length:  # the streak was broken before this outcome got here
            return item
        held: Deferred[None] = Deferred()
        streak.held.append(held)
        self.stats.inc_value(stat_keys.GUARD_HELD)
        await maybe_deferred_to_future(held)  # DropItem if the guard trips meanwhile
        return item

    async def _products_came(self, *products: ProductItem) -> None:
        """Products break the streaks that say the answers are not products; DropItem if field drift trips."""
        self._products += len(products)
        if self._not_product.length:
            self._release(self._not_product, reset=True)
        if self._not_found.length:
            self._release(self._not_found, reset=True)
        drift = self.field_drift
        if drift is not None and (drift.sampling or drift.tripped):
            await drift.hold(*products)  # DropItem if the check trips meanwhile

    async def _page(self, page: PageItem) -> PageItem:
        """A listing page: its products as any others; a page that failed for a reason every page
        would share (the key refused, an answer that is no listing, a 404) stops the crawl at once,
        since a listing has too few pages for a streak and would otherwise end "complete"."""
        if self.tripped is not None:
            self.stats.inc_value(stat_keys.GUARD_DROPPED)
            raise DropItem(f"not recorded: the guard stopped the crawl ({STOP_REASONS[self.tripped]})",
                           log_level="DEBUG")
        if page.failure is None:
            if page.products:
                await self._products_came(*page.products)
            return page
        if page.http_status in _AUTH_STATUSES:
            streak: Streak | None = self._auth
        elif page.http_status == 404:
            streak = self._not_found
        elif page.failure.startswith(_BAD_RESPONSE_PREFIX):
            streak = self._not_product
        else:
            streak = None  # no answer, or a server error: the page is recorded failed, the listing incomplete
        if streak is not None and streak.limit and streak.length:
            self._trip(streak)
            self.stats.inc_value(stat_keys.GUARD_DROPPED)
            raise DropItem(f"not recorded: the guard stopped the crawl ({STOP_REASONS[streak.kind]})",
                           log_level="DEBUG")
        return page

    def _streak_of(self, item: Any) -> Streak | None:
        if type(item) is not FailureItem:
            return None
        if item.outcome == MISSING:
            return self._not_found
        if item.http_status is None or (self._proxies and item.http_status in GATEWAY_STATUSES):
            return self._no_answer  # no HTTP answer (the spider's errback), or a proxy's word that it got none
        if item.http_status in _AUTH_STATUSES:
            return self._auth
        reason = item.reason
        if reason.startswith(_BAD_RESPONSE_PREFIX) and reason[len(_BAD_RESPONSE_PREFIX):] in NOT_PRODUCT_REASONS:
            return self._not_product
        return None

    def _release(self, streak: Streak, *, reset: bool) -> None:
        if reset:
            streak.length = 0
        held, streak.held = streak.held, []
        for deferred in held:
            deferred.callback(None)

    def _drop_all(self, reason: str) -> None:
        if self.field_drift is not None:
            self.field_drift.drop_all(reason)
        for streak in self._streaks:
            held, streak.held = streak.held, []
            for deferred in held:
                self.stats.inc_value(stat_keys.GUARD_DROPPED)
                deferred.errback(DropItem(f"not recorded: {reason}", log_level="DEBUG"))

    def spider_opened(self) -> None:
        self._idle_check.start(IDLE_CHECK_INTERVAL, now=False)

    def spider_closed(self) -> None:
        if self._idle_check.running:
            self._idle_check.stop()

    def _release_if_idle(self) -> None:
        """Nothing in flight can break or extend the open streaks: settle what they hold."""
        drift = self.field_drift
        drift_holding = drift is not None and drift.holding
        if not drift_holding and not any(streak.held for streak in self._streaks):
            return
        if self.crawler.engine.downloader.active:
            return
        if not self.crawler.crawling:  # an operator's stop: the next run fetches them again
            self._drop_all("the crawl was stopped")
            return
        if drift is not None and drift_holding:
            drift.settle_idle()
        retries_pending = monotonic() < self._retries_due + RETRY_DUE_SLACK
        for streak in self._streaks:
            if not (streak is self._no_answer and retries_pending):
                self._release(streak, reset=False)

    # -- tripping ----------------------------------------------------------------

    def _trip(self, streak: Streak) -> None:
        self.stop_for(streak.kind, diagnosis(streak, self.config, products=self._products,
                                             proxies=self._proxies,
                                             now=monotonic()))

    def stop_for(self, kind: str, diagnosis: str) -> None:
        """Stop the crawl (exit 3) for ``kind`` of STOP_REASONS: the crawl's stops call :meth:`_stopped` back."""
        crawl_stops(self.crawler).stop(kind, diagnosis, logger)

    def _stopped(self, kind: str, diagnosis: str) -> None:
        """The crawl stops for ``kind`` (the guard's own, or the proxies'): one ERROR line; drop held outcomes."""
        self.tripped = kind
        logger.error("Stopping the crawl: %s. Nothing was recorded for these ids and no product row "
                     "was removed; the next run resumes the pass.", diagnosis)
        self._drop_all(f"the guard stopped the crawl ({STOP_REASONS[kind]})")


def _build(crawler: Crawler) -> WholesaleFailureGuard:
    config = crawl_config(crawler)
    if not config.guard.enabled:
        raise NotConfigured
    guard = WholesaleFailureGuard(crawler, config)
    crawler.signals.connect(guard.response_downloaded, signal=signals.response_downloaded)
    crawler.signals.connect(guard.bad_response, signal=our_signals.bad_response)
    crawler.signals.connect(guard.no_answer, signal=our_signals.no_answer)
    crawler.signals.connect(guard.request_scheduled, signal=signals.request_scheduled)
    crawler.signals.connect(guard.spider_opened, signal=signals.spider_opened)
    crawler.signals.connect(guard.spider_closed, signal=signals.spider_closed)
    crawl_stops(crawler).watch(guard._stopped)
    return guard


#: The crawler's one guard, built by whichever of the extension and the pipeline Scrapy builds first.
_GUARD: PerCrawler[WholesaleFailureGuard] = PerCrawler("guard", _build)

