"""proxy.py (abhinavsingh/proxy.py, pinned in requirements-dev.txt), run as a subprocess:
an HTTP proxy we did not write, to check our client against.

``ProxyPy`` starts ``python -m proxy`` on port 0 of 127.0.0.1 (it writes the
port it got to ``--port-file``) with Basic credentials, one acceptor, and its
data and cache directories in the test's own temporary directory. It runs in
a session of its own: proxy.py forks an acceptor process that holds the
listening socket, so ``kill()`` SIGKILLs the whole group (killing the parent
alone leaves the acceptor serving).

proxy.py's access log has one line per *client connection*, naming only its
first request: useless to see what a kept-alive connection carried. The
``RecordRequests`` plugin (loaded by proxy.py with ``--plugins``; it only
observes) logs one ``forwarded METHOD PATH`` line per request proxy.py sends
upstream, kept-alive ones included; ``ProxyPy.forwarded()`` reads them back.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from proxy.http.proxy import HttpProxyBasePlugin

if TYPE_CHECKING:
    from pathlib import Path

    from proxy.http.parser import HttpParser

logger = logging.getLogger(__name__)

START_TIMEOUT = 20.0
_FORWARDED = re.compile(r" forwarded (\S+) (\S+)$", re.MULTILINE)


class RecordRequests(HttpProxyBasePlugin):
    """Runs inside proxy.py: one log line per request it forwards (after its own auth check)."""

    def handle_client_request(self, request: HttpParser) -> HttpParser:
        method = (request.method or b"?").decode("latin-1")
        path = (request.path or b"?").decode("latin-1")
        logger.info("forwarded %s %s", method, path)
        return request


class ProxyPy:
    def __init__(self, directory: Path, *, user: str, password: str) -> None:
        self.directory = directory
        self.user = user
        self.password = password
        self.log = directory / "proxy.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ProxyPy:
        from tests.support.crawls import ROOT

        port_file = self.directory / "port"
        port_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0",
                   "--port-file", str(port_file), "--basic-auth", f"{self.user}:{self.password}",
                   "--num-workers", "1", "--num-acceptors", "1", "--log-level", "INFO",
                   "--data-dir", str(self.directory / "data"), "--cache-dir", str(self.directory / "cache"),
                   "--plugins", f"{__name__}.{RecordRequests.__name__}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        give_up = time.monotonic() + START_TIMEOUT
        while not self._accepts(port_file):
            if self.process.poll() is not None or time.monotonic() > give_up:
                self.kill()
                raise RuntimeError(f"proxy.py did not start: {' '.join(command)}\n"
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        return self

    def _accepts(self, port_file: Path) -> bool:
        try:
            self.port = int(port_file.read_text().split()[0])
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except (OSError, ValueError, IndexError):  # not written yet, half written, not listening yet
            return False
        return True

    def url(self, *, password: str | None = None) -> str:
        return f"http://{self.user}:{password or self.password}@127.0.0.1:{self.port}"

    @staticmethod
    def port_of(url: str) -> int:
        return int(url.rsplit(":", 1)[1])

    def forwarded(self) -> list[str]:
        """Paths of the requests proxy.py forwarded upstream, in order."""
        return [path for _method, path in _FORWARDED.findall(self.log.read_text(errors="replace"))]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL proxy.py and its acceptor (a dead host, not a shutdown)."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)
