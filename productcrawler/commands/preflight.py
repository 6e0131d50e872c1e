"""Start-up checks: bad configuration fails at once, with one clear message.

Run by the ``crawl`` command before Scrapy starts (``connect_database`` also by
``passes`` and ``progress``) (the reactor is not running
yet, so the short blocking connects here block nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.config import ConfigError, CrawlConfig, mask_url
from productcrawler.config.driver_errors import describe
from productcrawler.ids import RangeIds
from productcrawler.passes.redis_pass import refusal, refused
from productcrawler.ratelimit.middleware import check_handlers
from productcrawler.redis_connection import is_cluster, redis_client, reply_text
from productcrawler.redis_keys import Keys
from productcrawler.spiders.products import fresh_requested
from productcrawler.storage.evolve import sa_connection
from productcrawler.storage.migrate import refuse_declared_types, refuse_id_type
from productcrawler.storage.target import DatabaseTarget

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Seconds a start-up check waits for a server before calling it unreachable.
CONNECT_TIMEOUT = 5.0


def check(settings: BaseSettings, spider_args: dict[str, Any]) -> CrawlConfig:
    """Validate the contract and reach the database (and Redis); raise ConfigError."""
    config = CrawlConfig.from_settings(settings, start_id=spider_args.get("start_id"),
                                       end_id=spider_args.get("end_id"), ids=spider_args.get("ids"))
    refuse_jobdir(settings)
    # Read here too, before the downloader exists: refused while the crawler is
    # built, it would leave the download handler's connections open behind it.
    if config.rate.enabled:
        check_handlers(settings)
    answer = config.answer
    _check_database(config.storage.database_url, config.ids.type, tuple((c.name, c.spec) for c in answer.columns),
                    answer.variants.declared_spec if answer.variants else ())
    if config.redis.url is not None:
        _check_redis(config.redis.url)
        if not fresh_requested(spider_args.get("fresh")) and not config.ids.failed_only:
            _check_shared_pass(config)
    return config


def refuse_jobdir(settings: BaseSettings) -> None:
    """Scrapy's JOBDIR would resume requests on top of the pass, which resumes by itself."""
    jobdir = settings.get("JOBDIR")
    if jobdir:
        raise ConfigError(f"JOBDIR={jobdir!r} is not supported: the crawl resumes its own pass "
                          "(in the database, or in Redis with REDIS_URL); run again without JOBDIR")


def connect_database(url: str, **options: Any) -> tuple[DatabaseTarget, Any]:
    """The target DATABASE_URL names and a DB-API connection to it; ConfigError if it cannot be used."""
    target = DatabaseTarget.from_url(url, **options)
    try:
        return target, target.connect()
    except Exception as error:  # noqa: BLE001 - any driver error is a configuration problem here
        raise _unusable(target, url, error) from None


def _unusable(target: DatabaseTarget, url: str, error: Exception) -> ConfigError:
    # A password with an unencoded / or # can still leave a host and database to try (the wrong ones).
    return ConfigError(f"DATABASE_URL={target.shown_url!r}: cannot use the database: "
                       f"{describe(error, url, tls_option='ssl_ca')}")


def _check_database(url: str, id_type: str = "int", declared: tuple[tuple[str, str], ...] = (),
                    variant_declared: tuple[tuple[str, str], ...] = ()) -> None:
    target, connection = connect_database(url, connect_timeout=CONNECT_TIMEOUT)
    # Reach it, and refuse ids the tables cannot hold and declared columns of another type
    # than the table's (nothing is changed then): the pipeline creates and
    # migrates the tables as the spider opens, whatever started the crawl, so that is done in one place.
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT 1")
        cursor.fetchall()
        with sa_connection(connection, target.dialect) as schema:
            refuse_id_type(schema, id_type)
            refuse_declared_types(schema, declared)
            refuse_declared_types(schema, variant_declared, "product_variants", "VARIANT_FIELDS")
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001
        raise _unusable(target, url, error) from None
    finally:
        connection.close()


def _check_redis(url: str) -> None:
    """Reach Redis as every component will (the one client factory), and refuse a
    plain URL that points at a cluster node: its MOVED replies would stop the crawl later."""
    try:
        client = redis_client(url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT)
        try:
            client.ping()
            in_cluster = not is_cluster(url) and _cluster_enabled(client)
        finally:
            client.close()
    except Exception as error:  # noqa: BLE001
        raise ConfigError(f"REDIS_URL={mask_url(url)!r}: cannot reach Redis: "
                          f"{describe(error, url, tls_option='ssl_ca_certs')}") from None
    if in_cluster:
        raise ConfigError(f"REDIS_URL={mask_url(url)!r} is a node of a Redis Cluster: use "
                          "redis+cluster://host:port (rediss+cluster:// over TLS)")


def _check_shared_pass(config: CrawlConfig) -> None:
    """Refuse at once an id list the running shared pass is not over (the pass's OPEN script refuses it too)."""
    assert config.redis.url is not None
    ids = config.ids.file or RangeIds(config.ids.start_id, config.ids.end_id)
    client = redis_client(config.redis.url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT)
    try:
        pass_id, status, running = client.hmget(Keys(config.redis.key_prefix).passes().current,
                                                ["id", "status", "ids"])
    finally:
        client.close()
    if status != b"running":
        return
    running_ids = reply_text(running or b"")
    if refused(running_ids, ids.descriptor):
        assert pass_id is not None  # the pass's hash always has its id
        raise ConfigError(refusal(int(pass_id), running_ids, ids))


def _cluster_enabled(client: Any) -> bool:
    import redis

    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except redis.ResponseError:  # INFO not allowed for this ACL user: nothing to tell
        return False

