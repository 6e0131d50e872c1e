"""The downloader middleware that owns the API's announced budget: each request is let through it first.

A request the budget holds back (a probe still out, a window spent) must not
hold a proxy's slot meanwhile: sent late, the held requests would go out
together and crowd that proxy's send window. So the budget is asked here,
before the proxy middleware and the rate limit's slot.

The answers are read for the budget where the rate limit reads them: the rate
limit (:class:`~productcrawler.ratelimit.middleware.RateLimitMiddleware`)
finds this middleware at its first answer and reads them for its pacer
(their headers, or a GraphQL listing page's cost). Without the rate limit
(``RATE_LIMIT_ENABLED`` off) nothing would read them: this middleware is then
off, and requests go without a budget. Whether it admits is settled when it is
built, not at ``spider_opened``: the pass's scheduler hands out requests while
the other components are still opening.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from productcrawler.budget import new_gate
from productcrawler.budget.pacer import BudgetPacer
from productcrawler.budget.stop import StopWatch
from productcrawler.config.crawler import crawl_config
from productcrawler.download.stops import crawl_stops
from productcrawler.redis_connection import crawler_redis
from productcrawler.redis_keys import Keys

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler


class BudgetGateMiddleware:
    """Lets each request through the announced budget (``RATE_LIMIT_HEADERS``); see the module."""

    def __init__(self, crawler: Crawler, pacer: BudgetPacer) -> None:
        self.crawler = crawler
        self.pacer = pacer
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = crawl_config(crawler)
        if not config.budget.headers or not config.rate.enabled:
            raise NotConfigured

        stops = crawl_stops(crawler)

        def stopping() -> bool:  # an operator's stop (SIGINT, SIGTERM), or the guard's
            return not crawler.crawling or stops.refusing

        cap, max_wait = config.rate.max_requests_per_second, config.budget.max_wait
        client = None if config.redis.url is None else crawler_redis(crawler, config.redis.url)
        gate = new_gate(client, Keys(config.redis.key_prefix).budget, cap=cap, stop=StopWatch(stopping),
                        max_wait=max_wait)
        graphql = config.listing.url is not None and config.listing.url.graphql is not None
        return cls(crawler, BudgetPacer(crawler.stats, gate, config.budget.headers, cap, max_wait,
                                        graphql=graphql))

    def spider_opened(self) -> None:
        if self.crawler.crawling:  # not `scrapy shell`, which never "crawls"
            self.pacer.start()

    async def spider_closed(self) -> None:
        await self.pacer.close()

    async def process_request(self, request: Request) -> None:
        await self.pacer.admit(request)
