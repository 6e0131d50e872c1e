"""Fixtures and pytest hooks: the real MariaDB and Redis of this machine, the simulator, servers of our own.

Each test gets its own MySQL database and Redis key prefix. If MariaDB or
Redis can't be reached the whole session fails (it never skips): integration
tests that quietly did not run would say nothing. Plain helpers live in
tests/support/, which test modules import from (never from here).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import redis

from simulator.process import SimulatorProcess
from tests.support import ports, reactor
from tests.support.catalogue import CATALOG_VERSION
from tests.support.services import MYSQL, PROXY_PASSWORD, PROXY_USER, REDIS_URL

if TYPE_CHECKING:
    from collections.abc import Iterator


def pytest_configure(config: pytest.Config) -> None:
    # Before any test module reads TEST_SERVER_PORT_OFFSET (they do at import).
    ports.spread_over_workers()
    # Before any test module imports twisted.internet.reactor. That loop is also the one
    # unit tests of the pass and scheduler run on (tests.support.reactor.on_reactor_loop).
    reactor.install()


@pytest.fixture(autouse=True)
def _reactor_loop_is_current() -> None:
    """Each test starts with the crawl's loop as the current one: a test that used ``asyncio.run``
    leaves none, and Scrapy's Deferred-to-Future conversion asks for it (the test order, which
    pytest-xdist changes, must not decide whether a test passes)."""
    reactor.make_current()


#: The files that take longest, slowest first (their summed --durations, measured on 2 workers).
#: They run before the others: under pytest-xdist each file goes whole to one worker, handed
#: out in the order of the run, so a long file left for last would keep one worker busy while
#: the other has nothing to do. `make test` passes --no-loadscope-reorder: without it xdist
#: hands out the files with the most tests first, whatever this order says.
SLOW_FILES = ("test_config_errors.py", "test_scrapy_conventions.py", "test_id_crawl.py", "test_pass_crawl.py",
              "test_independent_proxy.py", "test_field_drift.py", "test_cookbook.py", "test_faults.py",
              "test_id_migration.py", "test_services_lost.py", "test_storage_pipeline.py", "test_listing_crawl.py",
              "test_instances_start_together.py", "test_listing_incremental.py", "test_guard.py",
              "test_what_changed.py", "test_scrapyd.py", "test_crawl.py", "test_proxy_crawl.py",
              "test_api_shapes.py", "test_api_key.py", "test_structured_logging.py", "test_product_columns.py",
              "test_outages.py", "test_rented_services.py", "test_variants.py", "test_monitoring.py",
              "test_keep_answer.py")


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


@pytest.fixture(params=["mysql", "sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A fresh database of each kind the crawl writes to, by its DATABASE_URL (a test module may narrow it)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'products.db'}"
    return str(request.getfixturevalue(f"{request.param}_url"))


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


@pytest.fixture(scope="session")
def simulator() -> Iterator[SimulatorProcess]:
    """The simulator, started once per session (per pytest-xdist worker): a test that needs it
    as it started asks for ``clean_simulator``, which sets every option back."""
    with SimulatorProcess("--catalog-version", str(CATALOG_VERSION)) as sim:
        yield sim


@pytest.fixture
def clean_simulator(simulator: SimulatorProcess) -> SimulatorProcess:
    """The session's simulator with no faults and an empty arrival record."""
    return simulator.clean()


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
def postgres_server(certificates: Any) -> Iterator[Any]:
    """A PostgreSQL server of the session (tests/support/postgres.py), offering TLS with the test CA's certificate."""
    from tests.support.postgres import PostgresServer

    yield from _running(PostgresServer(tls=(certificates.server_cert, certificates.server_key)))


@pytest.fixture
def postgresql_url(postgres_server: Any) -> Iterator[str]:
    """A fresh, empty PostgreSQL database; dropped afterwards."""
    name = f"pc_test_{uuid.uuid4().hex[:12]}"
    postgres_server.admin(f"CREATE DATABASE {name}")
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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
