"""``scrapy crawl``, with start-up checks and an exit code that tells the truth.

Replaces Scrapy's command of the same name (COMMANDS_MODULE): a configuration
error prints one line and exits 2 before anything starts; a crawl the
wholesale-failure guard stopped exits 3; a crawl that stopped for any other
reason but "finished" or an operator's stop exits 1. With ``LOG_FORMAT=json``
it logs JSON lines (``structured_logging``). A feed (``-o``, ``-O``, ``FEEDS``)
of the products crawl exports products only, as stored, unless it names its
own ``item_classes``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.crawler import AsyncCrawlerProcess

from productcrawler import stat_keys
from productcrawler.commands import preflight
from productcrawler.config import ConfigError
from productcrawler.meta import exit_code
from productcrawler.monitoring.structured_logging import JsonLogging, json_requested

if TYPE_CHECKING:
    import argparse

#: What a feed of the products crawl exports unless it says otherwise: the
#: outcomes of ids that are not products are in crawl_failures, not in the feed.
PRODUCT_FEED_ITEMS = ["productcrawler.items.ProductItem"]


class Command(ScrapyCrawlCommand):
    json_logging: JsonLogging | None = None

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        # Here, before Scrapy sets up logging and installs the reactor (the process is created
        # after this): a configuration error exits before anything, an event loop included, exists.
        # The contract's environment values come from the add-on (config/addon.py), which the
        # crawler process applies only later; the start-up checks need them now.
        AddonManager.load_pre_crawler_settings(self.settings)
        try:
            if json_requested(self.settings):
                self.json_logging = JsonLogging.install(self.settings)
            if args == ["products"]:
                preflight.check(self.settings, opts.spargs)
        except ConfigError as error:
            self._config_error(error)
            sys.exit(2)
        feeds = self.settings.getdict("FEEDS")
        if args == ["products"] and feeds:
            for options in feeds.values():
                options.setdefault("item_classes", PRODUCT_FEED_ITEMS)
            priority = self.settings.getpriority("FEEDS")
            assert priority is not None  # FEEDS is among Scrapy's default settings
            self.settings.set("FEEDS", feeds, priority=priority)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or args[0] != "products":
            super().run(args, opts)
            return
        # Scrapy's choice for the asyncio reactor (settings.py): its crawl() is an asyncio task.
        assert isinstance(self.crawler_process, AsyncCrawlerProcess)
        crawler = self._create_crawler(args[0])
        if self.json_logging is not None:
            self.json_logging.attach(crawler)
        task = self.crawler_process.crawl(crawler, **opts.spargs)
        task.add_done_callback(self._report_config_error)
        self.crawler_process.start()
        if self.exitcode == 2:
            return
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
            return
        self.exitcode = exit_code(crawler.stats.get_value(stat_keys.EXIT_REASON)
                                  or crawler.stats.get_value("finish_reason"))

    def _report_config_error(self, task: asyncio.Task[None]) -> None:
        """A component refused a setting while the crawler was built: one line, exit 2.

        Reading the exception marks it retrieved, so asyncio would no longer
        print it: any other error is handed to asyncio's handler, traceback and all.
        """
        error = None if task.cancelled() else task.exception()
        if isinstance(error, ConfigError):
            self._config_error(error)
        elif error is not None:
            asyncio.get_event_loop().call_exception_handler(
                {"message": "The crawl failed to start", "exception": error, "task": task})

    def _config_error(self, error: ConfigError) -> None:
        print(f"productcrawler: configuration error: {error}", file=sys.stderr)
        self.exitcode = 2
