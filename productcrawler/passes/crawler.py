"""A crawler's pass: the scheduler drives it; the pipeline, progress and metrics read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.config.crawler import crawl_config
from productcrawler.passes import new_pass
from productcrawler.per_crawler import PerCrawler
from productcrawler.storage.crawler import crawl_database

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.passes.base import Pass


def _build(crawler: Crawler) -> Pass:
    return new_pass(crawl_config(crawler), crawl_database(crawler), crawler)


#: The crawler's pass (whoever asks first builds it, with the crawler's database).
crawl_pass: PerCrawler[Pass] = PerCrawler("pass", _build)


def built_pass(crawler: Crawler) -> Pass | None:
    """The pass if something has built it yet (for extensions that only read it)."""
    return crawl_pass.built(crawler)
