"""write_batch writes by what changed: exact product_changes rows, removed_at, first_seen, and
MySQL's own handler counters for rows it did not rewrite. MySQL and SQLite alike."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from productcrawler.items import FAILED, MISSING, FailureItem, ProductItem
from productcrawler.passes.database_sql import done_ids
from productcrawler.storage.database import DatabaseTarget, ensure_schema, write_batch

T1, T2, T3 = datetime(2025, 3, 1, 10, 0, 0), datetime(2025, 3, 1, 11, 0, 0), datetime(2025, 3, 1, 12, 0, 0)


def product(product_id: int, at: datetime, price: str = "7999.00", stock: int | None = 5,
            brand: str | None = "Acme") -> ProductItem:
    return ProductItem(product_id, f"product {product_id}", Decimal(price), stock, "phones", brand,
                       Decimal("4.50"), 10, at)


def missing(product_id: int) -> FailureItem:
    return FailureItem(product_id, MISSING, 404, "http_404", 1)


@pytest.fixture(params=["mysql", "sqlite", "postgresql"])
def database(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'changes.db'}" if request.param == "sqlite"
           else request.getfixturevalue(f"{request.param}_url"))
    target = DatabaseTarget.from_url(url)
    connection = target.connect()
    ensure_schema(connection.cursor(), target.dialect)
    connection.commit()
    yield target, connection
    connection.close()


def rows(connection, sql: str) -> list[tuple]:
    cursor = connection.cursor()
    cursor.execute(sql)
    return [tuple(str(v) if isinstance(v, datetime) else v for v in row) for row in cursor.fetchall()]


def changes(connection) -> list[tuple]:
    return rows(connection, "SELECT product_id, pass_id, changed_at, field, old_value, new_value "
                            "FROM product_changes ORDER BY id")


def test_three_passes_record_price_and_stock_changes_a_removal_and_a_return(database):
    target, connection = database
    cursor, dialect = connection.cursor(), target.dialect
    write_batch(cursor, dialect, [product(i, T1) for i in (1, 2, 3, 4)], [(missing(5), T1)], 1)
    connection.commit()
    assert changes(connection) == []  # a first sighting is not a change
    assert rows(connection, "SELECT product_id, first_seen, removed_at, pass_id FROM products ORDER BY product_id") == [
        (i, "2025-03-01 10:00:00", None, 1) for i in (1, 2, 3, 4)]

    # Pass 2: 1's price drops, 2's stock sells out and its brand changes (untracked), 3 is gone, 4 is unchanged.
    write_batch(cursor, dialect, [product(1, T2, price="7499.50"), product(2, T2, stock=0, brand="Acme Co"),
                                  product(4, T2)], [(missing(3), T2), (missing(5), T2)], 2)
    connection.commit()
    assert changes(connection) == [
        (1, 2, "2025-03-01 11:00:00", "price", "7999.00", "7499.50"),
        (2, 2, "2025-03-01 11:00:00", "stock", "5", "0"),
        (3, 2, "2025-03-01 11:00:00", "removed", None, "2025-03-01 11:00:00"),
    ]
    assert rows(connection, "SELECT product_id, brand, stock, update_time, first_seen, removed_at, pass_id "
                            "FROM products ORDER BY product_id") == [
        (1, "Acme", 5, "2025-03-01 11:00:00", "2025-03-01 10:00:00", None, 2),
        (2, "Acme Co", 0, "2025-03-01 11:00:00", "2025-03-01 10:00:00", None, 2),
        (3, "Acme", 5, "2025-03-01 10:00:00", "2025-03-01 10:00:00", "2025-03-01 11:00:00", 1),
        (4, "Acme", 5, "2025-03-01 11:00:00", "2025-03-01 10:00:00", None, 2),
    ]
    assert done_ids(cursor, dialect, 1, 5, 2) == {1, 2, 3, 4, 5}  # the removed one by its failure row

    # Pass 3: 3 is back at a new price, a 404 for it again in the same pass is not possible; 1 fails (kept).
    write_batch(cursor, dialect, [product(3, T3, price="10.00"), product(2, T3, stock=0, brand="Acme Co"),
                                  product(4, T3)], [(FailureItem(1, FAILED, 503, "http_503", 4), T3)], 3)
    connection.commit()
    assert changes(connection)[3:] == [
        (3, 3, "2025-03-01 12:00:00", "removed", "2025-03-01 11:00:00", None),
        (3, 3, "2025-03-01 12:00:00", "price", "7999.00", "10.00"),
    ]
    assert rows(connection, "SELECT product_id, price, removed_at, first_seen, pass_id FROM products "
                            "WHERE product_id IN (1, 3) ORDER BY product_id") == [
        (1, Decimal("7499.50") if dialect.name == "mysql" else 7499.5, None, "2025-03-01 10:00:00", 2),
        (3, Decimal("10.00") if dialect.name == "mysql" else 10, None, "2025-03-01 10:00:00", 3)]
    assert rows(connection, "SELECT product_id, outcome, pass_id FROM crawl_failures ORDER BY product_id") == [
        (1, "failed", 3), (5, "missing", 2)]


@pytest.mark.parametrize(("tracked", "expected"), [
    ((), []),
    (("name", "price", "stock", "category", "brand", "rating", "sales_count"),
     [(2, "stock", "5", "0"), (2, "brand", "Acme", None), (3, "removed", None, "2025-03-01 11:00:00")]),
])
def test_track_changes_picks_the_columns(database, tracked, expected):
    target, connection = database
    cursor = connection.cursor()
    write_batch(cursor, target.dialect, [product(i, T1) for i in (2, 3)], [], 1, tracked)
    write_batch(cursor, target.dialect, [product(2, T2, stock=0, brand=None)], [(missing(3), T2)], 2, tracked)
    connection.commit()
    assert [(r[0], r[3], r[4], r[5]) for r in changes(connection)] == expected
    assert rows(connection, "SELECT removed_at FROM products WHERE product_id = 3") == [("2025-03-01 11:00:00",)]


def _handler_counts(cursor) -> dict[str, int]:
    cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Handler_write', 'Handler_update', "
                   "'Handler_delete', 'Com_insert', 'Com_update')")
    return {name: int(value) for name, value in cursor.fetchall()}


def test_unchanged_products_cost_mysql_one_narrow_update_each_and_no_write(mysql_url):
    target = DatabaseTarget.from_url(mysql_url)
    connection = target.connect()
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    write_batch(cursor, target.dialect, [product(i, T1) for i in range(1, 201)], [], 1)
    connection.commit()
    before = _handler_counts(cursor)
    # 200 products: 6 with a new price, 194 as they were.
    batch = [product(i, T2, price="1.00" if i % 33 == 0 else "7999.00") for i in range(1, 201)]
    cursor.execute("SELECT AUTO_INCREMENT FROM information_schema.tables WHERE table_schema = DATABASE() "
                   "AND table_name = 'products'")
    next_id = cursor.fetchone()[0]
    written = write_batch(cursor, target.dialect, batch, [], 2)
    connection.commit()
    after = _handler_counts(cursor)
    assert (written.changed, written.unchanged, written.change_rows) == (6, 194, 6)
    # The server's own counts: no row written but the 6 change rows; 200 updated (6 whole, 194 touched).
    assert after["Handler_write"] - before["Handler_write"] == 6
    assert after["Handler_update"] - before["Handler_update"] == 200
    assert after["Handler_delete"] - before["Handler_delete"] == 0
    # And its statements: one UPDATE per changed product, one for all 194 unchanged ones (fetched in
    # the same second), one INSERT for the 6 change rows (executemany's multi-row form), no upsert.
    assert after["Com_update"] - before["Com_update"] == 6 + 1
    assert after["Com_insert"] - before["Com_insert"] == 1
    cursor.execute("SELECT AUTO_INCREMENT FROM information_schema.tables WHERE table_schema = DATABASE() "
                   "AND table_name = 'products'")
    assert cursor.fetchone()[0] == next_id  # no insert was even attempted
    cursor.execute("SELECT COUNT(*) FROM products WHERE pass_id = 2 AND update_time = '2025-03-01 11:00:00'")
    assert cursor.fetchone()[0] == 200
    connection.close()
