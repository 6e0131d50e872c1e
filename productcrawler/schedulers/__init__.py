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
        if crawl_config(crawler).redis_url is None:
            from productcrawler.schedulers.local import DelayingScheduler

            return DelayingScheduler.from_crawler(crawler)
        from productcrawler.schedulers.redis import RedisScheduler

        return RedisScheduler.from_crawler(crawler)
