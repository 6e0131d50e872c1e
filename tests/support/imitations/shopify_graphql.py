"""Shopify's GraphQL Admin API 2024-10 over the REST imitation's catalogue: ``POST /admin/api/2024-10/graphql.json``.

Written from shopify.dev ("GraphQL Admin API rate limits", "Paginating results
with GraphQL", "Shopify API search syntax") and the Shopify Engineering post on
calculated query cost. The catalogue, the token and ``mutate()`` are those of
``shopify.Shopify`` (its REST endpoints still answer here), so REST and GraphQL
of one imitation agree; a product's id is ``gid://shopify/Product/<REST id>``.

A request is ``{"query": ..., "variables": {...}, "operationName": ...}`` with
``X-Shopify-Access-Token``; a wrong token is a 401 as in REST. Every other
answer is a 200 with ``extensions.cost`` = ``{requestedQueryCost,
actualQueryCost, throttleStatus: {maximumAvailable, currentlyAvailable,
restoreRate}}`` (see ``graphql_cost`` for the cost); a query that is not
GraphQL, or asks for a field the schema lacks, is a 200 with ``errors``.

The budget: a leaky bucket of ``maximum`` points (1,000) restoring ``restore``
points a second (50). A query whose requested cost exceeds the points
available runs not at all: ``errors: [{"message": "Throttled", "extensions":
{"code": "THROTTLED", ...}}]``, no data. Otherwise the requested cost is taken
before it runs and the difference to the actual cost given back after. A
requested cost above 1,000 is refused whatever the bucket holds
(``MAX_COST_EXCEEDED``).

``products(first, after, last, before, query, reverse, sortKey)``: the
products by id (``sortKey: UPDATED_AT``: by modification time), edges with
cursors and ``nodes``, ``pageInfo``; ``query`` takes Shopify's search syntax
for ``updated_at`` and ``id`` (``updated_at:>='2024-01-01T00:00:00Z'``,
``updated_at:>2024-01-01``, ``id:>123``, terms joined by spaces or ``AND``);
another field is ignored with a warning in ``extensions.search``, as Shopify
does. ``product(id:)`` answers one product or null; ``shop`` the shop.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from graphql import (
    ExecutionResult,
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    build_schema,
    execute,
    get_operation_ast,
    parse,
    validate,
)
from graphql.execution.values import get_variable_values

from tests.support.imitations._base import ARRIVAL, json_answer, parse_time
from tests.support.imitations.graphql_cost import Cost, CostError
from tests.support.imitations.shopify import Shopify

PATH = "/admin/api/2024-10/graphql.json"
DOCUMENTATION = "https://shopify.dev/api/usage/rate-limits"
#: The largest requested cost of one query, whatever the plan.
SINGLE_QUERY_MAX = 1000
SDL = """
scalar DateTime
scalar Money
scalar Decimal
enum ProductStatus { ACTIVE ARCHIVED DRAFT }
enum ProductSortKeys { ID UPDATED_AT }
enum CurrencyCode { USD }
enum ShopCustomerAccountsSetting { DISABLED OPTIONAL REQUIRED }
type Shop { id: ID! name: String! timezoneOffsetMinutes: Int! customerAccounts: ShopCustomerAccountsSetting! }
type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }
type MoneyV2 { amount: Decimal! currencyCode: CurrencyCode! }
type ProductPriceRangeV2 { minVariantPrice: MoneyV2! maxVariantPrice: MoneyV2! }
type ProductVariant {
  id: ID! legacyResourceId: String! title: String! sku: String price: Money! compareAtPrice: Money
  inventoryQuantity: Int
}
type ProductVariantEdge { cursor: String! node: ProductVariant! }
type ProductVariantConnection { edges: [ProductVariantEdge!]! nodes: [ProductVariant!]! pageInfo: PageInfo! }
type Product {
  id: ID! legacyResourceId: String! title: String! vendor: String! productType: String! status: ProductStatus!
  createdAt: DateTime! updatedAt: DateTime! totalInventory: Int! priceRangeV2: ProductPriceRangeV2!
  variants(first: Int, after: String, last: Int, before: String, reverse: Boolean = false): ProductVariantConnection!
}
type ProductEdge { cursor: String! node: Product! }
type ProductConnection { edges: [ProductEdge!]! nodes: [Product!]! pageInfo: PageInfo! }
type QueryRoot {
  products(first: Int, after: String, last: Int, before: String, query: String, reverse: Boolean = false,
           sortKey: ProductSortKeys = ID): ProductConnection!
  product(id: ID!): Product
  shop: Shop!
}
schema { query: QueryRoot }
"""
SCHEMA = build_schema(SDL)
QUERY_ROOT = SCHEMA.query_type
SHOP = {"id": "gid://shopify/Shop/548380009", "name": "Snowdevil", "timezoneOffsetMinutes": -240,
        "customerAccounts": "OPTIONAL"}
TERM = re.compile(r"""(\w+):(>=|<=|>|<)?('[^']*'|"[^"]*"|\S+)""")
COMPARE = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           "<": lambda a, b: a < b, "": lambda a, b: a == b}


class Points:
    """The leaky bucket of cost points: ``maximum`` at most, ``restore`` more each second."""

    def __init__(self, maximum: int, restore: float) -> None:
        self.maximum, self.restore = maximum, restore
        self.reset()

    def reset(self) -> None:
        self.available, self.at = float(self.maximum), time.time()

    def refill(self, now: float) -> None:
        self.available = min(float(self.maximum), self.available + (now - self.at) * self.restore)
        self.at = now

    def take(self, cost: int) -> bool:
        if cost > self.available:
            return False
        self.available -= cost
        return True

    def give_back(self, points: int) -> None:
        self.available = min(float(self.maximum), self.available + points)

    def status(self) -> dict[str, Any]:
        return {"maximumAvailable": float(self.maximum), "currentlyAvailable": math.floor(self.available),
                "restoreRate": float(self.restore)}


def gid(kind: str, key: int) -> str:
    return f"gid://shopify/{kind}/{key}"


def utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_cursor(position: list[Any]) -> str:
    return base64.b64encode(json.dumps({"last": position}, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str) -> list[Any]:
    try:
        position = json.loads(base64.b64decode(cursor, validate=True))["last"]
        assert isinstance(position, list)
    except (binascii.Error, ValueError, AssertionError, KeyError, TypeError):
        raise GraphQLError(f"Invalid cursor for current pagination: {cursor}") from None
    return position


def connection(entries: list[tuple[list[Any], Any]], arguments: dict[str, Any]) -> dict[str, Any]:
    """A Relay connection over ``entries`` ((sort position, node), in order), sliced by first/after, last/before."""
    if arguments.get("reverse"):
        entries = entries[::-1]
    later = (lambda a, b: a < b) if arguments.get("reverse") else (lambda a, b: a > b)
    if arguments.get("after") is not None:
        after = decode_cursor(arguments["after"])
        entries = [entry for entry in entries if later(entry[0], after)]
    if arguments.get("before") is not None:
        before = decode_cursor(arguments["before"])
        entries = [entry for entry in entries if later(before, entry[0])]
    first, last = arguments.get("first"), arguments.get("last")
    page = entries[:first] if first is not None else entries[-last:] if last else entries
    more_after = first is not None and len(entries) > len(page)
    more_before = last is not None and len(entries) > len(page)
    edges = [{"cursor": encode_cursor(position), "node": node} for position, node in page]
    return {"edges": edges, "nodes": [node for _, node in page],
            "pageInfo": {"hasNextPage": more_after or (arguments.get("before") is not None and bool(page)),
                         "hasPreviousPage": more_before or (arguments.get("after") is not None and bool(page)),
                         "startCursor": edges[0]["cursor"] if edges else None,
                         "endCursor": edges[-1]["cursor"] if edges else None}}


def variant_node(variant: dict[str, Any]) -> dict[str, Any]:
    return {"id": gid("ProductVariant", variant["id"]), "legacyResourceId": str(variant["id"]),
            "title": variant.get("title", "Default Title"), "sku": variant.get("sku"), "price": variant["price"],
            "compareAtPrice": variant.get("compare_at_price"), "inventoryQuantity": variant.get("inventory_quantity")}


def product_node(product: dict[str, Any]) -> dict[str, Any]:
    variants = [variant_node(variant) for variant in product["variants"]]
    prices = sorted((float(variant["price"]), variant["price"]) for variant in variants)

    def variant_connection(info: Any, **arguments: Any) -> dict[str, Any]:
        return connection([([int(v["legacyResourceId"])], v) for v in variants], arguments)

    def money(amount: str) -> dict[str, Any]:
        return {"amount": amount, "currencyCode": "USD"}

    return {"id": gid("Product", product["id"]), "legacyResourceId": str(product["id"]), "title": product["title"],
            "vendor": product["vendor"], "productType": product["product_type"],
            "status": product.get("status", "active").upper(), "createdAt": utc(product["created_at"]),
            "updatedAt": utc(product["updated_at"]),
            "totalInventory": sum(v["inventoryQuantity"] or 0 for v in variants),
            "priceRangeV2": {"minVariantPrice": money(prices[0][1]), "maxVariantPrice": money(prices[-1][1])},
            "variants": variant_connection}


def search(query: str) -> tuple[list[tuple[str, str, Any]], list[dict[str, str]]]:
    """Shopify's search syntax, the terms this API filters on: ([(field, operator, value)], warnings)."""
    terms: list[tuple[str, str, Any]] = []
    warnings = []
    for field, operator, raw in TERM.findall(query):
        value = raw[1:-1] if raw[:1] in "'\"" and raw[-1:] == raw[:1] else raw
        if field == "updated_at" and parse_time(value) is not None:
            terms.append((field, operator or "", parse_time(value)))
        elif field == "id" and value.isdigit():
            terms.append((field, operator or "", int(value)))
        else:
            warnings.append({"field": field, "message": "Invalid search field for this query."})
    return terms, warnings


class ShopifyGraphql(Shopify):
    name = "shopify-graphql"

    def __init__(self, size: int | None = None, maximum: int = 1000, restore: float = 50.0,
                 bucket: int = 40, leak: float = 2.0) -> None:
        self.points = Points(maximum, restore)
        super().__init__(size, bucket, leak)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_post(PATH, self._graphql)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    def reset_budget(self) -> None:
        super().reset_budget()
        self.points.reset()
        self.queried = 0

    # The resolvers.
    def root(self, searched: list[dict[str, Any]]) -> dict[str, Any]:
        def products(info: Any, **arguments: Any) -> dict[str, Any]:
            terms, warnings = search(arguments.get("query") or "")
            if warnings:
                searched.append({"path": ["products"], "query": arguments["query"], "warnings": warnings})
            keys = [key for key in self.ordered() if all(COMPARE[op](self.value(key, field), value)
                                                         for field, op, value in terms)]
            by_time = arguments.get("sortKey") == "UPDATED_AT"
            entries = [([self.modified[key].timestamp(), key] if by_time else [key],
                        product_node(self.products[key])) for key in keys]
            return connection(sorted(entries, key=lambda entry: entry[0]), arguments)

        def product(info: Any, id: str) -> dict[str, Any] | None:
            key = id.rpartition("/")[2]
            found = self.products.get(int(key)) if id.startswith("gid://shopify/Product/") and key.isdigit() else None
            return None if found is None else product_node(found)

        return {"products": products, "product": product, "shop": SHOP}

    def value(self, key: int, field: str) -> Any:
        return self.modified[key] if field == "updated_at" else key

    # Serving.
    async def _graphql(self, request: web.Request) -> web.StreamResponse:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        self.queried += 1
        fault = self.faults.get(f"graphql#{self.queried}")
        if fault == "always" or (fault == "once" and f"graphql#{self.queried}" not in self.faulted):
            self.faulted.add(f"graphql#{self.queried}")
            return json_answer({"errors": "Internal Server Error"}, 500 if fault == "always" else 503)
        try:
            asked = await request.json()
            assert isinstance(asked, dict) and isinstance(asked.get("query"), str)
            variables = asked.get("variables") or {}
            assert isinstance(variables, dict)
        except (ValueError, AssertionError):
            return json_answer({"errors": {"query": "Required parameter missing or invalid"}}, 400)
        self.points.refill(time.time())
        answer = self.run(asked["query"], variables, asked.get("operationName"))
        request[ARRIVAL]["cost"] = answer["extensions"]["cost"]
        return json_answer(answer)

    def run(self, query: str, variables: dict[str, Any], operation_name: str | None) -> dict[str, Any]:
        """The answer's body: data and errors, and the cost it charged."""
        try:
            document = parse(query)
        except GraphQLError as error:
            return self.refusal([error.formatted], 0)
        invalid = validate(SCHEMA, document)
        if invalid:
            return self.refusal([error.formatted for error in invalid], 0)
        operation = get_operation_ast(document, operation_name)
        if not isinstance(operation, OperationDefinitionNode):
            return self.refusal([{"message": "An operation name is required"}], 0)
        if SCHEMA.get_root_type(operation.operation) is not QUERY_ROOT:
            return self.refusal([{"message": f"Schema is not configured for {operation.operation.value}s."}], 0)
        coerced = get_variable_values(SCHEMA, operation.variable_definitions or (), variables)
        if isinstance(coerced, list):
            return self.refusal([error.formatted for error in coerced], 0)
        fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
        cost = Cost(SCHEMA, fragments, coerced)
        assert QUERY_ROOT is not None
        try:
            requested = cost.requested(operation.selection_set, QUERY_ROOT)
        except CostError as error:
            return self.refusal([{"message": str(error)}], 0)
        if requested > SINGLE_QUERY_MAX:
            return self.refusal([{
                "message": f"Query cost is {requested}, which exceeds the single query max cost limit "
                           f"({SINGLE_QUERY_MAX}).",
                "extensions": {"code": "MAX_COST_EXCEEDED", "cost": requested, "maxCost": SINGLE_QUERY_MAX,
                               "documentation": DOCUMENTATION}}], requested)
        if not self.points.take(requested):
            return self.refusal([{"message": "Throttled", "extensions": {"code": "THROTTLED",
                                                                         "documentation": DOCUMENTATION}}], requested)
        searched: list[dict[str, Any]] = []
        result = execute(SCHEMA, document, root_value=self.root(searched), operation_name=operation_name,
                         variable_values=variables)
        assert isinstance(result, ExecutionResult)
        actual = cost.actual(operation.selection_set, QUERY_ROOT, result.data)
        self.points.give_back(requested - actual)
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [error.formatted for error in result.errors]
        body["extensions"] = {"cost": self.cost(requested, actual)}
        if searched:
            body["extensions"]["search"] = searched
        return body

    def refusal(self, errors: list[Any], requested: int) -> dict[str, Any]:
        return {"errors": errors, "extensions": {"cost": self.cost(requested, None)}}

    def cost(self, requested: int, actual: int | None) -> dict[str, Any]:
        return {"requestedQueryCost": requested, "actualQueryCost": actual, "throttleStatus": self.points.status()}
