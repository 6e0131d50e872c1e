"""Start-up checks: bad configuration fails at once, with one clear message.

Run by the ``crawl`` command before Scrapy starts (the reactor is not running
yet, so the short blocking connects here block nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.config import ConfigError, CrawlConfig, mask_url
from productcrawler.middlewares.ratelimit import rate_limit_enabled
from productcrawler.redis_connection import redis_client
from productcrawler.storage.database import DatabaseTarget

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Seconds a start-up check waits for a server before calling it unreachable.
CONNECT_TIMEOUT = 5.0


def check(settings: BaseSettings, spider_args: dict[str, Any]) -> CrawlConfig:
    """Validate the contract and reach the database (and Redis); raise ConfigError."""
    config = CrawlConfig.from_settings(settings, start_id=spider_args.get("start_id"),
                                       end_id=spider_args.get("end_id"))
    # Read here too, before the downloader exists: refused while the crawler is
    # built, it would leave the download handler's connections open behind it.
    rate_limit_enabled(settings)
    _check_database(config.database_url)
    if config.redis_url is not None:
        _check_redis(config.redis_url)
    return config


def _check_database(url: str) -> None:
    target = DatabaseTarget.from_url(url, connect_timeout=CONNECT_TIMEOUT)
    try:
        connection = target.connect()
        # Reach it only: the pipeline creates the tables as the spider opens,
        # whatever started the crawl, so that is done in one place.
        try:
            connection.cursor().execute("SELECT 1")
        finally:
            connection.close()
    except Exception as error:  # noqa: BLE001 - any driver error is a configuration problem here
        raise ConfigError(f"DATABASE_URL={target.shown_url!r}: cannot use the database: "
                          f"{_describe(error)}") from None


def _check_redis(url: str) -> None:
    try:
        client = redis_client(url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # noqa: BLE001
        raise ConfigError(f"REDIS_URL={mask_url(url)!r}: cannot reach Redis: {_describe(error)}") from None


def _describe(error: BaseException) -> str:
    if len(error.args) == 2 and isinstance(error.args[0], int):  # pymysql: (code, message)
        return f"{error.args[1]} (error {error.args[0]})"
    return str(error) or type(error).__name__
