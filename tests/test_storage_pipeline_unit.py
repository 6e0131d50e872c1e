"""The storage pipeline built by Scrapy's get_crawler, on a real SQLite database: when an outcome counts.

The crawl-level tests (test_storage_pipeline.py, test_outages.py, ...) show
rows and outages end to end; this pins the pipeline's own contract: an item
is done only once its batch is committed, batches are written by size, and
the rows carry the pass's stamp.
"""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from productcrawler import signals
from productcrawler.items import MISSING, FailureItem, ProductItem
from productcrawler.passes.crawler import crawl_pass
from productcrawler.spiders.products import ProductsSpider
from productcrawler.storage.crawler import crawl_database
from productcrawler.storage.database import utcnow
from productcrawler.storage.pipeline import StoragePipeline
from tests.support.reactor import on_reactor_loop


@pytest.fixture
def pipeline(tmp_path):
    crawler = get_crawler(ProductsSpider, {
        "API_BASE_URL": "http://api.test/v1", "DATABASE_URL": f"sqlite:///{tmp_path}/products.db",
        "DATABASE_BATCH_SIZE": 3, "DATABASE_FLUSH_INTERVAL": 30, "PRODUCT_ID_END": 10})
    crawler.spider = ProductsSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    database = crawl_database(crawler)
    database.pool.start()  # a crawl's reactor starts it; here there is no running reactor
    pipeline = StoragePipeline.from_crawler(crawler)
    pipeline.stamp_with(crawl_pass(crawler))  # as the pass scheduler does
    on_reactor_loop(crawl_pass(crawler).open(fresh=False))  # pass 1: its id stamps the rows
    on_reactor_loop(pipeline.open_spider())
    committed: list[list[int]] = []
    crawler.signals.connect(
        lambda products, failures: committed.append([i.product_id for i in [*products, *failures]]),
        signal=signals.outcomes_committed, weak=False)
    pipeline.committed = committed
    pipeline.path = tmp_path / "products.db"
    yield pipeline
    on_reactor_loop(pipeline.close_spider())
    database.pool.close()


def product(product_id: int) -> ProductItem:
    return ProductItem(product_id, f"product {product_id}", Decimal("9.99"), 1, None, None, None, None, utcnow())


def rows(pipeline: Any) -> list[tuple[int, int]]:
    with sqlite3.connect(pipeline.path) as connection:
        return connection.execute("SELECT product_id, pass_id FROM products UNION ALL "
                                  "SELECT product_id, pass_id FROM crawl_failures ORDER BY 1").fetchall()


def test_an_item_is_done_only_once_its_batch_is_committed(pipeline):
    async def scenario() -> None:
        first = [asyncio.ensure_future(pipeline.process_item(product(i))) for i in (1, 2)]
        await asyncio.sleep(0.3)
        assert not any(task.done() for task in first)  # a batch of 3: nothing written yet
        assert rows(pipeline) == [] and pipeline.committed == []
        third = asyncio.ensure_future(pipeline.process_item(FailureItem(3, MISSING, 404, "not_found", 1)))
        await asyncio.wait_for(asyncio.gather(*first, third), timeout=10)

    on_reactor_loop(scenario())
    assert rows(pipeline) == [(1, 1), (2, 1), (3, 1)]  # stamped with the pass
    assert pipeline.committed == [[1, 2, 3]]  # one signal for the batch, after the commit


def test_close_writes_the_last_partial_batch(pipeline):
    async def scenario() -> None:
        task = asyncio.ensure_future(pipeline.process_item(product(4)))
        await asyncio.sleep(0.1)
        assert not task.done()
        await pipeline.close_spider()
        await asyncio.wait_for(task, timeout=10)

    on_reactor_loop(scenario())
    assert rows(pipeline) == [(4, 1)]
    assert pipeline.committed == [[4]]
