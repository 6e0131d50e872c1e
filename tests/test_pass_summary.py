"""The pass summary's columns in crawl_passes, added to tables made before them, and read back."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pymysql
import pytest

from productcrawler.passes.summary import PassSummary, passes_summary
from productcrawler.storage.database import DatabaseTarget, ensure_schema
from productcrawler.storage.schema import mysql_init_sql
from tests.support.services import mysql_query

# crawl_passes, products and crawl_failures as they were before summaries and change history.
_OLD_MYSQL = (
    "CREATE TABLE crawl_passes (pass_id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, start_id INT NOT NULL, "
    "end_id INT NOT NULL, started_at DATETIME NOT NULL, finished_at DATETIME NULL)",
    "CREATE TABLE products (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, product_id INT NOT NULL, "
    "name VARCHAR(255) NOT NULL, price DECIMAL(10,2) NULL, stock INT NULL, category VARCHAR(100) NULL, "
    "brand VARCHAR(100) NULL, rating DECIMAL(3,2) NULL, sales_count INT NULL, update_time DATETIME NOT NULL, "
    "created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, UNIQUE KEY uk_product_id (product_id))",
    "INSERT INTO crawl_passes (start_id, end_id, started_at, finished_at) "
    "VALUES (1, 10, '2025-01-01 10:00:00', '2025-01-01 10:01:40')",
)


def _old_sqlite() -> tuple[str, ...]:
    return tuple(s.replace("INT NOT NULL AUTO_INCREMENT PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
                 .replace("BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
                 .replace(", UNIQUE KEY uk_product_id (product_id)", ", UNIQUE (product_id)")
                 for s in _OLD_MYSQL)


@pytest.fixture(params=["mysql", "sqlite"])
def old_database(request, tmp_path):
    if request.param == "mysql":
        url = request.getfixturevalue("mysql_url")
        statements = _OLD_MYSQL
    else:
        url = f"sqlite:///{tmp_path / 'old.db'}"
        statements = _old_sqlite()
    target = DatabaseTarget.from_url(url)
    connection = target.connect()
    for statement in statements:
        connection.cursor().execute(statement)
    connection.commit()
    yield target, connection
    connection.close()


def test_tables_made_before_summaries_get_the_columns_and_old_passes_read_as_unsummarized(old_database):
    target, connection = old_database
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    ensure_schema(cursor, target.dialect)  # twice: nothing to add the second time
    connection.commit()
    [old] = passes_summary(cursor, target.dialect, 10)
    assert old == PassSummary(1, datetime(2025, 1, 1, 10), datetime(2025, 1, 1, 10, 1, 40))
    assert not old.summarized and old.coverage == {}
    cursor.execute("SELECT first_seen, removed_at, pass_id FROM products WHERE 1 = 0")
    cursor.execute("SELECT product_id, pass_id, changed_at, field, old_value, new_value FROM product_changes")
    assert list(cursor.fetchall()) == []
    # The Redis token is unique however the column came to be.
    cursor.execute("UPDATE crawl_passes SET redis_token = 'abc'")
    with pytest.raises((sqlite3.IntegrityError, pymysql.err.IntegrityError)):
        cursor.execute("INSERT INTO crawl_passes (start_id, end_id, started_at, redis_token) "
                       "VALUES (1, 10, '2025-01-01 11:00:00', 'abc')")


def test_summaries_read_newest_first_with_counts_and_coverage(tmp_path):
    target = DatabaseTarget.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    connection = target.connect()
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    cursor.execute("INSERT INTO crawl_passes (start_id, end_id, started_at, finished_at, stored, missing, failed, "
                   "changed, removed, coverage) VALUES (1, 10, '2025-01-01 10:00:00', '2025-01-01 10:01:40', "
                   "8, 1, 1, 3, 0, '{\"price\": 1.0, \"brand\": 0.875}')")
    cursor.execute("INSERT INTO crawl_passes (start_id, end_id, started_at) VALUES (1, 10, '2025-01-01 11:00:00')")
    running, first = passes_summary(cursor, target.dialect, 10)
    assert first == PassSummary(1, datetime(2025, 1, 1, 10), datetime(2025, 1, 1, 10, 1, 40),
                                8, 1, 1, 3, 0, {"price": 1.0, "brand": 0.875})
    assert first.summarized and not running.summarized and running.finished_at is None
    assert [s.pass_id for s in passes_summary(cursor, target.dialect, 1)] == [2]
    connection.close()


def test_a_fresh_mysql_schema_has_the_summary_and_history_columns(mysql_url):
    target = DatabaseTarget.from_url(mysql_url)
    connection = target.connect()
    ensure_schema(connection.cursor(), target.dialect)
    connection.close()
    columns = {(table, column): kind for table, column, kind in mysql_query(
        mysql_url, "SELECT table_name, column_name, column_type FROM information_schema.columns "
                   "WHERE table_schema = DATABASE()")}
    assert columns[("crawl_passes", "coverage")] == "text"
    assert columns[("crawl_passes", "stored")] == "int(11)"
    assert columns[("products", "first_seen")] == "datetime"
    assert columns[("product_changes", "old_value")] == "varchar(255)"
    assert "product_changes" in mysql_init_sql()


@pytest.mark.parametrize(("raw", "expected"), [
    ("price,stock", ("price", "stock")), (" Stock , price ", ("price", "stock")), ("all", (
        "name", "price", "stock", "category", "brand", "rating", "sales_count")), ("none", ()), ("brand", ("brand",)),
])
def test_track_changes_reads_columns_all_and_none(raw, expected):
    from productcrawler.config import CrawlConfig
    from productcrawler.storage.changes import VALUE_COLUMNS

    assert CrawlConfig.from_settings({"TRACK_CHANGES": raw}).storage.track_changes == expected
    assert CrawlConfig.from_settings({}).storage.track_changes == ("price", "stock")
    assert CrawlConfig.from_settings({"TRACK_CHANGES": "all"}).storage.track_changes == VALUE_COLUMNS


@pytest.mark.parametrize("raw", ["prize", "price,updated_at", ",", "all,price"])
def test_an_unknown_tracked_column_is_refused_naming_it(raw):
    from productcrawler.config import ConfigError, CrawlConfig

    with pytest.raises(ConfigError, match="TRACK_CHANGES"):
        CrawlConfig.from_settings({"TRACK_CHANGES": raw})


def test_a_crawl_with_an_unknown_tracked_column_exits_2_with_one_line(tmp_path):
    from tests.support.crawls import run_crawl

    result = run_crawl("-a", "end_id=5", settings={"TRACK_CHANGES": "price,prize",
                                                     "DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "TRACK_CHANGES='price,prize': unknown column 'prize'" in result.stderr


def test_the_table_marks_a_fall_of_stored_and_of_coverage_against_the_pass_before():
    from productcrawler.commands.passes import passes_table

    at = datetime(2025, 3, 1, 11)
    older = PassSummary(211, at, datetime(2025, 3, 1, 11, 1, 42), 19402, 512, 0, 590, 3,
                        {"price": 1.0, "brand": 0.98})
    newer = PassSummary(212, datetime(2025, 3, 1, 12), datetime(2025, 3, 1, 12, 1, 44), 17657, 1503, 0, 512, 1,
                        {"price": 0.9995, "brand": 0.40})
    running = PassSummary(213, datetime(2025, 3, 1, 13), None)
    lines = passes_table([running, newer, older], 2)
    assert len(lines) == 3 and lines[0].split()[:5] == ["pass", "started", "finished", "duration", "stored"]
    assert "running or interrupted" in lines[1] and "- " in lines[1]
    assert "17657 (-9 %)" in lines[2] and "98 % -> 40 %" in lines[2] and "99.9 %" in lines[2]
    assert "1m44s" in lines[2]
    assert passes_table([]) == ["No pass has started yet."]
