"""Three passes against an API whose catalogue changes between them (tests/support/imitations/changing_catalogue.py):
the exact product_changes rows, removed_at, first_seen, rows not rewritten, and ``scrapy passes``.
MariaDB and SQLite; and a Redis-shared pass whose rows carry its crawl_passes id."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

import pytest

from tests.support.crawls import crawl_env, run_crawl, run_scrapy
from tests.support.imitations.changing_catalogue import CatalogueApi
from tests.support.services import REDIS_URL, database_query, mysql_query

END = 200
ABSENT = {13, 77}  # never in the catalogue: 404 in every pass
PRICE_CHANGED = (10, 20, 30, 40, 60, 70)  # 3 % of the ids, in pass 2
STOCK_CHANGED = (11, 21, 31, 41, 61, 71)  # 11 sells out
REMOVED_ID = 50  # gone in pass 2, back in pass 3 at a new price


def product(i: int) -> dict:
    return {"id": i, "name": f"Product {i}", "price": 100 + i + 0.99, "stock": i % 50 + 1, "category": "phones",
            "brand": f"Brand {i % 7}", "rating": 4.5, "sales_count": i * 3}


def catalogue(version: int) -> list[dict]:
    items = {i: product(i) for i in range(1, END + 1) if i not in ABSENT}
    if version >= 2:
        for i in PRICE_CHANGED:
            items[i]["price"] = 90 + i + 0.5
        for i in STOCK_CHANGED:
            items[i]["stock"] = 0 if i == 11 else 999
        del items[REMOVED_ID]
    if version >= 3:
        items[REMOVED_ID] = {**product(REMOVED_ID), "price": 1.5}
        items[11]["stock"] = 40  # back in stock
        items[10]["price"] = 80.0
        for i in items:  # the API stops sending brand for 60 % of products
            if i % 5 < 3:
                items[i]["brand"] = None
    return list(items.values())


@pytest.fixture(scope="module")
def api():
    with CatalogueApi() as server:
        yield server


def query(url: str, sql: str) -> list[tuple]:
    found = database_query(url, sql)
    return [tuple(v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime) else v for v in row) for row in found]


def crawl(api: CatalogueApi, url: str, version: int, **settings: str) -> None:
    api.put(catalogue(version))
    result = run_crawl("-a", "start_id=1", "-a", f"end_id={END}",
                       settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, **settings})
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(api.arrivals()) == END  # every id asked once
    assert {a["method"] for a in api.arrivals()} == {"GET"}


def price(value: float) -> str:
    return str(Decimal(repr(value)).quantize(Decimal("0.01")))


def expected_changes(removed_at: str) -> list[tuple]:
    second = [(i, 2, "price", price(100 + i + 0.99), price(90 + i + 0.5)) for i in PRICE_CHANGED]
    second += [(i, 2, "stock", str(i % 50 + 1), "0" if i == 11 else "999") for i in STOCK_CHANGED]
    second.append((REMOVED_ID, 2, "removed", None, removed_at))
    third = [(10, 3, "price", price(90 + 10 + 0.5), "80.00"), (11, 3, "stock", "0", "40"),
             (REMOVED_ID, 3, "price", price(100 + REMOVED_ID + 0.99), "1.50"),
             (REMOVED_ID, 3, "removed", removed_at, None)]
    return sorted(second + third)


def test_three_passes_record_what_changed_and_rewrite_nothing_else(api, database_url):
    url = database_url
    crawl(api, url, 1)
    passes = query(url, "SELECT pass_id, started_at, finished_at FROM crawl_passes ORDER BY pass_id")
    assert [p[0] for p in passes] == [1]
    assert query(url, "SELECT COUNT(*) FROM product_changes") == [(0,)]  # first sightings are no changes
    first_seen = dict(query(url, "SELECT product_id, first_seen FROM products"))
    assert sorted(first_seen) == [i for i in range(1, END + 1) if i not in ABSENT]
    assert all(passes[0][1] <= seen <= passes[0][2] for seen in first_seen.values())
    ids_before = query(url, "SELECT product_id, id FROM products ORDER BY product_id")
    auto_increment = (mysql_query(url, "SELECT AUTO_INCREMENT FROM information_schema.tables WHERE "
                                       "table_schema = DATABASE() AND table_name = 'products'")
                      if url.startswith("mysql") else None)

    crawl(api, url, 2)
    [(removed_at,)] = query(url, f"SELECT removed_at FROM products WHERE product_id = {REMOVED_ID}")
    assert removed_at is not None
    assert query(url, f"SELECT outcome, pass_id FROM crawl_failures WHERE product_id = {REMOVED_ID}") == [
        ("missing", 2)]
    crawl(api, url, 3)

    passes = query(url, "SELECT pass_id, started_at, finished_at FROM crawl_passes ORDER BY pass_id")
    assert [p[0] for p in passes] == [1, 2, 3]
    changes = query(url, "SELECT product_id, pass_id, field, old_value, new_value, changed_at FROM product_changes")
    assert sorted(c[:5] for c in changes) == expected_changes(removed_at)
    window = {p[0]: (p[1], p[2]) for p in passes}
    assert all(window[c[1]][0] <= c[5] <= window[c[1]][1] for c in changes)
    assert window[2][0] <= removed_at <= window[2][1]
    assert query(url, "SELECT COUNT(*) FROM products WHERE removed_at IS NOT NULL") == [(0,)]
    # first_seen is the first pass's, the returned product's included; every row was seen by pass 3.
    assert dict(query(url, "SELECT product_id, first_seen FROM products")) == first_seen
    assert query(url, "SELECT COUNT(*) FROM products WHERE pass_id = 3") == [(END - len(ABSENT),)]
    # No row was inserted again: same ids, and (MySQL) no auto-increment value spent on an upsert.
    assert query(url, "SELECT product_id, id FROM products ORDER BY product_id") == ids_before
    if auto_increment is not None:
        assert mysql_query(url, "SELECT AUTO_INCREMENT FROM information_schema.tables WHERE "
                                "table_schema = DATABASE() AND table_name = 'products'") == auto_increment

    summaries = query(url, "SELECT pass_id, stored, missing, failed, changed, removed FROM crawl_passes "
                           "ORDER BY pass_id")
    stored = END - len(ABSENT)
    assert summaries == [(1, stored, 2, 0, 0, 0), (2, stored - 1, 3, 0, 12, 1), (3, stored, 2, 0, 3, 0)]

    shown = run_scrapy("passes", "-n", "2", env=crawl_env(DATABASE_URL=url))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["pass", "started", "finished", "duration", "stored", "missing", "failed",
                                "changed", "removed", "price", "stock", "category", "brand", "rating",
                                "sales_count"]
    assert [line.split()[0] for line in lines[1:]] == ["3", "2"]
    # brand: sent for every product in pass 2, for 40 % of them in pass 3.
    assert re.split(r"\s{2,}", lines[1])[4:] == [str(stored), "2", "0", "3", "0", "100 %", "100 %", "100 %",
                                                 "100 % -> 40 %", "100 %", "100 %"], lines[1]
    assert re.split(r"\s{2,}", lines[2])[4:] == [str(stored - 1), "3", "0", "12", "1", "100 %", "100 %", "100 %",
                                                 "100 %", "100 %", "100 %"], lines[2]


def test_a_redis_shared_pass_has_a_crawl_passes_row_and_its_rows_carry_it(api, mysql_url, redis_prefix):
    settings = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}
    crawl(api, mysql_url, 1, **settings)
    crawl(api, mysql_url, 2, **settings)
    passes = mysql_query(mysql_url, "SELECT pass_id, redis_token IS NOT NULL, finished_at IS NOT NULL, stored, "
                                    "changed, removed FROM crawl_passes ORDER BY pass_id")
    assert passes == [(1, 1, 1, END - 2, 0, 0), (2, 1, 1, END - 3, 12, 1)]
    assert mysql_query(mysql_url, "SELECT DISTINCT pass_id FROM product_changes") == [(2,)]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products WHERE pass_id IS NULL") == [(0,)]


GONE = tuple(range(181, 201))  # a tenth of the catalogue gone in pass 2: the table marks the drop
REBRANDED = (1, 2, 3, 4)  # an untracked column by default


def shrunk(version: int) -> list[dict]:
    items = [item for item in catalogue(version) if version < 2 or item["id"] not in GONE]
    for item in items:
        if version >= 2 and item["id"] in REBRANDED:
            item["brand"] = "Other"
    return items


@pytest.mark.parametrize(("tracking", "kind"), [("all", "mysql"), ("all", "sqlite"), ("none", "sqlite")])
def test_track_changes_all_and_none_and_scrapy_passes_marks_a_drop_in_stored(api, tracking, kind, request,
                                                                               tmp_path):
    url = request.getfixturevalue("mysql_url") if kind == "mysql" else f"sqlite:///{tmp_path / 'changes.db'}"
    for version in (1, 2, 2):  # the third pass sees the same catalogue: nothing changes, nothing is removed again
        api.put(shrunk(version))
        result = run_crawl("-a", "start_id=1", "-a", f"end_id={END}",
                           settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, "TRACK_CHANGES": tracking})
        assert result.returncode == 0, result.stderr[-3000:]
    changes = query(url, "SELECT product_id, pass_id, field, old_value, new_value FROM product_changes")
    removed_at = dict(query(url, "SELECT product_id, removed_at FROM products WHERE removed_at IS NOT NULL"))
    assert sorted(removed_at) == sorted((REMOVED_ID, *GONE))
    if tracking == "none":
        assert changes == []
    else:
        expected = [c for c in expected_changes(removed_at[REMOVED_ID]) if c[1] == 2]
        expected += [(i, 2, "brand", f"Brand {i % 7}", "Other") for i in REBRANDED]
        expected += [(i, 2, "removed", None, removed_at[i]) for i in GONE]
        assert sorted(changes) == sorted(expected)
    # The removed keep their rows and their last values; the third pass removed nothing again.
    assert query(url, "SELECT product_id, name, stock, pass_id FROM products WHERE removed_at IS NOT NULL "
                      "ORDER BY product_id") == [(i, f"Product {i}", i % 50 + 1, 1) for i in sorted(removed_at)]
    stored = END - len(ABSENT)
    gone = len(GONE) + 1
    summaries = query(url, "SELECT pass_id, stored, missing, changed, removed FROM crawl_passes ORDER BY pass_id")
    changed = None if tracking == "none" else len(PRICE_CHANGED) + len(STOCK_CHANGED) + len(REBRANDED)
    assert summaries == [(1, stored, 2, None if tracking == "none" else 0, 0),
                         (2, stored - gone, 2 + gone, changed, gone),
                         (3, stored - gone, 2 + gone, None if tracking == "none" else 0, 0)]

    shown = run_scrapy("passes", "-n", "3", env=crawl_env(DATABASE_URL=url))
    assert shown.returncode == 0, shown.stderr
    cells = [re.split(r"\s{2,}", line) for line in shown.stdout.splitlines()[1:]]
    assert [row[0] for row in cells] == ["3", "2", "1"]
    # 177 of 198: 11 % fewer, marked on pass 2 only (pass 3 kept pass 2's count).
    assert cells[1][4] == f"{stored - gone} (-11 %)"
    assert cells[0][4] == str(stored - gone) and cells[2][4] == str(stored)
    assert [row[7] for row in cells] == (["-", "-", "-"] if tracking == "none" else ["0", str(changed), "0"])
    assert [row[8] for row in cells] == ["0", str(gone), "0"]
