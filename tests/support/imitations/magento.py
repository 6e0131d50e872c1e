"""Magento 2 / Adobe Commerce REST, ``Authorization: Bearer``: one product, and the product search.

Per SKU, ``GET /rest/default/V1/products/{sku}``: SKUs are strings with spaces
and slashes: ``WS12 M/Blue`` is asked as ``WS12%20M%2FBlue`` (an unencoded
``/`` is another path, a 404). Stock is at
``extension_attributes.stock_item.qty``. A wrong or missing token is a 401,
an unknown SKU a 404 ``{"message": "The product that was requested doesn't exist..."}``.

The listing, as Adobe documents "Search using REST endpoints"
(``searchCriteria``) and as its collections page:

- ``GET /rest/V1/products?searchCriteria[pageSize]=N&searchCriteria[currentPage]=P``
  (also under ``/rest/default/`` and ``/rest/all/``) answers ``{"items": [...],
  "search_criteria": {...}, "total_count": T}`` in entity id order;
  ``total_count`` counts the products, not the pages; without ``pageSize``
  every product comes at once (input limiting is off by default); without
  any ``searchCriteria`` parameter it is a 400 (the field is required);
- **a page past the end answers the last page again**, and ``search_criteria``
  echoes the page asked for, not the one answered;
- ``searchCriteria[filter_groups][G][filters][F][field|value|condition_type]``
  filters (filters of one group OR-ed, groups AND-ed; ``condition_type`` eq
  (the default), neq, gt, gteq, lt, lteq, in); products carry ``created_at``
  and ``updated_at`` in UTC (``2024-01-01 00:00:00``);
- ``fields=`` keeps the fields named, as Adobe documents "Retrieve filtered
  responses for REST endpoints" (per SKU too): ``sku,name`` top-level ones,
  ``extension_attributes[stock_item[qty]]`` nested ones; on the listing
  ``fields=items[sku,name]`` answers ``{"items": [...]}`` alone, without
  ``total_count`` unless it is named too.

No request budget is documented: none is enforced.
"""

from __future__ import annotations

import copy
import math
import operator
import random
import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from tests.support.imitations._base import Imitation, Refused, first_stamp, json_answer, parse_time

TOKEN = "mg2t0k3n_q8w7e6r5t4y3u2i1o0p9a8s7d6f5"
PREFIX = "/rest/default/V1/products/"
LIST_PATHS = ("/rest/V1/products", "/rest/default/V1/products", "/rest/all/V1/products")
SIZE = 300
#: The documented example, kept as is.
SHIRT = {"id": 1546, "sku": "WS12 M/Blue", "name": "Radiant Tee", "price": 22, "status": 1, "type_id": "simple",
         "extension_attributes": {"stock_item": {"qty": 100, "is_in_stock": True}}}
CONDITIONS = {"eq": operator.eq, "neq": operator.ne, "gt": operator.gt, "gteq": operator.ge, "lt": operator.lt,
              "lteq": operator.le}
FILTER = re.compile(r"searchCriteria\[filter_groups\]\[(\d+)\]\[filters\]\[(\d+)\]\[(field|value|condition_type)\]")
DATES = ("created_at", "updated_at")


def spell(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def tee(rng: random.Random, n: int, when: datetime) -> dict[str, Any]:
    sku = f"{rng.choice(['MH', 'WS', 'MJ'])}{n:02d} {rng.choice('SML')}/{rng.choice(['Blue', 'Red', 'Gray'])}"
    return {"id": 2000 + n, "sku": sku, "name": f"Tee {n}", "price": rng.randint(10, 90), "status": 1,
            "type_id": "simple", "created_at": spell(when), "updated_at": spell(when),
            "extension_attributes": {"stock_item": {"qty": rng.randint(0, 200), "is_in_stock": True}}}


def catalogue(size: int | None = None) -> dict[str, dict[str, Any]]:
    rng = random.Random("magento")
    shirt = {**copy.deepcopy(SHIRT), "created_at": spell(first_stamp(0)), "updated_at": spell(first_stamp(0))}
    products: dict[str, dict[str, Any]] = {"WS12 M/Blue": shirt}
    for n in range(1, SIZE if size is None else size):
        product = tee(rng, n, first_stamp(n))
        products[product["sku"]] = product
    return products


def bad(message: str) -> web.Response:
    return json_answer({"message": message}, 400)


def field_tree(spec: str) -> dict[str, Any]:
    """``items[sku,extension_attributes[stock_item[qty]]],total_count`` as nested dicts (None: the whole value)."""
    root: dict[str, Any] = {}
    stack, name = [root], ""
    for char in spec + ",":
        if char == "[":
            if not name:
                raise Refused(bad(f"Invalid fields: {spec}"))
            stack[-1][name] = {}
            stack.append(stack[-1][name])
            name = ""
        elif char in ",]":
            if name:
                stack[-1][name.strip()] = None
            name = ""
            if char == "]":
                if len(stack) == 1:
                    raise Refused(bad(f"Invalid fields: {spec}"))
                stack.pop()
        else:
            name += char
    if len(stack) != 1:
        raise Refused(bad(f"Invalid fields: {spec}"))
    return root


def kept(value: Any, tree: dict[str, Any] | None) -> Any:
    """``value`` with only the fields of ``tree`` (each object of a list alike)."""
    if tree is None:
        return value
    if isinstance(value, list):
        return [kept(one, tree) for one in value]
    if isinstance(value, dict):
        return {name: kept(value[name], below) for name, below in tree.items() if name in value}
    return value


def number(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise Refused(bad(f'The "{raw}" value\'s type is invalid. The "int" type was expected. Verify and try '
                          f"again. ({name})")) from None


class Magento(Imitation):
    name = "magento"

    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        return catalogue(size)

    def ordered(self) -> list[Any]:
        if self._order is None:
            self._order = sorted(self.products, key=lambda sku: self.products[sku]["id"])
        return self._order

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["updated_at"]).replace(tzinfo=UTC)

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["updated_at"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["price"] = rng.randint(10, 90)

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        n = max(product["id"] for product in self.products.values()) - 2000 + 1
        product = tee(rng, n, when)
        return product["sku"], product

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return json_answer({"message": "The consumer isn't authorized to access %resources.",
                                "parameters": {"resources": "Magento_Catalog::products"}}, 401)
        return None

    def product_key(self, request: web.Request) -> str | None:
        path = request.raw_path.partition("?")[0]
        encoded = path[len(PREFIX):] if path.startswith(PREFIX) else ""
        return unquote(encoded) if encoded and "/" not in encoded else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        product = self.products.get(key)
        fields = request.query.get("fields")
        return product if product is None or not fields else kept(product, field_tree(fields))

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return json_answer({"message": "The product that was requested doesn't exist. Verify the product and "
                                       "try again."}, 404)

    # The listing.
    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] in LIST_PATHS

    def listing(self, request: web.Request) -> web.Response:
        query = request.query
        if not any(name.startswith("searchCriteria") for name in query):
            raise Refused(json_answer({"message": '"%fieldName" is required. Enter and try again.',
                                       "parameters": {"fieldName": "searchCriteria"}}, 400))
        groups: dict[int, dict[int, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
        for name, value in query.items():
            found = FILTER.fullmatch(name)
            if found:
                groups[int(found[1])][int(found[2])][found[3]] = value
        keys = self.ordered()
        for group in groups.values():
            tests = [self.condition(spec) for spec in group.values()]
            keys = [key for key in keys if any(test(self.products[key]) for test in tests)]
        criteria: dict[str, Any] = {"filter_groups": [
            {"filters": [{"field": spec.get("field"), "value": spec.get("value"),
                          "condition_type": spec.get("condition_type", "eq")} for _, spec in sorted(group.items())]}
            for _, group in sorted(groups.items())]}
        total = len(keys)
        size = query.get("searchCriteria[pageSize]")
        if size is not None:
            page_size = number(size, "pageSize")
            page = number(query.get("searchCriteria[currentPage]", "1"), "currentPage")
            criteria.update(page_size=page_size, current_page=page)
            if page_size > 0:
                # The collection's page is clamped to its last one: past the end, the last page again.
                page = max(1, min(page, math.ceil(total / page_size)))
                keys = keys[(page - 1) * page_size:page * page_size]
        body = {"items": [self.products[key] for key in keys], "search_criteria": criteria, "total_count": total}
        fields = query.get("fields")
        return json_answer(body if not fields else kept(body, field_tree(fields)))

    def condition(self, spec: dict[str, str]) -> Any:
        field, value, kind = spec.get("field"), spec.get("value", ""), spec.get("condition_type", "eq")
        if field == "entity_id":
            field = "id"
        if field not in ("id", "sku", "name", "price", "status", "type_id", *DATES):
            raise Refused(bad(f'Invalid attribute name: {field}'))
        if kind == "in":
            wanted = set(value.split(","))
            return lambda product: str(product[field]) in wanted
        if kind not in CONDITIONS:
            raise Refused(bad(f'Invalid condition type: {kind}'))
        compare = CONDITIONS[kind]
        bound: Any
        if field in DATES:
            when = parse_time(value)
            if when is None:
                raise Refused(bad(f'Invalid date value for {field}: "{value}"'))
            bound = spell(when)
        elif field in ("id", "price", "status"):
            try:
                bound = float(value)
            except ValueError:
                raise Refused(bad(f'Invalid number for {field}: "{value}"')) from None
        else:
            bound = value
        return lambda product: compare(product[field], bound)
