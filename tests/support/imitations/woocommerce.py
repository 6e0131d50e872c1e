"""WooCommerce REST v3, HTTP Basic (consumer key : consumer secret): one product, and the product listing.

Per id, ``GET /wp-json/wc/v3/products/{id}``: prices and ``average_rating``
are strings, ``categories`` a list of ``{"id", "name"}``. Ids are WordPress
post ids: pages and images in between answer 404 ``{"code":
"woocommerce_rest_product_invalid_id", ...}``; a wrong or missing credential
is a 401 ``woocommerce_rest_cannot_view``.

The listing, as the WooCommerce REST API documents "List all products" and
the WordPress REST API its pagination:

- ``GET /wp-json/wc/v3/products?per_page=100&page=N`` (``per_page`` default 10,
  1 to 100, else a 400 ``rest_invalid_param``) answers a JSON array, newest
  first (``orderby=date``, ``order=desc``; ``orderby`` also ``id`` or
  ``modified``, ``order=asc``); ``X-WP-Total`` counts the products,
  ``X-WP-TotalPages`` the pages, and one ``Link`` header holds
  ``<URL>; rel="prev"`` and ``<URL>; rel="next"`` (the request's parameters,
  its page moved) where such a page exists; a page past the end is ``[]``;
- ``modified_after`` (ISO 8601; the site's time zone, UTC here, when it has
  none) keeps the products modified strictly after it. Products carry
  ``date_created``/``date_modified`` and their ``_gmt`` twins (``2024-01-01T00:00:00``).

No request budget is documented: none is enforced.
"""

from __future__ import annotations

import base64
import copy
import math
import random
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from tests.support.imitations._base import Imitation, Refused, first_stamp, json_answer, parse_time, whole

CONSUMER_KEY = "ck_4f9e1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b"
CONSUMER_SECRET = "cs_9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"
PATH = re.compile(r"/wp-json/wc/v3/products/([0-9]+)")
LIST_PATH = "/wp-json/wc/v3/products"
#: The documented example, kept as is.
SHIRT = {"id": 794, "name": "Premium Quality", "price": "21.99", "regular_price": "21.99", "stock_quantity": 7,
         "categories": [{"id": 9, "name": "Clothing"}, {"id": 14, "name": "T-shirts"}],
         "average_rating": "4.50", "rating_count": 2, "total_sales": 33}


def spell(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def dated(product: dict[str, Any], when: datetime) -> dict[str, Any]:
    for name in ("date_created", "date_created_gmt", "date_modified", "date_modified_gmt"):
        product[name] = spell(when)
    return product


def hoodie(rng: random.Random, post_id: int, when: datetime) -> dict[str, Any]:
    price = f"{rng.randint(100, 20000) / 100:.2f}"
    return dated({
        "id": post_id, "name": f"Hoodie {post_id}", "type": "simple", "status": "publish",
        "price": price, "regular_price": price, "stock_quantity": rng.choice([None, rng.randint(0, 99)]),
        "categories": [rng.choice([{"id": 9, "name": "Clothing"}, {"id": 15, "name": "Music"}])],
        "average_rating": f"{rng.randint(0, 500) / 100:.2f}", "total_sales": rng.randint(0, 500),
    }, when)


def catalogue(size: int | None = None) -> dict[int, dict[str, Any]]:
    """Post ids from 10 with gaps (the other posts are pages, images, orders); without ``size``, those below 1000."""
    rng = random.Random("woocommerce")
    products: dict[int, dict[str, Any]] = {}
    post_id = 10
    while (post_id < 1000) if size is None else (len(products) < size):
        when = first_stamp(len(products))
        if post_id == SHIRT["id"]:
            products[post_id] = dated(copy.deepcopy(SHIRT), when)
        elif rng.random() < 0.35:
            products[post_id] = hoodie(rng, post_id, when)
        post_id += 1
    return products


def invalid(name: str, message: str) -> web.Response:
    return json_answer({"code": "rest_invalid_param", "message": f"Invalid parameter(s): {name}",
                        "data": {"status": 400, "params": {name: message}}}, 400)


class WooCommerce(Imitation):
    name = "woocommerce"

    def __init__(self, size: int | None = None) -> None:
        super().__init__(size)
        credentials = base64.b64encode(f"{CONSUMER_KEY}:{CONSUMER_SECRET}".encode()).decode()
        self.authorization = f"Basic {credentials}"

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["date_modified_gmt"]).replace(tzinfo=UTC)

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["date_modified"] = product["date_modified_gmt"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["price"] = product["regular_price"] = f"{rng.randint(100, 20000) / 100:.2f}"

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        post_id = last + rng.randint(1, 4)
        return post_id, hoodie(rng, post_id, when)

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

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] in (LIST_PATH, LIST_PATH + "/")

    def listing(self, request: web.Request) -> web.Response:
        query = request.query
        per_page = whole(request, "per_page", 10, 1, 100, invalid)
        page = whole(request, "page", 1, 1, None, invalid)
        orderby, order = query.get("orderby", "date"), query.get("order", "desc")
        if orderby not in ("date", "id", "modified"):
            raise Refused(invalid("orderby", "orderby is not one of date, id, modified."))
        if order not in ("asc", "desc"):
            raise Refused(invalid("order", "order is not one of asc and desc."))
        keys = self.ordered()  # ids grow with the creation date: date order is id order
        if "modified_after" in query:
            after = parse_time(query["modified_after"])
            if after is None:
                raise Refused(invalid("modified_after", "Invalid date."))
            keys = self.since(after, inclusive=False)
        if orderby == "modified":
            keys = sorted(keys, key=lambda key: (self.modified[key], key))
        if order == "desc":
            keys = keys[::-1]
        total = len(keys)
        pages = math.ceil(total / per_page)
        body = [self.products[key] for key in keys[(page - 1) * per_page:page * per_page]]
        others = {name: value for name, value in query.items() if name != "page"}
        links = []
        if page > 1 and pages:
            links.append(self.link(request, others, min(page - 1, pages), "prev"))
        if page < pages:
            links.append(self.link(request, others, page + 1, "next"))
        headers = {"X-WP-Total": str(total), "X-WP-TotalPages": str(pages)}
        if links:
            headers["Link"] = ", ".join(links)
        return json_answer(body, headers=headers)

    @staticmethod
    def link(request: web.Request, others: dict[str, str], page: int, rel: str) -> str:
        return f'<{request.scheme}://{request.host}{LIST_PATH}?{urlencode({**others, "page": page})}>; rel="{rel}"'
