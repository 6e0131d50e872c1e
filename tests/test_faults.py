"""Retries against the simulator's fault modes, judged by rows and by the arrival record."""

from __future__ import annotations

import time
from collections import defaultdict
from decimal import Decimal

import pytest

from simulator import catalog
from tests.support.crawls import run_crawl
from tests.support.services import mysql_query

BACKOFF_BASE = 0.4
RETRY_AFTER = 2


def present(ids: range | list[int]) -> list[int]:
    return [i for i in ids if not catalog.is_missing(i)]


def arrivals_by_id(simulator) -> dict[int, list[tuple[float, int | None]]]:
    seen: dict[int, list[tuple[float, int | None]]] = defaultdict(list)
    for at, product_id, status, _fault in simulator.arrivals():
        seen[product_id].append((at, status))
    return seen


@pytest.fixture
def crawl(clean_simulator, mysql_url):
    def run(end: int, faults: list[str], **settings: object):
        clean_simulator.set_faults(faults, retry_after=RETRY_AFTER, slow_delay=3)
        result = run_crawl("-a", f"end_id={end}", settings={
            "API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_RETRIES": 3,
            "RETRY_BACKOFF_BASE": BACKOFF_BASE, "RETRY_BACKOFF_MAX": 10, "API_TIMEOUT": 1,
            **settings})
        assert result.returncode == 0, result.stderr[-3000:]
        return result
    return run


def test_transient_faults_end_with_the_product_stored(crawl, clean_simulator, mysql_url):
    ids = {"503": 1, "500": 2, "502": 3, "429s": 4, "429date": 5, "truncated": 6, "html": 7,
           "notproduct": 8, "wrongid": 9, "hang": 10, "slow": 11, "503ra": 12, "badutf8": 13}
    ids = {mode: next(i for i in range(100 * n, 100 * n + 50) if not catalog.is_missing(i))
           for n, mode in enumerate(ids, start=1)}
    faults = [f"{mode}={product_id}@2" if mode == "503" else f"{mode}={product_id}@1"
              for mode, product_id in ids.items()]
    end = max(ids.values())
    result = crawl(end, faults)
    stored = {r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products")}
    assert set(ids.values()) <= stored, {m: i for m, i in ids.items() if i not in stored}
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'")[0][0] == 0
    assert f"{len(present(range(1, end + 1)))} stored" in result.stderr

    seen = arrivals_by_id(clean_simulator)
    # Retry-After, in seconds and as an HTTP date: never requested again before it.
    for mode in ("429s", "429date", "503ra"):
        (first, _), (second, status) = seen[ids[mode]][:2]
        assert second - first >= RETRY_AFTER - 0.01, (mode, second - first)
        assert status == 200
    # 5xx: spaced by the exponential backoff (equal jitter: at least half the ceiling).
    times = [at for at, _ in seen[ids["503"]]]
    assert len(times) == 3
    assert times[1] - times[0] >= BACKOFF_BASE / 2
    assert times[2] - times[1] >= BACKOFF_BASE * 2 / 2


def test_permanent_faults_are_recorded_with_outcome_and_reason(crawl, clean_simulator, mysql_url):
    faults = ["400=1@*", "403=2@*", "503=3@*", "html=4@*", "hang=5@*", "truncated=6@*", "huge=7@*",
              "nested=8@*"]
    crawl(11, faults, DOWNLOAD_MAXSIZE=1_000_000)
    rows = {r[0]: r[1:] for r in mysql_query(
        mysql_url, "SELECT product_id, outcome, http_status, reason, attempts FROM crawl_failures")}
    assert rows[1] == ("failed", 400, "http_400", 1)
    assert rows[2] == ("failed", 403, "http_403", 1)
    assert rows[3] == ("failed", 503, "http_503", 4)
    assert rows[4] == ("failed", 200, "bad_response/html", 4)
    assert rows[5][0] == "failed" and rows[5][2] == "timeout" and rows[5][3] == 4
    assert rows[6] == ("failed", 200, "bad_response/not_json", 4)
    # Over DOWNLOAD_MAXSIZE: cancelled and given up at once, not retried.
    assert rows[7][0] == "failed" and rows[7][3] == 1, rows[7]
    assert "size" in rows[7][2].lower(), rows[7]
    assert rows[8][0] == "failed" and rows[8][2] == "bad_response/too_deep"
    # The one 404 among the ids without a fault.
    assert [i for i in range(9, 12) if catalog.is_missing(i)] == [11]
    assert rows[11] == ("missing", 404, "not_found", 1)
    stored = {r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products")}
    assert not stored & set(rows), "an id has two outcomes"
    # A permanent 4xx is asked once; a 503 MAX_RETRIES + 1 times.
    seen = arrivals_by_id(clean_simulator)
    assert len(seen[1]) == 1 and len(seen[3]) == 4


def test_an_id_that_later_succeeds_leaves_crawl_failures(crawl, mysql_url):
    product_id = present(range(1, 20))[1]
    crawl(20, [f"503={product_id}@*"], MAX_RETRIES=0)
    failed = "SELECT product_id FROM crawl_failures WHERE outcome='failed'"
    assert mysql_query(mysql_url, failed) == [(product_id,)]
    crawl(20, [])
    assert mysql_query(mysql_url, failed) == []
    assert (product_id,) in mysql_query(mysql_url, "SELECT product_id FROM products")


def test_two_thousand_ids_with_faults_leave_none_unaccounted_for(crawl, clean_simulator, mysql_url):
    # Transient faults strike each id at most 3 times in all (at most three of
    # 7, 11, 13, 17, 29, 31 divide an id up to 2000), within MAX_RETRIES=3.
    faults = ["503=%7@1", "429s=%11@1", "truncated=%13@1", "html=%17@1", "500=%19@*", "400=%23@*",
              "429date=%29@1", "502=%31@1", "dirty=%37@*"]
    # A cap far above what this machine drives: each 429 halves the rate down to a floor of 10 %
    # of the cap, and at 1000/s that floor (100/s) paced most of the run; the accounting is what is judged.
    result = crawl(2000, faults, MAX_REQUESTS_PER_SECOND=10_000, RETRY_BACKOFF_BASE=0.2)
    stored = {r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products")}
    failures = dict(mysql_query(mysql_url, "SELECT product_id, outcome FROM crawl_failures"))
    assert not stored & failures.keys()
    assert stored | failures.keys() == set(range(1, 2001))
    for product_id, outcome in failures.items():
        expected = "missing" if catalog.is_missing(product_id) and not (
            product_id % 19 == 0 or product_id % 23 == 0) else "failed"
        assert outcome == expected, product_id
        if outcome == "failed":
            assert product_id % 19 == 0 or product_id % 23 == 0
    assert "Finished (finished)" in result.stderr


# mode -> (outcome, what the row must show): stored faithfully where valid,
# recorded as failed with a reason where not.
HOSTILE = {
    "huge": ("failed", "size"),  # over DOWNLOAD_MAXSIZE: cancelled, not retried
    "nested": ("failed", "bad_response/too_deep"),
    "badutf8": ("failed", "bad_response/invalid_utf8"),
    "sqlish": ("stored", catalog.SQLISH_NAME),
    "emoji": ("stored", "📱"),
    "outofrange": ("stored", None),
}


def test_hostile_payloads_are_stored_faithfully_or_recorded_with_a_reason(crawl, mysql_url):
    ids = {mode: present(range(500 + 10 * n, 510 + 10 * n))[0] for n, mode in enumerate(HOSTILE)}
    crawl(max(ids.values()), [f"{mode}={product_id}@*" for mode, product_id in ids.items()],
          DOWNLOAD_MAXSIZE=1_000_000, MAX_RETRIES=1)
    failures = {r[0]: r[1:] for r in mysql_query(mysql_url, "SELECT product_id, outcome, reason FROM crawl_failures")}
    products = {r[0]: r[1:] for r in mysql_query(mysql_url, "SELECT product_id, name, price, stock, sales_count, "
                                                            "rating FROM products")}
    for mode, (outcome, shows) in HOSTILE.items():
        product_id = ids[mode]
        if outcome == "failed":
            assert product_id not in products, mode
            assert failures[product_id][0] == "failed" and shows in failures[product_id][1], \
                (mode, failures[product_id])
        else:
            assert product_id not in failures, (mode, failures.get(product_id))
            name, price, stock, sales_count, rating = products[product_id]
            if shows is not None:
                assert shows in name, mode
            else:  # out-of-range numbers: dropped to NULL or clamped, never rejected by MySQL
                assert (price, stock, sales_count, rating) == (None, None, None, Decimal("5.00"))


def test_a_404_marks_the_stale_product_row_removed_while_failed_keeps_the_last_good_one(crawl, clean_simulator,
                                                                                        mysql_url):
    gone = next(i for i in range(1, 40) if catalog.is_missing(i))
    kept = next(i for i in range(gone + 1, 40) if not catalog.is_missing(i))
    # First pass: id `gone` still answers with a product (a fault variant serves one even
    # for a 404 id), so both ids have a product row.
    crawl(40, [f"emoji={gone}@*"])
    query = "SELECT product_id, name, price, stock, update_time FROM products WHERE product_id IN (%s, %s)"
    first = {row[0]: row for row in mysql_query(mysql_url, query, (gone, kept))}
    assert sorted(first) == [gone, kept]
    time.sleep(1.1)  # rows are stamped to the second

    # Second pass: `gone` answers 404 now, `kept` fails for good.
    crawl(40, [f"503={kept}@*"], MAX_RETRIES=1)
    after = {row[0]: row for row in mysql_query(mysql_url, query, (gone, kept))}
    assert after[gone] == first[gone], "the stale row of a 404 id was changed or deleted"
    removed = mysql_query(mysql_url, "SELECT removed_at FROM products WHERE product_id = %s", (gone,))
    assert removed[0][0] is not None, "the stale row of a 404 id was not marked removed"
    assert after[kept] == first[kept], "the last good row of a failed id was changed or removed"
    failures = {r[0]: r[1:] for r in mysql_query(
        mysql_url, "SELECT product_id, outcome, http_status FROM crawl_failures WHERE product_id IN (%s, %s)",
        (gone, kept))}
    assert failures == {gone: ("missing", 404), kept: ("failed", 503)}
    # The other ids were refreshed in place.
    others = mysql_query(mysql_url, "SELECT COUNT(*) FROM products WHERE update_time > %s", (first[kept][4],))
    assert others[0][0] == len(present(range(1, 41))) - 1


def test_compressed_answers_are_decoded_and_a_gzip_bomb_is_cut_at_download_maxsize(crawl, mysql_url):
    ids = {mode: present(range(700 + 10 * n, 710 + 10 * n))[0]
           for n, mode in enumerate(("gzip", "deflate", "br", "gzipbomb"))}
    crawl(max(ids.values()), [f"{mode}={product_id}@*" for mode, product_id in ids.items()], MAX_RETRIES=1)
    stored = {r[0]: r[1] for r in mysql_query(mysql_url, "SELECT product_id, name FROM products")}
    failures = {r[0]: r[1:] for r in mysql_query(mysql_url, "SELECT product_id, outcome, reason, attempts "
                                                            "FROM crawl_failures")}
    for mode in ("gzip", "deflate", "br"):
        assert stored.get(ids[mode]), (mode, failures.get(ids[mode]))
    # 10 MB inflated from 10 KB: cut past DOWNLOAD_MAXSIZE (1 MiB) of decoded bytes, recorded, not retried.
    outcome, reason, attempts = failures[ids["gzipbomb"]]
    assert (outcome, attempts) == ("failed", 1), reason
    assert "exceeded DOWNLOAD_MAXSIZE (1048576 B) during decompression" in reason, reason
