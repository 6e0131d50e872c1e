"""Helpers shared by the crawl tests (running crawls, waiting on them, checking a pass)."""

from __future__ import annotations

import subprocess
import time

from productcrawler.simulator import catalog
from tests.conftest import ROOT, crawl_command, crawl_env, mysql_query


def start_crawl(*args: str, settings: dict[str, object]) -> subprocess.Popen[str]:
    """``scrapy crawl products`` in the background, stdout and stderr together."""
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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
