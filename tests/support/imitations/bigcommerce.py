"""BigCommerce Catalog v3, ``X-Auth-Token``: one product, and the product listing.

Per id, ``GET /stores/{hash}/v3/catalog/products/{id}`` answers ``{"data": {...},
"meta": {}}``; ids are integers; a wrong or missing token is a 401, an unknown
id a 404.

The listing, as BigCommerce documents it (Catalog API, "Get all products";
"API rate limits"):

- ``GET /stores/{hash}/v3/catalog/products?limit=250&page=N`` (``limit`` default 50,
  at most 250; ``page`` from 1) answers ``{"data": [...], "meta": {"pagination":
  {"total", "count", "per_page", "current_page", "total_pages", "links":
  {"previous", "current", "next"}}}}`` in id order; the links are relative
  query strings (``?limit=250&page=3``, with the request's other parameters),
  ``previous`` absent on page 1 and ``next`` absent on the last page; a page
  past the end has ``data: []``;
- ``date_modified:min`` / ``date_modified:max`` (ISO 8601 or a date; the
  products modified at or after / before it) filter; a value that is not a
  date is a 422. Products carry ``date_modified`` (``2024-01-01T00:00:00+00:00``).

The budget (Standard and Plus plans): 150 requests a 30-s window (the windows
run from the imitation's start or reset); every listing answer carries ``X-Rate-Limit-Requests-Left``,
``X-Rate-Limit-Requests-Quota``, ``X-Rate-Limit-Time-Reset-Ms`` (to the window's
end) and ``X-Rate-Limit-Time-Window-Ms``; over it, 429 with them. Only the list
endpoint's requests count.
"""

from __future__ import annotations

import copy
import math
import random
import re
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from tests.support.imitations._base import Imitation, Refused, first_stamp, json_answer, parse_time, whole
from tests.support.imitations.budgets import FixedWindow

STORE_HASH = "abc123xyz"
TOKEN = "bc7tok3n8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3"
PATH = re.compile(rf"/stores/{STORE_HASH}/v3/catalog/products/([0-9]+)")
LIST_PATH = f"/stores/{STORE_HASH}/v3/catalog/products"
#: A product as the documentation shows one.
SHOE = {"id": 77, "name": "[Sample] Orbit Terrarium - Large", "type": "physical", "price": 109,
        "inventory_level": 12, "total_sold": 4, "brand_id": 36, "categories": [23, 21]}


def item(rng: random.Random, product_id: int, when: datetime) -> dict[str, Any]:
    return {"id": product_id, "name": f"[Sample] Item {product_id}", "type": "physical",
            "price": rng.randint(100, 50000) / 100, "inventory_level": rng.randint(0, 80),
            "total_sold": rng.randint(0, 300), "brand_id": 36, "categories": [23],
            "date_created": when.isoformat(), "date_modified": when.isoformat()}


def catalogue(size: int | None = None) -> dict[int, dict[str, Any]]:
    """Ids from 70 with gaps; without ``size``, those below 600."""
    rng = random.Random("bigcommerce")
    products: dict[int, dict[str, Any]] = {}
    product_id = 70
    while (product_id < 600) if size is None else (len(products) < size):
        when = first_stamp(len(products))
        if product_id == SHOE["id"]:
            products[product_id] = {**copy.deepcopy(SHOE), "date_created": when.isoformat(),
                                    "date_modified": when.isoformat()}
        elif rng.random() < 0.6:
            products[product_id] = item(rng, product_id, when)
        product_id += 1
    return products


def unprocessable(name: str, message: str) -> web.Response:
    return json_answer({"status": 422, "title": f"The field '{name}' is invalid.", "type":
                        "https://developer.bigcommerce.com/api-docs/getting-started/api-status-codes",
                        "errors": {name: message}}, 422)


class BigCommerce(Imitation):
    name = "bigcommerce"

    def __init__(self, size: int | None = None, quota: int = 150, window: float = 30.0) -> None:
        self.window = FixedWindow(quota, window)
        super().__init__(size)

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["date_modified"])

    def spell(self, when: datetime) -> str:
        return when.isoformat()

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["date_modified"] = when.isoformat()

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["price"] = rng.randint(100, 50000) / 100

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        return last + 1, item(rng, last + 1, when)

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

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] in (LIST_PATH, LIST_PATH + "/")

    def listing(self, request: web.Request) -> web.Response:
        limit = min(whole(request, "limit", 50, 1, None, unprocessable), 250)
        page = whole(request, "page", 1, 1, None, unprocessable)
        keys = self.ordered()
        for name, later in (("date_modified:min", True), ("date_modified:max", False)):
            if name in request.query:
                bound = parse_time(request.query[name])
                if bound is None:
                    raise Refused(unprocessable(name, f"{name} must be a valid date."))
                keys = [key for key in keys if (self.modified[key] >= bound) == later]
        total = len(keys)
        pages = max(1, math.ceil(total / limit))
        data = [self.products[key] for key in keys[(page - 1) * limit:page * limit]]
        others = {name: value for name, value in request.query.items() if name not in ("limit", "page")}

        def link(number: int) -> str:
            return "?" + urlencode({**others, "limit": limit, "page": number})

        links = {"current": link(page)}
        if page > 1:
            links["previous"] = link(page - 1)
        if page < pages:
            links["next"] = link(page + 1)
        return json_answer({"data": data, "meta": {"pagination": {
            "total": total, "count": len(data), "per_page": limit, "current_page": page, "total_pages": pages,
            "links": links, "too_many": False}}})

    # The budget.
    def reset_budget(self) -> None:
        self.window.reset()

    def spend(self, now: float) -> tuple[web.Response | None, dict[str, str]]:
        allowed, left, reset_at = self.window.hit(now)
        headers = {"X-Rate-Limit-Requests-Left": str(left), "X-Rate-Limit-Requests-Quota": str(self.window.quota),
                   "X-Rate-Limit-Time-Reset-Ms": str(max(0, math.ceil((reset_at - now) * 1000))),
                   "X-Rate-Limit-Time-Window-Ms": str(round(self.window.window * 1000))}
        if allowed:
            return None, headers
        return json_answer({"status": 429, "title": "Too many requests", "type": "about:blank", "errors": {}},
                           429, headers), headers
