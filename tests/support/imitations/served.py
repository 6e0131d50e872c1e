"""The imitations served for tests: one in a thread of the test's process, or all of them in a subprocess.

In the test's process (the crawl under test may be a subprocess; the test
reads the imitation's own objects)::

    with Served(Shopify(size=300, leak=200.0)) as api:
        api.url                # http://127.0.0.1:PORT
        api.call(api.imitation.mutate, changed=0.05)   # on the server's loop, between passes
        api.arrivals()         # a copy of the arrival log

In a subprocess (``python -m tests.support.imitations``, its control routes)::

    with ImitationsProcess(size=50_000, budgets=["shopify:leak=200"]) as apis:
        apis.url("shopify"); apis.mutate("shopify", changed=0.03); apis.arrivals("shopify")
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.imitations._base import Imitation

ROOT = Path(__file__).resolve().parents[3]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
T = TypeVar("T")


class Served:
    """One imitation on 127.0.0.1, served by an event loop in a thread of its own."""

    def __init__(self, imitation: Imitation) -> None:
        self.imitation = imitation
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> Served:
        self._thread.start()
        self.url = self.call_soon(self._start())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            self.call_soon(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> str:
        self._runner = web.AppRunner(self.imitation.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    def call_soon(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` on the server's loop, between two requests: its result."""
        async def run() -> T:
            return function(*args, **kwargs)
        return self.call_soon(run())

    def arrivals(self) -> list[dict[str, Any]]:
        return self.call(lambda: [dict(arrival) for arrival in self.imitation.arrivals])


class ImitationsProcess:
    """Every imitation in a subprocess, driven through its control routes."""

    def __init__(self, size: int | None = None, budgets: list[str] | tuple[str, ...] = ()) -> None:
        self.command = [sys.executable, "-m", "tests.support.imitations"]
        if size is not None:
            self.command += ["--size", str(size)]
        for budget in budgets:
            self.command += ["--budget", budget]
        self.process: subprocess.Popen[str] | None = None
        self.ports: dict[str, int] = {}

    def __enter__(self) -> ImitationsProcess:
        self.process = subprocess.Popen(self.command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("IMITATIONS "):
            self.process.kill()
            raise RuntimeError(f"the imitations did not start: {line!r}")
        self.ports = json.loads(line.split(" ", 1)[1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def url(self, api: str) -> str:
        return f"http://127.0.0.1:{self.ports[api]}"

    def _control(self, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.ports['control']}{path}", data=data,
                                         method="GET" if data is None else "POST",
                                         headers={"Content-Type": "application/json"})
        with _OPENER.open(request, timeout=60) as answer:
            return json.loads(answer.read())

    def arrivals(self, api: str) -> list[dict[str, Any]]:
        return self._control(f"/arrivals/{api}")

    def reset(self) -> None:
        self._control("/reset", {})

    def faults(self, api: str, faults: dict[str, str]) -> None:
        self._control(f"/faults/{api}", faults)

    def mutate(self, api: str, **asked: Any) -> dict[str, Any]:
        return self._control(f"/mutate/{api}", asked)

    def catalogue(self, api: str) -> dict[str, Any]:
        return self._control(f"/catalogue/{api}")

    def rebuild(self, api: str, size: int | None = None) -> None:
        self._control(f"/rebuild/{api}", {"size": size})
