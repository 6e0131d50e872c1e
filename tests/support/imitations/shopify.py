"""Shopify Admin REST: ``GET /admin/api/2024-10/products/{id}.json``, ``X-Shopify-Access-Token``.

Answers ``{"product": {..., "variants": [{"id": 808950810, "price": "199.00", "inventory_quantity": 10}]}}``;
ids are sparse 13-digit integers (beyond a signed 32-bit INT); a wrong or
missing token is a 401, an unknown id a 404 ``{"errors": "Not Found"}``. A third
of the snowboards have two or three variants (sizes) of their own SKU, price and
stock, some with a ``compare_at_price`` (on sale), as the Admin API's variants have.
"""

from __future__ import annotations

import random
import re
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, json_answer

TOKEN = "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"
PATH = re.compile(r"/admin/api/2024-10/products/([0-9]+)\.json")
FIRST_ID = 7_204_539_760_000
#: The documented example, kept as is.
IPOD = {"id": FIRST_ID, "title": "IPod Nano - 8GB", "vendor": "Apple", "product_type": "Cult Products",
        "variants": [{"id": 808950810, "title": "Pink", "price": "199.00", "inventory_quantity": 10}]}


def catalogue() -> dict[int, dict[str, Any]]:
    rng = random.Random("shopify")
    products = {FIRST_ID: IPOD}
    product_id = FIRST_ID
    for n in range(299):
        product_id += rng.choice((1, 2, 3, 5))
        products[product_id] = {
            "id": product_id, "title": f"Snowboard {n}", "vendor": rng.choice(["Hydrogen", "Burton", "Jones"]),
            "product_type": rng.choice(["Snowboard", "Bindings"]), "status": "active",
            "variants": [{"id": 40_000_000_000 + n, "title": "Default Title",
                          "price": f"{rng.randint(100, 99999) / 100:.2f}", "inventory_quantity": rng.randint(0, 50)}],
        }
    sizes = random.Random("shopify variants")  # its own: the first variant of each product stays as it was
    for n, product in enumerate(list(products.values())[1:]):
        first = product["variants"][0]
        first.update(sku=f"SNOW-{n}-S", compare_at_price=None)
        for size in ("M", "L")[:sizes.choice((0, 0, 1, 2))]:
            price = sizes.randint(100, 99999) / 100
            product["variants"].append({
                "id": 41_000_000_000 + n * 10 + len(product["variants"]), "title": size, "sku": f"SNOW-{n}-{size}",
                "price": f"{price:.2f}", "inventory_quantity": sizes.randint(0, 50),
                "compare_at_price": f"{price * 1.25:.2f}" if sizes.random() < 0.5 else None})
    return products


class Shopify(Imitation):
    name = "shopify"

    def __init__(self) -> None:
        super().__init__()
        self.products = catalogue()

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("X-Shopify-Access-Token") != TOKEN:
            return json_answer({"errors": "[API] Invalid API key or access token (unrecognized login or wrong "
                                          "password)"}, 401)
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        product = self.products.get(int(key))
        return None if product is None else {"product": product}

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"errors": "Not Found"}, 404)
