"""Best Buy Products: ``GET /v1/products/{sku}.json?apiKey=KEY``.

Answers ``salePrice``, ``manufacturer``, ``categoryPath`` (``[1].name`` the
department); ``show=a,b`` keeps those attributes only. SKUs are sparse 7-8
digit integers; a wrong or missing ``apiKey`` is a 403, an unknown SKU a 404.
"""

from __future__ import annotations

import random
import re
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

API_KEY = "bbK3yAq7Zx9Wm2Lp5Rt8Vn4C"
PATH = re.compile(r"/v1/products/([0-9]{7,8})\.json")
FIRST_SKU = 6_501_001
#: A product as the documentation shows one.
TV = {"sku": FIRST_SKU, "name": "Samsung - 65\" Class Crystal UHD 4K Smart TV", "salePrice": 479.99,
      "regularPrice": 529.99, "manufacturer": "Samsung",
      "categoryPath": [{"id": "cat00000", "name": "Best Buy"}, {"id": "abcat0100000", "name": "TV & Home Theater"},
                       {"id": "abcat0101000", "name": "TVs"}],
      "customerReviewAverage": 4.6, "customerReviewCount": 1520, "onlineAvailability": True}


def catalogue() -> dict[int, dict[str, Any]]:
    rng = random.Random("bestbuy")
    products = {FIRST_SKU: TV}
    sku = FIRST_SKU
    for n in range(249):
        sku += rng.choice((1, 2, 4))
        department = rng.choice(["Computers & Tablets", "Cell Phones", "Appliances"])
        products[sku] = {"sku": sku, "name": f"Gadget {n}", "salePrice": rng.randint(500, 200000) / 100,
                         "regularPrice": 2000.0, "manufacturer": rng.choice(["Apple", "Lenovo", "LG"]),
                         "categoryPath": [{"id": "cat00000", "name": "Best Buy"},
                                          {"id": f"abcat{n:07d}", "name": department}],
                         "customerReviewAverage": rng.choice([None, rng.randint(10, 50) / 10]),
                         "customerReviewCount": rng.randint(0, 900), "onlineAvailability": True}
    return products


class BestBuy(Imitation):
    name = "bestbuy"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.query.get("apiKey") != API_KEY:
            return json_answer({"errorCode": "403", "errorMessage": "The provided API Key is invalid."}, 403)
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        product = self.products.get(int(key))
        show = request.query.get("show")
        if product is None or not show:
            return product
        return {name: product[name] for name in show.split(",") if name in product}

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"errorCode": "404", "errorMessage": f"The requested item ({key}) was not found."}, 404)
