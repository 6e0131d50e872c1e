"""Rows carry the pass that wrote them: a new pass owes every id, however close in time to the last."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

from productcrawler.items import MISSING, FailureItem, ProductItem
from productcrawler.passes.database_sql import done_count, done_ids, finish_pass, open_pass, outcome_counts
from productcrawler.storage.database import DatabaseTarget, ensure_schema, utcnow, write_batch


def product(product_id: int, fetched_at) -> ProductItem:
    return ProductItem(product_id, f"product {product_id}", Decimal("9.99"), 1, None, None, None, None, fetched_at)


def test_a_pass_opened_right_after_another_owes_every_id_and_opens_at_once(mysql_url):
    target = DatabaseTarget.from_url(mysql_url)
    connection = target.connect()
    cursor, dialect = connection.cursor(), target.dialect
    ensure_schema(cursor, dialect)
    first = open_pass(cursor, dialect, 1, 10, fresh=False, now=utcnow())
    # Fetched by an instance whose clock runs 3 s ahead: stamps later than the next pass's start.
    ahead = utcnow() + timedelta(seconds=3)
    write_batch(cursor, dialect, [product(i, ahead) for i in range(1, 10)],
                [(FailureItem(10, MISSING, 404, "http_404", 1), ahead)], first.pass_id)
    assert done_count(cursor, dialect, 1, 10, first.pass_id) == 10
    finish_pass(cursor, dialect, first.pass_id, utcnow())
    connection.commit()

    began = time.monotonic()
    second = open_pass(cursor, dialect, 1, 10, fresh=False, now=utcnow())
    assert time.monotonic() - began < 0.5  # no waiting out the second on a database thread
    assert second.pass_id == first.pass_id + 1 and not second.resumed
    assert done_count(cursor, dialect, 1, 10, second.pass_id) == 0
    write_batch(cursor, dialect, [product(3, utcnow())], [], second.pass_id)
    assert done_ids(cursor, dialect, 1, 10, second.pass_id) == {3}
    assert outcome_counts(cursor, dialect, 1, 10, second.pass_id) == {"stored": 1, "missing": 0, "failed": 0}
    connection.close()


def test_tables_made_before_rows_carried_their_pass_get_the_column(mysql_url):
    target = DatabaseTarget.from_url(mysql_url)
    connection = target.connect()
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    for table in ("products", "crawl_failures"):
        cursor.execute(f"ALTER TABLE {table} DROP COLUMN pass_id")
    ensure_schema(cursor, target.dialect)
    write_batch(cursor, target.dialect, [product(1, utcnow())], [], 7)
    assert done_count(cursor, target.dialect, 1, 1, 7) == 1
    connection.close()
