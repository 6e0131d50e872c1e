"""Passes: one sweep over the id range, which ids it still owes, and when it is complete.

``base.py`` is the interface, ``scheduler.py`` its one driver; ``database.py``
(one process: the database is the ledger) and ``redis_pass.py`` (any number
of instances share the pass in Redis) implement it. ``pass_for`` picks one by
``REDIS_URL``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.config import crawl_config
from productcrawler.passes.database import DatabasePass
from productcrawler.passes.record import SharedPassRecord
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.redis_connection import async_redis_client
from productcrawler.storage import database_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.passes.base import Pass

_ATTRIBUTE = "_productcrawler_pass"


def pass_for(crawler: Crawler) -> Pass:
    """The crawler's one pass (the scheduler drives it; the pipeline, progress and metrics read it)."""
    crawl_pass = getattr(crawler, _ATTRIBUTE, None)
    if crawl_pass is None:
        config = crawl_config(crawler)
        if config.redis_url is None:
            crawl_pass = DatabasePass(database_for(crawler), config)
        else:
            record = SharedPassRecord(database_for(crawler), tracking=bool(config.track_changes))
            crawl_pass = RedisPass(async_redis_client(config.redis_url), config.redis_key_prefix,
                                   config.start_id, config.end_id, heartbeat_ttl=config.redis_heartbeat_ttl,
                                   record=record)
        setattr(crawler, _ATTRIBUTE, crawl_pass)
    return crawl_pass


def built_pass(crawler: Crawler) -> Pass | None:
    """The crawler's pass if something has built it yet (extensions that only read it)."""
    return getattr(crawler, _ATTRIBUTE, None)
