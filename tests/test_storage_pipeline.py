"""The storage pipeline against the real MySQL (and PostgreSQL, which aborts a whole transaction on one bad row):
one bad row never sinks its batch; batch size and flush interval."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from urllib.parse import quote

import pytest

from tests.support.crawls import ROOT, crawl_env, read_lines, run_crawl, start_crawl
from tests.support.logs import dumped_stats
from tests.support.services import database_query, mysql_query

# A spider that hands the pipeline items directly, one of them out of range
# for DECIMAL(10,2): cleaning would never let it through, so this is the
# database's own check being exercised.
SCRIPT = """
import sys
from decimal import Decimal
from scrapy import Spider
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings
from productcrawler.items import FAILED, FailureItem, ProductItem
from productcrawler.storage.database import utcnow

class Items(Spider):
    name = "items"

    async def start(self):
        for i in range(1, 11):
            yield ProductItem(i, f"product {i}", Decimal("1e12") if i == 5 else Decimal("9.99"), 1,
                              None, None, None, None, utcnow())
        yield FailureItem(11, FAILED, 503, "http_503", 4)
        # Out of BIGINT's range: not even its failure row can be stored.
        yield FailureItem(10**19, FAILED, 503, "http_503", 4)

settings = get_project_settings()
settings.set("DATABASE_URL", sys.argv[1], priority="cmdline")
settings.set("EXTENSIONS", {}, priority="cmdline")
process = CrawlerProcess(settings)
process.crawl(Items)
process.start()
"""


@pytest.mark.parametrize("kind", ["mysql", "postgresql"])
def test_a_row_the_database_rejects_is_recorded_and_the_rest_of_its_batch_stored(kind, request):
    url = request.getfixturevalue(f"{kind}_url")
    result = subprocess.run([sys.executable, "-c", SCRIPT, url], cwd=ROOT, env=crawl_env(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    stored = [r[0] for r in database_query(url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    failures = database_query(url, "SELECT product_id, outcome, reason FROM crawl_failures ORDER BY product_id")
    assert [f[:2] for f in failures] == [(5, "failed"), (11, "failed")]
    # The database's own words, on one line (PostgreSQL's message has a DETAIL line of its own).
    said = {"mysql": "Out of range value for column 'price'", "postgresql": "numeric field overflow DETAIL: "}[kind]
    assert failures[0][2].startswith("db_rejected: ") and said in failures[0][2], failures[0][2]
    assert "\n" not in failures[0][2]
    # The stats count the failures recorded, by reason (a rejected row's error message is not part of the key).
    assert dumped_stats(result.stderr, "productcrawler/failed_reason/") == {
        "productcrawler/failed_reason/db_rejected": 1, "productcrawler/failed_reason/http_503": 1}
    assert "rejected the row of product 5" in result.stderr
    # Rejected twice (its row, then its failure row), then dropped: the crawl ends instead of retrying forever.
    assert result.stderr.count(f"rejected the row of product {10**19}") == 2


def test_write_batches_are_full_at_a_high_rate(clean_arrival_server, mysql_url):
    # At 400/s a flush interval of 0.5 s holds ~200 outcomes: batches should
    # be far bigger than what comes in during one write (a handful).
    end = 1200
    result = run_crawl("-a", f"end_id={end}", settings={
        "API_BASE_URL": clean_arrival_server.base_url, "DATABASE_URL": mysql_url,
        "MAX_REQUESTS_PER_SECOND": 400, "DATABASE_BATCH_SIZE": 200, "DATABASE_FLUSH_INTERVAL": 0.5})
    assert result.returncode == 0, result.stderr[-3000:]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0] == end
    batches = int(re.search(r"'productcrawler/db/batches': (\d+)", result.stderr).group(1))
    assert end / batches >= 50, batches


# --- DATABASE_BATCH_SIZE and DATABASE_FLUSH_INTERVAL in the real crawl --------------


def outcome_rows(url: str) -> int:
    try:
        return mysql_query(url, "SELECT (SELECT COUNT(*) FROM products) + (SELECT COUNT(*) FROM crawl_failures)")[0][0]
    except Exception:  # noqa: BLE001 - the tables may not exist yet
        return 0


def watch_rows(process: subprocess.Popen[str], url: str, output: list[str] | None = None
               ) -> list[tuple[float, int]]:
    """(time, outcome rows) at each change while the crawl runs; a batch commits atomically."""
    changes: list[tuple[float, int]] = []
    output = [] if output is None else output  # read meanwhile, or the crawl blocks on a full pipe
    threading.Thread(target=read_lines, args=(process.stdout, queue.Queue(), output), daemon=True).start()
    while process.poll() is None:
        rows = outcome_rows(url)
        if not changes or rows != changes[-1][1]:
            changes.append((time.monotonic(), rows))
        time.sleep(0.02)
    return changes


def test_database_batch_size_is_the_most_rows_per_write(clean_simulator, mysql_url):
    # The single writer drains what is pending in batches of at most DATABASE_BATCH_SIZE
    # rows (a partial one when it catches up), so 301 outcomes take at least 43 writes.
    batch, end = 7, 7 * 43
    process = start_crawl("-a", f"end_id={end}", settings={
        "API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": 100,
        "DATABASE_BATCH_SIZE": batch, "DATABASE_FLUSH_INTERVAL": 60})
    output: list[str] = []
    watch_rows(process, mysql_url, output)
    assert process.wait(timeout=60) == 0, "".join(output)[-3000:]
    assert outcome_rows(mysql_url) == end
    batches = re.search(r"'productcrawler/db/batches': (\d+)", "".join(output))
    assert batches is not None, "".join(output)[-3000:]
    assert int(batches[1]) >= end // batch


def test_database_flush_interval_is_the_time_between_writes(clean_simulator, mysql_url):
    # Batches far larger than the crawl: rows are written only when the interval comes round.
    interval, end = 1.5, 600
    process = start_crawl("-a", f"end_id={end}", settings={
        "API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": 100,
        "DATABASE_BATCH_SIZE": 100_000, "DATABASE_FLUSH_INTERVAL": interval})
    changes = watch_rows(process, mysql_url)
    assert process.wait(timeout=60) == 0
    assert outcome_rows(mysql_url) == end
    at = [when for when, rows in changes if 0 < rows < end]
    gaps = sorted(b - a for a, b in zip(at, at[1:]))
    assert len(gaps) >= 2, changes
    # Writes about one interval apart (a write at close, or one draining what came in
    # during the last, may follow sooner); a loaded machine can only make gaps longer.
    assert interval * 0.7 <= gaps[len(gaps) // 2] <= interval * 2, gaps
    assert sum(gap >= interval * 0.7 for gap in gaps) >= 3, gaps


@pytest.mark.parametrize("kind", ["mysql", "postgresql"])
def test_a_percent_encoded_database_name_is_the_database_written_to(kind, clean_simulator, request):
    """``café-<n>`` written as ``caf%C3%A9-<n>`` in DATABASE_URL: the rows land in ``café-<n>``."""
    import uuid

    import pymysql

    from tests.support.services import MYSQL

    name = f"pc_test_café-{uuid.uuid4().hex[:8]}"
    if kind == "mysql":
        connection = pymysql.connect(**MYSQL)
        create, drop = f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4", f"DROP DATABASE IF EXISTS `{name}`"
        url = f"mysql://root@127.0.0.1:3306/{quote(name)}"

        def passes() -> list[tuple]:
            cursor = connection.cursor()
            cursor.execute(f"SELECT COUNT(*) FROM `{name}`.crawl_passes")
            return list(cursor.fetchall())

        def admin(sql: str) -> None:
            connection.cursor().execute(sql)
    else:
        server = request.getfixturevalue("postgres_server")
        create, drop = f'CREATE DATABASE "{name}"', f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
        url = server.url(quote(name))

        def passes() -> list[tuple]:
            return server.admin("SELECT COUNT(*) FROM crawl_passes", database=name)

        admin = server.admin
    try:
        admin(create)
        assert "%C3%A9" in url
        result = run_crawl("-a", "end_id=5", settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": url})
        assert result.returncode == 0, result.stderr[-3000:]
        assert passes() == [(1,)]
    finally:
        admin(drop)
        if kind == "mysql":
            connection.close()
