"""BigCommerce Catalog v3: ``GET /stores/{hash}/v3/catalog/products/{id}``, ``X-Auth-Token``.

Answers ``{"data": {...}, "meta": {}}``; ids are integers; a wrong or missing
token is a 401, an unknown id a 404.
"""

from __future__ import annotations

import random
import re
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

STORE_HASH = "abc123xyz"
TOKEN = "bc7tok3n8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3"
PATH = re.compile(rf"/stores/{STORE_HASH}/v3/catalog/products/([0-9]+)")
#: A product as the documentation shows one.
SHOE = {"id": 77, "name": "[Sample] Orbit Terrarium - Large", "type": "physical", "price": 109,
        "inventory_level": 12, "total_sold": 4, "brand_id": 36, "categories": [23, 21]}


def catalogue() -> dict[int, dict[str, Any]]:
    rng = random.Random("bigcommerce")
    products = {}
    for product_id in range(70, 600):
        if product_id == SHOE["id"]:
            products[product_id] = SHOE
        elif rng.random() < 0.6:
            products[product_id] = {"id": product_id, "name": f"[Sample] Item {product_id}", "type": "physical",
                                    "price": rng.randint(100, 50000) / 100, "inventory_level": rng.randint(0, 80),
                                    "total_sold": rng.randint(0, 300), "brand_id": 36, "categories": [23]}
    return products


class BigCommerce(Imitation):
    name = "bigcommerce"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("X-Auth-Token") != TOKEN:
            return json_answer({"status": 401, "title": "Unauthorized", "type": "about:blank", "errors": {}}, 401)
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        product = self.products.get(int(key))
        return None if product is None else {"data": product, "meta": {}}

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"status": 404, "title": "The requested resource was not found.",
                            "type": "about:blank", "errors": {}}, 404)
