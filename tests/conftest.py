"""Shared fixtures: the real MariaDB and Redis of this machine, the simulator, a crawl runner.

Each test gets its own MySQL database and Redis key prefix. If MariaDB or
Redis can't be reached the whole session fails (it never skips): integration
tests that quietly did not run would say nothing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import redis

from simulator.process import SimulatorProcess

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
#: The Redis every test uses (REDIS_TEST_URL points them all elsewhere: the start-up check and
#: the key clean-up included).
REDIS_URL = os.environ.get("REDIS_TEST_URL", "redis://127.0.0.1:6379/0")
#: Pinned so that expected products don't change when the hour does.
CATALOG_VERSION = 490000


REACTOR_LOOP: asyncio.AbstractEventLoop | None = None

#: Under pytest-xdist (``make test`` runs most of the suite on several workers) each
#: worker moves the fixed ports of the servers tests start (tests/support/servers.py,
#: test_rate_redis_stall.py) by this much more than the worker before it, on top of
#: TEST_SERVER_PORT_OFFSET, so that each worker's session servers have ports of their
#: own. 10 works for up to 8 workers: no two of those ports (27001-27003, their cluster
#: bus ports 27101-27103, 27306, 27379, 27400) differ by 10, 20, ... 70. Every port
#: stays below 27500, so a second checkout at TEST_SERVER_PORT_OFFSET=500 never meets them.
WORKER_PORT_STRIDE = 10


def _worker_port_offset() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1"... set by pytest-xdist before conftest loads
    if worker is None:
        return
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 8:
        raise pytest.UsageError("at most 8 pytest-xdist workers: a 9th would share ports with the first "
                                "(tests/conftest.py, WORKER_PORT_STRIDE)")
    base = int(os.environ.get("TEST_SERVER_PORT_OFFSET", "0"))
    os.environ["TEST_SERVER_PORT_OFFSET"] = str(base + WORKER_PORT_STRIDE * int(worker.removeprefix("gw")))


def pytest_configure(config: pytest.Config) -> None:
    # Before any test module reads TEST_SERVER_PORT_OFFSET (they do at import).
    _worker_port_offset()
    # The crawl's reactor, installed before any test module imports
    # twisted.internet.reactor (which would install the default one): Scrapy's
    # get_crawler() builds its settings for whichever reactor is installed, so
    # without this a component's reactor check depends on the order of the tests.
    from scrapy.utils.reactor import install_reactor

    from productcrawler import settings

    # And its event loop: Scrapy refuses a crawler whose ASYNCIO_EVENT_LOOP
    # differs from the installed one. That loop is also the one unit tests of
    # the pass and scheduler run on (tests.support.helpers.on_reactor_loop).
    install_reactor(settings.TWISTED_REACTOR, settings.ASYNCIO_EVENT_LOOP)
    from twisted.internet import reactor  # the one just installed

    global REACTOR_LOOP
    REACTOR_LOOP = reactor._asyncioEventloop  # Twisted keeps no public handle on it


@pytest.fixture(autouse=True)
def _reactor_loop_is_current() -> None:
    """Each test starts with the crawl's loop as the current one: a test that used ``asyncio.run``
    leaves none, and Scrapy's Deferred-to-Future conversion asks for it (the test order, which
    pytest-xdist changes, must not decide whether a test passes)."""
    if REACTOR_LOOP is not None:
        asyncio.set_event_loop(REACTOR_LOOP)


#: The files whose crawls take longest, slowest first. They run before the others: under
#: pytest-xdist each file goes whole to one worker, handed out in the order of the run,
#: so a long file left for last would keep one worker busy while the other has nothing to do.
SLOW_FILES = ("test_passes.py", "test_services_lost.py", "test_proxy_crawl.py", "test_guard.py",
              "test_rented_services.py", "test_instances_start_together.py", "test_scrapyd.py", "test_faults.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))  # stable: each file keeps its order


def pytest_sessionstart(session: pytest.Session) -> None:
    problems = []
    try:
        pymysql.connect(connect_timeout=5, **MYSQL).close()
    except Exception as error:  # noqa: BLE001
        problems.append(f"MariaDB at 127.0.0.1:3306 (root, empty password): {error}")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5).ping()
    except Exception as error:  # noqa: BLE001
        problems.append(f"Redis at {REDIS_URL}: {error}")
    if problems:
        pytest.exit("Required services are unreachable:\n  " + "\n  ".join(problems), returncode=3)


@pytest.fixture
def mysql_url() -> Iterator[str]:
    """A fresh, empty MySQL database; dropped afterwards."""
    name = f"pc_test_{uuid.uuid4().hex[:12]}"
    connection = pymysql.connect(**MYSQL)
    try:
        connection.cursor().execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        yield f"mysql://root@127.0.0.1:3306/{name}"
    finally:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS {name}")
        connection.close()


def mysql_query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    database = url.rsplit("/", 1)[1]
    connection = pymysql.connect(database=database, **MYSQL)
    try:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        connection.close()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"pctest:{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    # The pass's keys are "{prefix}:..." (the prefix is their cluster hash tag).
    keys = [key for pattern in (f"{prefix}*", f"{{{prefix}}}*") for key in client.scan_iter(pattern, count=1000)]
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorProcess]:
    with SimulatorProcess("--catalog-version", str(CATALOG_VERSION)) as sim:
        yield sim


@pytest.fixture
def clean_simulator(simulator: SimulatorProcess) -> SimulatorProcess:
    """The module's simulator with no faults and an empty arrival record."""
    return simulator.clean()


def crawl_env(**overrides: str) -> dict[str, str]:
    """The environment of a crawl subprocess: ours minus the contract's names, plus overrides."""
    from productcrawler.config import DEFAULTS

    env = {k: v for k, v in os.environ.items() if k not in DEFAULTS}
    env["PYTHONPATH"] = str(ROOT)
    env.update(overrides)
    return env


def crawl_command(*args: str, settings: dict[str, Any] | None = None) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", "products"]
    for name, value in (settings or {}).items():
        command += ["-s", f"{name}={value}"]
    return command + list(args)


def run_crawl(*args: str, settings: dict[str, Any] | None = None, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real ``scrapy crawl products`` and wait for it."""
    return subprocess.run(crawl_command(*args, settings=settings), cwd=ROOT, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def https_simulator(certificates: Any) -> Iterator[SimulatorProcess]:
    """The simulator serving https (a certificate for 127.0.0.1 from the session's test CA)."""
    with SimulatorProcess("--catalog-version", str(CATALOG_VERSION), "--tls-cert", str(certificates.server_cert),
                          "--tls-key", str(certificates.server_key), ca=certificates.ca) as simulator:
        yield simulator


@pytest.fixture
def clean_https_simulator(https_simulator: SimulatorProcess) -> SimulatorProcess:
    """The module's https simulator with no faults and an empty arrival record."""
    return https_simulator.clean()


def verifying(certificates: Any) -> dict[str, str]:
    """A crawl's environment that trusts the test CA (with DOWNLOAD_VERIFY_CERTIFICATES: a real TLS check)."""
    return crawl_env(SSL_CERT_FILE=str(certificates.ca))


# --- servers of our own: TLS MariaDB, TLS Redis, Redis Cluster (tests/support/servers.py) ---

@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.support.servers import make_certificates

    return make_certificates(tmp_path_factory.mktemp("certs"))


def _running(server: Any) -> Iterator[Any]:
    """A session fixture's body: ``server`` started, then stopped even if the start failed half-way."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tls_mariadb(tmp_path_factory: pytest.TempPathFactory, certificates: Any) -> Iterator[Any]:
    """A MariaDB on port 27306 that requires TLS (and a client certificate for ``crawler``)."""
    from tests.support.servers import TlsMariaDB

    yield from _running(TlsMariaDB(tmp_path_factory.mktemp("mariadb-tls"), certificates))


@pytest.fixture(scope="session")
def tls_redis(tmp_path_factory: pytest.TempPathFactory, certificates: Any) -> Iterator[Any]:
    """A Redis on TLS port 27379 only, with an ACL user and the default user off."""
    from tests.support.servers import TlsRedis

    yield from _running(TlsRedis(tmp_path_factory.mktemp("redis-tls"), certificates))


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three Redis Cluster masters on ports 27001-27003."""
    from tests.support.servers import RedisClusterServers

    yield from _running(RedisClusterServers(tmp_path_factory.mktemp("redis-cluster")))


@pytest.fixture(scope="session")
def pushgateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's prometheus-pushgateway on an ephemeral port of 127.0.0.1, once per session."""
    from tests.support.servers import Pushgateway

    yield from _running(Pushgateway(tmp_path_factory.mktemp("pushgateway")))


# --- local forwarding proxies (simulator.proxies) ---

#: The local proxies' credentials (the crawl must send them: they answer 407 otherwise).
PROXY_USER, PROXY_PASSWORD = "crawler", "pr0xy-s3cret"


@pytest.fixture(scope="session")
def proxy_farm() -> Iterator[Any]:
    """Three local forwarding HTTP proxies (simulator.proxies), for the whole session."""
    from simulator.proxies import ProxyFarm

    with ProxyFarm(3, user=PROXY_USER, password=PROXY_PASSWORD) as farm:
        yield farm


@pytest.fixture
def proxies(proxy_farm: Any) -> Any:
    """The session's proxies, all forwarding again, their records emptied."""
    proxy_farm.reset()
    return proxy_farm


@pytest.fixture(scope="session")
def arrival_server() -> Iterator[Any]:
    """The independent arrival clock (tests/support/arrival_server.py) with three proxy ports, once per session."""
    from tests.support.arrival_server import ArrivalServer

    with ArrivalServer(proxies=3) as server:
        yield server


@pytest.fixture
def clean_arrival_server(arrival_server: Any) -> Any:
    """The session's arrival server with an empty record and no hold mode."""
    arrival_server.reset()
    return arrival_server
