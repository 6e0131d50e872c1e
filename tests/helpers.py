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
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=env,
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


class LaggyTcpProxy:
    """A TCP proxy that delays every byte by ``delay`` seconds each way (a distant Redis, say).

    Listens on port 0; a thread per direction forwards each chunk once it is
    ``delay`` old, in order. Use as a context manager.
    """

    def __init__(self, target_host: str, target_port: int, delay: float) -> None:
        import socket
        import threading

        self.target = (target_host, target_port)
        self.delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[Any] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def __enter__(self) -> LaggyTcpProxy:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for sock in list(self._sockets):
            sock.close()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: Any, sink: Any) -> None:
        import queue
        import threading

        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def send() -> None:
            while True:
                due, data = chunks.get()
                if not data:
                    return
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    sink.sendall(data)
                except OSError:
                    return

        threading.Thread(target=send, daemon=True).start()
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + self.delay, data))
            if not data:
                return
