"""An imitation of a product JSON API whose catalogue the test sets between passes.

Not the simulator, and sharing no code with ``productcrawler``: a plain aiohttp
app serving ``GET /v1/product/{id}`` as the article's API does — 200 with the
product object (``id``, ``name``, ``price``, ``stock``, ``category``,
``brand``, ``rating``, ``sales_count``), 404 with ``{"error": "not found"}``
for an id the catalogue does not hold; and its listing, ``GET /v1/products?page=N``,
three products a page in id order, ``{"products": [...], "next": URL or null}``
(the next-URL style). Run it as a subprocess
(``python -m tests.support.imitations.changing_catalogue``); it listens on an
ephemeral port of 127.0.0.1 and prints ``CATALOGUE API LISTENING http://HOST:PORT``.

Control routes (not recorded as arrivals):

- ``PUT /_catalogue``: ``{"products": [object, ...]}`` becomes the whole
  catalogue (keyed by each object's ``id``); the arrival record is emptied;
- ``GET /_arrivals``: ``{"arrivals": [{"method", "path", "query", "headers", "at"}, ...]}``.

``CatalogueApi`` drives it from tests.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from typing import Any

from aiohttp import web

LISTENING = "CATALOGUE API LISTENING"
PER_PAGE = 3
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def make_app() -> web.Application:
    catalogue: dict[int, dict[str, Any]] = {}
    arrivals: list[dict[str, Any]] = []

    async def product(request: web.Request) -> web.Response:
        arrivals.append({"method": request.method, "path": request.path, "query": request.query_string,
                         "headers": dict(request.headers), "at": time.time()})
        try:
            item = catalogue.get(int(request.match_info["id"]))
        except ValueError:
            item = None
        if item is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(item)

    async def listing(request: web.Request) -> web.Response:
        arrivals.append({"method": request.method, "path": request.path, "query": request.query_string,
                         "headers": dict(request.headers), "at": time.time()})
        page = int(request.query.get("page", "1"))
        ids = sorted(catalogue)[(page - 1) * PER_PAGE:page * PER_PAGE]
        more = page * PER_PAGE < len(catalogue)
        next_url = str(request.url.with_query(page=str(page + 1))) if more else None
        return web.json_response({"products": [catalogue[i] for i in ids], "next": next_url})

    async def put_catalogue(request: web.Request) -> web.Response:
        body = await request.json()
        catalogue.clear()
        catalogue.update({int(item["id"]): item for item in body["products"]})
        arrivals.clear()
        return web.json_response({"products": len(catalogue)})

    async def get_arrivals(request: web.Request) -> web.Response:
        return web.json_response({"arrivals": arrivals})

    app = web.Application()
    app.router.add_get("/v1/product/{id}", product)
    app.router.add_get("/v1/products", listing)
    app.router.add_put("/_catalogue", put_catalogue)
    app.router.add_get("/_arrivals", get_arrivals)
    return app


async def _serve() -> None:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = site._server.sockets[0].getsockname()[:2]  # aiohttp keeps no public handle on the bound port
    print(f"{LISTENING} http://{host}:{port}", flush=True)
    while True:
        await asyncio.sleep(3600)


class CatalogueApi:
    """The imitation as a subprocess: ``with CatalogueApi() as api: api.put([...])``."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> CatalogueApi:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.imitations.changing_catalogue"],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(LISTENING):
            self.process.kill()
            raise RuntimeError(f"the imitation did not start: {line!r}")
        self.url = line.split()[-1]
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def put(self, products: list[dict[str, Any]]) -> None:
        request = urllib.request.Request(f"{self.url}/_catalogue", method="PUT",
                                         data=json.dumps({"products": products}).encode(),
                                         headers={"Content-Type": "application/json"})
        with _OPENER.open(request, timeout=10) as response:
            response.read()

    def arrivals(self) -> list[dict[str, Any]]:
        with _OPENER.open(f"{self.url}/_arrivals", timeout=10) as response:
            return json.loads(response.read())["arrivals"]


if __name__ == "__main__":
    asyncio.run(_serve())
