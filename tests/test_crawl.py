"""The real ``scrapy crawl products`` against the simulator, into MySQL and SQLite."""

from __future__ import annotations

import re
import sqlite3
import time
from decimal import Decimal

import pytest

from productcrawler.answer.cleaning import parse_product
from simulator import catalog
from tests.support.catalogue import CATALOG_VERSION
from tests.support.crawls import ROOT, crawl_env, run_crawl
from tests.support.services import mysql_query

END = 1500


def expected(product_id: int) -> dict[str, object]:
    import json
    from datetime import datetime

    item, _ = parse_product(json.dumps(catalog.product(product_id, CATALOG_VERSION)).encode(),
                            product_id, datetime(2000, 1, 1))
    return {"name": item.name, "price": item.price, "stock": item.stock, "category": item.category,
            "brand": item.brand, "rating": item.rating, "sales_count": item.sales_count}


def test_crawl_into_mysql_stores_every_product_once_and_records_404s(clean_simulator, mysql_url):
    result = run_crawl("-a", "start_id=1", "-a", f"end_id={END}",
                       settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url})
    assert result.returncode == 0, result.stderr[-3000:]

    missing = {i for i in range(1, END + 1) if catalog.is_missing(i)}
    rows = mysql_query(mysql_url, "SELECT product_id, name, price, stock, category, brand, rating, "
                                  "sales_count FROM products ORDER BY product_id")
    assert [r[0] for r in rows] == [i for i in range(1, END + 1) if i not in missing]
    for row in rows[:: max(1, len(rows) // 50)]:
        columns = ("name", "price", "stock", "category", "brand", "rating", "sales_count")
        assert dict(zip(columns, row[1:])) == expected(row[0])
    failures = mysql_query(mysql_url, "SELECT product_id, outcome, http_status FROM crawl_failures")
    assert sorted(failures) == [(i, "missing", 404) for i in sorted(missing)]
    assert "Finished (finished)" in result.stderr
    assert f"{END - len(missing)} stored, {len(missing)} missing, 0 failed" in result.stderr
    # The simulator saw each id exactly once.
    arrivals = [a[1] for a in clean_simulator.arrivals()]
    assert sorted(arrivals) == list(range(1, END + 1))


def test_second_run_starts_a_new_pass_and_updates_rows_in_place(clean_simulator, mysql_url):
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url}
    first = run_crawl("-a", "start_id=1", "-a", "end_id=200", settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    before = dict(mysql_query(mysql_url, "SELECT product_id, update_time FROM products"))
    second = run_crawl("-a", "start_id=1", "-a", "end_id=200", settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Starting pass 2" in second.stderr
    after = dict(mysql_query(mysql_url, "SELECT product_id, update_time FROM products"))
    assert after.keys() == before.keys()
    assert all(after[i] > before[i] for i in after)
    assert mysql_query(mysql_url, "SELECT COUNT(*), COUNT(DISTINCT product_id) FROM products")[0] == (
        len(after), len(after))
    passes = mysql_query(mysql_url, "SELECT pass_id, finished_at IS NOT NULL FROM crawl_passes")
    assert passes == [(1, 1), (2, 1)]


def test_embedded_default_crawls_into_sqlite_with_no_database_configured(clean_simulator, tmp_path):
    env = crawl_env(SCRAPY_SETTINGS_MODULE="productcrawler.settings", API_BASE_URL=clean_simulator.base_url)
    import subprocess
    import sys

    started = time.time()
    result = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "products", "-a", "end_id=300"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    connection = sqlite3.connect(tmp_path / "data" / "products.db")
    stored = [r[0] for r in connection.execute("SELECT product_id FROM products ORDER BY product_id")]
    missing = [r[0] for r in connection.execute(
        "SELECT product_id FROM crawl_failures WHERE outcome = 'missing' ORDER BY product_id")]
    assert stored == [i for i in range(1, 301) if not catalog.is_missing(i)]
    assert missing == [i for i in range(1, 301) if catalog.is_missing(i)]
    price = connection.execute("SELECT price FROM products WHERE product_id = ?", (stored[0],)).fetchone()[0]
    assert Decimal(str(price)) == expected(stored[0])["price"]
    # Relative to the working directory, not to the project.
    assert not (ROOT / "data" / "products.db").exists() or (ROOT / "data" / "products.db").stat().st_mtime < started


def cleaned_dirty(product_id: int) -> tuple[object, ...]:
    """What a ``dirty`` product must be stored as: the clean product's values, from the catalogue."""
    clean = catalog.product(product_id, CATALOG_VERSION)
    # The dirty form sends the price as "¥1,234.50", "1,234.50" or null, by id % 3.
    price = None if product_id % 3 == 2 else Decimal(f"{clean['price']:.2f}")
    # ... the rating as a one-place string for odd ids, 7.5 (clamped to 5) for even ones.
    rating = Decimal(f"{clean['rating']:.1f}") if product_id % 2 else Decimal("5.00")
    # ... and a negative sales count (NULL), the stock as a string, markup around the labels.
    return (clean["name"], price, clean["stock"], rating, None, clean["category"], clean["brand"])


def test_dirty_values_are_cleaned_before_they_are_stored(clean_simulator, mysql_url):
    emoji, sqlish, outofrange = 41, 42, 43
    # Each id below must really be a product, or its assertion checks nothing.
    assert not any(catalog.is_missing(i) for i in (emoji, sqlish, outofrange))
    clean_simulator.set_faults(["dirty=1-40@*", f"emoji={emoji}", f"sqlish={sqlish}", f"outofrange={outofrange}"])
    result = run_crawl("-a", "start_id=1", "-a", "end_id=45",
                       settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r[0]: r[1:] for r in mysql_query(
        mysql_url, "SELECT product_id, name, price, stock, rating, sales_count, category, brand "
                   "FROM products WHERE product_id <= 40")}
    dirty = list(range(1, 41))  # a fault answers with a product even for ids that are otherwise 404s
    assert sorted(rows) == dirty
    # All three price forms occur among them (string with currency, plain string, null).
    assert {i % 3 for i in dirty} == {0, 1, 2}
    for product_id in dirty:
        assert rows[product_id] == cleaned_dirty(product_id), product_id
    by_id = {r[0]: r for r in mysql_query(mysql_url, "SELECT product_id, name, price, stock, rating "
                                                     "FROM products WHERE product_id > 40")}
    assert "📱" in by_id[emoji][1]
    assert by_id[sqlish][1] == catalog.SQLISH_NAME
    assert by_id[outofrange][2] is None and by_id[outofrange][3] is None and by_id[outofrange][4] == Decimal("5.00")
    # The dropped values are counted in the stats: every dirty id's sales count, and the
    # out-of-range id's price, stock and sales count; a null price is not a dropped value.
    counted = sorted(line.strip(" {},") for line in result.stderr.splitlines() if "'cleaning/invalid/" in line)
    assert counted == ["'cleaning/invalid/price': 1", f"'cleaning/invalid/sales_count': {len(dirty) + 1}",
                       "'cleaning/invalid/stock': 1"]


PROGRESS = re.compile(r"^(\d+\.\d+) \[productcrawler\.monitoring\.progress\] INFO: Progress: (\d+)/(\d+) ids done "
                      r"\((\d+\.\d)%\), (\d+) stored, (\d+) missing, (\d+) failed; (\d+) ids/s, ETA (\d+ s|unknown)$")


@pytest.mark.timing  # the ids/s of each progress line, measured in real time
def test_progress_lines_have_the_readmes_format_and_add_up(clean_simulator, mysql_url):
    end, rate = 400, 100
    result = run_crawl("-a", f"end_id={end}", settings={
        "API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": rate,
        "PROGRESS_INTERVAL": 1, "LOG_FORMAT": "%(created).3f [%(name)s] %(levelname)s: %(message)s"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "Progress: " in line]
    matches = [PROGRESS.match(line) for line in lines]
    assert len(lines) >= 2 and all(matches), lines
    previous_done = 0
    for found in matches:
        done, total, percent, stored, missing, failed, per_second = (
            float(v) if "." in v else int(v) for v in found.groups()[1:-1])
        assert total == end and stored + missing + failed == done  # a fresh pass: this run's ids are the pass's
        assert percent == round(100 * done / total, 1) and done >= previous_done
        if found[9] == "unknown":
            # A line before the first outcome is committed (a loaded machine, or the first
            # answers held while the guard's checks decide) has no rate to give an ETA from.
            assert done == 0 and per_second == 0, found[0]
            continue
        eta = int(found[9].removesuffix(" s"))
        assert 0.3 * rate <= per_second <= 1.2 * rate, found[0]
        assert abs(eta - (total - done) / per_second) <= 1 + 0.2 * (total - done) / per_second, found[0]
        previous_done = done
    stamps = [float(found[1]) for found in matches]
    assert all(0.8 <= b - a <= 2.5 for a, b in zip(stamps, stamps[1:])), stamps
    missing = sum(catalog.is_missing(i) for i in range(1, end + 1))
    assert re.search(rf"Finished \(finished\) in \d+\.\d s: {end - missing} stored, {missing} missing, "
                     rf"0 failed in this run$", result.stderr, re.MULTILINE)
