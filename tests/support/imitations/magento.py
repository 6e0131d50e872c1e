"""Magento 2 / Adobe Commerce: ``GET /rest/default/V1/products/{sku}``, ``Authorization: Bearer``.

SKUs are strings with spaces and slashes: ``WS12 M/Blue`` is asked as
``WS12%20M%2FBlue`` (an unencoded ``/`` is another path, a 404). Stock is at
``extension_attributes.stock_item.qty``. A wrong or missing token is a 401,
an unknown SKU a 404 ``{"message": "The product that was requested doesn't exist..."}``.
"""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

TOKEN = "mg2t0k3n_q8w7e6r5t4y3u2i1o0p9a8s7d6f5"
PREFIX = "/rest/default/V1/products/"
#: The documented example, kept as is.
SHIRT = {"id": 1546, "sku": "WS12 M/Blue", "name": "Radiant Tee", "price": 22, "status": 1, "type_id": "simple",
         "extension_attributes": {"stock_item": {"qty": 100, "is_in_stock": True}}}


def catalogue() -> dict[str, dict[str, Any]]:
    rng = random.Random("magento")
    products = {SHIRT["sku"]: SHIRT}
    for n in range(1, 300):
        sku = f"{rng.choice(['MH', 'WS', 'MJ'])}{n:02d} {rng.choice('SML')}/{rng.choice(['Blue', 'Red', 'Gray'])}"
        products[sku] = {"id": 2000 + n, "sku": sku, "name": f"Tee {n}", "price": rng.randint(10, 90),
                         "status": 1, "type_id": "simple",
                         "extension_attributes": {"stock_item": {"qty": rng.randint(0, 200), "is_in_stock": True}}}
    return products


class Magento(Imitation):
    name = "magento"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return json_answer({"message": "The consumer isn't authorized to access %resources.",
                                "parameters": {"resources": "Magento_Catalog::products"}}, 401)
        return None

    def product_key(self, request: web.Request) -> str | None:
        path = request.raw_path.partition("?")[0]
        encoded = path[len(PREFIX):] if path.startswith(PREFIX) else ""
        return unquote(encoded) if encoded and "/" not in encoded else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        return self.products.get(key)

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"message": "The product that was requested doesn't exist. Verify the product and "
                                       "try again."}, 404)
