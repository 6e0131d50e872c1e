"""The API's announced budget, asked before any slot is taken.

A request the budget holds back (a probe still out, a window spent) must not
hold a proxy's slot meanwhile: sent late, the held requests would go out
together and crowd that proxy's send window. So the budget is asked here,
before the proxy middleware, and the rate limit (which asks it otherwise,
for a crawl without this middleware) does not ask again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.meta import BUDGET_ADMITTED
from productcrawler.ratelimit.middleware import RateLimitMiddleware

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class BudgetGateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._rate_limit: RateLimitMiddleware | None = None
        self._looked_up = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BudgetGateMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if not self._looked_up:  # at the first request: the downloader's middlewares exist by then
            self._rate_limit = self.crawler.get_downloader_middleware(RateLimitMiddleware)
            self._looked_up = True
        rate_limit = self._rate_limit
        budget = None if rate_limit is None else rate_limit.budget
        if budget is not None:
            await budget.admit(request)
            request.meta[BUDGET_ADMITTED] = True
