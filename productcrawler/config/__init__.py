"""The configuration: every user-facing setting, its type, default and rule.

Each value can come from the environment or, under the same name, from a Scrapy
setting (``-s NAME=value``, scrapyd's ``setting=NAME=value``); a setting given
explicitly wins over the environment because the add-on that reads the
environment sets its values at Scrapy's "addon" priority, below ``-s``.

* :mod:`.declared` — every setting declared once: name, default, parser, topic,
  meaning; ``DEFAULTS`` derived from it;
* :mod:`.addon` — :class:`ContractAddon`, the add-on (``ADDONS`` in
  ``settings.py``) that fills ``DEFAULTS`` into the settings: the environment,
  else the default;
* :mod:`.reader` — a declared setting's value, parsed (reading an undeclared
  name fails);
* :mod:`.parsers`, :mod:`.values`, :mod:`.proxy_urls`, :mod:`.auth` — the
  checks of single values, ``ConfigError``, :func:`mask_url`,
  :func:`mask_credentials` and :func:`password_hint`;
* :mod:`.driver_errors` — :func:`~.driver_errors.describe`, one line for a
  database or Redis driver's error about a configured URL;
* :mod:`.sections` — one frozen section per feature (``.api``, ``.ids``,
  ``.rate``, ``.retry``...);
* :mod:`.crawl` — :class:`CrawlConfig`, the sections together and the rules
  between them; a crawler's components share one, ``crawl_config(crawler)``
  (:mod:`.crawler`), and each takes its section;
* :mod:`.reference` — the reference page, ``docs/configuration.md``.

Components never read these names with raw ``settings.get``: parsing raises
``ConfigError`` (a ``ValueError``) naming the setting and the offending value,
passwords masked.
"""

from productcrawler.config.addon import ContractAddon
from productcrawler.config.crawl import CrawlConfig
from productcrawler.config.declared import DEFAULTS, SIMULATOR_BASE_URL, SIMULATOR_PORT
from productcrawler.config.sections import burst_for_rate
from productcrawler.config.values import REDIS_SCHEMES, ConfigError, mask_credentials, mask_url, password_hint

__all__ = [
    "DEFAULTS",
    "REDIS_SCHEMES",
    "SIMULATOR_BASE_URL",
    "SIMULATOR_PORT",
    "ConfigError",
    "ContractAddon",
    "CrawlConfig",
    "burst_for_rate",
    "mask_credentials",
    "mask_url",
    "password_hint",
]
