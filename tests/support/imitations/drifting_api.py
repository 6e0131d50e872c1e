"""A product JSON API whose answers' fields can change between passes: a small aiohttp app of its own.

It shares no code with ``productcrawler`` or ``simulator``. ``GET
/v1/product/{id}`` answers a flat product object (``product_id``, ``name``,
``price``, ``stock``, ``category``, ``brand``, ``rating``, ``sales_count``,
the fields a product API of this kind documents), or 404 for every id
divisible by ``MISSING_EVERY``. Values depend on the id and a catalogue
``version``, so two passes store different values.

Control routes (not recorded as arrivals):

- ``POST /_shape`` with a JSON object: ``version`` (int), ``drop`` (fields no
  answer carries), ``move`` (``{"price": "pricing.current"}``: the field's value
  under a new dotted path), ``dropout`` (``{"brand": 25}``: the field is absent
  from every 25th product); each key replaces the one before, the rest stay;
- ``POST /_reset``: the flat shape of version 1, an empty arrival record;
- ``GET /_arrivals``: ``{"arrivals": [{"time", "method", "path", "query", "headers"}, ...]}``.

Run it as ``python -m tests.support.imitations.drifting_api``: it listens on port 0 of
127.0.0.1 and prints ``DRIFTING API LISTENING http://HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from decimal import Decimal
from typing import Any

from aiohttp import web

LISTENING = "DRIFTING API LISTENING"
MISSING_EVERY = 50
CATEGORIES = ("tools", "garden", "kitchen", "toys")
BRANDS = ("Acme", "Globex", "Initech")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_FLAT: dict[str, Any] = {"version": 1, "drop": [], "move": {}, "dropout": {}}


def product(product_id: int, version: int) -> dict[str, Any]:
    """The flat product of ``product_id`` in catalogue ``version`` (what a stored row must hold)."""
    return {
        "product_id": product_id,
        "name": f"Product {product_id} v{version}",
        "price": f"{(product_id * 37 + version * 11) % 9000 + 100}.{(product_id + version) % 100:02d}",
        "stock": (product_id * 7 + version) % 500,
        "category": CATEGORIES[(product_id + version) % len(CATEGORIES)],
        "brand": BRANDS[product_id % len(BRANDS)],
        "rating": f"{(product_id % 5) + 0.5:.2f}",
        "sales_count": product_id * 3 + version,
    }


def shaped(product_id: int, shape: dict[str, Any]) -> dict[str, Any]:
    answer = product(product_id, shape["version"])
    for field in shape["drop"]:
        answer.pop(field, None)
    for field, every in shape["dropout"].items():
        if product_id % int(every) == 0:
            answer.pop(field, None)
    for field, path in shape["move"].items():
        value = answer.pop(field)
        *parents, leaf = path.split(".")
        node = answer
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return answer


def build_app() -> web.Application:
    app = web.Application()
    state: dict[str, Any] = {"shape": dict(_FLAT), "arrivals": []}  # changed by the control routes

    async def answer(request: web.Request) -> web.Response:
        state["arrivals"].append({"time": time.time(), "method": request.method, "path": request.path,
                                "query": request.query_string, "headers": dict(request.headers)})
        product_id = int(request.match_info["product_id"])
        if product_id % MISSING_EVERY == 0:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(shaped(product_id, state["shape"]))

    async def set_shape(request: web.Request) -> web.Response:
        state["shape"] = {**state["shape"], **await request.json()}
        return web.json_response(state["shape"])

    async def reset(request: web.Request) -> web.Response:
        state["shape"] = dict(_FLAT)
        state["arrivals"] = []
        return web.json_response({})

    async def arrivals(request: web.Request) -> web.Response:
        return web.json_response({"arrivals": state["arrivals"]})

    app.router.add_get(r"/v1/product/{product_id:\d+}", answer)
    app.router.add_post("/_shape", set_shape)
    app.router.add_post("/_reset", reset)
    app.router.add_get("/_arrivals", arrivals)
    return app


async def _serve() -> None:
    runner = web.AppRunner(build_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    print(f"{LISTENING} http://{host}:{port}", flush=True)
    await asyncio.Event().wait()


class DriftingApi:
    """The app above in a subprocess: ``with DriftingApi() as api: api.base_url``."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> DriftingApi:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.imitations.drifting_api"],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith(LISTENING):
            self.process.kill()
            raise RuntimeError(f"the drifting API did not start: {line!r}")
        self.url = line.split()[-1]
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        if method == "POST" and data is None:
            data = b"{}"
        request = urllib.request.Request(self.url + path, method=method, data=data,
                                         headers={"Content-Type": "application/json"})
        with _OPENER.open(request, timeout=30) as response:
            return json.load(response)

    def shape(self, **shape: Any) -> None:
        self._call("POST", "/_shape", shape)

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def arrivals(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_arrivals")["arrivals"]


def stored_row(product_id: int, version: int) -> tuple[Any, ...]:
    """The (product_id, name, price, stock, category, brand, rating, sales_count) a crawl stores."""
    item = product(product_id, version)
    return (product_id, item["name"], Decimal(item["price"]), item["stock"], item["category"], item["brand"],
            Decimal(item["rating"]), item["sales_count"])


if __name__ == "__main__":
    asyncio.run(_serve())
