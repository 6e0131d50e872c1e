"""docs/what-changed.md's queries run against a real database and return what they say."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from productcrawler.items import MISSING, FailureItem, ProductItem, VariantItem
from productcrawler.passes.summary import finish_with_summary
from productcrawler.storage.database import DatabaseTarget, ensure_schema, utcnow, write_batch
from tests.support.crawls import ROOT

PAGE = (ROOT / "docs" / "what-changed.md").read_text()


def page_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", PAGE, re.DOTALL)


def for_sqlite(sql: str) -> str:
    return sql.replace("CURRENT_DATE", "DATE('now')").replace("AS SIGNED", "AS INTEGER")


def product(i: int, at: datetime, price: str, stock: int) -> ProductItem:
    return ProductItem(i, f"product {i}", Decimal(price), stock, "c", "b", None, None, at)


@pytest.fixture(params=["mysql", "sqlite"])
def database(request, tmp_path):
    url = (request.getfixturevalue("mysql_url") if request.param == "mysql"
           else f"sqlite:///{tmp_path / 'docs.db'}")
    target = DatabaseTarget.from_url(url)
    connection = target.connect()
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    # Two passes: yesterday (pass 1) and now (pass 2). 1042 drops 999.00 -> 899.00, 7 drops 20.00 -> 5.00,
    # 8 rises, 9 comes back in stock, 10 is removed.
    yesterday, now = utcnow() - timedelta(days=1), utcnow()
    for pass_id, at, rows, missing in (
            (1, yesterday, [(1042, "999.00", 3), (7, "20.00", 1), (8, "1.00", 1), (9, "3.00", 0), (10, "4.00", 2)], []),
            (2, now, [(1042, "899.00", 3), (7, "5.00", 1), (8, "2.00", 1), (9, "3.00", 6)], [10])):
        p = target.dialect.placeholder
        cursor.execute(f"INSERT INTO crawl_passes (start_id, end_id, started_at) VALUES (1, 2000, {p})",
                       (target.dialect.value(at),))
        write_batch(cursor, target.dialect, [product(i, at, price, stock) for i, price, stock in rows],
                    [(FailureItem(i, MISSING, 404, "http_404", 1), at) for i in missing], pass_id)
        finish_with_summary(cursor, target.dialect, pass_id, 1, 2000, at + timedelta(seconds=1))
    connection.commit()
    yield target, connection
    connection.close()


def run(database, sql: str) -> list[tuple]:
    target, connection = database
    cursor = connection.cursor()
    cursor.execute(sql if target.dialect.name == "mysql" else for_sqlite(sql))
    return [tuple(str(v) if isinstance(v, (Decimal, datetime)) else v for v in row) for row in cursor.fetchall()]


def test_the_page_has_the_queries_people_type():
    queries = page_queries()
    assert len(queries) == 10
    assert "product_id = 1042 AND field = 'price'" in queries[0]
    assert "variant_id = '13' AND field = 'price'" in queries[5]


def test_each_query_returns_what_the_page_says(database):
    history, drops, back_in_stock, removed, one_pass = page_queries()[:5]
    assert [row[1:] for row in run(database, history)] == [("999.00", "899.00")]
    assert [row[:3] for row in run(database, drops)] == [(1042, "999.00", "899.00"), (7, "20.00", "5.00")]
    assert run(database, back_in_stock) == [(9, "product 9", "6")]
    assert [row[:2] for row in run(database, removed)] == [(10, "product 10")]
    assert sorted(run(database, one_pass.replace("212", "2"))) == [("price", 3), ("removed", 1), ("stock", 1)]


def for_database(sql: str, name: str) -> str:
    """The page's MySQL form in ``name``'s spelling, as the page says."""
    if name == "sqlite":
        return for_sqlite(sql).replace("JSON_VALUE(coverage, '$.status')", "json_extract(coverage, '$.status')")
    if name == "postgresql":
        return sql.replace("AS SIGNED", "AS INTEGER").replace("JSON_VALUE(coverage, '$.status')",
                                                              "CAST(coverage AS jsonb) ->> 'status'")
    return sql


def variant(variant_id: str, price: str, stock: int, compare_at: str | None = None) -> VariantItem:
    return VariantItem(variant_id, f"SKU-{variant_id}", Decimal(price), stock, {"compare_at": compare_at})


@pytest.fixture(params=["mysql", "sqlite", "postgresql"])
def variant_database(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'variants.db'}" if request.param == "sqlite"
           else request.getfixturevalue(f"{request.param}_url"))
    target = DatabaseTarget.from_url(url)
    connection = target.connect()
    cursor = connection.cursor()
    declared, variant_declared = (("status", "text(16)"),), (("compare_at", "decimal(10,2)"),)
    ensure_schema(cursor, target.dialect, "int", declared, variant_declared)
    # Pass 1 yesterday, pass 2 now: variant 13's price drops, 12 is back in stock, 11 goes on sale;
    # product 2 loses its status (coverage 100 % -> 50 %).
    yesterday, now = utcnow() - timedelta(days=1), utcnow()
    for pass_id, at, variants, statuses in (
            (1, yesterday, [variant("11", "10.00", 5), variant("12", "12.00", 0), variant("13", "15.00", 3)],
             ("active", "active")),
            (2, now, [variant("11", "10.00", 5, "12.00"), variant("12", "12.00", 4), variant("13", "14.00", 3)],
             ("active", None))):
        p = target.dialect.placeholder
        cursor.execute(f"INSERT INTO crawl_passes (start_id, end_id, started_at) VALUES (1, 2, {p})",
                       (target.dialect.value(at),))
        products = [product(1, at, "10.00", 8), product(2, at, "5.00", 1)]
        products[0].variants = variants
        for item, status in zip(products, statuses, strict=True):
            item.extra = {"status": status}
        write_batch(cursor, target.dialect, products, [], pass_id, ("price", "stock", "compare_at"),
                    declared=declared, variant_declared=variant_declared)
        finish_with_summary(cursor, target.dialect, pass_id, 1, 2, at + timedelta(seconds=1), declared=("status",))
    connection.commit()
    yield target, connection
    connection.close()


def test_each_variant_query_returns_what_the_page_says(variant_database):
    target, connection = variant_database
    history, drops, back_in_stock, sales, coverage = page_queries()[5:]

    def run_here(sql: str) -> list[tuple]:
        cursor = connection.cursor()
        cursor.execute(for_database(sql, target.dialect.name))
        return [tuple(str(Decimal(str(v)).quantize(Decimal("0.01"))) if isinstance(v, float)
                      else str(v) if isinstance(v, (Decimal, datetime)) else v for v in row)
                for row in cursor.fetchall()]

    assert [row[1:] for row in run_here(history)] == [("15.00", "14.00")]
    assert run_here(drops) == [(1, "13", "SKU-13", "15.00", "14.00")]
    assert run_here(back_in_stock) == [(1, "12", "SKU-12", "4")]
    assert [row[:3] + row[4:] for row in run_here(sales)] == [(1, "11", "SKU-11", "12.00")]
    assert [(row[0], row[1], float(row[2])) for row in run_here(coverage)] == [(2, 2, 0.5), (1, 2, 1.0)]
