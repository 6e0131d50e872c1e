"""Every imitation in one process: ``python -m tests.support.imitations``.

Each API listens on a port of its own (port 0: the OS picks), and a control
app on one more; the first line printed is ``IMITATIONS {"shopify": port, ...,
"control": port}``. Control routes: ``GET /arrivals/{api}`` (every request the
API got since the last reset: method, path, raw query, headers, time),
``POST /reset`` (forget them, and every fault), ``POST /faults/{api}`` with a
JSON object ``{key: "once" | "always" | "drop"}``.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from tests.support.imitations._base import Imitation
from tests.support.imitations.bestbuy import BestBuy
from tests.support.imitations.bigcommerce import BigCommerce
from tests.support.imitations.dummyjson import DummyJson
from tests.support.imitations.magento import Magento
from tests.support.imitations.shopify import Shopify
from tests.support.imitations.woocommerce import WooCommerce

IMITATIONS: tuple[type[Imitation], ...] = (Shopify, WooCommerce, BigCommerce, Magento, BestBuy, DummyJson)


def control_app(imitations: dict[str, Imitation]) -> web.Application:
    async def arrivals(request: web.Request) -> web.Response:
        return web.json_response(imitations[request.match_info["api"]].arrivals)

    async def reset(request: web.Request) -> web.Response:
        for imitation in imitations.values():
            imitation.reset()
        return web.json_response({})

    async def faults(request: web.Request) -> web.Response:
        imitations[request.match_info["api"]].faults.update(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/arrivals/{api}", arrivals)
    app.router.add_post("/reset", reset)
    app.router.add_post("/faults/{api}", faults)
    return app


async def main() -> None:
    imitations = {kind.name: kind() for kind in IMITATIONS}
    apps = {name: imitation.app() for name, imitation in imitations.items()}
    apps["control"] = control_app(imitations)
    ports = {}
    for name, app in apps.items():
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports[name] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print("IMITATIONS " + json.dumps(ports), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
