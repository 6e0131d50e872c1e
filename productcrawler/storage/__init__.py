"""Storage: MySQL or SQLite behind one interface (``database.py``; the connection in ``target.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from productcrawler.config import crawl_config
from productcrawler.storage.database import Database
from productcrawler.storage.target import DatabaseTarget

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_ATTRIBUTE = "_productcrawler_database"


def database_for(crawler: Crawler) -> Database:
    """The crawler's one connection pool, shared by the pipeline and the pass ledger."""
    database = getattr(crawler, _ATTRIBUTE, None)
    if database is None:
        config = crawl_config(crawler)
        database = Database(DatabaseTarget.from_url(config.database_url), config.id_type)
        setattr(crawler, _ATTRIBUTE, database)
        # Closed last: the pipeline flushes and the ledger settles the pass on the way out.
        crawler.signals.connect(database.close, signal=signals.engine_stopped, weak=False)
    return database
