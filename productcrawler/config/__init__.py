"""The configuration contract: every user-facing setting, its type, default and rule.

Each value can come from the environment or, under the same name, from a Scrapy
setting (``-s NAME=value``, scrapyd's ``setting=NAME=value``); a setting given
explicitly wins over the environment because the add-on that reads the
environment sets its values at Scrapy's "addon" priority, below ``-s``.

* :mod:`.defaults` — the names and their defaults (``DEFAULTS``);
* :mod:`.addon` — :class:`ContractAddon`, the add-on (``ADDONS`` in
  ``settings.py``) that fills them into the settings: the environment, else
  the default;
* :mod:`.values` — the checks of single values (numbers, URLs,
  ``PRODUCT_FIELDS``), ``ConfigError``, :func:`mask_url`, :func:`mask_credentials` and
  :func:`password_hint`;
* :mod:`.driver_errors` — :func:`~.driver_errors.describe`, one line for a
  database or Redis driver's error about a configured URL;
* :mod:`.crawl` — :class:`CrawlConfig`, the whole contract parsed and
  validated; a crawler's components share one, ``crawl_config(crawler)``
  (:mod:`.crawler`).

Components never read these names with raw ``settings.get``: they read the
crawler's ``CrawlConfig``, whose parsing raises ``ConfigError`` (a
``ValueError``) naming the setting and the offending value, passwords masked.

The names below are re-exported so that every component imports the contract
from one place, ``productcrawler.config``, whichever module defines a name.
"""

from productcrawler.config.addon import ContractAddon
from productcrawler.config.crawl import CrawlConfig, api_timeout, burst_for_rate, max_retries
from productcrawler.config.defaults import DEFAULTS, SIMULATOR_BASE_URL, SIMULATOR_PORT
from productcrawler.config.values import REDIS_SCHEMES, ConfigError, mask_credentials, mask_url, password_hint

__all__ = [
    "DEFAULTS",
    "REDIS_SCHEMES",
    "SIMULATOR_BASE_URL",
    "SIMULATOR_PORT",
    "ConfigError",
    "ContractAddon",
    "CrawlConfig",
    "api_timeout",
    "burst_for_rate",
    "mask_credentials",
    "mask_url",
    "max_retries",
    "password_hint",
]
