"""docs/what-changed.md's queries run against a real database and return what they say."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from productcrawler.items import MISSING, FailureItem, ProductItem
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
    assert len(queries) == 5
    assert "product_id = 1042 AND field = 'price'" in queries[0]


def test_each_query_returns_what_the_page_says(database):
    history, drops, back_in_stock, removed, one_pass = page_queries()
    assert [row[1:] for row in run(database, history)] == [("999.00", "899.00")]
    assert [row[:3] for row in run(database, drops)] == [(1042, "999.00", "899.00"), (7, "20.00", "5.00")]
    assert run(database, back_in_stock) == [(9, "product 9", "6")]
    assert [row[:2] for row in run(database, removed)] == [(10, "product 10")]
    assert sorted(run(database, one_pass.replace("212", "2"))) == [("price", 3), ("removed", 1), ("stock", 1)]
