"""Passes: which ids a run still has to fetch, and when a pass is complete.

A pass is one sweep over the id range. Without Redis the database is the
ledger (``database.py``): an id is done in a pass when its product or failure
row was written after the pass started, so nothing counts as done before its
row is committed, and a run killed at any moment resumes from the rows. With
Redis, the pass lives in Redis (``redis_pass.py``) and the scheduler hands
out its ids (``shared.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.config import crawl_config
from productcrawler.passes.database import DatabaseLedger
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.passes.shared import SharedLedger
from productcrawler.redis_connection import redis_client
from productcrawler.storage import database_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_ATTRIBUTE = "_productcrawler_redis_pass"
_LEDGER = "_productcrawler_ledger"


def redis_pass_for(crawler: Crawler) -> RedisPass:
    """The crawler's one view of the shared pass (scheduler and ledger use the same)."""
    redis_pass = getattr(crawler, _ATTRIBUTE, None)
    if redis_pass is None:
        config = crawl_config(crawler)
        assert config.redis_url is not None
        redis_pass = RedisPass(redis_client(config.redis_url), config.redis_key_prefix)
        setattr(crawler, _ATTRIBUTE, redis_pass)
    return redis_pass


def ledger_for(crawler: Crawler) -> DatabaseLedger | SharedLedger:
    """The crawler's one pass ledger (spider, pipeline, progress and metrics use the same)."""
    ledger = getattr(crawler, _LEDGER, None)
    if ledger is None:
        config = crawl_config(crawler)
        if config.redis_url is None:
            ledger = DatabaseLedger(database_for(crawler), config)
        else:
            ledger = SharedLedger(redis_pass_for(crawler), config)
        setattr(crawler, _LEDGER, ledger)
    return ledger


def built_ledger(crawler: Crawler) -> DatabaseLedger | SharedLedger | None:
    """The crawler's ledger if the spider has built it yet (extensions that only read it)."""
    return getattr(crawler, _LEDGER, None)
