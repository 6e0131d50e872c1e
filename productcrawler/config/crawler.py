"""A crawler's configuration: one :class:`CrawlConfig`, parsed on first use and shared by its components."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.config.crawl import CrawlConfig
from productcrawler.per_crawler import PerCrawler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

def _parse(crawler: Crawler) -> CrawlConfig:
    return CrawlConfig.from_settings(crawler.settings)


#: The contract, parsed and validated (raises ConfigError); whoever asks first parses it.
crawl_config: PerCrawler[CrawlConfig] = PerCrawler("config", _parse)


def configure(crawler: Crawler, *, start_id: Any = None, end_id: Any = None, ids: Any = None) -> CrawlConfig:
    """The contract with the spider's arguments, which win over the settings.

    The spider is built before the other components and calls this; each of
    them gets the same object from :data:`crawl_config`.
    """
    return crawl_config.keep(crawler, CrawlConfig.from_settings(crawler.settings, start_id=start_id, end_id=end_id,
                                                                ids=ids))
