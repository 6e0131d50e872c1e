"""PRODUCT_COLUMNS: columns of the user's own, cleaned by type, added to existing tables, tracked.

Crawled for real against the changing-catalogue imitation (MySQL, SQLite, PostgreSQL):
the rows column by column, the cleaning counts, the change rows of a declared column,
its coverage in ``scrapy passes``; tables made by the code before keep every row (products,
changes, failures, passes) and take answers, variants and variant changes; a declared type
that differs from the table's stops the crawl at start, tables untouched.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

import pytest

from productcrawler.config import ConfigError
from productcrawler.config.crawl import CrawlConfig
from tests.support.crawls import crawl_env, run_crawl, run_scrapy
from tests.support.imitations.changing_catalogue import CatalogueApi
from tests.support.old_schema import MYSQL_DDL_HANDWRITTEN, SQLITE_DDL_HANDWRITTEN
from tests.support.services import database_query, mysql_execute

END = 12
DECLARED = ("sku:text(8)=variants.0.sku,status:text(16)=status,compare_at:decimal(10,2)=variants.0.compare_at_price,"
            "updated_at:datetime=updated_at,tags:json=tags,units:integer=units,taxable:boolean=taxable")


def product(i: int, version: int) -> dict:
    item = {"id": i, "name": f"Board {i}", "price": 100 + i, "stock": i, "status": "active",
            "updated_at": "2026-03-01T10:00:00+02:00", "tags": ["snow", i], "units": str(i * 10), "taxable": True,
            "variants": [{"sku": f"SKU-{i}", "compare_at_price": None}]}
    if i == 2:
        item["variants"][0]["sku"] = "MUCH-TOO-LONG-SKU"  # cut to text(8)
    if i == 3:
        item["updated_at"] = "2026-03-01 10:00:00"  # no offset: invalid
        item["units"] = "many"  # invalid
    if i == 4:
        del item["status"]  # absent
    if version >= 2 and i in (5, 6):
        item["variants"][0]["compare_at_price"] = "149.99"  # a sale started
        item["status"] = "draft"
    return item


def catalogue(version: int) -> list[dict]:
    return [product(i, version) for i in range(1, END + 1)]


@pytest.fixture(scope="module")
def api():
    with CatalogueApi() as server:
        yield server


def crawl(api: CatalogueApi, url: str, version: int, declared: str = DECLARED, **settings: str):
    api.put(catalogue(version))
    return run_crawl("-a", "start_id=1", "-a", f"end_id={END}",
                     settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, "PRODUCT_COLUMNS": declared,
                               "TRACK_CHANGES": "price,stock,compare_at", **settings})


def rows(url: str, sql: str) -> list[tuple]:
    return [tuple(v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else v for v in row)
            for row in database_query(url, sql)]


def test_declared_columns_are_stored_cleaned_by_type_and_their_changes_recorded(api, database_url):
    url = database_url
    first = crawl(api, url, 1)
    assert first.returncode == 0, first.stderr[-3000:]
    stored = rows(url, "SELECT product_id, sku, status, compare_at, updated_at, units, taxable FROM products "
                       "WHERE product_id <= 6 ORDER BY product_id")
    assert [(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in stored] == [
        (1, "SKU-1", "active", None, "2026-03-01 08:00:00", 10, True),
        (2, "MUCH-TOO", "active", None, "2026-03-01 08:00:00", 20, True),
        (3, "SKU-3", "active", None, None, None, True),
        (4, "SKU-4", None, None, "2026-03-01 08:00:00", 40, True),
        (5, "SKU-5", "active", None, "2026-03-01 08:00:00", 50, True),
        (6, "SKU-6", "active", None, "2026-03-01 08:00:00", 60, True)]
    [(tags,)] = rows(url, "SELECT tags FROM products WHERE product_id = 7")
    assert (tags if isinstance(tags, list) else __import__("json").loads(tags)) == ["snow", 7]
    # The cleaning counts of a declared column are its own, as the article's are.
    assert "'cleaning/invalid/updated_at': 1" in first.stderr
    assert "'cleaning/invalid/units': 1" in first.stderr
    assert "'cleaning/absent/status': 1" in first.stderr

    second = crawl(api, url, 2)
    assert second.returncode == 0, second.stderr[-3000:]
    # compare_at is tracked: a sale that started is a change row; status changed too but is not tracked.
    changes = rows(url, "SELECT product_id, pass_id, field, old_value, new_value FROM product_changes "
                        "ORDER BY product_id, field")
    assert changes == [(5, 2, "compare_at", None, "149.99"), (6, 2, "compare_at", None, "149.99")]
    assert rows(url, "SELECT product_id, status, compare_at FROM products WHERE product_id IN (5, 6) "
                     "ORDER BY product_id") == [(5, "draft", Decimal("149.99")), (6, "draft", Decimal("149.99"))] \
        or url.startswith("sqlite")
    # An unchanged third pass writes no change row, the JSON and datetime columns included.
    third = crawl(api, url, 2)
    assert third.returncode == 0, third.stderr[-3000:]
    assert len(rows(url, "SELECT * FROM product_changes")) == 2
    assert rows(url, "SELECT changed FROM crawl_passes ORDER BY pass_id") == [(0,), (2,), (0,)]

    shown = run_scrapy("passes", "-n", "3", env=crawl_env(DATABASE_URL=url, PRODUCT_COLUMNS=DECLARED))
    assert shown.returncode == 0, shown.stderr
    header = shown.stdout.splitlines()[0].split()
    assert header[-7:] == ["compare_at", "sku", "status", "tags", "taxable", "units", "updated_at"], header
    cells = re.split(r"\s{2,}", shown.stdout.splitlines()[1])
    assert cells[header.index("compare_at")] == "17 %"  # 2 of 12
    assert cells[header.index("status")] == "92 %"  # 11 of 12


def test_track_changes_names_declared_columns_and_a_bad_declaration_is_refused():
    settings = {"API_BASE_URL": "http://api.test/v1", "PRODUCT_COLUMNS": DECLARED, "TRACK_CHANGES": "price,sku"}
    assert CrawlConfig.from_settings(settings, start_id=1, end_id=2).storage.track_changes == ("price", "sku")
    for bad, said in (("sku:text=variants.0.sku", "type 'text' is not one of"),
                      ("sku:varchar(8)=a", "is not one of"),
                      ("price:decimal(10,2)=a", "one of the crawl's own"),
                      ("sku:text(8)", "is not name:type=path"),
                      ("sku:text(8)=a..b", "keys separated by dots"),
                      ("sku:text(8)=a,sku:integer=b", "declared twice")):
        with pytest.raises(ConfigError, match="PRODUCT_COLUMNS") as error:
            CrawlConfig.from_settings({**settings, "PRODUCT_COLUMNS": bad, "TRACK_CHANGES": "price"},
                                      start_id=1, end_id=2)
        assert said in str(error.value), (bad, str(error.value))


#: What the code before PRODUCT_COLUMNS, KEEP_ANSWER and VARIANTS wrote, table by table: (INSERT, rows).
OLD_ROWS = (
    ("INSERT INTO products (product_id, name, price, update_time, pass_id) VALUES (%s, %s, %s, %s, %s)",
     [(1000 + i, f"Old {i}", f"{i}.50", "2025-01-01 00:00:00", 1) for i in range(5)]),
    ("INSERT INTO product_changes (product_id, pass_id, changed_at, field, old_value, new_value) "
     "VALUES (%s, %s, %s, %s, %s, %s)",
     [(1000, 1, "2025-01-01 00:00:00", "price", "9.99", "0.50"), (1001, 1, "2025-01-01 00:00:00", "stock", None, "3"),
      (1004, 1, "2025-01-01 00:00:00", "removed", "2024-12-31 23:00:00", None)]),
    ("INSERT INTO crawl_failures (product_id, outcome, http_status, reason, attempts, updated_at, pass_id) "
     "VALUES (%s, %s, %s, %s, %s, %s, %s)",
     [(1005, "missing", 404, "not_found", 1, "2025-01-01 00:00:00", 1),
      (1006, "failed", 503, "http_503", 4, "2025-01-01 00:00:00", 1)]),
    ("INSERT INTO crawl_passes (pass_id, start_id, end_id, started_at, finished_at, stored, missing, failed, changed, "
     "removed, coverage) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
     [(1, 1000, 1006, "2025-01-01 00:00:00", "2025-01-01 00:01:00", 5, 1, 1, 2, 1, '{"price": 5}')]),
)
OLD_TABLES = ("SELECT product_id, name, price, update_time, pass_id FROM products WHERE product_id >= 1000",
              "SELECT id, product_id, pass_id, changed_at, field, old_value, new_value FROM product_changes",
              "SELECT product_id, outcome, http_status, reason, attempts, updated_at, pass_id FROM crawl_failures",
              "SELECT pass_id, start_id, end_id, started_at, finished_at, stored, missing, failed, changed, removed, "
              "coverage FROM crawl_passes")
#: The migrated tables written with every new column: answers, a variant of each product, a variant's changes.
NEW_FEATURES = {"KEEP_ANSWER": "1", "VARIANTS": "variants",
                "VARIANT_FIELDS": "variant_id=sku,sku=sku,was:decimal(10,2)=compare_at_price",
                "TRACK_CHANGES": "price,stock,compare_at,was"}


def old_tables(kind: str, request: pytest.FixtureRequest, tmp_path) -> str:
    """A database whose tables the code before this work made (old_schema's HANDWRITTEN DDL), with OLD_ROWS."""
    if kind == "mysql":
        url = request.getfixturevalue("mysql_url")
        for statement in MYSQL_DDL_HANDWRITTEN:
            mysql_execute(url, statement, [()])
        for sql, values in OLD_ROWS:
            mysql_execute(url, sql, values)
        return url
    import sqlite3

    connection = sqlite3.connect(tmp_path / "old.db")
    for statement in SQLITE_DDL_HANDWRITTEN:
        connection.execute(statement)
    for sql, values in OLD_ROWS:
        connection.executemany(sql.replace("%s", "?"), values)
    connection.commit()
    connection.close()
    return f"sqlite:///{tmp_path / 'old.db'}"


@pytest.mark.parametrize("kind", ["mysql", "sqlite"])
def test_tables_made_before_gain_the_columns_with_every_row_and_a_changed_type_stops_at_start(
        api, kind, request, tmp_path):
    url = old_tables(kind, request, tmp_path)
    before = [rows(url, f"{sql} ORDER BY 1") for sql in OLD_TABLES]
    assert [len(table) for table in before] == [5, 3, 2, 1]
    result = crawl(api, url, 1, **NEW_FEATURES)
    assert result.returncode == 0, result.stderr[-3000:]
    # Every row as it was, the new columns NULL in the old rows.
    assert [rows(url, f"{sql} ORDER BY 1") for sql in OLD_TABLES[:3]] == before[:3]
    assert rows(url, f"{OLD_TABLES[3]} WHERE pass_id = 1") == before[3]
    assert rows(url, "SELECT COUNT(*) FROM products WHERE product_id >= 1000 AND sku IS NULL AND answer IS NULL "
                     "AND answer_digest IS NULL") == [(5,)]
    assert rows(url, "SELECT COUNT(*) FROM product_changes WHERE variant_id IS NULL") == [(3,)]
    # The crawl's pass follows the old one; its products carry their columns, answers and variants.
    assert rows(url, "SELECT pass_id, start_id, end_id, finished_at IS NOT NULL FROM crawl_passes "
                     "WHERE pass_id > 1") == [(2, 1, END, 1)]
    assert rows(url, "SELECT COUNT(*) FROM products WHERE sku IS NOT NULL AND answer IS NOT NULL "
                     "AND answer_digest IS NOT NULL") == [(END,)]
    assert rows(url, "SELECT product_id, variant_id, pass_id FROM product_variants ORDER BY product_id") == [
        (i, "MUCH-TOO-LONG-SKU" if i == 2 else f"SKU-{i}", 2) for i in range(1, END + 1)]
    second = crawl(api, url, 2, **NEW_FEATURES)
    assert second.returncode == 0, second.stderr[-3000:]
    assert rows(url, "SELECT product_id, pass_id, variant_id, field, old_value, new_value FROM product_changes "
                     "WHERE pass_id = 3 ORDER BY product_id, field") == [
        (5, 3, None, "compare_at", None, "149.99"), (5, 3, "SKU-5", "was", None, "149.99"),
        (6, 3, None, "compare_at", None, "149.99"), (6, 3, "SKU-6", "was", None, "149.99")]
    assert rows(url, "SELECT id, product_id, pass_id, changed_at, field, old_value, new_value FROM product_changes "
                     "WHERE pass_id = 1 ORDER BY 1") == before[1]

    # sku was text(8): declared text(16) now, the crawl stops before it changes anything.
    columns = rows(url, "SELECT * FROM products WHERE product_id = 1")
    refused = crawl(api, url, 2, declared=DECLARED.replace("sku:text(8)", "sku:text(16)"), **NEW_FEATURES)
    assert refused.returncode == 2, refused.stderr[-3000:]
    lines = [line for line in refused.stderr.splitlines() if line.startswith("productcrawler:")]
    assert len(lines) == 1, refused.stderr[-3000:]
    assert "PRODUCT_COLUMNS declares sku:text(16), but products.sku is VARCHAR(8)" in lines[0], lines[0]
    assert "Traceback" not in refused.stderr
    assert rows(url, "SELECT * FROM products WHERE product_id = 1") == columns
    assert rows(url, "SELECT COUNT(*) FROM crawl_passes") == [(3,)]
