"""A crawler's pass: the scheduler drives it; the pipeline, progress and metrics read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.config.crawler import crawl_config
from productcrawler.passes import new_pass
from productcrawler.storage.crawler import crawl_database

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.passes.base import Pass

_ATTRIBUTE = "_productcrawler_pass"


def crawl_pass(crawler: Crawler) -> Pass:
    """The crawler's pass (whoever asks first builds it, with the crawler's database)."""
    crawl: Pass | None = getattr(crawler, _ATTRIBUTE, None)
    if crawl is None:
        crawl = new_pass(crawl_config(crawler), crawl_database(crawler))
        setattr(crawler, _ATTRIBUTE, crawl)
    return crawl


def built_pass(crawler: Crawler) -> Pass | None:
    """The pass if something has built it yet (for extensions that only read it)."""
    return getattr(crawler, _ATTRIBUTE, None)
