"""``ContractAddon``: the Scrapy add-on that fills the configuration contract into the settings.

Each name of :data:`~productcrawler.config.declared.DEFAULTS` gets the
environment's value at Scrapy's "addon" priority, or else its default at
"default" priority, the one Scrapy keeps its own defaults at; each of
:data:`~productcrawler.config.declared.FIXED_DEFAULTS` (switches and tuning
the environment does not give) gets its default at "default" priority. ``settings.py``
(project), a spider's ``custom_settings`` (spider), ``-s NAME=value`` and
scrapyd's ``setting=NAME=value`` (cmdline) are all higher, so they win; and a
priority says where a value came from, which :class:`~.reader.Reader`
needs to tell a value someone gave from a default.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from productcrawler.config.declared import DEFAULTS, FIXED_DEFAULTS

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: The priority of a value taken from the environment.
ENVIRONMENT_PRIORITY = SETTINGS_PRIORITIES["addon"]


class ContractAddon:
    """Enabled in ``settings.py`` (``ADDONS``); see the module docstring."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        # The contract is read before any crawler loads its add-ons: by the
        # crawl command's start-up checks, by the spider (built before its
        # crawler's settings are applied) and by the passes/progress commands.
        # A crawler process calls this on the settings it gives each crawler.
        fill_contract(settings)

    def update_settings(self, settings: BaseSettings) -> None:
        # A crawler built without a crawler process gets the contract here.
        fill_contract(settings)


def fill_contract(settings: BaseSettings) -> None:
    """Set every contract name that nothing at a higher priority set: the environment, else the default."""
    for name, default in DEFAULTS.items():
        value = environment_value(name)
        if value is None:
            settings.set(name, default, priority="default")
        else:
            settings.set(name, value, priority=ENVIRONMENT_PRIORITY)
    for name, default in FIXED_DEFAULTS.items():
        settings.set(name, default, priority="default")


def environment_value(name: str) -> str | None:
    """The environment's value of ``name``; None when it is unset or blank."""
    value = os.environ.get(name)
    return value if value is not None and value.strip() else None
