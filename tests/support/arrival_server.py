"""An independent arrival clock: a minimal raw-socket HTTP/1.1 server, not the simulator.

It shares no code with ``simulator``. Each request is
time-stamped by the kernel as its bytes arrive (``SO_TIMESTAMPNS``, read with
``recvmsg``; on loopback that is while the sender's ``send`` runs), so the
record does not depend on when this process gets the CPU: on a loaded machine
a server that stamped requests when it read them would itself bunch arrivals
that came apart. It answers ``GET /v1/product/{id}`` with a small product
JSON. Run it as a subprocess (``python tests/support/arrival_server.py``, it prints
``ARRIVAL SERVER LISTENING http://HOST:PORT``); it also asks for a higher
scheduling priority when the OS allows.

With ``--proxies N`` it also listens on N more ports (printed on a second line,
``ARRIVAL SERVER PROXIES http://HOST:PORT,...``) that take the absolute-form
``GET http://HOST:PORT/v1/product/{id}`` an HTTP proxy gets, and answer it
themselves: a crawl's ``PROXY_URLS`` pointed at them has its requests stamped
where a proxy provider counts them, at each proxy's socket.

Control routes (not recorded as arrivals):

- ``GET /_arrivals``: ``{"arrivals": [t, ...]}``, product requests since the
  last reset, in seconds of ``CLOCK_REALTIME``;
- ``POST /_reset``: forget them and end any hold mode;
- ``POST /_hold?seconds=S&every=E``: from now on, every ``E`` seconds the API
  stalls for ``S`` seconds: an answer due inside a stall is held until it ends;
- ``POST /_slow?from_id=N&seconds=S``: ids from ``N`` on are answered after ``S`` seconds.

``GET /_arrivals`` also gives ``ids``, the product id of each arrival, and
``via``, the index of the proxy port it came to (-1: the API's own port).

``ArrivalServer`` drives it from tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from typing import Any

LISTENING = "ARRIVAL SERVER LISTENING"
PROXIES = "ARRIVAL SERVER PROXIES"
PRODUCT_PATH = re.compile(rb"^GET /v1/product/(\d+) HTTP/1\.[01]$")
#: What a proxy port takes: the absolute form (``GET http://host:port/v1/...``) as well.
PROXIED_PATH = re.compile(rb"^GET (?:http://[^/ ]+)?/v1/product/(\d+) HTTP/1\.[01]$")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Linux, not exposed by the socket module: receive time stamps with nanoseconds.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")


class State:
    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.ids: list[int] = []
        self.via: list[int] = []
        self.slow_from = 0
        self.slow_seconds = 0.0
        self.hold_seconds = 0.0
        self.hold_every = 0.0
        self.hold_origin = 0.0

    def held_until(self, now: float) -> float:
        """When an answer due at ``now`` may leave (``now`` outside a stall)."""
        if self.hold_seconds <= 0:
            return now
        phase = (now - self.hold_origin) % self.hold_every
        return now if phase >= self.hold_seconds else now + self.hold_seconds - phase


def product(product_id: int) -> bytes:
    return json.dumps({"product_id": product_id, "name": f"Arrival product {product_id}",
                       "price": "19.90", "stock": product_id % 100, "category": "test",
                       "brand": "clock", "rating": 4.5, "sales_count": 7}).encode()


def response(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Connection:
    """One client connection, read with ``recvmsg`` whenever the loop sees it readable."""

    def __init__(self, sock: socket.socket, state: State, loop: asyncio.AbstractEventLoop, via: int = -1) -> None:
        self.sock, self.state, self.loop = sock, state, loop
        self.via = via  # the proxy port it came to, -1 for the API's own
        self.path = PRODUCT_PATH if via < 0 else PROXIED_PATH
        self.buffer = b""
        self.busy_until = 0.0  # answers leave in order
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        loop.add_reader(sock, self.readable)

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(TIMESPEC.size))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, ancillary = b"", []
        if not data:
            self.close()
            return
        stamp = time.time()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = TIMESPEC.unpack(payload[:TIMESPEC.size])
                stamp = seconds + nanoseconds / 1e9
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            request_line = head.split(b"\r\n", 1)[0]
            match = self.path.match(request_line)
            if match:
                product_id = int(match.group(1))
                self.state.arrivals.append(stamp)
                self.state.ids.append(product_id)
                self.state.via.append(self.via)
                slow = self.state.slow_seconds if self.state.slow_seconds and product_id >= self.state.slow_from else 0
                self.answer(response("200 OK", product(product_id)), hold=True, delay=slow)
            else:
                self.answer(self.control(request_line), hold=False)

    def answer(self, payload: bytes, *, hold: bool, delay: float = 0.0) -> None:
        now = time.monotonic()
        leave = max(self.state.held_until(now + delay) if hold else now, self.busy_until)
        if leave <= now:
            self.send(payload)
        else:
            self.busy_until = leave
            self.loop.call_at(self.loop.time() + (leave - now), self.send, payload)

    def send(self, payload: bytes) -> None:
        try:
            self.sock.sendall(payload)  # a few hundred bytes: fits the socket buffer
        except OSError:
            self.close()

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock)
            self.sock.close()

    def control(self, request_line: bytes) -> bytes:
        method, target = request_line.decode().split(" ")[:2]
        path, _, query = target.partition("?")
        params = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
        if method == "GET" and path == "/_arrivals":
            return response("200 OK", json.dumps({"arrivals": self.state.arrivals, "ids": self.state.ids,
                                                  "via": self.state.via}).encode())
        if method == "POST" and path == "/_reset":
            self.state.arrivals, self.state.ids, self.state.via = [], [], []
            self.state.hold_seconds = self.state.slow_seconds = 0.0
            return response("200 OK", b"{}")
        if method == "POST" and path == "/_hold":
            self.state.hold_seconds = float(params["seconds"])
            self.state.hold_every = float(params["every"])
            self.state.hold_origin = time.monotonic()
            return response("200 OK", b"{}")
        if method == "POST" and path == "/_slow":
            self.state.slow_from = int(params["from_id"])
            self.state.slow_seconds = float(params["seconds"])
            return response("200 OK", b"{}")
        return response("404 Not Found", b"{}")


def listen(host: str, port: int, state: State, loop: asyncio.AbstractEventLoop, via: int = -1) -> str:
    """Accept connections on ``host:port`` (0: any free port); returns its URL."""
    listener = socket.create_server((host, port), backlog=1024)
    listener.setblocking(False)

    def accept() -> None:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        Connection(sock, state, loop, via)

    loop.add_reader(listener, accept)
    address = listener.getsockname()
    return f"http://{address[0]}:{address[1]}"


async def serve(host: str, port: int, proxies: int = 0) -> None:
    state = State()
    loop = asyncio.get_running_loop()
    print(f"{LISTENING} {listen(host, port, state, loop)}", flush=True)
    if proxies:
        urls = [listen(host, 0, state, loop, via) for via in range(proxies)]
        print(f"{PROXIES} {','.join(urls)}", flush=True)
    await asyncio.Event().wait()


class ArrivalServer:
    """The server above in a subprocess; ``with ArrivalServer() as server: server.base_url``."""

    def __init__(self, proxies: int = 0) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.proxies = proxies
        #: The proxy ports' URLs, for ``PROXY_URLS``.
        self.proxy_urls: list[str] = []

    def __enter__(self) -> ArrivalServer:
        self.process = subprocess.Popen([sys.executable, __file__, "--port", "0", "--proxies", str(self.proxies)],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith(LISTENING):
            self.process.kill()
            raise RuntimeError(f"arrival server did not start: {line!r}")
        self.url = line.split()[-1]
        if self.proxies:
            line = self.process.stdout.readline().strip()
            if not line.startswith(PROXIES):
                self.process.kill()
                raise RuntimeError(f"arrival server did not open its proxy ports: {line!r}")
            self.proxy_urls = line.split()[-1].split(",")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _call(self, method: str, path: str) -> Any:
        request = urllib.request.Request(self.url + path, method=method, data=b"" if method == "POST" else None)
        with _OPENER.open(request, timeout=30) as answer:
            return json.load(answer)

    def arrivals(self) -> list[float]:
        return self._call("GET", "/_arrivals")["arrivals"]

    def arrivals_by_id(self) -> list[tuple[float, int]]:
        """``(time, product id)`` of every product request since the reset."""
        record = self._call("GET", "/_arrivals")
        return list(zip(record["arrivals"], record["ids"]))

    def arrivals_by_proxy(self) -> list[list[float]]:
        """The arrival times at each proxy port, by its index."""
        record = self._call("GET", "/_arrivals")
        times: list[list[float]] = [[] for _ in self.proxy_urls]
        for stamp, via in zip(record["arrivals"], record["via"]):
            if via >= 0:
                times[via].append(stamp)
        return times

    def slow(self, from_id: int, seconds: float) -> None:
        """Answer ids from ``from_id`` on after ``seconds``."""
        self._call("POST", f"/_slow?from_id={from_id}&seconds={seconds}")

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def hold(self, seconds: float, every: float) -> None:
        """Stall answers for ``seconds`` out of every ``every`` seconds, from now on."""
        self._call("POST", f"/_hold?seconds={seconds}&every={every}")


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    proxies = int(sys.argv[sys.argv.index("--proxies") + 1]) if "--proxies" in sys.argv else 0
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -5)  # the judge should stall less than the judged
    except OSError:
        pass
    asyncio.run(serve("127.0.0.1", port, proxies))


if __name__ == "__main__":
    main()
