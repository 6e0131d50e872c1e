"""Run the simulator as a subprocess and drive it from synchronous code (tests, bench, scripts)."""

from __future__ import annotations

import json
import logging
import os
import queue
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

logger = logging.getLogger(__name__)

LISTENING = "SIMULATOR LISTENING"  # the line server.serve() prints
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
# 127.0.0.1 must never go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

Arrival = tuple[float, int | None, int | None, str]  # time, id, status (None: no answer), fault


class SimulatorProcess:
    """``python -m simulator --port PORT *args`` in a subprocess.

    Use as a context manager, or call ``start()`` and ``stop()``. ``args`` are
    further command-line options, e.g. ``("--catalog-version", "7", "--fault", "503=1-10@2")``.
    With ``("--tls-cert", CERT, "--tls-key", KEY)`` it serves https: pass ``ca``, the CA that
    signed CERT, for the calls made here.
    """

    def __init__(self, *args: str, host: str = "127.0.0.1", port: int = 0,
                 startup_timeout: float = 15.0, ca: str | Path | None = None) -> None:
        self.args = args
        self._opener = _OPENER if ca is None else urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._url: str | None = None

    def __enter__(self) -> SimulatorProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://host:port`` of the running simulator."""
        if self._url is None:
            raise RuntimeError("the simulator is not running")
        return self._url

    @property
    def base_url(self) -> str:
        """What the crawler's ``API_BASE_URL`` should be."""
        return f"{self.url}/v1"

    def start(self) -> SimulatorProcess:
        """Start the server and wait until it listens; raises ``RuntimeError`` if it does not."""
        if self._process is not None:
            raise RuntimeError("the simulator is already running")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (_PROJECT_ROOT, env.get("PYTHONPATH"))))
        command = [sys.executable, "-m", "simulator",
                   "--host", self.host, "--port", str(self.port), *self.args]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
        line = _read_line(self._process.stdout, self.startup_timeout)  # type: ignore[arg-type]
        if line is None or not line.startswith(LISTENING):
            status = self.stop()
            reason = (f"did not start within {self.startup_timeout:g} s" if line is None
                      else f"failed to start (exit status {status})")
            raise RuntimeError(f"simulator {' '.join(command[3:])} {reason}")
        self._url = line.split()[-1]
        logger.debug("Simulator started at %s", self._url)
        return self

    def stop(self) -> int | None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s); return its exit status."""
        process, self._process, self._url = self._process, None, None
        if process is None:
            return None
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def arrivals(self, since: float | None = None) -> list[Arrival]:
        """Every product request since ``since`` (a ``time.time()``), oldest first."""
        query = "" if since is None else "?" + urllib.parse.urlencode({"since": repr(since)})
        return [tuple(entry) for entry in self._call("GET", "/_sim/arrivals" + query)["arrivals"]]

    def stats(self) -> dict[str, Any]:
        """``{"total": n, "by_status": {"200": n, ...}, "by_fault": {"503": n, ...}}``."""
        return self._call("GET", "/_sim/stats")

    def reset(self) -> None:
        """Forget arrivals, per-id attempt counts and the rate-limit window."""
        self._call("POST", "/_sim/reset")

    def clean(self) -> SimulatorProcess:
        """No faults, the options it was started with, and an empty arrival record; returns itself."""
        self.set_faults([])
        self.reset()
        return self

    def set_faults(self, faults: Sequence[str] = (), **options: object) -> None:
        """Replace the fault configuration (options: retry_after, slow_delay, rate_limit,
        shape, api_key, revoke_after).

        Options left out take the values the server was started with; attempt
        counts start again. A rejected configuration raises ``ValueError``.
        """
        self._call("POST", "/_sim/faults", {"faults": list(faults), **options})

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with self._opener.open(request, timeout=60) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 400:
                raise ValueError(json.load(exc).get("error", "rejected")) from None
            raise


def _read_line(stream: IO[bytes], timeout: float) -> str | None:
    """The next line of ``stream``, or None after ``timeout`` seconds."""
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).decode(errors="replace").strip()
    except queue.Empty:
        return None


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if it has not exited after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
