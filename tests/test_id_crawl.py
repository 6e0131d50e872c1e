"""Crawls over id files and failed ids: the real ``scrapy crawl products`` against the simulator, MySQL and Redis."""

from __future__ import annotations

import hashlib
import signal
from collections import Counter

import pytest

from simulator import catalog
from tests.support.catalogue import CATALOG_VERSION, PRODUCT_COLUMNS, catalogue_row, done_ids
from tests.support.crawls import finish, kill_when_stored, start_crawl, wait_until_stored
from tests.support.logs import summary
from tests.support.services import REDIS_URL, mysql_query

FAST = {"MAX_REQUESTS_PER_SECOND": 1000}
#: Sparse 13-digit ids (beyond a 32-bit INT), as a Shopify catalogue has.
BASE = 7_000_000_000_000


def sparse_ids(count: int, step: int = 7919, base: int = BASE) -> list[int]:
    return [base + n * step for n in range(count)]


def write_ids(tmp_path, ids: list[object], name: str = "ids.txt", blank_every: int = 50) -> str:
    lines = []
    for n, product_id in enumerate(ids):
        lines.append(f"  {product_id} \n")
        if n % blank_every == 0:
            lines.append("\n")
    path = tmp_path / name
    path.write_text("".join(lines))
    return str(path)


@pytest.fixture
def settings(clean_simulator, mysql_url) -> dict[str, object]:
    return {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": 400,
            "PROGRESS_INTERVAL": 1}


@pytest.fixture
def shared(settings, redis_prefix) -> dict[str, object]:
    return {**settings, "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}


def assert_outcomes(mysql_url: str, ids: set[int]) -> None:
    """Each of ``ids`` has its outcome, column by column: the catalogue's product, or `missing`; nothing else."""
    present = sorted(i for i in ids if not catalog.is_missing(i))
    rows = mysql_query(mysql_url, f"SELECT {', '.join(PRODUCT_COLUMNS)} FROM products ORDER BY product_id")
    assert rows == [catalogue_row(i, CATALOG_VERSION) for i in present]
    failures = mysql_query(mysql_url, "SELECT product_id, outcome, http_status FROM crawl_failures "
                                      "ORDER BY product_id")
    assert failures == [(i, "missing", 404) for i in sorted(ids) if catalog.is_missing(i)]


def test_a_file_of_sparse_64_bit_ids_with_duplicates_fetches_exactly_its_lines(settings, clean_simulator,
                                                                                 mysql_url, tmp_path):
    ids = sparse_ids(400)
    listed = ids + ids[:3]  # three duplicates: each of their lines is fetched
    path = write_ids(tmp_path, listed)
    assert any(catalog.is_missing(i) for i in ids)
    code, output = finish(start_crawl("-a", f"ids=@{path}", settings={**settings, **FAST}))
    assert code == 0, output[-3000:]
    assert f"Starting pass 1 over {len(listed)} ids of {path}" in output
    assert Counter(a[1] for a in clean_simulator.arrivals()) == Counter(listed)
    assert_outcomes(mysql_url, set(ids))
    digest = hashlib.sha256((tmp_path / "ids.txt").read_bytes()).hexdigest()
    assert mysql_query(mysql_url, "SELECT pass_id, start_id, end_id, ids_digest, ids_count, source_pass_id, "
                                  "finished_at IS NOT NULL FROM crawl_passes") == [
        (1, 1, len(listed), digest, len(listed), None, 1)]
    # Its summary counts the rows it stamped (positions 1..N are not ids: no range restricts them).
    missing = sum(catalog.is_missing(i) for i in ids)
    assert mysql_query(mysql_url, "SELECT stored, missing, failed FROM crawl_passes") == [
        (len(ids) - missing, missing, 0)]
    # A run over the same file is a new pass: the finished one is not resumed.
    code, output = finish(start_crawl("-a", f"ids=@{path}", settings={**settings, **FAST}))
    assert code == 0 and "Starting pass 2 over" in output, output[-3000:]


@pytest.mark.parametrize("use_redis", [False, True], ids=["database-ledger", "redis"])
def test_a_crawl_over_a_file_killed_with_sigkill_resumes_where_it_stopped(use_redis, settings, shared, mysql_url,
                                                                           clean_simulator, tmp_path):
    ids = sparse_ids(3000)
    path = write_ids(tmp_path, ids)
    config = {**shared, "REDIS_HEARTBEAT_TTL": 4} if use_redis else settings
    process = start_crawl("-a", f"ids=@{path}", settings=config)
    kill_when_stored(process, mysql_url, 900, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    done_before = done_ids(mysql_url)
    assert 900 <= len(done_before) < len(ids)
    sent_before = len(clean_simulator.arrivals())
    code, output = finish(start_crawl("-a", f"ids=@{path}", settings={**config, **FAST}))
    assert code == 0, output[-3000:]
    assert ("Joined pass 1 over" if use_redis else "Resuming pass 1 over") in output, output[-3000:]
    fetched = {a[1] for a in clean_simulator.arrivals()[sent_before:]}
    assert fetched >= set(ids) - done_before, "an id left undone was not fetched"
    again = fetched & done_before
    if use_redis:  # a few ids committed just before the kill but not yet marked done in Redis
        assert len(again) <= 400, len(again)
    else:
        assert again == set(), sorted(again)[:20]
    assert_outcomes(mysql_url, set(ids))
    if not use_redis:
        assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_passes WHERE finished_at IS NOT NULL") == [(1,)]


def test_two_instances_share_a_pass_over_one_file_and_one_with_another_file_is_refused(shared, clean_simulator,
                                                                                       mysql_url, tmp_path):
    ids = sparse_ids(3000)
    path = write_ids(tmp_path, ids)
    other = write_ids(tmp_path, ids[:-1], name="other.txt")
    first = start_crawl("-a", f"ids=@{path}", settings=shared)
    wait_until_stored(first, mysql_url, 100)
    second = start_crawl("-a", f"ids=@{path}", settings=shared)
    refused = start_crawl("-a", f"ids=@{other}", settings=shared)
    code, output = finish(refused)
    assert code == 2, output[-3000:]
    lines = [line for line in output.splitlines() if line.startswith("productcrawler:")]
    assert len(lines) == 1 and "Traceback" not in output, output[-3000:]
    digest = hashlib.sha256((tmp_path / "ids.txt").read_bytes()).hexdigest()
    assert lines[0].startswith("productcrawler: configuration error: PRODUCT_IDS: the shared pass 1 in Redis "
                               f"runs over a file of 3000 ids with SHA-256 {digest[:16]}, this instance over "
                               f"2999 ids of {other}"), lines[0]
    results = [finish(first), finish(second)]
    for code, output in results:
        assert code == 0, output[-3000:]
    assert "Joined pass 1 over 3000 ids of" in results[1][1]
    assert all(summary(output)[0] > 0 for _, output in results), "an instance did no work"
    fetched = sorted(a[1] for a in clean_simulator.arrivals())
    assert fetched == ids, "an id was fetched twice or never"  # none of them by the refused instance
    assert_outcomes(mysql_url, set(ids))


FAILING = "500=%10@*"  # every tenth id answers 500 at every attempt


@pytest.mark.parametrize("use_redis", [False, True], ids=["database-ledger", "redis"])
def test_failed_ids_are_fetched_again_alone_as_a_run_of_their_own(use_redis, settings, shared, mysql_url,
                                                                  clean_simulator):
    config = {**(shared if use_redis else settings), **FAST, "MAX_RETRIES": 0}
    # An earlier pass whose failures are not the latest pass's: they are not fetched again.
    clean_simulator.set_faults([FAILING])
    code, output = finish(start_crawl("-a", "start_id=1001", "-a", "end_id=1100", settings=config))
    assert code == 0, output[-3000:]
    clean_simulator.set_faults([FAILING])
    code, output = finish(start_crawl("-a", "start_id=1", "-a", "end_id=300", settings=config))
    assert code == 0, output[-3000:]
    failed = [i for i in range(1, 301) if i % 10 == 0]
    assert mysql_query(mysql_url, "SELECT product_id FROM crawl_failures WHERE outcome = 'failed' "
                                  "AND product_id <= 300 ORDER BY product_id") == [(i,) for i in failed]
    clean_simulator.clean()
    code, output = finish(start_crawl("-a", "ids=failed", settings=config))
    assert code == 0, output[-3000:]
    assert f"over the {len(failed)} ids recorded failed" in output, output[-3000:]
    assert sorted(a[1] for a in clean_simulator.arrivals()) == failed  # nothing else was asked of the API
    stored = {r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products")}
    assert {i for i in failed if not catalog.is_missing(i)} <= stored
    left = mysql_query(mysql_url, "SELECT product_id FROM crawl_failures WHERE outcome = 'failed' "
                                  "ORDER BY product_id")
    assert left == [(i,) for i in range(1001, 1101) if i % 10 == 0]
    # The re-run is a pass of its own (a Redis-shared one has its row too), naming the pass it re-fetched.
    assert mysql_query(mysql_url, "SELECT pass_id, source_pass_id, ids_count, finished_at IS NOT NULL "
                                  "FROM crawl_passes WHERE pass_id = 3") == [(3, 2, len(failed), 1)]
    # Nothing failed in the latest pass now: one line, exit 0, nothing asked of the API.
    clean_simulator.reset()
    code, output = finish(start_crawl("-a", "ids=failed", settings=config))
    assert code == 0, output[-3000:]
    assert "No ids are recorded failed in the latest pass (pass 3): nothing to fetch" in output, output[-3000:]
    assert clean_simulator.arrivals() == []
