"""``scrapy settings``: Scrapy's command, showing the configuration contract as a crawl would have it.

Secrets are shown as the crawl's messages show them (``config.values.masked``):
``API_KEY`` as ``***``, URLs' passwords masked, ``API_HEADERS``' values hidden.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.addons import AddonManager
from scrapy.commands.settings import Command as ScrapySettingsCommand

from productcrawler.config.values import SECRET_SETTINGS, masked

if TYPE_CHECKING:
    import argparse


class Command(ScrapySettingsCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        settings = self.settings
        assert settings is not None
        # Scrapy's command starts no crawler process, which is what calls the add-ons that fill the
        # contract in (config/addon.py): without this, --get API_BASE_URL would print None.
        AddonManager.load_pre_crawler_settings(settings)
        for name in SECRET_SETTINGS:
            value = settings.get(name)
            if value is not None:
                settings.set(name, masked(name, value), priority=settings.getpriority(name) or 0)
        super().run(args, opts)
