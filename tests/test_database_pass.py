"""DatabasePass against real databases (SQLite, MariaDB and PostgreSQL): what a pass owes, and when it is complete.

Run on the asyncio reactor's loop with the connection pool's threads started
by hand: the same code path as in a crawl, without a crawl around it.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest
from scrapy.settings import Settings
from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.config import CrawlConfig
from productcrawler.items import MISSING, FailureItem, ProductItem
from productcrawler.passes.base import FINISHED, RUNNING, Entry
from productcrawler.passes.database import DatabasePass
from productcrawler.storage.database import Database, DatabaseTarget, utcnow, write_batch
from tests.support.reactor import on_reactor_loop

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def database(database_url) -> Iterator[Database]:
    database = Database(DatabaseTarget.from_url(database_url))
    database.pool.start()  # a crawl's reactor starts it; here there is no running reactor
    yield database
    database.pool.close()


def new_pass(database: Database, start: int, end: int) -> DatabasePass:
    config = CrawlConfig.from_settings(Settings({"PRODUCT_ID_START": start, "PRODUCT_ID_END": end}))
    return DatabasePass(database, config)


def store(database: Database, crawl_pass: DatabasePass, stored: list[int], missing: list[int]) -> None:
    now = utcnow()
    products = [ProductItem(i, f"product {i}", Decimal("1.00"), 1, None, None, None, None, now) for i in stored]
    failures = [(FailureItem(i, MISSING, 404, "not_found", 1), now) for i in missing]
    on_reactor_loop(maybe_deferred_to_future(database.run(write_batch, products, failures, crawl_pass.row_stamp)))


def lease_all(crawl_pass: DatabasePass) -> list[int]:
    ids = []
    while entries := on_reactor_loop(crawl_pass.lease(7)).entries:
        ids += [entry.position for entry in entries]
    return ids


def test_a_new_pass_hands_out_every_id_once_then_says_finished(database):
    crawl_pass = new_pass(database, 1, 20)
    assert on_reactor_loop(crawl_pass.open(fresh=False)) == "Starting pass 1 over ids 1..20"
    assert lease_all(crawl_pass) == list(range(1, 21))
    assert on_reactor_loop(crawl_pass.lease(7)).status == FINISHED


def test_a_resumed_pass_hands_out_only_the_ids_without_a_row_of_this_pass(database):
    first = new_pass(database, 1, 20)
    on_reactor_loop(first.open(fresh=False))
    store(database, first, stored=[1, 2, 3, 10], missing=[4, 20])
    assert not on_reactor_loop(first.close("shutdown", lost=False))  # 6 of 20: not complete

    resumed = new_pass(database, 1, 20)
    assert on_reactor_loop(resumed.open(fresh=False)) == "Resuming pass 1 over ids 1..20: 6 of 20 already done"
    assert resumed.pass_id == 1 and resumed.done(0) == 6
    owed = lease_all(resumed)
    assert owed == [i for i in range(1, 21) if i not in (1, 2, 3, 4, 10, 20)]
    store(database, resumed, stored=owed, missing=[])
    assert on_reactor_loop(resumed.close("finished", lost=False))

    after = new_pass(database, 1, 20)  # the pass is finished: the next run starts another
    assert on_reactor_loop(after.open(fresh=False)) == "Starting pass 2 over ids 1..20"
    assert len(lease_all(after)) == 20


def test_fresh_abandons_an_unfinished_pass(database):
    on_reactor_loop(new_pass(database, 1, 5).open(fresh=False))
    fresh = new_pass(database, 1, 5)
    assert on_reactor_loop(fresh.open(fresh=True)) == "Starting pass 2 over ids 1..5"


def test_a_retry_is_held_until_due_and_the_pass_is_not_finished_while_one_waits(database):
    crawl_pass = new_pass(database, 1, 2)
    on_reactor_loop(crawl_pass.open(fresh=False))
    assert lease_all(crawl_pass) == [1, 2]
    on_reactor_loop(crawl_pass.push([(Entry(2, 1), 0.2), (Entry(1, 3), 0.0)]))
    assert on_reactor_loop(crawl_pass.lease(7)).entries == [Entry(1, 3)]
    waiting = on_reactor_loop(crawl_pass.lease(7))
    assert (waiting.entries, waiting.status) == ([], RUNNING)
    on_reactor_loop(asyncio.sleep(0.25))
    assert on_reactor_loop(crawl_pass.lease(7)).entries == [Entry(2, 1)]
    assert on_reactor_loop(crawl_pass.lease(7)).status == FINISHED
