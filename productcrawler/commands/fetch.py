"""``scrapy fetch``: Scrapy's command, without the database or Redis (see ``_standalone``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.fetch import Command as ScrapyFetchCommand

from productcrawler.commands._standalone import without_storage

if TYPE_CHECKING:
    import argparse


class Command(ScrapyFetchCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        without_storage(self.settings)
