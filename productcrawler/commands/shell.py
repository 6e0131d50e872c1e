"""``scrapy shell``: Scrapy's command, without the database or Redis, with the aiohttp handler.

Scrapy's shell builds the downloader in the main thread before its event loop
runs, and Scrapy's aiohttp handler (and our paced subclass of it), which is
built with the downloader, needs a running loop to create its session ("no
running event loop"). The shell therefore gets the same paced handler built on
the first request instead, which runs on the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.shell import Command as ScrapyShellCommand
from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler

from productcrawler.commands._standalone import without_storage
from productcrawler.ratelimit.handler import PacedAiohttpDownloadHandler

if TYPE_CHECKING:
    import argparse

AIOHTTP_HANDLERS = ("scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler",
                    "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler",
                    AiohttpDownloadHandler, PacedAiohttpDownloadHandler)
LAZY_AIOHTTP_HANDLER = "productcrawler.commands.shell.LazyAiohttpDownloadHandler"


class LazyAiohttpDownloadHandler(PacedAiohttpDownloadHandler):
    """The project's paced aiohttp handler, built when the first request needs it."""

    lazy = True


class Command(ScrapyShellCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        without_storage(self.settings)
        handlers = self.settings.getdict("DOWNLOAD_HANDLERS")
        lazy = {scheme: LAZY_AIOHTTP_HANDLER for scheme, handler in handlers.items()
                if handler in AIOHTTP_HANDLERS}
        if lazy:
            self.settings.set("DOWNLOAD_HANDLERS", {**handlers, **lazy}, priority="cmdline")
