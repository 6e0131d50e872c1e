"""API_KEY: sent at send time, never stored in Redis, never in a crawl's log or stats.

The simulator records no headers, so the first crawl here talks to a small API
of the test's own that serves the simulator's catalogue and records each
request's Authorization header. Id RETRIED answers 429 with Retry-After the
first time, so a retry of it waits in Redis while the test reads every key of
the crawl's prefix. The others send the key where a message may quote it: in
the URL (API_AUTH=query:NAME), to an API that answers what aiohttp cannot parse
(its error quotes the URL sent) and to one that refuses the key (the guard's
stop line names the URL).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import pytest
import redis

from productcrawler.config import ConfigError, CrawlConfig
from simulator import catalog
from tests.support.catalogue import CATALOG_VERSION, assert_pass_complete
from tests.support.crawls import crawl_env, finish, run_crawl, start_crawl
from tests.support.logs import log_lines
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


#: Sent in the URL, where aiohttp's errors and a log line's URL could carry it.
IN_THE_QUERY = {"API_AUTH": "query:apiKey", "API_KEY": SECRET, "LOG_LEVEL": "DEBUG"}


def assert_key_not_in(output: str) -> None:
    for piece in (SECRET, SECRET[:8], SECRET[-8:]):
        assert piece not in output, piece


class _Garbled(BaseHTTPRequestHandler):
    """Every answer has a Content-Length aiohttp cannot parse: its error quotes the URL it sent."""

    def do_GET(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def garbled_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbled)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_key_in_the_url_is_masked_in_the_errors_that_quote_it(garbled_api, tmp_path):
    settings = {"API_BASE_URL": garbled_api, "DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "MAX_RETRIES": 1,
                **IN_THE_QUERY}
    result = run_crawl("-a", "end_id=3", settings=settings, timeout=120)
    output = result.stderr + result.stdout
    # aiohttp's message, with the URL sent, is in the log (the failure's DEBUG line): masked.
    assert "apiKey=***" in output, output[-3000:]
    assert "Dumping Scrapy stats" in output, output[-3000:]
    assert_key_not_in(output)


def test_a_refused_key_is_not_in_the_guards_stop_line(clean_simulator, tmp_path):
    clean_simulator.set_faults([], api_key="the-right-key")
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
                **IN_THE_QUERY}
    result = run_crawl(settings=settings, timeout=120)
    assert result.returncode == 3, result.stderr[-3000:]
    stop, = [line for line in log_lines(result.stderr, "ERROR") if "Stopping the crawl" in line]
    assert "HTTP 401/403" in stop and "/v1/product/" in stop and "check API_KEY (set)" in stop, stop
    assert_key_not_in(result.stderr + result.stdout)


def test_the_key_is_read_from_api_key_file_and_sent(api, mysql_url, tmp_path):
    """A Docker or Kubernetes secret: a file with the key and a trailing newline, named in the environment."""
    key_file = tmp_path / "api_key"
    key_file.write_text(f"{SECRET}\n")
    result = run_crawl("-a", "end_id=3", settings={"API_BASE_URL": api.base_url, "DATABASE_URL": mysql_url},
                       env=crawl_env(API_KEY_FILE=str(key_file)), timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert {authorization for _, authorization in api.seen} == {f"Bearer {SECRET}"}
    assert SECRET not in result.stderr


@pytest.mark.parametrize(("content", "key"), [
    (b"k3y\n", "k3y"), (b"k3y\r\n", "k3y"), (b"k3y", "k3y"), (b"user:pa ss\n", "user:pa ss")])
def test_api_key_file_gives_the_key_without_its_trailing_newline(tmp_path, content, key):
    path = tmp_path / "key"
    path.write_bytes(content)
    assert CrawlConfig.from_settings({"API_KEY_FILE": str(path)}).api.key == key


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read the file: No such file or directory"),
    (b"", "is empty"), (b"\n", "is empty"), (b"\xff\xfe", "is not UTF-8 text"),
    (b"k" * 70_000, "is larger than 65536 bytes"),
])
def test_an_unusable_api_key_file_stops_the_crawl_at_start(tmp_path, content, says):
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({"API_KEY_FILE": str(path)})
    assert str(error.value).startswith(f"API_KEY_FILE={str(path)!r}") and says in str(error.value), error.value


def test_api_key_and_api_key_file_together_exit_2_without_showing_the_key(tmp_path):
    path = tmp_path / "key"
    path.write_text("from-the-file\n")
    result = run_crawl(env=crawl_env(API_KEY=SECRET, API_KEY_FILE=str(path)), timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "API_KEY and API_KEY_FILE" in result.stderr and "give the key once" in result.stderr
    assert SECRET not in result.stderr and "from-the-file" not in result.stderr
