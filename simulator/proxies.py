"""Local forwarding HTTP proxies that the simulator's users can break on command.

``ProxyFarm(n)`` runs ``n`` plain-HTTP forward proxies (absolute-form
``GET http://host:port/path``, and ``CONNECT host:port`` tunnels for an https
API) on port 0 of 127.0.0.1, all in one
asyncio loop in a background thread, so a test can start them once per
session and point ``PROXY_URLS`` at them. Each keeps its own record of the
requests it forwarded (the count per proxy a test compares), and can be told
to change behaviour mid-crawl:

=========  ================================================================
``ok``     forward every request
``refuse`` stop listening and reset every open connection (a dead proxy)
``slow``   wait ``slow_delay`` seconds before forwarding each request
``407``    answer 407 Proxy Authentication Required to every request
``403``    answer 403 itself (an exit IP the API has blocked)
=========  ================================================================

With ``user``/``password`` set, a request without the matching Basic
``Proxy-Authorization`` is answered 407 (recorded as ``auth``). The modes
apply to a CONNECT as to any request (a tunnel refused with 407 or 403). A
proxy that cannot reach the API answers ``502 Bad Gateway`` (recorded as
``502``), as real proxies do; a tunnel it opened is recorded as ``tunnel``.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from types import TracebackType

MODES = ("ok", "refuse", "slow", "407", "403")


@dataclass
class _Listener:
    index: int
    port: int = 0
    mode: str = "ok"
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    #: (time.time(), path, what): what is "forwarded", "tunnel", "407", "403", "auth" or "502".
    record: list[tuple[float, str, str]] = field(default_factory=list)


class ProxyFarm:
    def __init__(self, count: int, *, user: str | None = None, password: str | None = None,
                 slow_delay: float = 2.0) -> None:
        self.slow_delay = slow_delay
        self._user = user
        self._auth = (b"Basic " + base64.b64encode(f"{user}:{password}".encode())) if user else None
        self._listeners = [_Listener(i) for i in range(count)]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="proxy-farm", daemon=True)

    def __enter__(self) -> ProxyFarm:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def start(self) -> ProxyFarm:
        self._thread.start()
        for listener in self._listeners:
            self._run(self._listen(listener))
        return self

    def close(self) -> None:
        for listener in self._listeners:
            self._run(self._stop(listener))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- what a test uses --------------------------------------------------

    def urls(self, *, user: str | None = None, password: str | None = None) -> list[str]:
        credentials = f"{user}:{password}@" if user else ""
        return [f"http://{credentials}127.0.0.1:{listener.port}" for listener in self._listeners]

    def set_mode(self, index: int, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; expected one of {MODES}")
        self._run(self._set_mode(self._listeners[index], mode))

    def reset(self) -> None:
        """Every proxy back to ``ok``, every record emptied."""
        for listener in self._listeners:
            self.set_mode(listener.index, "ok")
            listener.record.clear()

    def record(self, index: int) -> list[tuple[float, str, str]]:
        return list(self._listeners[index].record)

    def forwarded(self, index: int, since: float = 0.0) -> list[float]:
        """Times of the requests proxy ``index`` forwarded (at or after ``since``)."""
        return [t for t, _, what in self.record(index) if what == "forwarded" and t >= since]

    # -- the loop's side ---------------------------------------------------

    def _run(self, coroutine: object) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)  # type: ignore[arg-type]

    async def _listen(self, listener: _Listener) -> None:
        listener.server = await asyncio.start_server(
            lambda r, w: self._serve(listener, r, w), "127.0.0.1", listener.port)
        listener.port = listener.server.sockets[0].getsockname()[1]

    async def _stop(self, listener: _Listener) -> None:
        if listener.server is not None:
            listener.server.close()
            listener.server = None
        for writer in list(listener.writers):
            writer.transport.abort()  # RST, as a dead host's connections end
        listener.writers.clear()

    async def _set_mode(self, listener: _Listener, mode: str) -> None:
        if mode == "refuse":
            await self._stop(listener)
        elif listener.server is None:
            await self._listen(listener)
        listener.mode = mode

    async def _serve(self, listener: _Listener, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        listener.writers.add(writer)
        upstream: tuple[str, int] | None = None
        up_writer: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head[:-4].split(b"\r\n")
                method, target, version = request_line.split(b" ", 2)
                headers = [line.split(b":", 1) for line in header_lines if b":" in line]
                length = next((int(v) for k, v in headers if k.strip().lower() == b"content-length"), 0)
                body = await reader.readexactly(length) if length else b""
                parts = urlsplit(target.decode("latin-1"))
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                given = next((v.strip() for k, v in headers if k.strip().lower() == b"proxy-authorization"),
                             None)
                answer = self._answer(listener, given)
                if answer is not None:
                    listener.record.append((time.time(), path, answer))
                    reason = {"407": b"Proxy Authentication Required", "auth": b"Proxy Authentication Required",
                              "403": b"Forbidden"}[answer]
                    status = b"403" if answer == "403" else b"407"
                    writer.write(b"HTTP/1.1 " + status + b" " + reason + b"\r\nContent-Length: 0\r\n"
                                 b"Proxy-Authenticate: Basic realm=\"farm\"\r\n\r\n")
                    await writer.drain()
                    continue
                if listener.mode == "slow":
                    await asyncio.sleep(self.slow_delay)
                if method == b"CONNECT":
                    await self._tunnel(listener, target.decode("latin-1"), reader, writer)
                    return
                address = (parts.hostname or "127.0.0.1", parts.port or 80)
                if up_writer is None or upstream != address or pump is None or pump.done():
                    if up_writer is not None:
                        up_writer.close()
                    try:
                        up_reader, up_writer = await asyncio.open_connection(*address)
                    except OSError:
                        up_writer = None
                        await self._bad_gateway(listener, path, writer)
                        continue
                    upstream = address
                    pump = asyncio.ensure_future(self._pump(up_reader, writer))
                kept = b"".join(k + b":" + v + b"\r\n" for k, v in headers
                                if k.strip().lower() not in (b"proxy-authorization", b"proxy-connection"))
                up_writer.write(method + b" " + path.encode("latin-1") + b" " + version + b"\r\n"
                                + kept + b"\r\n" + body)
                listener.record.append((time.time(), path, "forwarded"))
                await up_writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError, OSError):
            pass
        finally:
            listener.writers.discard(writer)
            if pump is not None:
                pump.cancel()
            for w in (up_writer, writer):
                if w is not None:
                    w.close()

    async def _tunnel(self, listener: _Listener, target: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        """CONNECT: bytes both ways between the client and ``target`` until either side closes."""
        host, _, port = target.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except (OSError, ValueError):
            await self._bad_gateway(listener, target, writer)
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        listener.record.append((time.time(), target, "tunnel"))
        pump = asyncio.ensure_future(self._pump(up_reader, writer))
        try:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()
        finally:
            pump.cancel()
            up_writer.close()

    @staticmethod
    async def _bad_gateway(listener: _Listener, path: str, writer: asyncio.StreamWriter) -> None:
        listener.record.append((time.time(), path, "502"))
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    def _answer(self, listener: _Listener, given: bytes | None) -> str | None:
        """What to answer instead of forwarding, if anything."""
        if listener.mode in ("407", "403"):
            return listener.mode
        if self._auth is not None and given != self._auth:
            return "auth"
        return None

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Upstream's bytes to the client as they come; its close closes the client."""
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
