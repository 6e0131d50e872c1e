"""Best Buy Products API, ``apiKey`` in the query: one product, and the product search.

Per SKU, ``GET /v1/products/{sku}.json?apiKey=KEY`` answers ``salePrice``,
``manufacturer``, ``categoryPath`` (``[1].name`` the department); ``show=a,b``
keeps those attributes only. SKUs are sparse 7-8 digit integers; a wrong or
missing ``apiKey`` is a 403 (JSON, "The provided API Key is invalid."), an
unknown SKU a 404.

The listing, as Best Buy's developer documentation describes the Products API
(pagination, ``cursorMark``, search by attribute, rate limits):

- ``GET /v1/products?apiKey=KEY&format=json&pageSize=100&page=N`` (``pageSize``
  default 10, 1 to 100, else a 400; without ``format=json`` the answer is XML)
  answers ``{"from", "to", "currentPage", "total", "totalPages", "queryTime",
  "totalTime", "partial", "canonicalUrl", "products": [...]}`` in SKU order; a
  page past the end has ``products: []``;
- ``cursorMark=*`` starts a cursor walk (no ``page`` with it: a 400): each
  answer carries ``nextCursorMark`` to send next; **at the end the same mark
  comes back** (with no products), so a walk takes the pages plus one request;
- a search in the path, ``/v1/products(itemUpdateDate>2024-01-01T00:00:00)``,
  keeps the products whose attribute compares so (``=``, ``!=``, ``>``,
  ``>=``, ``<``, ``<=``; terms joined by ``&``); products carry
  ``itemUpdateDate`` (``2024-01-01T00:00:00``, UTC here).

The budget: 5 requests a second and 50,000 a day (windows from the imitation's
start or reset). Over the per-second one the gateway answers **403** (not 429)
with the HTML ``<h1>Over Quota</h1>``; over the daily one, 403 with JSON
``{"errorCode": "403", "errorMessage": "Over Quota"}``. Both count list requests only.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import math
import operator
import random
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from tests.support.imitations._base import Imitation, Refused, first_stamp, json_answer, parse_time, whole
from tests.support.imitations.budgets import FixedWindow

API_KEY = "bbK3yAq7Zx9Wm2Lp5Rt8Vn4C"
PATH = re.compile(r"/v1/products/([0-9]{7,8})\.json")
LIST_PATH = re.compile(r"/v1/products(?:\((.*)\))?(?:\.json)?")
FIRST_SKU = 6_501_001
SIZE = 250
#: A product as the documentation shows one.
TV = {"sku": FIRST_SKU, "name": "Samsung - 65\" Class Crystal UHD 4K Smart TV", "salePrice": 479.99,
      "regularPrice": 529.99, "manufacturer": "Samsung",
      "categoryPath": [{"id": "cat00000", "name": "Best Buy"}, {"id": "abcat0100000", "name": "TV & Home Theater"},
                       {"id": "abcat0101000", "name": "TVs"}],
      "customerReviewAverage": 4.6, "customerReviewCount": 1520, "onlineAvailability": True}
TERM = re.compile(r"([A-Za-z.]+)(>=|<=|!=|>|<|=)(.*)")
COMPARE = {"=": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge, "<": operator.lt,
           "<=": operator.le}


def spell(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def gadget(rng: random.Random, sku: int, n: int, when: datetime) -> dict[str, Any]:
    department = rng.choice(["Computers & Tablets", "Cell Phones", "Appliances"])
    return {"sku": sku, "name": f"Gadget {n}", "salePrice": rng.randint(500, 200000) / 100,
            "regularPrice": 2000.0, "manufacturer": rng.choice(["Apple", "Lenovo", "LG"]),
            "categoryPath": [{"id": "cat00000", "name": "Best Buy"}, {"id": f"abcat{n:07d}", "name": department}],
            "customerReviewAverage": rng.choice([None, rng.randint(10, 50) / 10]),
            "customerReviewCount": rng.randint(0, 900), "onlineAvailability": True, "itemUpdateDate": spell(when)}


def catalogue(size: int | None = None) -> dict[int, dict[str, Any]]:
    rng = random.Random("bestbuy")
    products = {FIRST_SKU: {**copy.deepcopy(TV), "itemUpdateDate": spell(first_stamp(0))}}
    sku = FIRST_SKU
    for n in range((SIZE if size is None else size) - 1):
        sku += rng.choice((1, 2, 4))
        products[sku] = gadget(rng, sku, n, first_stamp(n + 1))
    return products


def bad(message: str) -> web.Response:
    return json_answer({"errorCode": "400", "errorMessage": message}, 400)


def encode_mark(sku: int) -> str:
    return base64.b64encode(f"sku:{sku}".encode()).decode()


def decode_mark(mark: str) -> int:
    if mark == "*":
        return 0
    try:
        return int(base64.b64decode(mark, validate=True).decode().removeprefix("sku:"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Refused(bad(f"Invalid cursorMark: {mark}")) from None


class BestBuy(Imitation):
    name = "bestbuy"

    def __init__(self, size: int | None = None, per_second: int = 5, per_day: int = 50_000) -> None:
        self.second, self.day = FixedWindow(per_second, 1.0), FixedWindow(per_day, 86_400.0)
        super().__init__(size)

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["itemUpdateDate"]).replace(tzinfo=UTC)

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["itemUpdateDate"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["salePrice"] = rng.randint(500, 200000) / 100

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        sku = last + rng.choice((1, 2, 4))
        return sku, gadget(rng, sku, sku - FIRST_SKU, when)

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

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return LIST_PATH.fullmatch(unquote(request.raw_path.partition("?")[0])) is not None

    def listing(self, request: web.Request) -> web.Response:
        query = request.query
        size = whole(request, "pageSize", 10, 1, 100, lambda name, message: bad(message))
        page = whole(request, "page", 1, 1, None, lambda name, message: bad(message))
        found = LIST_PATH.fullmatch(unquote(request.raw_path.partition("?")[0]))
        assert found is not None
        keys = self.search(found[1]) if found[1] else self.ordered()
        body: dict[str, Any] = {"total": len(keys), "totalPages": math.ceil(len(keys) / size), "queryTime": "0.004",
                                "totalTime": "0.010", "partial": False,
                                "canonicalUrl": f"/v1/products{'(' + found[1] + ')' if found[1] else ''}"
                                                f"?format=json&pageSize={size}"}
        if "cursorMark" in query:
            if "page" in query:
                raise Refused(bad("page cannot be used with cursorMark"))
            mark = query["cursorMark"]
            after = decode_mark(mark)
            start = bisect.bisect_right(keys, after)
            chosen = keys[start:start + size]
            body["nextCursorMark"] = encode_mark(chosen[-1]) if chosen else mark
            body["currentPage"] = 1
        else:
            start = (page - 1) * size
            chosen = keys[start:start + size]
            body["currentPage"] = page
        body.update({"from": start + 1 if chosen else 0, "to": start + len(chosen)})
        show = [name for name in query.get("show", "").split(",") if name]
        products = [self.products[key] for key in chosen]
        if show:
            products = [{name: product[name] for name in show if name in product} for product in products]
        body["products"] = products
        if query.get("format") != "json":
            skus = "".join(f"<product><sku>{product.get('sku', '')}</sku></product>" for product in products)
            return web.Response(text=f'<?xml version="1.0" encoding="UTF-8"?><products currentPage='
                                     f'"{body["currentPage"]}" total="{body["total"]}">{skus}</products>',
                                content_type="application/xml")
        return json_answer(body)

    def search(self, terms: str) -> list[Any]:
        keys = self.ordered()
        for term in terms.split("&"):
            found = TERM.fullmatch(term.strip())
            if found is None:
                raise Refused(bad(f"Couldn't understand '({terms})'"))
            name, compare, raw = found[1], COMPARE[found[2]], found[3]
            if name == "itemUpdateDate":
                when = parse_time(raw)
                if when is None:
                    raise Refused(bad(f"Invalid date for itemUpdateDate: {raw}"))
                keys = [key for key in keys if compare(self.modified[key], when)]
            elif name in ("sku", "salePrice"):
                try:
                    bound = float(raw)
                except ValueError:
                    raise Refused(bad(f"Couldn't understand '({terms})'")) from None
                keys = [key for key in keys if compare(self.products[key][name], bound)]
            elif name in ("manufacturer", "name"):
                keys = [key for key in keys if compare(str(self.products[key][name]), raw)]
            else:
                raise Refused(bad(f"Couldn't understand '({terms})'"))
        return keys

    # The budget.
    def reset_budget(self) -> None:
        self.second.reset()
        self.day.reset()

    def spend(self, now: float) -> tuple[web.Response | None, dict[str, str]]:
        this_second, _, _ = self.second.hit(now)
        this_day, _, _ = self.day.hit(now)
        if not this_day:
            return json_answer({"errorCode": "403", "errorMessage": "Over Quota"}, 403), {}
        if not this_second:
            return web.Response(text="<h1>Over Quota</h1>", status=403, content_type="text/html"), {}
        return None, {}
