"""A small TCP proxy for fault injection: sits between the crawler and MySQL or Redis.

``cut(seconds)`` closes the listening socket (new connections are refused)
and every live connection (they are cut), then listens again on the same port.
``delay`` holds every chunk that long each way, in order (a distant server).
"""

from __future__ import annotations

import queue
import selectors
import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, delay: float = 0.0, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.delay = delay
        self.host = host  # where it listens: another loopback address stands for another host
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._down_until = 0.0
        self._stopping = False
        #: Connections accepted and passed on to the target so far.
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, name="tcp-proxy", daemon=True)
        self._thread.start()

    def url(self, scheme: str, path: str = "", user: str = "") -> str:
        credentials = f"{user}@" if user else ""
        return f"{scheme}://{credentials}{self.host}:{self.port}{path}"

    def cut(self, seconds: float) -> None:
        """Refuse and cut every connection for ``seconds``, then accept again."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            self._listener.close()
            for pair in self._pairs:
                for sock in pair:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sock.close()
            self._pairs.clear()

    def close(self) -> None:
        self._stopping = True
        self.cut(0)
        self._thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stopping:
            with self._lock:
                down = time.monotonic() < self._down_until
                if not down and self._listener.fileno() == -1:
                    self._listener = socket.create_server((self.host, self.port))
                listener = self._listener
            if down or listener.fileno() == -1:
                time.sleep(0.05)
                continue
            listener.settimeout(0.1)
            try:
                client, _ = listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
            if self.delay:
                upstream.settimeout(None)  # an idle connection is not an error
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump_late, args=(source, sink), daemon=True).start()
            else:
                threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        try:
            selector.register(client, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, client)
            while True:
                for key, _ in selector.select(timeout=1):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            for sock in (client, upstream):
                try:
                    sock.close()
                except OSError:
                    pass

    def _pump_late(self, source: socket.socket, sink: socket.socket) -> None:
        """One direction: each chunk sent once it is ``delay`` old (a sender thread keeps the order)."""
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def send() -> None:
            while True:
                due, data = chunks.get()
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    if not data:
                        sink.shutdown(socket.SHUT_WR)
                        return
                    sink.sendall(data)
                except OSError:
                    return

        threading.Thread(target=send, daemon=True).start()
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + self.delay, data))
            if not data:
                return
