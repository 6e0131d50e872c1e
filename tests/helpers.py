"""Helpers shared by the test modules (fixtures live in ``conftest.py``).

Test modules import from here, never from each other. Append new helpers
under a heading of their own; don't reorganise what is here.
"""

from __future__ import annotations

import random
import subprocess
import time
from typing import IO, TYPE_CHECKING, Any

from scrapy import Request

from productcrawler.simulator import catalog
from tests.conftest import ROOT, crawl_command, crawl_env, mysql_query

if TYPE_CHECKING:
    import queue

#: The id range most crawl tests use.
END = 3000

# --- unit-test doubles --------------------------------------------------------

PRODUCT_URL = "http://api.test/v1/product/7"


class FakeRandom(random.Random):
    """``uniform(a, b)`` lands at ``fraction`` of the way from a to b; calls are recorded.

    ``fraction=1.0`` makes every jittered delay its ceiling, ``0.0`` its floor.
    """

    def __init__(self, fraction: float = 0.5) -> None:
        super().__init__(0)
        self.fraction = fraction
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return a + (b - a) * self.fraction


def product_request(**meta: Any) -> Request:
    """A request for product 7, as the spider builds it, with extra ``meta``."""
    return Request(PRODUCT_URL, meta={"product_id": 7, **meta})


# --- the simulator's catalogue ------------------------------------------------


def present_ids(end: int = END, start: int = 1) -> list[int]:
    """Ids of ``start..end`` the simulator answers with a product (the others are 404s)."""
    return [i for i in range(start, end + 1) if not catalog.is_missing(i)]


def missing_ids(end: int = END, start: int = 1) -> list[int]:
    """Ids of ``start..end`` the simulator answers 404."""
    return [i for i in range(start, end + 1) if catalog.is_missing(i)]


# --- crawl subprocesses -------------------------------------------------------


def start_crawl(*args: str, settings: dict[str, object], env: dict[str, str] | None = None
                ) -> subprocess.Popen[str]:
    """Start the real ``scrapy crawl products``; stdout and stderr together in ``stdout``."""
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=env or crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    """Wait for a crawl started by ``start_crawl``: (exit code, its whole output)."""
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def read_lines(stream: IO[str], into: queue.Queue[str | None], log: list[str]) -> None:
    """Thread target: every line of ``stream`` into ``log`` and ``into``; ``None`` at its end."""
    for line in stream:
        log.append(line)
        into.put(line)
    into.put(None)


def summary(output: str) -> tuple[int, int, int]:
    """(stored, missing, failed) from the final log line of a run."""
    line = next(line for line in output.splitlines() if "Finished (" in line)
    counts = line.split(": ")[-1].split(" in this run")[0].split(", ")
    return tuple(int(part.split()[0]) for part in counts)  # type: ignore[return-value]


# --- the database -------------------------------------------------------------


def stored_count(url: str) -> int:
    try:
        return mysql_query(url, "SELECT COUNT(*) FROM products")[0][0]
    except Exception:  # noqa: BLE001 - the table may not exist yet
        return 0


def kill_when_stored(process: subprocess.Popen[str], url: str, at_least: int, sig: int) -> None:
    """Send ``sig`` once ``at_least`` products are stored (signal 0: just wait for them)."""
    deadline = time.monotonic() + 60
    while stored_count(url) < at_least:
        if process.poll() is not None:
            raise AssertionError("the crawl ended before it could be interrupted:\n"
                                 + process.communicate()[0][-3000:])
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.1)
    process.send_signal(sig)


def assert_pass_complete(url: str, end: int = END) -> None:
    """Every id of 1..end has its outcome: a product row, or a 'missing' row for a 404; none failed."""
    stored = [r[0] for r in mysql_query(url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == present_ids(end)
    missing = [r[0] for r in mysql_query(url, "SELECT product_id FROM crawl_failures "
                                              "WHERE outcome = 'missing' ORDER BY product_id")]
    assert missing == missing_ids(end)
    assert mysql_query(url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'")[0][0] == 0


def done_ids(url: str) -> set[int]:
    """Ids with an outcome row of any pass: a product or a failure."""
    return {row[0] for row in mysql_query(url, "SELECT product_id FROM products UNION "
                                               "SELECT product_id FROM crawl_failures")}


def outcome_stamps(url: str) -> dict[int, Any]:
    """Each id's latest outcome time: its product's update_time or its failure's updated_at."""
    stamps: dict[int, Any] = {}
    for product_id, stamp in mysql_query(url, "SELECT product_id, update_time FROM products UNION ALL "
                                              "SELECT product_id, updated_at FROM crawl_failures"):
        stamps[product_id] = max(stamp, stamps.get(product_id, stamp))
    return stamps


#: Ids a crawl killed with -9 may have committed to the database but not yet marked done
#: in Redis (the mark follows the commit); the shared pass fetches those again.
REDIS_UNMARKED_MAX = 400


def assert_resumed(arrivals: list[tuple], done_before: set[int], end: int, use_redis: bool) -> None:
    """A resumed run (its ``arrivals``) fetched every id not done before it, and not the done ones.

    With the database as the ledger a committed row is exactly "done"; through
    Redis a few ids committed just before a kill -9 may be fetched again.
    """
    fetched = {a[1] for a in arrivals}
    assert fetched >= set(range(1, end + 1)) - done_before, "an id left undone was not fetched"
    again = fetched & done_before
    if use_redis:
        assert len(again) <= min(REDIS_UNMARKED_MAX, len(done_before) // 2), (len(again), len(done_before))
    else:
        assert again == set(), sorted(again)[:20]


def kill_after_arrivals(process: subprocess.Popen[str], simulator: Any, count: int) -> None:
    """SIGKILL the crawl once the simulator has seen ``count`` requests; it must still be running."""
    deadline = time.monotonic() + 60
    while len(simulator.arrivals()) < count:
        assert process.poll() is None, "the crawl ended before it could be killed"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.05)
    assert process.poll() is None, "the crawl ended before it could be killed"
    process.kill()
    process.wait(timeout=30)
