"""A crawler's database: one connection pool, shared by the storage pipeline and the pass ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from productcrawler.config.crawler import crawl_config
from productcrawler.per_crawler import PerCrawler
from productcrawler.storage.database import Database
from productcrawler.storage.target import DatabaseTarget

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _open(crawler: Crawler) -> Database:
    config = crawl_config(crawler)
    database = Database(DatabaseTarget.from_url(config.storage.database_url), config.ids.type,
                        tuple((c.name, c.spec) for c in config.answer.columns),
                        config.answer.variants.declared_spec if config.answer.variants else ())
    # Closed last: the pipeline flushes and the ledger settles the pass on the way out.
    crawler.signals.connect(database.close, signal=signals.engine_stopped, weak=False)
    return database


#: The crawler's database (whoever asks first opens it; it closes when the engine stops).
crawl_database: PerCrawler[Database] = PerCrawler("database", _open)
