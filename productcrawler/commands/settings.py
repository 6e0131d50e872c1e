"""``scrapy settings``: Scrapy's command, showing the configuration contract as a crawl would have it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.settings import Command as ScrapySettingsCommand

if TYPE_CHECKING:
    import argparse


class Command(ScrapySettingsCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        # Scrapy's command starts no crawler process, which is what calls the add-ons that fill the
        # contract in (config/addon.py): without this, --get API_BASE_URL would print None.
        AddonManager.load_pre_crawler_settings(self.settings)
        super().run(args, opts)
