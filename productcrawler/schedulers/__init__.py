"""Schedulers: Scrapy's own (one process) or the Redis-backed one (many).

Both hold retries that must wait (``retry_delay`` meta) off the downloader.
``PassScheduler`` is the SCHEDULER setting: it picks one by REDIS_URL, which
is only known once the crawl's settings are final.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.core.scheduler import BaseScheduler

from productcrawler.config import crawl_config

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class PassScheduler(BaseScheduler):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:  # type: ignore[override]
        # The Redis scheduler hands out the ids of the shared pass: only the
        # products spider has one; any other spider of the project runs locally.
        from productcrawler.spiders.products import ProductsSpider

        if (crawl_config(crawler).redis_url is None
                or not isinstance(crawler.spider, ProductsSpider)):
            from productcrawler.schedulers.local import DelayingScheduler

            return DelayingScheduler.from_crawler(crawler)
        from productcrawler.schedulers.redis import RedisScheduler

        return RedisScheduler.from_crawler(crawler)
