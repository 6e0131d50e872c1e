"""The ``products`` spider: every id of the pass, fetched once, ends stored or recorded.

The spider decides what each final answer means for its id (the retry
middleware only retries, as Scrapy's does): its requests ask for every status
(``handle_httpstatus_all``), so that a 404 is recorded ``missing`` and any
other non-200, including one whose retries are used up or were turned off, is
recorded ``failed`` with its status; a download error that reaches the errback
is recorded ``failed`` with a short reason (``timeout``, ...).
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from w3lib.url import safe_url_string

from productcrawler import signals as signals_
from productcrawler import stat_keys
from productcrawler.answer.cleaning import BadResponse, clean_product, decode_answer, parse_product
from productcrawler.answer.kept import keep_answer
from productcrawler.config import CrawlConfig
from productcrawler.config.crawler import configure
from productcrawler.download.errors import exception_detail, exception_reason, known_reason
from productcrawler.guard.failure_guard import WholesaleFailureGuard
from productcrawler.items import FAILED, MISSING, FailureItem, PageItem, ProductItem
from productcrawler.listing import ListingError
from productcrawler.listing.graphql import GRAPHQL_ERRORS, GraphqlErrors, cost_wait
from productcrawler.listing.listed import ListedProducts
from productcrawler.listing.reader import PageReader
from productcrawler.meta import ABANDONED, LISTED_ON, LISTING_PAGE, PRODUCT_ID
from productcrawler.passes.crawler import crawl_pass
from productcrawler.proxies import gateway_error
from productcrawler.retry.policy import RetryPolicy
from productcrawler.storage.database import utcnow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from productcrawler.guard.field_drift import FieldDrift

logger = logging.getLogger(__name__)

#: Values of the spider argument ``fresh`` that mean yes.
FRESH_WORDS = ("1", "true", "yes", "on")


def fresh_requested(fresh: Any) -> bool:
    """Whether the spider argument ``fresh`` (None when not given) asks for a new pass."""
    return fresh is not None and str(fresh).strip().lower() in FRESH_WORDS


class ProductsSpider(Spider):
    name = "products"

    def __init__(self, start_id: Any = None, end_id: Any = None, fresh: Any = None, ids: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_id_arg = start_id
        self.end_id_arg = end_id
        self.ids_arg = ids
        self.fresh = fresh_requested(fresh)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ProductsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.config = configure(crawler, start_id=spider.start_id_arg, end_id=spider.end_id_arg,
                                  ids=spider.ids_arg)
        # Our URLs are a template and a percent-encoded id: when the template is
        # in normal form, so is every URL, and Request and aiohttp (yarl) need not
        # normalise each one again (Scrapy's verbatim_url meta key).
        spider.verbatim_urls = safe_url_string(spider.config.api.product_url(1)) == spider.config.api.product_url(1)
        if spider.config.listing.url is not None:
            pages = crawl_pass(crawler).ids
            spider.pages = PageReader(pages.url, spider.config.listing.options,  # type: ignore[attr-defined]  # ListingPages
                                      spider.config.listing.url.graphql)
            if spider.config.ids.from_listing:
                spider.listed = ListedProducts()
        return spider

    config: CrawlConfig
    #: A listing pass (PRODUCT_LIST_URL): reads each page's answer; None: a pass by id.
    pages: PageReader | None = None
    #: PRODUCT_IDS=list: the listed ids' product requests and their pages' marks; None otherwise.
    listed: ListedProducts | None = None

    @cached_property
    def retry_policy(self) -> RetryPolicy:
        # Built on first use, not in from_crawler: crawler.stats exists only
        # once the crawl starts (start(), or a callback under scrapy parse).
        return RetryPolicy.from_crawler(self.crawler)
    verbatim_urls: bool = False

    @cached_property
    def field_drift(self) -> FieldDrift | None:
        guard = self.crawler.get_extension(WholesaleFailureGuard)  # first asked for an answer: it exists
        return None if guard is None else guard.field_drift

    async def start(self) -> AsyncIterator[Request]:
        # The ids come from the pass, through the scheduler (passes/scheduler.py).
        self.retry_policy  # noqa: B018 - built now, so that a bad retry setting stops the start
        return
        yield

    def make_request(self, product_id: int | str) -> Request:
        # dont_filter: the pass hands out each id once, so a
        # fingerprint set (memory growing with the range) would add nothing.
        if self.pages is not None:
            return self.page_request(int(product_id))
        return self.product_request(product_id)

    def product_request(self, product_id: int | str) -> Request:
        return Request(
            self.config.api.product_url(product_id),
            callback=self.parse,
            errback=self.on_error,
            dont_filter=True,
            meta={PRODUCT_ID: product_id, "download_timeout": self.config.api.timeout,
                  "handle_httpstatus_all": True, "verbatim_url": self.verbatim_urls},
        )

    def page_request(self, page: int) -> Request:
        """A listing page of the pass (its position the request's ``product_id``, as the pass knows it)."""
        locator = crawl_pass(self.crawler).ids.url(page)  # type: ignore[attr-defined]  # ListingPages
        listing = self.config.listing.url
        assert listing is not None
        graphql = listing.graphql
        return Request(
            locator if graphql is None else listing.template,
            method="GET" if graphql is None else "POST",
            body=None if graphql is None else graphql.body(locator),
            headers=None if graphql is None else {"Content-Type": "application/json"},
            callback=self.parse_page,
            errback=self.on_error,
            dont_filter=True,
            meta={PRODUCT_ID: page, LISTING_PAGE: page, "download_timeout": self.config.api.timeout,
                  "handle_httpstatus_all": True},
        )

    def product_id_in(self, url: str) -> int | str | None:
        """The id of a product URL (the inverse of ``config.api.product_url``), of PRODUCT_ID_TYPE's type, else None."""
        found = self.config.api.product_id_in(url)
        if found is None or self.config.ids.type == "string":
            return found or None
        return int(found) if found.isascii() and found.isdigit() else None

    # Callbacks return lists rather than yield: Scrapy inspects the source of
    # generator callbacks for return values, at a cost on the hot path.
    def parse(self, response: Response) -> list[Any]:
        request = response.request
        assert request is not None
        if PRODUCT_ID not in request.meta:  # scrapy parse: a request the spider did not build
            product_id = self.product_id_in(response.url)
            if product_id is None:
                logger.warning("Not a product URL of %s, nothing to parse: %s",
                               self.config.api.product_url_setting, response.url)
                return []
            request = request.replace(meta={**request.meta, PRODUCT_ID: product_id})
        try:
            outcome = self._outcome(request, response)
        except Exception as error:
            # A bug of ours, or an answer nothing here foresaw: the id still ends recorded
            # (with a shared pass, an id without an outcome would be leased again forever).
            logger.exception("Product %s: could not parse the answer", request.meta[PRODUCT_ID])
            reason = f"parse_error: {type(error).__name__}: {error}"
            outcome = [FailureItem(request.meta[PRODUCT_ID], FAILED, response.status, reason[:255],
                                   request.meta.get("retry_times", 0) + 1)]
        return outcome if self.listed is None else self.listed.outcome(request, outcome)

    def _outcome(self, request: Request, response: Response) -> list[Any]:
        status = response.status
        if status == 404:
            return [self.retry_policy.give_up(request, outcome=MISSING, reason="not_found", http_status=404)]
        if status != 200:
            # Not retried (RETRY_HTTP_CODES), or retried RETRY_TIMES times already.
            if (gateway := gateway_error(request, status)) is not None:  # a proxy got no answer from the API
                self.crawler.signals.send_catch_log(signals_.no_answer, request=request, error=gateway)
            return [self.retry_policy.give_up(request, reason=f"http_{status}", http_status=status)]
        product_id = request.meta[PRODUCT_ID]
        absent: list[str] = []
        try:
            item, dropped = parse_product(response.body, product_id, utcnow(), self.config.answer.fields, absent,
                                          declared=self.config.answer.columns, variants=self.config.answer.variants)
        except BadResponse as bad:
            self.crawler.stats.inc_value(stat_keys.bad_response(bad.reason))
            # The wholesale-failure guard counts these (guard/failure_guard.py).
            self.crawler.signals.send_catch_log(signals_.bad_response, request=response.request, error=bad)
            logger.debug("Product %s: bad response (%s: %s)", product_id, bad.reason, bad.detail)
            return [self.retry_policy.next_step(request, reason=f"bad_response/{bad.reason}",
                                                http_status=status)]
        for field in dropped:
            self.crawler.stats.inc_value(stat_keys.cleaning_invalid(field))
        for field in absent:
            self.crawler.stats.inc_value(stat_keys.cleaning_absent(field))
        drift = self.field_drift
        if drift is not None and drift.sampling:  # the check quotes the keys of these first answers
            drift.saw_answer(response.body)
        self._keep_answer(item, response.body)
        return [item]

    def _keep_answer(self, item: ProductItem, answer: bytes | object) -> None:
        if self.config.answer.keep and not keep_answer(item, answer, self.config.answer.keep_max_bytes):
            self.crawler.stats.inc_value(stat_keys.ANSWERS_TOO_LARGE)

    def parse_page(self, response: Response) -> list[Any]:
        """A listing page: its products, cleaned as answers by id are, and the pages it makes known."""
        request = response.request
        assert request is not None and self.pages is not None
        page, status = request.meta[LISTING_PAGE], response.status
        if status != 200:  # not retried, or retried enough (RETRY_HTTP_CODES)
            if (gateway := gateway_error(request, status)) is not None:
                self.crawler.signals.send_catch_log(signals_.no_answer, request=request, error=gateway)
            return [self._page_failed(request, f"http_{status}", status)]
        try:
            objects, revealed = self.pages.read(page, response)
        except GraphqlErrors as errors:
            if not errors.throttled:
                return self._not_a_page(request, response, BadResponse(GRAPHQL_ERRORS, str(errors)),
                                        retry=not errors.over_cost_limit)
            # Over the query-cost budget (an HTTP 200): a 429, waiting for the points it needs.
            self.crawler.stats.inc_value(stat_keys.RATELIMIT_429)
            wait = cost_wait(decode_answer(response.body), self.retry_policy.retry_after_max)
            step = self.retry_policy.next_step(request, reason="graphql_throttled", http_status=429,
                                               retry_after=wait)
            return [step if isinstance(step, Request) else self._page_failed(request, step.reason, 429)]
        except (BadResponse, ListingError) as bad:
            return self._not_a_page(request, response, bad if isinstance(bad, BadResponse)
                                    else BadResponse("not_a_listing", str(bad)))
        fetched_at, drift = utcnow(), self.field_drift
        products = []
        for listed in objects:
            absent: list[str] = []
            try:
                item, dropped = clean_product(listed, None, fetched_at, self.config.answer.fields, absent,
                                              id_type=self.config.ids.type, declared=self.config.answer.columns,
                                              variants=self.config.answer.variants)
            except BadResponse as bad:
                self.crawler.stats.inc_value(stat_keys.bad_response(bad.reason))
                logger.debug("Listing page %d: a listed object is not a product (%s)", page, bad)
                continue
            for field in dropped:
                self.crawler.stats.inc_value(stat_keys.cleaning_invalid(field))
            for field in absent:
                self.crawler.stats.inc_value(stat_keys.cleaning_absent(field))
            if drift is not None and drift.sampling:
                drift.saw_product(listed)
            self._keep_answer(item, listed)
            products.append(item)
        mark = PageItem(page, response.url, products, revealed)
        if self.listed is None:
            return [mark]
        # PRODUCT_IDS=list: each listed product is fetched by id; the page's mark follows them.
        ids = list(dict.fromkeys(item.product_id for item in products))
        requests: list[Any] = []
        for product_id in ids:
            request = self.product_request(product_id)
            request.meta[LISTED_ON] = page
            requests.append(request)
        return [*requests, *self.listed.listed(PageItem(page, response.url, [], revealed), ids)]

    def _not_a_page(self, request: Request, response: Response, bad: BadResponse, *, retry: bool = True) -> list[Any]:
        """An answer that is no listing page: retried (if ``retry``), then the page failed (and the guard stops
        the crawl)."""
        self.crawler.stats.inc_value(stat_keys.bad_response(bad.reason))
        # The guard's not-a-product streak: a wrong mapping, query or URL is a wrong configuration.
        self.crawler.signals.send_catch_log(signals_.bad_response, request=request,
                                            error=BadResponse("not_a_product", str(bad)))
        logger.warning("Listing page %d (%s) is not a listing page: %s", request.meta[LISTING_PAGE], response.url,
                       bad)
        reason = f"bad_response/{bad.reason}"
        step = (self.retry_policy.next_step(request, reason=reason, http_status=response.status) if retry
                else self.retry_policy.give_up(request, reason=reason, http_status=response.status))
        return [step if isinstance(step, Request) else self._page_failed(request, step.reason, response.status)]

    def _page_failed(self, request: Request, reason: str, http_status: int | None) -> PageItem:
        page = request.meta[LISTING_PAGE]
        logger.error("Listing page %d (%s) failed: %s; the listing is not complete this pass, and no "
                     "product is marked removed", page, request.url, reason)
        return PageItem(page, request.url, [], {}, reason[:255], http_status)

    def on_error(self, failure: Failure) -> list[Any]:
        request = failure.request  # type: ignore[attr-defined]  # Scrapy sets it on an errback's Failure
        outcome = self._error_outcome(request, failure)
        return outcome if self.listed is None else self.listed.outcome(request, outcome)

    def _error_outcome(self, request: Request, failure: Failure) -> list[Any]:
        error = failure.value
        assert error is not None  # set by every Failure's constructor
        if request.meta.get(ABANDONED):
            return []  # never sent, the crawl stopping: the id stays pending
        # The wholesale-failure guard counts ids that never got an answer (guard/failure_guard.py).
        self.crawler.signals.send_catch_log(signals_.no_answer, request=request, error=error)
        if LISTING_PAGE in request.meta:
            return [self._page_failed(request, exception_reason(error) if known_reason(error) is not None
                                      else exception_detail(error), None)]
        if known_reason(error) is not None:  # a download error, retried already if RETRY_EXCEPTIONS lists it
            return [self.retry_policy.give_up(request, reason=exception_reason(error), http_status=None)]
        detail = exception_detail(error)
        logger.debug("Product %s failed: %s", request.meta[PRODUCT_ID], detail)
        return [FailureItem(request.meta[PRODUCT_ID], FAILED, None, detail[:255],
                            request.meta.get("retry_times", 0) + 1)]
