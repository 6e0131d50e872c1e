"""Shopify Admin REST 2024-10, ``X-Shopify-Access-Token``: one product, and the product listing.

Per id, ``GET /admin/api/2024-10/products/{id}.json`` answers ``{"product": {...,
"variants": [{"price": "199.00", "inventory_quantity": 10}]}}``; ids are
sparse 13-digit integers (beyond a signed 32-bit INT); a wrong or missing
token is a 401, an unknown id a 404 ``{"errors": "Not Found"}``. A third
of the snowboards have two or three variants (sizes) of their own SKU, price and
stock, some with a ``compare_at_price`` (on sale), as the Admin API's variants have.

The listing, as Shopify documents its cursor-based pagination
(shopify.dev, "Make paginated requests to the REST Admin API"):

- ``GET /admin/api/2024-10/products.json?limit=250`` answers ``{"products": [...]}``
  in id order, ``limit`` products (default 50, at most 250; more is a 400);
- the next page is in the ``Link`` header,
  ``<https://host/admin/api/2024-10/products.json?limit=250&page_info=CURSOR>; rel="next"``
  (and ``rel="previous"`` past the first page); no ``rel="next"`` on the last page;
- ``page_info`` is opaque and carries the first request's filters: with it, no
  parameter but ``limit`` and ``fields`` may be sent (400 ``{"errors": {"NAME":
  "NAME cannot be passed when page_info is present."}}``); a cursor not of
  ours is a 400 too;
- filters on the first request: ``updated_at_min`` (ISO 8601; the products
  updated at or after it), ``since_id``; ``fields=a,b`` keeps those fields.

Products carry ``created_at``/``updated_at`` in the shop's time zone
(``2024-01-01T08:00:00-04:00``). The budget (standard plan): a leaky bucket of 40
calls leaking 2 a second, ``X-Shopify-Shop-Api-Call-Limit: 32/40`` on every
listing answer; a call that finds it full gets 429 with ``Retry-After: 2.0``.
The bucket counts the list endpoint's calls only (the per-id endpoint is not
budgeted, so the per-id crawls of tests run at their own pace).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import random
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import web

from tests.support.imitations._base import Imitation, Refused, first_stamp, json_answer, parse_time, whole
from tests.support.imitations.budgets import LeakyBucket

TOKEN = "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"
PATH = re.compile(r"/admin/api/2024-10/products/([0-9]+)\.json")
LIST_PATH = "/admin/api/2024-10/products.json"
FIRST_ID = 7_204_539_760_000
SIZE = 300
SHOP_ZONE = timezone(timedelta(hours=-4))
#: The parameters that may come with ``page_info``.
WITH_PAGE_INFO = {"page_info", "limit", "fields"}
#: The documented example, kept as is.
IPOD = {"id": FIRST_ID, "title": "IPod Nano - 8GB", "vendor": "Apple", "product_type": "Cult Products",
        "variants": [{"id": 808950810, "title": "Pink", "price": "199.00", "inventory_quantity": 10}]}


def spell(when: datetime) -> str:
    return when.astimezone(SHOP_ZONE).isoformat()


def snowboard(rng: random.Random, product_id: int, n: int, when: datetime) -> dict[str, Any]:
    return {
        "id": product_id, "title": f"Snowboard {n}", "vendor": rng.choice(["Hydrogen", "Burton", "Jones"]),
        "product_type": rng.choice(["Snowboard", "Bindings"]), "status": "active",
        "created_at": spell(when), "updated_at": spell(when),
        "variants": [{"id": 40_000_000_000 + n, "title": "Default Title",
                      "price": f"{rng.randint(100, 99999) / 100:.2f}", "inventory_quantity": rng.randint(0, 50)}],
    }


def catalogue(size: int | None = None) -> dict[int, dict[str, Any]]:
    rng = random.Random("shopify")
    ipod = copy.deepcopy(IPOD)
    ipod["created_at"] = ipod["updated_at"] = spell(first_stamp(0))
    products = {FIRST_ID: ipod}
    product_id = FIRST_ID
    for n in range((SIZE if size is None else size) - 1):
        product_id += rng.choice((1, 2, 3, 5))
        products[product_id] = snowboard(rng, product_id, n, first_stamp(n + 1))
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


def bad_request(name: str, message: str) -> web.Response:
    return json_answer({"errors": {name: message}}, 400)


def encode_cursor(cursor: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(page_info: str) -> dict[str, Any]:
    try:
        cursor = json.loads(base64.urlsafe_b64decode(page_info + "=" * (-len(page_info) % 4)))
        assert isinstance(cursor, dict) and cursor["direction"] in ("next", "prev")
        int(cursor["last_id"])
    except (binascii.Error, ValueError, AssertionError, KeyError, TypeError):
        raise Refused(bad_request("page_info", "Invalid value.")) from None
    return cursor


class Shopify(Imitation):
    name = "shopify"

    def __init__(self, size: int | None = None, bucket: int = 40, leak: float = 2.0) -> None:
        self.bucket = LeakyBucket(bucket, leak)
        super().__init__(size)

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["updated_at"])

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["updated_at"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["variants"][0]["price"] = f"{rng.randint(100, 99999) / 100:.2f}"

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        product_id = (last or FIRST_ID) + rng.choice((1, 2, 3, 5))
        return product_id, snowboard(rng, product_id, product_id - FIRST_ID, when)

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

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] == LIST_PATH

    def listing(self, request: web.Request) -> web.Response:
        query = request.query
        limit = whole(request, "limit", 50, 1, 250, bad_request)
        if "page_info" in query:
            extra = sorted(set(query) - WITH_PAGE_INFO)
            if extra:
                raise Refused(bad_request(extra[0], f"{extra[0]} cannot be passed when page_info is present."))
            cursor = decode_cursor(query["page_info"])
        else:
            cursor = {"direction": "next", "last_id": whole(request, "since_id", 0, 0, None, bad_request)}
            if "updated_at_min" in query:
                since = parse_time(query["updated_at_min"], SHOP_ZONE)
                if since is None:
                    raise Refused(bad_request("updated_at_min", "updated_at_min is invalid."))
                cursor["updated_at_min"] = since.isoformat()
        since = cursor.get("updated_at_min")
        keys = self.ordered() if since is None else self.since(datetime.fromisoformat(since), inclusive=True)
        last_id = int(cursor["last_id"])
        if cursor["direction"] == "next":
            page = [key for key in keys if key > last_id][:limit]
        else:
            page = [key for key in keys if key < last_id][-limit:]
        links = []
        if page and "page_info" in query and keys[0] < page[0]:
            links.append(self.link(request, limit, {**cursor, "direction": "prev", "last_id": page[0]}, "previous"))
        if page and keys[-1] > page[-1]:
            links.append(self.link(request, limit, {**cursor, "direction": "next", "last_id": page[-1]}, "next"))
        fields = [name for name in query.get("fields", "").split(",") if name]
        products = [self.products[key] for key in page]
        if fields:
            products = [{name: product[name] for name in fields if name in product} for product in products]
        return json_answer({"products": products}, headers={"Link": ", ".join(links)} if links else None)

    @staticmethod
    def link(request: web.Request, limit: int, cursor: dict[str, Any], rel: str) -> str:
        fields = request.query.get("fields")
        also = f"&fields={fields}" if fields else ""
        return (f'<{request.scheme}://{request.host}{LIST_PATH}?limit={limit}{also}'
                f'&page_info={encode_cursor(cursor)}>; rel="{rel}"')

    # The budget.
    def reset_budget(self) -> None:
        self.bucket.reset()

    def spend(self, now: float) -> tuple[web.Response | None, dict[str, str]]:
        allowed, level = self.bucket.hit(now)
        headers = {"X-Shopify-Shop-Api-Call-Limit": f"{level}/{self.bucket.size}"}
        if allowed:
            return None, headers
        return json_answer({"errors": "Exceeded 2 calls per second for api client. Reduce request rates to "
                                      "resume uninterrupted service."}, 429,
                           {**headers, "Retry-After": "2.0"}), headers
