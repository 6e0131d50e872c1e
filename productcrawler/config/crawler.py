"""A crawler's configuration: one :class:`CrawlConfig`, parsed on first use and shared by its components."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.config.crawl import CrawlConfig

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_ATTRIBUTE = "_productcrawler_config"


def crawl_config(crawler: Crawler) -> CrawlConfig:
    """The contract, parsed and validated (raises ConfigError); whoever asks first parses it."""
    config: CrawlConfig | None = getattr(crawler, _ATTRIBUTE, None)
    if config is None:
        config = configure(crawler)
    return config


def configure(crawler: Crawler, *, start_id: Any = None, end_id: Any = None, ids: Any = None) -> CrawlConfig:
    """The contract with the spider's arguments, which win over the settings.

    The spider is built before the other components and calls this; each of
    them gets the same object from :func:`crawl_config`.
    """
    config = CrawlConfig.from_settings(crawler.settings, start_id=start_id, end_id=end_id, ids=ids)
    setattr(crawler, _ATTRIBUTE, config)
    return config
