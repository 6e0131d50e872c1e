"""Helpers shared by the test modules (fixtures live in ``conftest.py``).

Test modules import from here, never from each other. Append new helpers
under a heading of their own; don't reorganise what is here.
"""

from __future__ import annotations

import ast
import asyncio
import random
import re
import subprocess
import sys
import time
from datetime import datetime
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any

from scrapy import Request

from simulator import catalog
from tests.conftest import MYSQL, ROOT, crawl_command, crawl_env, mysql_query

if TYPE_CHECKING:
    import queue
    from collections.abc import Callable, Iterator

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


# --- crawl subprocesses and their logs -----------------------------------------


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


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    """Wait for a crawl; on timeout kill it and fail, showing the end of its log."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the crawl was still running after {timeout} s:\n{output[-3000:]}") from None
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


def run_scrapy(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
               cwd: Any = ROOT) -> subprocess.CompletedProcess[str]:
    """Run any real ``scrapy`` command of the project (``fetch``, ``shell``, ``crawl``) and wait."""
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


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


def wait_until_stored(process: subprocess.Popen[str], url: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while stored_count(url) < at_least:
        assert process.poll() is None, "the crawl ended before it could be interrupted"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.1)


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


# --- the database and Redis ---------------------------------------------------


def table(mysql_url: str, name: str) -> list[tuple[Any, ...]]:
    """Every row of a table, every column, ordered by product_id: compare snapshots row for row."""
    return mysql_query(mysql_url, f"SELECT * FROM {name} ORDER BY product_id")


def mysql_execute(url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Run ``sql`` once per row of parameters and commit."""
    import pymysql

    connection = pymysql.connect(database=url.rsplit("/", 1)[1], **MYSQL)
    try:
        connection.cursor().executemany(sql, rows)
        connection.commit()
    finally:
        connection.close()


def stored_count(url: str) -> int:
    try:
        return mysql_query(url, "SELECT COUNT(*) FROM products")[0][0]
    except Exception:  # noqa: BLE001 - the table may not exist yet
        return 0


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


def redis_keys(client: Any, prefix: str) -> list[bytes]:
    """Every key under a test's prefix: the pass's keys are ``{prefix}:...`` (the cluster hash tag)."""
    return [key for pattern in (f"{prefix}:*", f"{{{prefix}}}:*") for key in client.scan_iter(pattern)]


# --- crawls whose log is read as it is written ------------------------------------


class LoggedCrawl:
    """A subprocess (a crawl, say) whose stderr is read as it is written: each line into
    ``log`` and into the queue ``lines`` (``None`` at its end). stdout is dropped."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        import queue
        import threading

        self.process = subprocess.Popen(command, cwd=ROOT, env=env or crawl_env(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=read_lines, args=(self.process.stderr, self.lines, self.log),
                                        daemon=True)
        self._reader.start()

    def wait(self, timeout: float = 180) -> tuple[int, str]:
        """The exit code and the whole log, once the process has ended."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code, "".join(self.log)

    def kill(self) -> None:
        """Kill the process if it still runs (a failed test's clean-up)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._reader.join(timeout=5)


def on_reactor_loop(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end on the asyncio reactor's event loop (the reactor itself is not running).

    The loop a crawl runs the pass and scheduler on: Deferreds from the
    database pool's threads arrive there. Set as the current loop first,
    because tests that use ``asyncio.run`` leave none set.
    """
    from tests import conftest

    assert conftest.REACTOR_LOOP is not None
    asyncio.set_event_loop(conftest.REACTOR_LOOP)
    return conftest.REACTOR_LOOP.run_until_complete(coroutine)


class LoopServer:
    """An aiohttp.web server (port 0) on the reactor's loop, as a module fixture's body:
    ``yield from LoopServer.running(Subclass())``; subclasses answer every path in ``handle``."""

    def __init__(self, tls: Any = None) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None)
        self.tls = tls  # an ssl.SSLContext: the server speaks TLS
        self.port = 0

    async def handle(self, request: Any) -> Any:
        raise NotImplementedError

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    async def _start(self) -> None:
        from aiohttp import web

        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    @staticmethod
    def running(server: LoopServer) -> Iterator[Any]:
        on_reactor_loop(server._start())
        try:
            yield server
        finally:
            on_reactor_loop(server.runner.cleanup())


# --- either database, by its URL -----------------------------------------------


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` from a crawl's ``DATABASE_URL``: MySQL (mysql_url) or SQLite (sqlite:///path)."""
    if url.startswith("sqlite:///"):
        import sqlite3

        connection = sqlite3.connect(url[len("sqlite:///"):])
        try:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
        finally:
            connection.close()
    return mysql_query(url, sql)
