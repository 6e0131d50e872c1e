"""A PostgreSQL server the tests start for themselves (Debian's postgresql package).

``initdb`` into a temporary directory, then ``postgres`` on a fixed port of the
test range (27432, moved by ``ports.offset()``), once per session
(``conftest.py``'s ``postgres_server``), with TLS on when given the tests'
certificates (a certificate for 127.0.0.1 and localhost, signed by the test CA):
plain connections still work, and a ``DATABASE_URL`` with ``ssl_ca`` verifies
it. PostgreSQL refuses to run as root: as
root, the server runs as the ``postgres`` user the package creates. A missing
binary fails the test that needs it, naming it; it never skips.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import offset

POSTGRES_PORT = 27432 + offset()
#: Debian's layout: the server programs are not on PATH.
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
START_TIMEOUT = 30.0


def _as_server_user() -> list[str]:
    # setpriv execs the program itself, so that signals reach postgres, not a wrapper.
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"] if os.geteuid() == 0 else []


@dataclass
class PostgresServer:
    port: int = POSTGRES_PORT
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pc-postgres-")))
    process: subprocess.Popen[bytes] | None = None
    #: (certificate, key) the server offers TLS with; None: no TLS.
    tls: tuple[Path, Path] | None = None

    def start(self) -> None:
        for program in ("initdb", "postgres"):
            if not (POSTGRES_BIN / program).exists():
                pytest.fail(f"{POSTGRES_BIN / program} is not installed: the PostgreSQL tests start their own "
                            "server (.ci/run installs the postgresql package)", pytrace=False)
        data = self.directory / "data"
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        subprocess.run([*_as_server_user(), str(POSTGRES_BIN / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"],
                       check=True, capture_output=True, timeout=120)
        log = self.directory / "postgres.log"
        self.process = subprocess.Popen(
            [*_as_server_user(), str(POSTGRES_BIN / "postgres"), "-D", str(data), "-p", str(self.port),
             "-k", str(self.directory), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", f"log_directory={self.directory}", "-c", "logging_collector=off", *self._tls_options()],
            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.admin("SELECT 1")
                return
            except Exception as error:  # noqa: BLE001 - not up yet
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not start ({error}): {log.read_text()[-2000:]}") from None
                time.sleep(0.1)

    def _tls_options(self) -> list[str]:
        if self.tls is None:
            return []
        # The server reads its key as its own user and refuses one others may read.
        certificate, key = self.directory / "server.crt", self.directory / "server.key"
        shutil.copyfile(self.tls[0], certificate)
        shutil.copyfile(self.tls[1], key)
        key.chmod(0o600)
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (certificate, key):
                os.chown(path, user.pw_uid, user.pw_gid)
        return ["-c", "ssl=on", "-c", f"ssl_cert_file={certificate}", "-c", f"ssl_key_file={key}"]

    def admin(self, sql: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=database,
                             autocommit=True, connect_timeout=2) as connection:
            cursor = connection.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: SIGTERM's would wait for the clients
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
