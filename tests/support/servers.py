"""Servers the tests start for themselves: a MariaDB that requires TLS, a Redis over
TLS with an ACL user, and a three-master Redis Cluster.

Each runs from its own temporary directory on fixed ports of this project's
test range (27000-27999), started once per session by the fixtures in
``conftest.py``. Certificates are made at start with ``cryptography``. A
missing server binary fails the test that needs it, naming the binary; it
never skips.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from redis.cluster import RedisCluster

from tests.support.ports import offset

if TYPE_CHECKING:
    from collections.abc import Callable

#: Moves every port so that two checkouts, and pytest-xdist's workers, have ports of their own.
_OFFSET = offset()
MARIADB_TLS_PORT = 27306 + _OFFSET
REDIS_TLS_PORT = 27379 + _OFFSET
CLUSTER_PORTS = tuple(port + _OFFSET for port in (27001, 27002, 27003))
#: Cluster bus ports (Redis's default, port + 10000, is outside our range).
CLUSTER_BUS_OFFSET = 100
MARIADB_USER, MARIADB_PASSWORD = "crawler", "tls-db-secret"
REDIS_USER, REDIS_PASSWORD = "crawler", "tls-redis-secret"
START_TIMEOUT = 30.0
SBIN = "/usr/local/sbin:/usr/sbin:/sbin"


def binary(name: str) -> str:
    """The path of ``name``, or the test fails naming it (never skips)."""
    found = shutil.which(name) or shutil.which(name, path=SBIN)
    if found is None:
        pytest.fail(f"{name} is not installed: this test starts its own server and needs it "
                    "(.ci/run installs it)", pytrace=False)
    return found


# --- certificates ---------------------------------------------------------------

@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA that signed the servers' and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: the "wrong CA"
    localhost_cert: Path  # signed by ``ca`` for the name localhost only: the wrong host for 127.0.0.1
    localhost_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
                 issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool, usage: Any = None,
                 san: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False), critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                        critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1/localhost, one for localhost only, a client certificate, another CA."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / f"{name}.pem" for name in
             ("ca", "server_cert", "server_key", "client_cert", "client_key", "other_ca", "localhost_cert",
              "localhost_key")}
    ca_key, other_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    localhost_key = ec.generate_private_key(ec.SECP256R1())
    pem = serialization.Encoding.PEM
    paths["ca"].write_bytes(_certificate("productcrawler test CA", ca_key, "productcrawler test CA",
                                         ca_key, ca=True).public_bytes(pem))
    paths["other_ca"].write_bytes(_certificate("some other CA", other_key, "some other CA", other_key,
                                               ca=True).public_bytes(pem))
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    paths["server_cert"].write_bytes(_certificate("127.0.0.1", server_key, "productcrawler test CA", ca_key,
                                                  ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH,
                                                  san=san).public_bytes(pem))
    paths["client_cert"].write_bytes(_certificate(MARIADB_USER, client_key, "productcrawler test CA", ca_key,
                                                  ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
                                     .public_bytes(pem))
    paths["localhost_cert"].write_bytes(_certificate("localhost", localhost_key, "productcrawler test CA", ca_key,
                                                     ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH,
                                                     san=[x509.DNSName("localhost")]).public_bytes(pem))
    _write_key(paths["server_key"], server_key)
    _write_key(paths["localhost_key"], localhost_key)
    _write_key(paths["client_key"], client_key)
    return Certificates(**paths)


# --- processes ------------------------------------------------------------------

def _wait(ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} at start:\n{_tail(log)}")
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up within {START_TIMEOUT:g} s:\n{_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    except OSError:
        return "(no log)"


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class TlsMariaDB:
    """A MariaDB that refuses connections without TLS; ``crawler`` needs a client certificate."""

    directory: Path
    certs: Certificates
    port: int = MARIADB_TLS_PORT
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.directory / "mysqld.sock"

    def start(self) -> None:
        install_db, mariadbd = binary("mariadb-install-db"), binary("mariadbd")
        data = self.directory / "data"
        log = self.directory / "error.log"
        subprocess.run([install_db, "--no-defaults", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-log-file-size=8M"],
                       check=True, capture_output=True, timeout=120)
        self.process = subprocess.Popen(
            [mariadbd, "--no-defaults", f"--datadir={data}", f"--port={self.port}", "--bind-address=127.0.0.1",
             f"--socket={self.socket}", f"--pid-file={self.directory / 'mysqld.pid'}", "--user=root",
             f"--log-error={log}", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
             "--innodb-log-file-size=8M",
             f"--ssl-ca={self.certs.ca}", f"--ssl-cert={self.certs.server_cert}",
             f"--ssl-key={self.certs.server_key}", "--require-secure-transport=ON"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: self.admin("SELECT 1") is not None, self.process, "mariadbd", log)
        self.admin(f"CREATE USER '{MARIADB_USER}'@'%' IDENTIFIED BY '{MARIADB_PASSWORD}' REQUIRE X509")
        self.admin(f"GRANT ALL PRIVILEGES ON *.* TO '{MARIADB_USER}'@'%'")

    def admin(self, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Run ``sql`` as root over the Unix socket (no TLS needed there)."""
        connection = pymysql.connect(unix_socket=str(self.socket), user="root", password="",
                                     connect_timeout=2)
        try:
            cursor = connection.cursor()
            cursor.execute(sql, params)
            rows = list(cursor.fetchall())
            connection.commit()
            return rows
        finally:
            connection.close()

    def url(self, database: str, *, ca: Path | None = None, verify_identity: bool = True) -> str:
        """A DATABASE_URL over TLS with the client certificate (and checking the host name)."""
        return (f"mysql://{MARIADB_USER}:{MARIADB_PASSWORD}@127.0.0.1:{self.port}/{database}"
                f"?ssl_ca={ca or self.certs.ca}&ssl_cert={self.certs.client_cert}&ssl_key={self.certs.client_key}"
                + ("&ssl_verify_identity=true" if verify_identity else ""))

    def stop(self) -> None:
        if self.process is not None:
            stop([self.process])
        shutil.rmtree(self.directory / "data", ignore_errors=True)  # ~25 MB, of no use afterwards


def _redis_process(arguments: list[str], directory: Path) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([binary("redis-server"), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(directory), "--logfile", str(directory / "redis.log"), *arguments],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@dataclass
class TlsRedis:
    """A Redis that speaks TLS only; the default user is off, ``crawler`` has a password."""

    directory: Path
    certs: Certificates
    port: int = REDIS_TLS_PORT
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = _redis_process(
            ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(self.certs.server_cert),
             "--tls-key-file", str(self.certs.server_key), "--tls-ca-cert-file", str(self.certs.ca),
             "--tls-auth-clients", "no", "--user", "default", "off",
             "--user", REDIS_USER, "on", f">{REDIS_PASSWORD}", "~*", "&*", "+@all"], self.directory)
        _wait(lambda: self.client().ping(), self.process, "redis-server --tls-port", self.directory / "redis.log")

    def url(self, *, ca: Path | None = None) -> str:
        return (f"rediss://{REDIS_USER}:{REDIS_PASSWORD}@127.0.0.1:{self.port}/0"
                f"?ssl_ca_certs={ca or self.certs.ca}")

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url(), socket_connect_timeout=2)

    def stop(self) -> None:
        if self.process is not None:
            stop([self.process])


@dataclass
class RedisClusterServers:
    """Three masters, slots split by ``redis-cli --cluster create``, no replicas."""

    directory: Path
    ports: tuple[int, ...] = CLUSTER_PORTS
    processes: list[subprocess.Popen[bytes]] | None = None

    def start(self) -> None:
        self.processes = []
        for port in self.ports:
            node = self.directory / str(port)
            self.processes.append(_redis_process(
                ["--port", str(port), "--cluster-enabled", "yes", "--cluster-port", str(port + CLUSTER_BUS_OFFSET),
                 "--cluster-config-file", str(node / "nodes.conf")], node))
        for port, process in zip(self.ports, self.processes):
            _wait(redis.Redis(port=port, socket_connect_timeout=1).ping, process, f"redis-server :{port}",
                  self.directory / str(port) / "redis.log")
        subprocess.run([binary("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)

        def every_node_ok() -> bool:
            return all(redis.Redis(port=p).cluster("INFO")["cluster_state"] == "ok" for p in self.ports)

        _wait(every_node_ok, self.processes[0], "Redis Cluster", self.directory / str(self.ports[0]) / "redis.log")

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}/0"

    def client(self) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self.ports[0])

    def node_keys(self, pattern: str) -> dict[int, list[str]]:
        """Keys matching ``pattern`` on each node, by port."""
        return {port: sorted(k.decode() for k in redis.Redis(port=port).scan_iter(pattern, count=1000))
                for port in self.ports}

    def stop(self) -> None:
        if self.processes:
            stop(self.processes)


# --- a Prometheus Pushgateway (Debian's prometheus-pushgateway) ---------------------

_PUSHGATEWAY_ADDRESS = re.compile(r'msg="Listening on" address=(127\.0\.0\.1:\d+)')


class Pushgateway:
    """The real Pushgateway on an ephemeral port of 127.0.0.1 (it logs the address it got), in memory only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        log = self.directory / "pushgateway.log"
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [binary("prometheus-pushgateway"), "--web.listen-address=127.0.0.1:0", "--persistence.file=",
                 "--web.enable-admin-api"], stdout=output, stderr=subprocess.STDOUT)

        def listening() -> bool:
            found = _PUSHGATEWAY_ADDRESS.search(log.read_text(errors="replace"))
            if found:
                self.url = f"http://{found[1]}"
            return found is not None

        _wait(listening, self.process, "prometheus-pushgateway", log)

    def metrics(self) -> str:
        """The text of its /metrics: every series pushed to it, and its own."""
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{self.url}/metrics",
                                                                             timeout=10) as answer:
            return answer.read().decode()

    def wipe(self) -> None:
        """Delete every pushed group (its admin API)."""
        request = urllib.request.Request(f"{self.url}/api/v1/admin/wipe", method="PUT")
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10).close()

    def stop(self) -> None:
        if self.process is not None:
            stop([self.process])
