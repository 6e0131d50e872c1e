"""Variants as rows (VARIANTS, VARIANT_FIELDS): product_variants and product_changes, row by row.

Crawled for real against the changing-catalogue imitation, on MySQL, SQLite and
PostgreSQL: products with several variants of distinct prices, SKUs and stock; a
compare-at price that appears, then vanishes; a catalogue that changes between
passes (a variant added, one removed and back, the price of the third variant only).
Shopify's GraphQL variants, edges that carry a cursor beside their node, crawled
from the Shopify GraphQL imitation's listing.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from productcrawler.answer.cleaning import parse_product
from productcrawler.answer.variants import parse_variant_shape
from tests.support.crawls import run_crawl
from tests.support.imitations import shopify
from tests.support.imitations.changing_catalogue import CatalogueApi
from tests.support.imitations.served import Served
from tests.support.imitations.shopify_graphql import ShopifyGraphql
from tests.support.recipes import money, recipe
from tests.support.services import database_query

SETTINGS = {
    "VARIANTS": "variants",
    "VARIANT_FIELDS": "variant_id=id,sku=sku,price=price,stock=inventory_quantity,"
                      "compare_at:decimal(10,2)=compare_at_price",
    "TRACK_CHANGES": "price,stock,compare_at",
    "PRODUCT_PRICE_FROM_VARIANTS": "min",
    "PRODUCT_STOCK_FROM_VARIANTS": "sum",
}


def variant(variant_id: int, sku: str, price: str, stock: int, compare_at: str | None = None) -> dict:
    return {"id": variant_id, "sku": sku, "price": price, "inventory_quantity": stock,
            "compare_at_price": compare_at}


def catalogue(version: int) -> list[dict]:
    first = [variant(11, "BRD-S", "10.00", 5), variant(12, "BRD-M", "12.00", 0), variant(13, "BRD-L", "15.00", 3)]
    if version == 2:  # a sale starts on 11, 12 is gone, 13's price drops, 14 is new
        first = [variant(11, "BRD-S", "10.00", 5, "12.00"), variant(13, "BRD-L", "14.00", 3),
                 variant(14, "BRD-XL", "9.50", 2)]
    if version == 3:  # the sale ends, 12 is back
        first = [variant(11, "BRD-S", "10.00", 5), variant(12, "BRD-M", "12.00", 0),
                 variant(13, "BRD-L", "14.00", 3), variant(14, "BRD-XL", "9.50", 2)]
    # GraphQL's shape for the second product: edges of nodes.
    second = [{"node": variant(21, "CAP", "25.00", 7)}]
    return [{"id": 1, "name": "Board", "price": "999.00", "variants": first},
            {"id": 2, "name": "Cap", "variants": second}]


@pytest.fixture(scope="module")
def api():
    with CatalogueApi() as server:
        yield server


def crawl(api: CatalogueApi, url: str, version: int) -> None:
    api.put(catalogue(version))
    result = run_crawl("-a", "start_id=1", "-a", "end_id=2",
                       settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, **SETTINGS})
    assert result.returncode == 0, result.stderr[-3000:]


def rows(url: str, sql: str, money: tuple[int, ...] = ()) -> list[tuple]:
    """The rows of ``sql``, times as text, the columns at ``money`` as Decimals of cents (SQLite's DECIMAL
    gives 12 for 12.00)."""
    return [tuple(v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime)
                  else Decimal(str(v)).quantize(Decimal("0.01")) if i in money and v is not None else v
                  for i, v in enumerate(row))
            for row in database_query(url, sql)]


def variant_rows(url: str) -> list[tuple]:
    return [(*r[:7], bool(r[7])) for r in rows(
        url, "SELECT product_id, variant_id, sku, price, stock, compare_at, pass_id, removed_at IS NOT NULL "
             "FROM product_variants ORDER BY product_id, variant_id", money=(3, 5))]
CHANGES = ("SELECT product_id, pass_id, variant_id, field, old_value, new_value FROM product_changes "
           "ORDER BY id")


def d(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def test_variants_are_rows_and_their_changes_are_recorded_with_their_ids(api, database_url):
    url = database_url
    crawl(api, url, 1)
    assert variant_rows(url) == [
        (1, "11", "BRD-S", d("10.00"), 5, None, 1, False),
        (1, "12", "BRD-M", d("12.00"), 0, None, 1, False),
        (1, "13", "BRD-L", d("15.00"), 3, None, 1, False),
        (2, "21", "CAP", d("25.00"), 7, None, 1, False)]
    # The product's price is its variants' lowest, its stock their sum (the answer's own price is not used).
    assert rows(url, "SELECT product_id, price, stock FROM products ORDER BY product_id", money=(1,)) == [
        (1, d("10.00"), 8), (2, d("25.00"), 7)]
    assert rows(url, CHANGES) == []

    crawl(api, url, 2)
    assert variant_rows(url) == [
        (1, "11", "BRD-S", d("10.00"), 5, d("12.00"), 2, False),
        (1, "12", "BRD-M", d("12.00"), 0, None, 1, True),  # kept, marked removed
        (1, "13", "BRD-L", d("14.00"), 3, None, 2, False),
        (1, "14", "BRD-XL", d("9.50"), 2, None, 2, False),
        (2, "21", "CAP", d("25.00"), 7, None, 2, False)]
    [(removed_at,)] = rows(url, "SELECT removed_at FROM product_variants WHERE variant_id = '12'")
    changes = rows(url, CHANGES)
    assert sorted(changes, key=str) == sorted([
        (1, 2, None, "price", "10.00", "9.50"), (1, 2, None, "stock", "8", "10"),
        (1, 2, "11", "compare_at", None, "12.00"),
        (1, 2, "13", "price", "15.00", "14.00"),
        (1, 2, "12", "removed", None, removed_at)], key=str)

    crawl(api, url, 3)
    assert variant_rows(url) == [
        (1, "11", "BRD-S", d("10.00"), 5, None, 3, False),
        (1, "12", "BRD-M", d("12.00"), 0, None, 3, False),
        (1, "13", "BRD-L", d("14.00"), 3, None, 3, False),
        (1, "14", "BRD-XL", d("9.50"), 2, None, 3, False),
        (2, "21", "CAP", d("25.00"), 7, None, 3, False)]
    assert sorted(rows(url, CHANGES)[len(changes):], key=str) == sorted([
        (1, 3, "11", "compare_at", "12.00", None),
        (1, 3, "12", "removed", removed_at, None)], key=str)
    first_seen = rows(url, "SELECT variant_id, first_seen FROM product_variants ORDER BY variant_id")
    assert first_seen[0][1] == first_seen[1][1] < first_seen[3][1]  # 14 first seen in pass 2


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_listed_products_carry_their_columns_answers_and_variants(api, kind, request, tmp_path):
    url = f"sqlite:///{tmp_path / 'listed.db'}" if kind == "sqlite" else request.getfixturevalue("postgresql_url")
    api.put(catalogue(1))
    result = run_crawl(settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, **SETTINGS,
                                 "PRODUCT_LIST_URL": f"{api.base_url}/products?page=1", "LIST_PAGINATION": "next_url",
                                 "LIST_PRODUCTS": "products", "LIST_NEXT": "next", "KEEP_ANSWER": "1",
                                 "PRODUCT_COLUMNS": "first_sku:text(16)=variants.0.sku"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in variant_rows(url)] == [
        (1, "11", "BRD-S", d("10.00"), 5), (1, "12", "BRD-M", d("12.00"), 0), (1, "13", "BRD-L", d("15.00"), 3),
        (2, "21", "CAP", d("25.00"), 7)]
    stored = database_query(url, "SELECT product_id, first_sku, answer, answer_digest FROM products "
                                 "ORDER BY product_id")
    assert [(r[0], r[1]) for r in stored] == [(1, "BRD-S"), (2, None)]
    answers = [r[2] if isinstance(r[2], dict) else __import__("json").loads(r[2]) for r in stored]
    assert [a["name"] for a in answers] == ["Board", "Cap"] and all(len(r[3]) == 64 for r in stored)


def test_graphql_edges_are_read_node_by_node_whatever_else_they_carry():
    shape = parse_variant_shape("variants.edges", "variant_id=legacyResourceId,sku=sku,price=price")
    edges = [{"cursor": "eyJsYXN0IjpbMV19", "node": {"legacyResourceId": "11", "sku": "S", "price": "10.00"}},
             {"node": {"legacyResourceId": "12", "sku": "M", "price": "12.00"}},
             {"cursor": "eyJsYXN0IjpbM119", "node": None}]  # no variant in it
    body = json.dumps({"id": 1, "name": "Board", "variants": {"edges": edges}}).encode()
    item, dropped = parse_product(body, 1, datetime(2024, 5, 1), variants=shape)
    assert [(v.variant_id, v.sku, v.price) for v in item.variants] == [("11", "S", d("10.00")), ("12", "M", d("12.00"))]
    assert dropped == ["variant_id"]


def test_the_product_price_can_be_its_variants_highest():
    shape = parse_variant_shape("variants", "variant_id=id,price=price,stock=inventory_quantity", "max", "sum")
    body = json.dumps({"id": 1, "name": "Board", "price": "1.00", "variants": [
        variant(11, "S", "10.00", 5), variant(12, "M", "15.00", 2), {"id": 13, "price": None}]}).encode()
    item, _ = parse_product(body, 1, datetime(2024, 5, 1), variants=shape)
    assert (item.price, item.stock) == (d("15.00"), 7)


def test_a_variant_column_whose_declared_type_changed_stops_the_crawl_at_start(api, tmp_path):
    url = f"sqlite:///{tmp_path / 'products.db'}"
    crawl(api, url, 1)
    before = [rows(url, f"SELECT * FROM {table} ORDER BY 1") for table in ("products", "product_variants")]
    api.put(catalogue(2))
    changed = SETTINGS["VARIANT_FIELDS"].replace("decimal(10,2)", "decimal(12,2)")
    refused = run_crawl("-a", "start_id=1", "-a", "end_id=2", settings={
        "API_BASE_URL": api.base_url, "DATABASE_URL": url, **SETTINGS, "VARIANT_FIELDS": changed})
    assert refused.returncode == 2, refused.stderr[-3000:]
    lines = [line for line in refused.stderr.splitlines() if line.startswith("productcrawler:")]
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert "VARIANT_FIELDS declares compare_at:decimal(12,2), but product_variants.compare_at is NUMERIC(10, 2)" \
        in lines[0], lines[0]
    assert [rows(url, f"SELECT * FROM {table} ORDER BY 1") for table in ("products", "product_variants")] == before
    assert rows(url, "SELECT COUNT(*) FROM crawl_passes") == [(1,)]
    assert api.arrivals() == []  # nothing asked of the API


#: The shopify-graphql recipe's products with their variants, as Shopify's connection gives them: edges of a
#: cursor and a node. 40 products a page keeps a page's cost within the 1,000 points a query may cost.
GRAPHQL_VARIANTS = ("variants(first: 5) { edges { cursor node { legacyResourceId sku price compareAtPrice "
                    "inventoryQuantity } } } ")


def test_shopify_graphql_variants_are_rows_of_their_own(tmp_path):
    database = tmp_path / "products.db"
    with Served(ShopifyGraphql(size=100, restore=1000.0)) as api:
        settings = recipe("shopify-graphql")
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(settings["PRODUCT_LIST_URL"]))
        query = settings["PRODUCT_LIST_QUERY"].replace("first: 250", "first: 40")
        settings.update(PRODUCT_LIST_URL=settings["PRODUCT_LIST_URL"].replace(origin, api.url),
                        PRODUCT_LIST_QUERY=query.replace("totalInventory ", "totalInventory " + GRAPHQL_VARIANTS),
                        API_KEY=shopify.TOKEN, DATABASE_URL=f"sqlite:///{database}", VARIANTS="variants.edges",
                        VARIANT_FIELDS="variant_id=legacyResourceId,sku=sku,price=price,stock=inventoryQuantity,"
                                       "compare_at:decimal(10,2)=compareAtPrice")
        result = run_crawl(settings=settings)
        assert result.returncode == 0, result.stderr[-3000:]
        catalogue = api.call(lambda: dict(api.imitation.products))
    expected = sorted((f"gid://shopify/Product/{key}", str(v["id"]), v.get("sku"), money(v["price"]),
                       v["inventory_quantity"], money(v.get("compare_at_price")))
                      for key, product in catalogue.items() for v in product["variants"])
    stored = [(*r[:3], money(r[3]), r[4], money(r[5])) for r in database_query(
        f"sqlite:///{database}", "SELECT product_id, variant_id, sku, price, stock, compare_at FROM product_variants")]
    assert sorted(stored) == expected
    assert len(expected) > len(catalogue)  # some products have several variants
    assert "invalid/variant_id" not in result.stderr
