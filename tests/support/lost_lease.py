"""A test-only extension: leases ids in the crawl's own name and drops them.

This is what a lease looks like when Redis ran the script but the reply was
lost (the connection cut mid-call): the ids are leased to this instance in
Redis, and the instance never got them. Enabled by ``tests/test_pass_crawl.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from productcrawler.passes.crawler import crawl_pass

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

LOST = 5


class LoseALease:
    def __init__(self, crawler: Crawler) -> None:
        self.crawl_pass = crawl_pass(crawler)
        crawler.signals.connect(self.lose, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LoseALease:
        return cls(crawler)

    async def lose(self) -> None:
        # The pass is open (the scheduler opened it before spider_opened).
        await self.crawl_pass.lease(LOST)
