"""Passes: one sweep over the id list (a range or a file), which ids it still owes, and when it is complete.

``base.py`` is the interface, ``scheduler.py`` its one driver; ``database.py``
(one process: the database is the ledger) and ``redis_pass.py`` (any number
of instances share the pass in Redis) implement it over ids, ``listing.py`` and
``redis_listing.py`` over a listing's pages (``PRODUCT_LIST_URL``). ``new_pass`` picks one by
``REDIS_URL`` (the Redis ones on the crawler's client); a crawler has one, ``crawl_pass(crawler)`` (:mod:`.crawler`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.ids import RangeIds
from productcrawler.passes.database import DatabasePass
from productcrawler.passes.failed import failed_snapshot
from productcrawler.passes.listing import ListingPass
from productcrawler.passes.record import SharedPassRecord
from productcrawler.passes.redis_listing import RedisListingPass
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.redis_connection import crawler_redis

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.config import CrawlConfig
    from productcrawler.ids.failed import FailedIds
    from productcrawler.passes.base import Pass
    from productcrawler.storage.database import Database


def new_pass(config: CrawlConfig, database: Database, crawler: Crawler) -> Pass:
    """The pass ``config`` asks for: in ``database``, or in Redis (which records its outcomes in ``database``);
    over the ids, or over a listing's pages (PRODUCT_LIST_URL)."""
    if config.listing.url is not None:
        if config.redis.url is None:
            return ListingPass(database, config)
        return RedisListingPass(crawler_redis(crawler, config.redis.url), config.redis.key_prefix, config,
                                SharedPassRecord(database, tracking=bool(config.storage.track_changes)))
    if config.redis.url is None:
        return DatabasePass(database, config)
    read_failed = None
    if config.ids.failed_only:

        async def read_failed() -> FailedIds:
            await database.ensure_schema()
            return await maybe_deferred_to_future(database.run(failed_snapshot, config.ids.type))

    ids = None if config.ids.failed_only else (config.ids.file or RangeIds(config.ids.start_id, config.ids.end_id))
    record = SharedPassRecord(database, tracking=bool(config.storage.track_changes))
    return RedisPass(crawler_redis(crawler, config.redis.url), config.redis.key_prefix, ids,
                     heartbeat_ttl=config.redis.heartbeat_ttl, read_failed=read_failed, record=record)
