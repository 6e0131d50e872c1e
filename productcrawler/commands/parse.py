"""``scrapy parse``: Scrapy's command, without the database or Redis (see ``_standalone``).

``scrapy parse --spider products {API_BASE_URL}/product/1`` shows the cleaned
item the crawl would store for that id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.parse import Command as ScrapyParseCommand

from productcrawler.commands._standalone import without_storage

if TYPE_CHECKING:
    import argparse


class Command(ScrapyParseCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        without_storage(self.settings)
