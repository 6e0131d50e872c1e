"""Rented services: a MySQL that requires TLS, a Redis over TLS with an ACL user, a Redis Cluster.

The servers are the tests' own (``tests/support/servers.py``, started once per
session); the crawls are the real ``scrapy crawl products``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import pytest
from scrapy.settings import Settings

from productcrawler.config import ConfigError, CrawlConfig, mask_url
from productcrawler.storage.database import ensure_schema
from productcrawler.storage.target import DatabaseTarget
from simulator import catalog
from tests.support.crawls import ROOT, crawl_env, run_crawl, start_crawl, wait_for
from tests.support.servers import CLUSTER_PORTS, MARIADB_PASSWORD, REDIS_PASSWORD
from tests.support.services import mysql_query
from tests.support.tcp_proxy import TcpProxy

SECRET = "s3cr3t-pw"
TLS_END = 1000
CLUSTER_END = 3000


def present(end: int) -> list[int]:
    return [i for i in range(1, end + 1) if not catalog.is_missing(i)]


def progress(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scrapy", "progress"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The configuration error: one line (Scrapy's start-up banner may precede it), no traceback."""
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("productcrawler: configuration error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


# --- configuration: every option checked, none dropped, secrets masked -------------------

@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "very-private-client-key.pem"
    path.write_text("not read: the option is refused first")
    return path


def bad_urls(key: str, ca: str) -> list[tuple[dict[str, str], list[str]]]:
    db = f"mysql://u:{SECRET}@db.internal:3306/shop"
    return [
        ({"DATABASE_URL": f"{db}?ssl_key={key}&sslca={ca}"}, ["DATABASE_URL", "unknown option 'sslca'", "ssl_ca"]),
        ({"DATABASE_URL": f"{db}?ssl_key={key}&ssl_verify_cert=maybe"}, ["ssl_verify_cert='maybe'", "boolean"]),
        ({"DATABASE_URL": f"{db}?ssl_ca=/no/such/ca.pem"}, ["ssl_ca='/no/such/ca.pem'", "not a readable file"]),
        ({"DATABASE_URL": f"{db}?ssl_ca={ca}&ssl_ca={ca}"}, ["'ssl_ca' twice"]),
        ({"DATABASE_URL": f"{db}?ssl_key_password={SECRET}&charset=latin1"}, ["unknown option 'charset'"]),
        ({"DATABASE_URL": "sqlite:///data/x.db?mode=ro"}, ["sqlite:/// takes no options"]),
        ({"REDIS_URL": f"rediss://u:{SECRET}@r.internal:6380/0?ssl_keyfile={key}&ssl_ca_cert={ca}"},
         ["REDIS_URL", "unknown option 'ssl_ca_cert'", "ssl_ca_certs"]),
        ({"REDIS_URL": f"redis://u:{SECRET}@r.internal:6379/0?ssl_ca_certs={ca}"}, ["ssl_ca_certs without TLS",
                                                                                   "rediss://"]),
        ({"REDIS_URL": "rediss://r.internal:6380/0?ssl_cert_reqs=sometimes"}, ["ssl_cert_reqs='sometimes'"]),
        ({"REDIS_URL": "redis://r.internal:6379/0?health_check_interval=-5"},
         ["health_check_interval='-5'", "must be 0 (off) or more"]),
        ({"REDIS_URL": "redis+cluster://r.internal:7000/2"}, ["Redis Cluster has database 0 only"]),
        ({"REDIS_URL": "redis://r.internal:6379/0", "REDIS_KEY_PREFIX": "shop{1}"},
         ["REDIS_KEY_PREFIX='shop{1}'", "must not contain"]),
    ]


@pytest.mark.parametrize("case", range(12))
def test_every_url_option_is_checked_and_secrets_stay_masked(case, key_file, certificates):
    settings, words = bad_urls(str(key_file), str(certificates.ca))[case]
    with pytest.raises(ConfigError) as raised:
        CrawlConfig.from_settings(Settings(settings))
    message = str(raised.value)
    for word in words:
        assert word in message
    assert SECRET not in message
    assert str(key_file) not in message


def test_an_unknown_option_stops_the_crawl_at_start_with_one_line(tmp_path, key_file):
    url = f"mysql://u:{SECRET}@127.0.0.1:3306/shop?ssl_key={key_file}&ssl_mode=REQUIRED"
    result = run_crawl(env=crawl_env(DATABASE_URL=url), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "DATABASE_URL" in line and "unknown option 'ssl_mode'" in line
    assert SECRET not in line and str(key_file) not in line and "ssl_key=***" in line


@pytest.mark.parametrize(("url", "shown"), [
    ("mysql://u:pw@db/shop?ssl_ca=/ca.pem&ssl_key=/k.pem&ssl_key_password=x",
     "mysql://u:***@db/shop?ssl_ca=/ca.pem&ssl_key=***&ssl_key_password=***"),
    ("rediss://u:pw@r:6380/0?ssl_keyfile=/k.pem&ssl_ca_certs=/ca.pem",
     "rediss://u:***@r:6380/0?ssl_keyfile=***&ssl_ca_certs=/ca.pem"),
    ("sqlite:///data/x.db", "sqlite:///data/x.db"),
])
def test_mask_url_hides_key_paths_and_passwords(url, shown):
    assert mask_url(url) == shown


@pytest.mark.parametrize("spelling", ["1", "true", "yes", "on", "0", "false", "no", "off", "False", "OFF"])
def test_a_redis_boolean_option_means_to_redis_what_the_check_accepted(spelling):
    """redis-py reads the URL's options itself: a spelling the check accepts must mean the same there."""
    from redis.connection import parse_url

    url = f"rediss://r.internal:6380/0?ssl_check_hostname={spelling}"
    try:
        CrawlConfig.from_settings(Settings({"REDIS_URL": url}))
    except ConfigError as error:
        assert spelling.lower() not in ("true", "false"), error  # the documented spellings work
        assert "ssl_check_hostname" in str(error) and "boolean" in str(error)
        return
    expected = spelling.lower() in ("1", "true", "yes", "on")
    assert parse_url(url)["ssl_check_hostname"] is expected


@pytest.mark.parametrize(("name", "url"), [
    ("DATABASE_URL", f"mysql://u@db.internal:3306/shop?passwd={SECRET}"),  # PyMySQL's own alias
    ("DATABASE_URL", f"mysql://u@db.internal:3306/shop?ssl_verify_cert=true&ssl_key_pass={SECRET}"),
    ("REDIS_URL", f"redis://r.internal:6379/0?auth_token={SECRET}"),
])
def test_the_value_of_an_unknown_option_is_masked_too(name, url):
    """An option we do not know may hold a secret: the line names it, never shows its value."""
    with pytest.raises(ConfigError, match="unknown option") as raised:
        CrawlConfig.from_settings(Settings({name: url}))
    assert SECRET not in str(raised.value)
    assert SECRET not in mask_url(url)


@pytest.mark.parametrize(("query", "verified", "host_checked"), [
    ("ssl_verify_cert=true", True, True),  # TLS asked for: both checks unless one is turned off
    ("ssl_verify_cert=true&ssl_verify_identity=true", True, True),  # a certificate from a public CA
    ("ssl_verify_identity=true", True, True),
    ("ssl_verify_cert=true&ssl_verify_identity=false", True, False),
    ("ssl_verify_cert=false", False, False),
    ("ssl_verify_cert=false&ssl_verify_identity=true", True, True),  # a name is checked on a verified chain
    ("ssl_ca={ca}", True, True),  # before, PyMySQL checked the chain but not the name
    ("ssl_ca={ca}&ssl_verify_identity=false", True, False),
])
def test_tls_verification_options_reach_the_tls_context(query, verified, host_checked, certificates):
    """TLS asked for is verified, chain and host name: against ssl_ca, else the system's CAs.

    PyMySQL itself turns the host name check off whenever no CA file is given,
    and leaves it off with one unless ssl_verify_identity says otherwise.
    """
    import ssl

    import pymysql

    target = DatabaseTarget.from_url(f"mysql://u:p@db.example.com:3306/shop?{query.format(ca=certificates.ca)}")
    connection = pymysql.connect(defer_connect=True, **target.connect_kwargs)  # the context it would use
    assert connection.ctx.verify_mode == (ssl.CERT_REQUIRED if verified else ssl.CERT_NONE)
    assert connection.ctx.check_hostname is host_checked


# --- a MySQL that requires TLS ------------------------------------------------------------

@pytest.fixture
def tls_database(tls_mariadb):
    name = f"pc_tls_{uuid.uuid4().hex[:12]}"
    tls_mariadb.admin(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    yield name
    tls_mariadb.admin(f"DROP DATABASE IF EXISTS {name}")


def test_a_crawl_through_tls_mysql_and_tls_redis_stores_every_product(clean_simulator, tls_mariadb,
                                                                      tls_database, tls_redis, certificates):
    env = crawl_env(DATABASE_URL=tls_mariadb.url(tls_database), REDIS_URL=tls_redis.url(),
                    REDIS_KEY_PREFIX=f"pctls:{uuid.uuid4().hex[:8]}")
    result = run_crawl("-a", f"end_id={TLS_END}", settings={"API_BASE_URL": clean_simulator.base_url,
                                                             "MAX_REQUESTS_PER_SECOND": 1000}, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    stored = [row[0] for row in tls_mariadb.admin(f"SELECT product_id FROM {tls_database}.products "
                                                  "ORDER BY product_id")]
    assert stored == present(TLS_END)
    assert sorted({a[1] for a in clean_simulator.arrivals()}) == list(range(1, TLS_END + 1))
    assert "Redis bucket" in output  # the shared rate limit went through the TLS Redis too
    # The pass lived in the TLS Redis: `scrapy progress` reads it through the same factory.
    shown = progress(env)
    assert shown.returncode == 0, shown.stderr
    assert f"(finished): {TLS_END}/{TLS_END} ids done" in shown.stdout
    for secret in (MARIADB_PASSWORD, REDIS_PASSWORD, str(certificates.client_key)):
        assert secret not in output + shown.stdout + shown.stderr


def test_the_unix_socket_option_connects_through_the_socket(tls_mariadb, tls_database):
    # root@localhost exists for socket connections only, and TCP would need TLS.
    target = DatabaseTarget.from_url(f"mysql://root@localhost/{tls_database}?unix_socket={tls_mariadb.socket}")
    connection = target.connect()
    try:
        ensure_schema(connection.cursor(), target.dialect)
        connection.commit()
    finally:
        connection.close()
    assert ("products",) in tls_mariadb.admin(f"SHOW TABLES FROM {tls_database}")


def test_mysql_with_the_wrong_ca_fails_at_start_naming_tls(tls_mariadb, tls_database, certificates):
    # ssl_ca alone, as most users write it: naming a CA means verifying with it.
    url = tls_mariadb.url(tls_database, ca=certificates.other_ca, verify_identity=False)
    result = run_crawl(env=crawl_env(DATABASE_URL=url), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "DATABASE_URL" in line and "TLS handshake failed" in line and "ssl_ca" in line
    assert MARIADB_PASSWORD not in line and str(certificates.client_key) not in line


def test_mysql_whose_certificate_names_another_host_fails_at_start(tls_mariadb, tls_database, certificates):
    # The right CA, the URL as users write it (ssl_ca, no ssl_verify_identity), but the server is reached
    # at 127.0.0.2, which its certificate (127.0.0.1, localhost) does not name.
    with TcpProxy("127.0.0.1", tls_mariadb.port, host="127.0.0.2") as forward:
        url = tls_mariadb.url(tls_database, verify_identity=False).replace(
            f"@127.0.0.1:{tls_mariadb.port}/", f"@127.0.0.2:{forward.port}/")
        result = run_crawl(env=crawl_env(DATABASE_URL=url), timeout=60)
        assert forward.accepted >= 1  # it was reached, and refused for its certificate
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "DATABASE_URL" in line and "TLS handshake failed" in line and "IP address mismatch" in line, line


def test_redis_whose_certificate_names_another_host_fails_at_start(tmp_path, tls_redis):
    # redis-py checks the host name of a rediss:// URL by default (ssl_check_hostname); shown, not assumed.
    with TcpProxy("127.0.0.1", tls_redis.port, host="127.0.0.2") as forward:
        url = tls_redis.url().replace(f"@127.0.0.1:{tls_redis.port}/", f"@127.0.0.2:{forward.port}/")
        result = run_crawl(env=crawl_env(DATABASE_URL=f"sqlite:///{tmp_path}/x.db", REDIS_URL=url), timeout=60)
        assert forward.accepted >= 1
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "REDIS_URL" in line and "TLS handshake failed" in line and "IP address mismatch" in line, line


def test_redis_with_the_wrong_ca_fails_at_start_naming_tls(tmp_path, tls_redis, certificates):
    env = crawl_env(DATABASE_URL=f"sqlite:///{tmp_path}/x.db", REDIS_URL=tls_redis.url(ca=certificates.other_ca))
    result = run_crawl(env=env, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "REDIS_URL" in line and "TLS handshake failed" in line and "ssl_ca_certs" in line
    assert REDIS_PASSWORD not in line


# --- Redis Cluster ------------------------------------------------------------------------

def stored_count(url: str) -> int:
    try:
        return mysql_query(url, "SELECT COUNT(*) FROM products")[0][0]
    except Exception:  # noqa: BLE001 - no table yet
        return 0


def test_a_crawl_on_redis_cluster_survives_kill_9_and_stores_every_product(clean_simulator, mysql_url,
                                                                           redis_cluster, capsys):
    prefix = f"pccluster:{uuid.uuid4().hex[:8]}"
    env = crawl_env(DATABASE_URL=mysql_url, REDIS_URL=redis_cluster.url, REDIS_KEY_PREFIX=prefix)
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 1000}
    began = time.monotonic()
    first = start_crawl("-a", f"end_id={CLUSTER_END}", settings=settings, env=env)
    wait_for(lambda: stored_count(mysql_url) >= 800, first, "800 products were stored")
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    killed_after = time.monotonic() - began
    second = run_crawl("-a", f"end_id={CLUSTER_END}", settings=settings, env=env)
    elapsed = time.monotonic() - began
    output = second.stdout + second.stderr
    assert second.returncode == 0, output[-3000:]
    assert "Joined pass 1" in output
    assert "Recovered" in output  # the killed instance's leases, by the recover script on the cluster
    assert "Redis bucket" in output
    stored = [row[0] for row in mysql_query(mysql_url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == present(CLUSTER_END)
    fetched = [a[1] for a in clean_simulator.arrivals()]
    assert sorted(set(fetched)) == list(range(1, CLUSTER_END + 1))
    # Every key of the pass is on one node, in one slot (the prefix is their hash tag).
    by_node = {port: keys for port, keys in redis_cluster.node_keys(f"{{{prefix}}}*").items() if keys}
    assert len(by_node) == 1, by_node
    client = redis_cluster.client()
    keys = next(iter(by_node.values()))
    assert len({client.keyslot(key) for key in keys}) == 1, keys
    client.close()
    shown = progress(env)
    assert shown.returncode == 0, shown.stderr
    assert f"(finished): {CLUSTER_END}/{CLUSTER_END} ids done" in shown.stdout
    with capsys.disabled():
        print(f"\nREDIS CLUSTER CRAWL: {CLUSTER_END} ids, killed (-9) after {killed_after:.1f} s, complete "
              f"after {elapsed:.1f} s in all; {len(fetched)} requests, "
              f"{len(fetched) - len(set(fetched))} ids fetched more than once")


@pytest.mark.parametrize(("url", "words"), [
    (f"redis://127.0.0.1:{CLUSTER_PORTS[0]}/0", ["is a node of a Redis Cluster", "redis+cluster://"]),
    ("redis+cluster://127.0.0.1:6379", ["cannot reach Redis", "Cluster mode is not enabled"]),
], ids=["plain-url-to-a-cluster", "cluster-url-to-a-single-server"])
def test_a_url_of_the_wrong_kind_for_the_server_fails_at_start(tmp_path, redis_cluster, url, words):
    result = run_crawl(env=crawl_env(DATABASE_URL=f"sqlite:///{tmp_path}/x.db", REDIS_URL=url), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    for word in words:
        assert word in line


# --- PostgreSQL over TLS: the session's server offers the test CA's certificate for 127.0.0.1 ----------


def test_postgresql_with_ssl_ca_verifies_the_certificate_and_stores(postgres_server, postgresql_url, certificates,
                                                                     clean_simulator):
    url = f"{postgresql_url}?ssl_ca={certificates.ca}"
    result = run_crawl("-a", "end_id=5", env=crawl_env(DATABASE_URL=url, API_BASE_URL=clean_simulator.base_url),
                       timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    name = postgresql_url.rsplit("/", 1)[1]
    ((stored, failed),) = postgres_server.admin("SELECT stored, failed FROM crawl_passes", database=name)
    assert stored > 0 and failed == 0
    assert postgres_server.admin("SELECT COUNT(*) FROM products", database=name) == [(stored,)]


def test_postgresql_with_the_wrong_ca_fails_at_start_naming_tls(postgresql_url, certificates):
    result = run_crawl(env=crawl_env(DATABASE_URL=f"{postgresql_url}?ssl_ca={certificates.other_ca}"), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "DATABASE_URL" in line and "certificate verify failed" in line, line


def test_postgresql_whose_certificate_names_another_host_fails_at_start(postgres_server, postgresql_url,
                                                                        certificates):
    # The right CA, but the server is reached at 127.0.0.2, which its certificate (127.0.0.1, localhost)
    # does not name: ssl_ca means verify-full, as for MySQL.
    with TcpProxy("127.0.0.1", postgres_server.port, host="127.0.0.2") as forward:
        url = postgresql_url.replace(f"@127.0.0.1:{postgres_server.port}/", f"@127.0.0.2:{forward.port}/")
        result = run_crawl(env=crawl_env(DATABASE_URL=f"{url}?ssl_ca={certificates.ca}"), timeout=60)
        assert forward.accepted >= 1
    assert result.returncode == 2, result.stderr[-2000:]
    line = one_line(result)
    assert "DATABASE_URL" in line and "127.0.0.2" in line and "does not match" in line, line
