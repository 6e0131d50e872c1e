"""Tables made while product_id was a 32-bit INT, migrated on the first run with nothing lost (MySQL and SQLite)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from simulator import catalog
from tests.support.crawls import run_crawl
from tests.support.old_schema import MYSQL_DDL_INT, MYSQL_DDL_TODAY, SQLITE_DDL_INT, SQLITE_DDL_TODAY
from tests.support.services import MYSQL

OLD_PRODUCT = (2147483647, "old product", "9.99", 3, "cat", "brand", "4.50", 12, "2026-01-02 03:04:05", 4)
OLD_FAILURE = (123456, "failed", 503, "http_503", 4, "2026-01-02 03:04:05", 4)
OLD_CHANGE = (2147483647, 4, "2026-01-02 03:04:05", "price", "10.99", "9.99")
CHANGE_SELECT = "SELECT product_id, pass_id, changed_at, field, old_value, new_value FROM product_changes"
#: The tables of each earlier version: product_id INT before pass summaries, and just before this one.
OLD_TABLES = {("mysql", "v1"): MYSQL_DDL_INT, ("sqlite", "v1"): SQLITE_DDL_INT,
              ("mysql", "today"): MYSQL_DDL_TODAY, ("sqlite", "today"): SQLITE_DDL_TODAY}
PRODUCT_SELECT = ("SELECT product_id, name, price, stock, category, brand, rating, sales_count, update_time, pass_id "
                  "FROM products")
FAILURE_SELECT = "SELECT product_id, outcome, http_status, reason, attempts, updated_at, pass_id FROM crawl_failures"


class Store:
    """One database of either kind, reached the way a user would look at it."""

    def __init__(self, kind: str, generation: str, request: pytest.FixtureRequest, tmp_path: Any) -> None:
        self.kind = kind
        self.generation = generation
        if kind == "mysql":
            self.url = request.getfixturevalue("mysql_url")
        else:
            self.path = tmp_path / "old.db"
            self.url = f"sqlite:///{self.path}"

    def connect(self) -> Any:
        if self.kind == "sqlite":
            return sqlite3.connect(self.path)
        import pymysql

        return pymysql.connect(database=self.url.rsplit("/", 1)[1], **MYSQL)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        connection = self.connect()
        try:
            cursor = connection.cursor()
            cursor.execute(sql.replace("%s", "?") if self.kind == "sqlite" else sql, params)
            rows = list(cursor.fetchall())
            connection.commit()
            return rows
        finally:
            connection.close()

    def create_old_tables(self) -> None:
        for statement in OLD_TABLES[self.kind, self.generation]:
            self.execute(statement)
        marks = ", ".join(["%s"] * len(OLD_PRODUCT))
        self.execute(f"INSERT INTO products (product_id, name, price, stock, category, brand, rating, sales_count, "
                     f"update_time, pass_id) VALUES ({marks})", OLD_PRODUCT)
        self.execute(f"INSERT INTO crawl_failures VALUES ({', '.join(['%s'] * len(OLD_FAILURE))})", OLD_FAILURE)
        self.execute("INSERT INTO crawl_passes (start_id, end_id, started_at, finished_at) "
                     "VALUES (1, 50000, '2026-01-01 00:00:00', '2026-01-01 01:00:00')")
        if self.generation == "today":
            self.execute(f"INSERT INTO product_changes (product_id, pass_id, changed_at, field, old_value, "
                         f"new_value) VALUES ({', '.join(['%s'] * len(OLD_CHANGE))})", OLD_CHANGE)

    def column_type(self, table: str, column: str) -> str:
        if self.kind == "sqlite":
            return next(str(r[2]) for r in self.execute(f"PRAGMA table_info({table})") if r[1] == column)
        return str(self.execute("SELECT column_type FROM information_schema.columns WHERE table_schema = "
                                "DATABASE() AND table_name = %s AND column_name = %s", (table, column))[0][0])

    def rows(self, sql: str) -> list[tuple[str, ...]]:
        """Rows as text, whatever the driver returns: compare values, not Python types."""
        return [tuple(None if v is None else str(v) for v in row) for row in self.execute(sql)]


@pytest.fixture(params=[("mysql", "v1"), ("sqlite", "v1"), ("mysql", "today"), ("sqlite", "today")],
                ids=lambda p: "-".join(p))
def store(request, tmp_path) -> Store:
    return Store(*request.param, request, tmp_path)


def crawl(store: Store, simulator: Any, *args: str, **settings: object) -> Any:
    return run_crawl(*args, settings={"API_BASE_URL": simulator.base_url, "DATABASE_URL": store.url,
                                      "MAX_REQUESTS_PER_SECOND": 1000, **settings})


def present(ids: range) -> list[int]:
    return [i for i in ids if not catalog.is_missing(i)]


def test_an_int_table_becomes_64_bit_with_every_row_kept(store, clean_simulator):
    store.create_old_tables()
    old_product, old_failure = store.rows(PRODUCT_SELECT), store.rows(FAILURE_SELECT)
    wide = range(2**40, 2**40 + 30)  # ids no INT column could hold
    result = crawl(store, clean_simulator, "-a", f"start_id={wide.start}", "-a", f"end_id={wide.stop - 1}")
    assert result.returncode == 0, result.stderr[-3000:]
    if store.kind == "mysql":
        assert store.column_type("products", "product_id") == "bigint(20)"
        assert store.column_type("crawl_failures", "product_id") == "bigint(20)"
        assert store.column_type("crawl_passes", "start_id") == "bigint(20)"
        if store.generation == "today":
            assert store.column_type("product_changes", "product_id") == "bigint(20)"
    if store.generation == "today":
        assert store.rows(CHANGE_SELECT) == [tuple(str(v) for v in OLD_CHANGE)]
    assert store.rows(PRODUCT_SELECT + f" WHERE product_id = {OLD_PRODUCT[0]}") == old_product
    assert store.rows(FAILURE_SELECT + f" WHERE product_id = {OLD_FAILURE[0]}") == old_failure
    stored = [int(r[0]) for r in store.execute("SELECT product_id FROM products WHERE product_id >= %s "
                                               "ORDER BY product_id", (2**40,))]
    assert stored == present(wide)
    assert store.rows("SELECT pass_id, start_id, end_id, ids_digest FROM crawl_passes ORDER BY pass_id") == [
        ("1", "1", "50000", None), ("2", str(wide.start), str(wide.stop - 1), None)]


def test_an_int_table_becomes_a_string_table_with_every_row_kept_as_text(store, clean_simulator, tmp_path):
    store.create_old_tables()
    old_product, old_failure = store.rows(PRODUCT_SELECT), store.rows(FAILURE_SELECT)
    ids = ["1001", "1002", "1003", "0042"]  # '0042' is not 42: the simulator's answer for it is refused
    (tmp_path / "skus.txt").write_text("\n".join(ids) + "\n")
    result = crawl(store, clean_simulator, "-a", f"ids=@{tmp_path / 'skus.txt'}", PRODUCT_ID_TYPE="string",
                   MAX_RETRIES=0)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "product_id holds integers" in result.stderr
    if store.kind == "mysql":
        assert store.column_type("products", "product_id") == "varchar(64)"
        collation = store.execute("SELECT collation_name FROM information_schema.columns WHERE table_schema = "
                                  "DATABASE() AND table_name = 'products' AND column_name = 'product_id'")
        assert collation == [("utf8mb4_bin",)]
    else:
        assert store.column_type("products", "product_id") == "VARCHAR(64)"
        assert store.column_type("crawl_failures", "product_id") == "VARCHAR(64)"
        indexes = {r[0] for r in store.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                               "AND sql IS NOT NULL")}
        # Every index survives the rebuild (v1's crawl_passes gets redis_token's index when the column is added).
        assert indexes == {"idx_category", "idx_brand", "idx_outcome", "idx_changes_product", "idx_changes_pass",
                           "idx_variants_sku",
                           *(["uk_redis_token"] if store.generation == "v1" else [])}
        assert store.execute("SELECT DISTINCT typeof(product_id) FROM products") == [("text",)]
    if store.generation == "today":
        assert store.column_type("product_changes", "product_id").lower() == "varchar(64)"
        assert store.rows(CHANGE_SELECT) == [tuple(str(v) for v in OLD_CHANGE)]
        assert store.execute("SELECT typeof(product_id) FROM product_changes" if store.kind == "sqlite"
                             else "SELECT product_id FROM product_changes") == [
            ("text",) if store.kind == "sqlite" else ("2147483647",)]
    assert store.rows(PRODUCT_SELECT + " WHERE product_id = '2147483647'") == old_product
    assert store.rows(FAILURE_SELECT + " WHERE product_id = '123456'") == old_failure
    stored = sorted(str(r[0]) for r in store.execute("SELECT product_id FROM products WHERE product_id <> "
                                                     "'2147483647'"))
    assert stored == [i for i in ids[:3] if not catalog.is_missing(int(i))]
    # '0042' stays '0042' (an integer column would have made it 42): its answer said 42, so it failed.
    assert store.rows("SELECT product_id, outcome, reason FROM crawl_failures WHERE product_id = '0042'") == [
        ("0042", "failed", "bad_response/id_mismatch")]
    # And the reverse is refused: integer ids on a table of strings could merge '0042' and '42'.
    again = crawl(store, clean_simulator, "-a", "end_id=5")
    assert again.returncode == 2, again.stderr[-3000:]
    lines = [line for line in again.stderr.splitlines() if line.startswith("productcrawler:")]
    assert len(lines) == 1 and "PRODUCT_ID_TYPE=int, but products.product_id holds string ids" in lines[0]
    assert "Traceback" not in again.stderr, \
        again.stderr[-3000:]
