"""A DummyJSON-style API, no credential, dense ids: one product, and the product list.

Per id, ``GET /products/{id}`` answers the product itself (``id``, ``title``,
``price``, ``stock``, ``category``, ``brand``, ``rating``, ``meta.updatedAt``);
an unknown id is a 404 ``{"message": "Product with id '195' not found"}``.

The listing, as dummyjson.com documents "Get all products" and "Limit and skip":
``GET /products?limit=N&skip=S`` answers ``{"products": [...], "total": T,
"skip": S, "limit": L}`` in id order (``limit`` default 30, ``0`` for every
product; ``L`` is the number of products answered); a skip past the end answers
``products: []``; ``select=a,b`` keeps ``id`` and those.

The budget, as express-rate-limit's memory store keeps one (the server
DummyJSON runs on): a fixed window (200 requests a second by default, as in
``budgets.py``; the windows run from the imitation's start or reset), every request
counted; ``X-RateLimit-Limit``/``-Remaining``/``-Reset`` (epoch seconds) and the
draft's ``RateLimit-Limit``/``-Remaining``/``-Reset`` (seconds to go) on each
listing answer; over it, 429 with ``Retry-After`` and the text "Too many
requests, please try again later.". Only the list endpoint's requests count.
"""

from __future__ import annotations

import copy
import math
import random
import re
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, first_stamp, json_answer, whole
from tests.support.imitations.budgets import FixedWindow

PATH = re.compile(r"/products/([0-9]+)")
LIST_PATH = "/products"
COUNT = 194
#: The documented example, kept as is.
MASCARA = {"id": 1, "title": "Essence Mascara Lash Princess", "category": "beauty", "price": 9.99, "rating": 4.94,
           "stock": 5, "brand": "Essence", "sku": "RCH45Q1A"}


def spell(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def item(rng: random.Random, product_id: int, when: datetime) -> dict[str, Any]:
    return {"id": product_id, "title": f"Item {product_id}",
            "category": rng.choice(["beauty", "groceries", "furniture"]),
            "price": rng.randint(100, 99999) / 100, "rating": rng.randint(100, 500) / 100,
            "stock": rng.randint(0, 100), "brand": rng.choice(["Essence", "Glamour Beauty"]),
            "meta": {"createdAt": spell(when), "updatedAt": spell(when)}}


def catalogue(size: int | None = None) -> dict[int, dict[str, Any]]:
    rng = random.Random("dummyjson")
    first = first_stamp(0)
    products = {1: {**copy.deepcopy(MASCARA), "meta": {"createdAt": spell(first), "updatedAt": spell(first)}}}
    for product_id in range(2, (COUNT if size is None else size) + 1):
        products[product_id] = item(rng, product_id, first_stamp(product_id - 1))
    return products


def bad(name: str, message: str) -> web.Response:
    return json_answer({"message": message}, 400)


class DummyJson(Imitation):
    name = "dummyjson"

    def __init__(self, size: int | None = None, quota: int = 200, window: float = 1.0) -> None:
        self.window = FixedWindow(quota, window)
        super().__init__(size)

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["meta"]["updatedAt"])

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["meta"]["updatedAt"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["price"] = rng.randint(100, 99999) / 100

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        return last + 1, item(rng, last + 1, when)

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        return None

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        return self.products.get(int(key))

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"message": f"Product with id '{key}' not found"}, 404)

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] == LIST_PATH

    def listing(self, request: web.Request) -> web.Response:
        limit = whole(request, "limit", 30, 0, None, bad)
        skip = whole(request, "skip", 0, 0, None, bad)
        keys = self.ordered()
        chosen = keys[skip:] if limit == 0 else keys[skip:skip + limit]
        select = [name for name in request.query.get("select", "").split(",") if name]
        products = [self.products[key] for key in chosen]
        if select:
            products = [{name: product[name] for name in ["id", *select] if name in product} for product in products]
        return json_answer({"products": products, "total": len(keys), "skip": skip, "limit": len(products)})

    # The budget.
    def reset_budget(self) -> None:
        self.window.reset()

    def spend(self, now: float) -> tuple[web.Response | None, dict[str, str]]:
        allowed, remaining, reset_at = self.window.hit(now)
        quota, to_go = str(self.window.quota), max(0, math.ceil(reset_at - now))
        headers = {"X-RateLimit-Limit": quota, "X-RateLimit-Remaining": str(remaining),
                   "X-RateLimit-Reset": str(math.ceil(reset_at)), "RateLimit-Limit": quota,
                   "RateLimit-Remaining": str(remaining), "RateLimit-Reset": str(to_go)}
        if allowed:
            return None, headers
        return web.Response(text="Too many requests, please try again later.", status=429,
                            headers={**headers, "Retry-After": str(max(1, to_go))}), headers
