"""The cookbook's recipes (docs/cookbook.md) and what each imitated API's products must become as rows."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tests.support.crawls import ROOT
from tests.support.imitations import bestbuy, bigcommerce, dummyjson, shopify, woocommerce

if TYPE_CHECKING:
    from collections.abc import Callable

COLUMNS = "product_id, name, price, stock, category, brand, rating, sales_count"
CENT = Decimal("0.01")


def money(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(CENT)


@dataclass
class Api:
    name: str
    key: str | None
    #: Every form the secret could leak in.
    secrets: list[str]
    ids: tuple[int, int]
    row: Callable[[dict[str, Any]], tuple[Any, ...]]
    #: A documented example, as its row must be.
    example: tuple[Any, ...]
    catalogue: dict[Any, dict[str, Any]] = field(default_factory=dict)
    #: The recipe's name in docs/cookbook.md, when it is not the API's.
    recipe: str | None = None


WOO_KEY = f"{woocommerce.CONSUMER_KEY}:{woocommerce.CONSUMER_SECRET}"
APIS = {
    "woocommerce": Api(
        "woocommerce", WOO_KEY,
        [woocommerce.CONSUMER_KEY, woocommerce.CONSUMER_SECRET, base64.b64encode(WOO_KEY.encode()).decode()],
        (10, 800), lambda p: (p["id"], p["name"], money(p["price"]), p["stock_quantity"], p["categories"][0]["name"],
                              None, money(p["average_rating"]), p["total_sales"]),
        (794, "Premium Quality", Decimal("21.99"), 7, "Clothing", None, Decimal("4.50"), 33),
        woocommerce.catalogue()),
    "bigcommerce": Api(
        "bigcommerce", bigcommerce.TOKEN, [bigcommerce.TOKEN], (70, 300),
        lambda p: (p["id"], p["name"], money(p["price"]), p["inventory_level"], None, None, None, p["total_sold"]),
        (77, "[Sample] Orbit Terrarium - Large", Decimal("109.00"), 12, None, None, None, 4),
        bigcommerce.catalogue()),
    "bestbuy": Api(
        "bestbuy", bestbuy.API_KEY, [bestbuy.API_KEY], (bestbuy.FIRST_SKU, bestbuy.FIRST_SKU + 300),
        lambda p: (p["sku"], p["name"], money(p["salePrice"]), None, p["categoryPath"][1]["name"], p["manufacturer"],
                   money(p["customerReviewAverage"]), None),
        (bestbuy.FIRST_SKU, 'Samsung - 65" Class Crystal UHD 4K Smart TV', Decimal("479.99"), None,
         "TV & Home Theater", "Samsung", Decimal("4.60"), None),
        bestbuy.catalogue()),
    "dummyjson": Api(
        "dummyjson", None, [], (1, 200),
        lambda p: (p["id"], p["title"], money(p["price"]), p["stock"], p["category"], p["brand"], money(p["rating"]),
                   None),
        (1, "Essence Mascara Lash Princess", Decimal("9.99"), 5, "beauty", "Essence", Decimal("4.94"), None),
        dummyjson.catalogue()),
    "shopify": Api(
        "shopify", shopify.TOKEN, [shopify.TOKEN], (shopify.FIRST_ID, shopify.FIRST_ID + 400),
        lambda p: (p["id"], p["title"], money(p["variants"][0]["price"]), p["variants"][0]["inventory_quantity"],
                   p["product_type"], p["vendor"], None, None),
        (shopify.FIRST_ID, "IPod Nano - 8GB", Decimal("199.00"), 10, "Cult Products", "Apple", None, None),
        shopify.catalogue()),
}
SHOPIFY_VARIANTS = Api(
    "shopify", shopify.TOKEN, [shopify.TOKEN], (shopify.FIRST_ID, shopify.FIRST_ID + 400),
    lambda p: (p["id"], p["title"], min(money(v["price"]) for v in p["variants"]),
               sum(v["inventory_quantity"] for v in p["variants"]), p["product_type"], p["vendor"], None, None),
    (shopify.FIRST_ID, "IPod Nano - 8GB", Decimal("199.00"), 10, "Cult Products", "Apple", None, None),
    shopify.catalogue(), recipe="shopify-variants")
#: Ids an id file lists that the API has no product for (deleted since the list was made): 404s, missing.
GONE_FROM_LIST = 3


def recipe(name: str) -> dict[str, str]:
    """The settings block of ``name`` in docs/cookbook.md."""
    page = (ROOT / "docs" / "cookbook.md").read_text()
    found = re.search(rf"<!-- cookbook: {name} -->\n```ini\n(.*?)```", page, re.DOTALL)
    assert found, f"no recipe for {name} in docs/cookbook.md"
    return dict(line.split("=", 1) for line in found[1].splitlines() if line.strip())
