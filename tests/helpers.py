"""Helpers shared by test modules (append; don't import from test_*.py modules)."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from productcrawler.simulator import catalog
from tests.conftest import MYSQL, mysql_query

PRODUCT_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating", "sales_count")
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_CENT = Decimal("0.01")


def catalogue_row(product_id: int, version: int) -> tuple[Any, ...]:
    """The ``products`` row a crawl must store for ``product_id`` (PRODUCT_COLUMNS), straight
    from the simulator's catalogue: its values are clean already."""
    item = catalog.product(product_id, version)
    return (product_id, item["name"], Decimal(repr(item["price"])).quantize(_CENT), item["stock"],
            item["category"], item["brand"], Decimal(repr(item["rating"])).quantize(_CENT),
            item["sales_count"])


def table(mysql_url: str, name: str) -> list[tuple[Any, ...]]:
    """Every row of a table, every column, ordered by product_id: compare snapshots row for row."""
    return mysql_query(mysql_url, f"SELECT * FROM {name} ORDER BY product_id")


def log_lines(stderr: str, level: str) -> list[str]:
    """The log lines of one level (``ERROR``, ``WARNING``...) of a crawl's stderr."""
    return [line for line in stderr.splitlines() if f"] {level}: " in line]


def log_time(stderr: str, text: str) -> datetime:
    """The timestamp (to the second) of the first log line containing ``text``."""
    for line in stderr.splitlines():
        if text in line:
            match = _LOG_TIME.match(line)
            if match:
                return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    raise AssertionError(f"no log line contains {text!r}")


def mysql_execute(url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Run ``sql`` once per row of parameters and commit."""
    import pymysql

    connection = pymysql.connect(database=url.rsplit("/", 1)[1], **MYSQL)
    try:
        connection.cursor().executemany(sql, rows)
        connection.commit()
    finally:
        connection.close()
