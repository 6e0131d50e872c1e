"""API_KEY: sent as ``Authorization: Bearer …`` at send time, never stored in Redis or logged.

The simulator records no headers, so the crawl here talks to a small API of
the test's own that serves the simulator's catalogue and records each
request's Authorization header. Id RETRIED answers 429 with Retry-After the
first time, so a retry of it waits in Redis while the test reads every key of
the crawl's prefix.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import pytest
import redis

from simulator import catalog
from tests.support.catalogue import CATALOG_VERSION, assert_pass_complete
from tests.support.crawls import finish, start_crawl
from tests.support.services import REDIS_URL, redis_keys

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "k3y-0f-th1s-t3st-5b8e2c"
END = 60
RETRIED = 7
RETRY_AFTER = 2


class RecordingApi(ThreadingHTTPServer):
    """``GET /v1/product/{id}`` from the simulator's catalogue; records (id, Authorization)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[int, str | None]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: RecordingApi

    def do_GET(self) -> None:
        product_id = int(self.path.rsplit("/", 1)[1])
        with self.server.lock:
            self.server.seen.append((product_id, self.headers.get("Authorization")))
            attempt = sum(1 for seen_id, _ in self.server.seen if seen_id == product_id)
        if product_id == RETRIED and attempt == 1:
            self._answer(429, {"error": "slow down"}, {"Retry-After": str(RETRY_AFTER)})
        elif catalog.is_missing(product_id):
            self._answer(404, {"error": "product not found"})
        else:
            self._answer(200, catalog.product(product_id, CATALOG_VERSION))

    def _answer(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[RecordingApi]:
    server = RecordingApi()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def values_under(client: redis.Redis, prefix: str) -> list[bytes]:
    """Every key name and stored value under ``prefix``, whatever the key's type."""
    found: list[bytes] = []
    for key in redis_keys(client, prefix):  # the pass's keys are "{prefix}:..." (hash tag)
        found.append(key)
        kind = client.type(key)
        if kind == b"string":
            found.append(client.get(key) or b"")
        elif kind == b"list":
            found += client.lrange(key, 0, -1)
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                found += [field, value]
        elif kind == b"set":
            found += list(client.smembers(key))
        elif kind == b"zset":
            found += [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
    return found


def test_api_key_is_sent_as_bearer_at_send_time_and_never_stored_in_redis_or_logged(api, mysql_url, redis_prefix):
    settings = {"API_BASE_URL": api.base_url, "DATABASE_URL": mysql_url, "API_KEY": SECRET,
                "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix, "MAX_REQUESTS_PER_SECOND": 100,
                "LOG_LEVEL": "DEBUG"}
    client = redis.Redis.from_url(REDIS_URL)
    process = start_crawl("-a", f"end_id={END}", settings=settings)
    looks, while_waiting = 0, 0
    try:
        while process.poll() is None:
            stored = b"\n".join(values_under(client, redis_prefix))
            assert SECRET.encode() not in stored
            looks += 1
            if client.zcard(f"{{{redis_prefix}}}:products:pass:1:delayed"):
                while_waiting += 1
            time.sleep(0.05)
    finally:
        client.close()
        if process.poll() is None:
            process.kill()
    code, output = finish(process)
    assert code == 0, output[-3000:]
    # The test did look while the retry waited in Redis.
    assert while_waiting >= 3, (looks, while_waiting)
    assert_pass_complete(mysql_url, END)

    # Every request carried the key, the retry sent from Redis included.
    assert sorted({product_id for product_id, _ in api.seen}) == list(range(1, END + 1))
    assert [product_id for product_id, _ in api.seen].count(RETRIED) == 2
    assert {header for _, header in api.seen} == {f"Bearer {SECRET}"}
    # Not logged, not even at DEBUG (the settings dump shows it masked, or not at all).
    assert SECRET not in output
    assert SECRET[:8] not in output
