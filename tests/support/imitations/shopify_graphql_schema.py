"""The schema of the Shopify GraphQL Admin API imitation, and the REST catalogue's products in its shape.

The part of the GraphQL Admin API 2024-10 a product crawler reads (shopify.dev,
GraphQL Admin API reference: ``QueryRoot.products``, ``Product``,
``ProductVariant``; "Paginating results with GraphQL"; "Shopify API search
syntax"): Relay connections with ``edges``/``nodes``/``pageInfo`` and opaque
cursors, ids as GIDs, times in UTC, and the ``query`` argument's terms on
``updated_at`` and ``id``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime
from typing import Any

from graphql import GraphQLError, build_schema

from tests.support.imitations._base import parse_time

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
