"""The ``products`` spider: every id of the pass, fetched once, ends stored or recorded."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider, signals

from productcrawler import stat_keys
from productcrawler.cleaning import BadResponse, parse_product
from productcrawler.config import CrawlConfig, crawl_config
from productcrawler.items import FAILED, FailureItem
from productcrawler.middlewares.retry import GiveUp
from productcrawler.passes import ledger_for
from productcrawler.retry_policy import RetryPolicy
from productcrawler.storage.database import utcnow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")


class ProductsSpider(Spider):
    name = "products"

    def __init__(self, start_id: Any = None, end_id: Any = None, fresh: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_id_arg = start_id
        self.end_id_arg = end_id
        self.fresh = str(fresh).strip().lower() in _TRUE if fresh is not None else False

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ProductsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.config = crawl_config(crawler, start_id=spider.start_id_arg, end_id=spider.end_id_arg)
        spider.ledger = ledger_for(crawler)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    config: CrawlConfig
    retry_policy: RetryPolicy

    async def start(self) -> AsyncIterator[Request]:
        # Built here, not in from_crawler: crawler.stats exists only once the crawl starts.
        self.retry_policy = RetryPolicy.from_crawler(self.crawler)
        await self.ledger.open(fresh=self.fresh)
        # Scrapy reads start() without pause while the downloader is full, so an
        # eager generator would put the whole range in the scheduler at once (a
        # 1,000,000-id range: ~27 s of the reactor, ~27 µs a Request, and a
        # Request per id held in memory). Instead, once the downloader is full,
        # hand over one downloader's worth of requests each time the scheduler
        # runs dry ("lazy start requests" in Scrapy's docs).
        engine = self.crawler.engine
        assert engine is not None
        batch = max(1, self.crawler.settings.getint("CONCURRENT_REQUESTS"))
        handed = 0
        async for chunk in self.ledger.pending():
            for product_id in chunk:
                if handed >= batch and engine.needs_backout():
                    await self.crawler.signals.wait_for(signals.scheduler_empty)
                    handed = 0
                handed += 1
                yield self.make_request(product_id)

    def make_request(self, product_id: int) -> Request:
        # dont_filter: the ledger hands out each id once per pass, so a
        # fingerprint set (memory growing with the range) would add nothing.
        return Request(
            self.config.product_url(product_id),
            callback=self.parse,
            errback=self.on_error,
            dont_filter=True,
            meta={"product_id": product_id, "download_timeout": self.config.api_timeout},
        )

    # Callbacks return lists rather than yield: Scrapy inspects the source of
    # generator callbacks for return values, at a cost on the hot path.
    def parse(self, response: Response) -> list[Any]:
        product_id = response.meta["product_id"]
        try:
            item, dropped = parse_product(response.body, product_id, utcnow())
        except BadResponse as bad:
            self.crawler.stats.inc_value(stat_keys.bad_response(bad.reason))
            logger.debug("Product %d: bad response (%s: %s)", product_id, bad.reason, bad.detail)
            return [self.retry_policy.next_step(response.request, reason=f"bad_response/{bad.reason}",
                                                http_status=response.status)]
        for field in dropped:
            self.crawler.stats.inc_value(stat_keys.cleaning_invalid(field))
        return [item]

    def on_error(self, failure: Failure) -> list[FailureItem]:
        if failure.check(GiveUp):
            return [failure.value.item]
        request = failure.request  # type: ignore[attr-defined]
        error = failure.value
        reason = f"{type(error).__name__}: {error}".strip().rstrip(":")
        logger.debug("Product %d failed: %s", request.meta["product_id"], reason)
        return [FailureItem(request.meta["product_id"], FAILED, None, reason[:255],
                            request.meta.get("retry_times", 0) + 1)]

    async def _closed(self, reason: str) -> None:
        await self.ledger.close(reason)
