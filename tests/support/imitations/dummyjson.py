"""A DummyJSON-style API: ``GET /products/{id}``, no credential, dense ids.

Answers the product itself (``id``, ``title``, ``price``, ``stock``,
``category``, ``brand``, ``rating``); an unknown id is a 404
``{"message": "Product with id '195' not found"}``.
"""

from __future__ import annotations

import random
import re
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

PATH = re.compile(r"/products/([0-9]+)")
COUNT = 194
#: The documented example, kept as is.
MASCARA = {"id": 1, "title": "Essence Mascara Lash Princess", "category": "beauty", "price": 9.99, "rating": 4.94,
           "stock": 5, "brand": "Essence", "sku": "RCH45Q1A"}


def catalogue() -> dict[int, dict[str, Any]]:
    rng = random.Random("dummyjson")
    products = {1: MASCARA}
    for product_id in range(2, COUNT + 1):
        products[product_id] = {"id": product_id, "title": f"Item {product_id}",
                                "category": rng.choice(["beauty", "groceries", "furniture"]),
                                "price": rng.randint(100, 99999) / 100, "rating": rng.randint(100, 500) / 100,
                                "stock": rng.randint(0, 100), "brand": rng.choice(["Essence", "Glamour Beauty"])}
    return products


class DummyJson(Imitation):
    name = "dummyjson"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        return self.products.get(int(key))

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"message": f"Product with id '{key}' not found"}, 404)
