"""A progress line at a steady interval, and one summary line at the end."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from twisted.internet.task import LoopingCall

from productcrawler import stat_keys
from productcrawler.budget.graphql_cost import GRAPHQL_COST
from productcrawler.budget.headers import SHOPIFY
from productcrawler.config.crawler import crawl_config
from productcrawler.passes.crawler import built_pass

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The budgets that are leaky buckets: room left, no reset.
LEAKY_FORMATS = (SHOPIFY, GRAPHQL_COST)


class ProgressLog:
    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.interval = interval
        self._task = LoopingCall(self.log_progress)
        self._started = 0.0
        self._spider: Spider | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProgressLog:
        extension = cls(crawler, crawl_config(crawler).monitoring.progress_interval)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        self._spider = spider
        self._started = time.monotonic()
        self._task.start(self.interval, now=False)

    def outcomes(self) -> tuple[int, int, int]:
        return (self.stats.get_value(stat_keys.STORED, 0), self.stats.get_value(stat_keys.MISSING, 0),
                self.stats.get_value(stat_keys.FAILED, 0))

    def log_progress(self) -> None:
        crawl_pass = built_pass(self.crawler)
        if crawl_pass is None:
            return
        stored, missing, failed = self.outcomes()
        this_run = stored + missing + failed
        done = crawl_pass.done(this_run)
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = this_run / elapsed
        if crawl_pass.ids.descriptor.startswith("listing:"):
            # A listing pass: its positions are pages, and more become known as it goes (no ETA).
            logger.info("Progress: %d of the %d listing pages known so far done, %d stored, %d missing, "
                        "%d failed; %.0f products/s%s", done, crawl_pass.total, stored, missing, failed, rate,
                        self.budget())
            return
        remaining = max(crawl_pass.total - done, 0)
        eta = f"{remaining / rate:.0f} s" if rate > 0 else "unknown"
        logger.info("Progress: %d/%d ids done (%.1f%%), %d stored, %d missing, %d failed; "
                    "%.0f ids/s, ETA %s%s", done, crawl_pass.total, 100.0 * done / crawl_pass.total,
                    stored, missing, failed, rate, eta, self.budget())

    def budget(self) -> str:
        """The announced budget's part of the line (RATE_LIMIT_HEADERS), empty when there is none."""
        pace = self.stats.get_value(stat_keys.BUDGET_PACE)
        if pace is None:
            return ""
        left = self.stats.get_value(stat_keys.BUDGET_REMAINING, 0)
        reset = self.stats.get_value(stat_keys.BUDGET_RESET_SECONDS)
        if self.stats.get_value(stat_keys.BUDGET_FORMAT) in LEAKY_FORMATS or reset is None:
            return f"; budget: pace {pace:.0f}/s, room for {left:.0f}"
        return f"; budget: pace {pace:.0f}/s, {left:.0f} left, reset in {reset:.1f} s"

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task.running:
            self._task.stop()
        stored, missing, failed = self.outcomes()
        elapsed = time.monotonic() - self._started
        logger.info("Finished (%s) in %.1f s: %d stored, %d missing, %d failed in this run",
                    self.stats.get_value(stat_keys.EXIT_REASON) or reason, elapsed, stored, missing, failed)
