"""WooCommerce REST v3: ``GET /wp-json/wc/v3/products/{id}``, HTTP Basic (consumer key : consumer secret).

Prices and ``average_rating`` are strings, ``categories`` a list of ``{"id", "name"}``.
Ids are WordPress post ids: pages and images in between answer 404
``{"code": "woocommerce_rest_product_invalid_id", ...}``; a wrong or missing
credential is a 401 ``woocommerce_rest_cannot_view``.
"""

from __future__ import annotations

import base64
import random
import re
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

CONSUMER_KEY = "ck_4f9e1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b"
CONSUMER_SECRET = "cs_9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"
PATH = re.compile(r"/wp-json/wc/v3/products/([0-9]+)")
#: The documented example, kept as is.
SHIRT = {"id": 794, "name": "Premium Quality", "price": "21.99", "regular_price": "21.99", "stock_quantity": 7,
         "categories": [{"id": 9, "name": "Clothing"}, {"id": 14, "name": "T-shirts"}],
         "average_rating": "4.50", "rating_count": 2, "total_sales": 33}


def catalogue() -> dict[int, dict[str, Any]]:
    rng = random.Random("woocommerce")
    products = {}
    for post_id in range(10, 1000):
        if post_id == SHIRT["id"]:
            products[post_id] = SHIRT
        elif rng.random() < 0.35:  # the other posts are pages, images, orders
            price = f"{rng.randint(100, 20000) / 100:.2f}"
            products[post_id] = {
                "id": post_id, "name": f"Hoodie {post_id}", "type": "simple", "status": "publish",
                "price": price, "regular_price": price, "stock_quantity": rng.choice([None, rng.randint(0, 99)]),
                "categories": [rng.choice([{"id": 9, "name": "Clothing"}, {"id": 15, "name": "Music"}])],
                "average_rating": f"{rng.randint(0, 500) / 100:.2f}", "total_sales": rng.randint(0, 500),
            }
    return products


class WooCommerce(Imitation):
    name = "woocommerce"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()
        credentials = base64.b64encode(f"{CONSUMER_KEY}:{CONSUMER_SECRET}".encode()).decode()
        self.authorization = f"Basic {credentials}"

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Authorization") != self.authorization:
            return json_answer({"code": "woocommerce_rest_cannot_view", "message": "Sorry, you cannot view this "
                                "resource.", "data": {"status": 401}}, 401)
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        return self.products.get(int(key))

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"code": "woocommerce_rest_product_invalid_id", "message": "Invalid ID.",
                            "data": {"status": 404}}, 404)
