"""Shared test helpers (no fixtures: those are in conftest.py). Append; never import from test_*.py."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from productcrawler.simulator import catalog
from tests.conftest import MYSQL, ROOT, crawl_command, crawl_env, mysql_query

if TYPE_CHECKING:
    from collections.abc import Callable

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


def start_crawl(*args: str, settings: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real ``scrapy crawl products`` in the background, stdout and stderr together."""
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=env or crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str,
             timeout: float = 60) -> None:
    """Poll ``condition`` while ``process`` runs; fail if it ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the crawl ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


def run_scrapy(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
               cwd: Any = ROOT) -> subprocess.CompletedProcess[str]:
    """Run any real ``scrapy`` command of the project (``fetch``, ``shell``, ``crawl``) and wait."""
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def dumped_stat(log: str, key: str) -> Any:
    """The value of ``key`` in the stats Scrapy dumps at the end of a crawl's log (None if absent)."""
    match = re.search(rf"'{re.escape(key)}': ([^,\n}}]+)", log)
    return None if match is None else ast.literal_eval(match.group(1))


_STAT = re.compile(r"'([^']+)': (-?[0-9][0-9.e+-]*)")


def dumped_stats(log: str, prefix: str = "") -> dict[str, float]:
    """The numeric stats of Scrapy's final stats dump in a crawl's log, whose key starts with ``prefix``."""
    start = log.rfind("Dumping Scrapy stats")
    if start < 0:
        return {}
    return {key: float(value) for key, value in _STAT.findall(log[start:]) if key.startswith(prefix)}


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    """Wait for a crawl; on timeout kill it and fail, showing the end of its log."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the crawl was still running after {timeout} s:\n{output[-3000:]}") from None
    return process.returncode, output


def stored_count(url: str) -> int:
    try:
        return mysql_query(url, "SELECT COUNT(*) FROM products")[0][0]
    except Exception:  # noqa: BLE001 - the table may not exist yet
        return 0


def wait_until_stored(process: subprocess.Popen[str], url: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while stored_count(url) < at_least:
        assert process.poll() is None, "the crawl ended before it could be interrupted"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.1)


def assert_pass_complete(url: str, end: int) -> None:
    """Ids 1..end each have their one outcome: stored, or missing where the catalog has none."""
    stored = [r[0] for r in mysql_query(url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == [i for i in range(1, end + 1) if not catalog.is_missing(i)]
    missing = [r[0] for r in mysql_query(url, "SELECT product_id FROM crawl_failures "
                                              "WHERE outcome = 'missing' ORDER BY product_id")]
    assert missing == [i for i in range(1, end + 1) if catalog.is_missing(i)]
    assert mysql_query(url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'")[0][0] == 0


def redis_keys(client: Any, prefix: str) -> list[bytes]:
    """Every key under a test's prefix: the pass's keys are ``{prefix}:...`` (the cluster hash tag)."""
    return [key for pattern in (f"{prefix}:*", f"{{{prefix}}}:*") for key in client.scan_iter(pattern)]
