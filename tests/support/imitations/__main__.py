"""Every imitation in one process: ``python -m tests.support.imitations [--size N] [--budget API:NAME=VALUE ...]``.

Each API listens on a port of its own (port 0: the OS picks), and a control
app on one more; the first line printed is ``IMITATIONS {"shopify": port, ...,
"control": port}``. ``--size N`` gives every catalogue N products (default:
each module's own, a few hundred); ``--budget shopify:leak=200`` passes a
budget's setting to that API's constructor (``shopify``: ``bucket``, ``leak``;
``bigcommerce``: ``quota``, ``window``; ``bestbuy``: ``per_second``,
``per_day``; ``dummyjson``: ``quota``, ``window``; ``shopify-graphql``: ``maximum``,
``restore`` (points), ``bucket``, ``leak`` (REST); ``github``: ``limit``, ``window``,
``exceeded_status``).

Control routes (on the control port, never the APIs' own):

- ``GET /arrivals/{api}``: every request the API got since the last reset
  (method, path, raw query, headers, body, time, status; a GraphQL request its
  ``cost``, as in the answer's ``extensions.cost``);
- ``POST /reset``: forget them and every fault, and start the budgets afresh;
- ``POST /faults/{api}`` with ``{key: "once" | "always" | "drop"}`` (``list#N``:
  the Nth list request since the reset; ``graphql#N``, ``shopify-graphql``'s Nth
  GraphQL request: "once" or "always");
- ``POST /mutate/{api}`` with ``{"changed": 0.03, "removed": 1, "added": 1, "seed": null}``
  (each optional): answers ``{"changed": [keys], "removed": [keys], "added": [keys],
  "at": "<the API's spelling>", "at_utc": "<ISO 8601>"}``;
- ``GET /catalogue/{api}``: ``{"keys": [keys in list order], "products": [...]}``;
- ``POST /rebuild/{api}`` with ``{"size": N}`` (null: the default): the catalogue afresh.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation
from tests.support.imitations.bestbuy import BestBuy
from tests.support.imitations.bigcommerce import BigCommerce
from tests.support.imitations.dummyjson import DummyJson
from tests.support.imitations.github import GitHub
from tests.support.imitations.magento import Magento
from tests.support.imitations.shopify import Shopify
from tests.support.imitations.shopify_graphql import ShopifyGraphql
from tests.support.imitations.woocommerce import WooCommerce

IMITATIONS: tuple[type[Imitation], ...] = (Shopify, WooCommerce, BigCommerce, Magento, BestBuy, DummyJson,
                                           ShopifyGraphql, GitHub)
#: The settings given as decimals (every other one is a whole number).
DECIMALS = {"leak", "window", "restore"}


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

    async def mutate(request: web.Request) -> web.Response:
        asked = await request.json() if request.can_read_body else {}
        return web.json_response(imitations[request.match_info["api"]].mutate(**asked))

    async def catalogue(request: web.Request) -> web.Response:
        imitation = imitations[request.match_info["api"]]
        keys = imitation.ordered()
        return web.json_response({"keys": keys, "products": [imitation.products[key] for key in keys]})

    async def rebuild(request: web.Request) -> web.Response:
        asked = await request.json() if request.can_read_body else {}
        imitations[request.match_info["api"]].rebuild(asked.get("size"))
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/arrivals/{api}", arrivals)
    app.router.add_post("/reset", reset)
    app.router.add_post("/faults/{api}", faults)
    app.router.add_post("/mutate/{api}", mutate)
    app.router.add_get("/catalogue/{api}", catalogue)
    app.router.add_post("/rebuild/{api}", rebuild)
    return app


def budget_settings(given: list[str]) -> dict[str, dict[str, Any]]:
    """``["shopify:leak=200", ...]`` as constructor arguments per API."""
    settings: dict[str, dict[str, Any]] = {}
    for item in given:
        api, _, setting = item.partition(":")
        name, _, value = setting.partition("=")
        settings.setdefault(api, {})[name] = float(value) if "." in value or name in DECIMALS else int(value)
    return settings


async def main(size: int | None, budgets: dict[str, dict[str, Any]]) -> None:
    imitations = {kind.name: kind(size, **budgets.get(kind.name, {})) for kind in IMITATIONS}
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
    parser = argparse.ArgumentParser(prog="python -m tests.support.imitations", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=None, help="products in every catalogue")
    parser.add_argument("--budget", action="append", default=[], metavar="API:NAME=VALUE")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.size, budget_settings(arguments.budget)))
