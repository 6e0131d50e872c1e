"""The JSON shapes the simulator can serve one product in (``--shape``).

``catalog.product`` builds the article's shape (``id``); the others are how
real product APIs differ from it: the old ``product_id`` key, an envelope
with a status code, renamed and nested fields, and a Shopify-like product.
"""

from __future__ import annotations

from typing import Any

DEFAULT_SHAPE = "id"

#: shape -> the PRODUCT_FIELDS a crawler needs for it ("" : none, the default rules read it).
PRODUCT_FIELDS = {
    "id": "",
    "product_id": "",
    "envelope": "",
    "renamed": "product_id=data.sku,name=data.title,price=data.pricing.current,"
               "stock=data.inventory.available",
    "shopify": "name=product.title,price=product.variants.0.price,"
               "stock=product.variants.0.inventory_quantity,brand=product.vendor,"
               "category=product.product_type",
}
SHAPES = tuple(PRODUCT_FIELDS)


def shaped(item: dict[str, Any], shape: str) -> dict[str, Any]:
    """``item`` (the ``id`` shape, as built by ``catalog``) in ``shape``."""
    if shape == "id":
        return item
    if shape == "product_id":
        return {"product_id": item["id"], **{k: v for k, v in item.items() if k != "id"}}
    if shape == "envelope":
        return {"code": 0, "msg": "ok", "data": item}
    if shape == "renamed":
        return {"data": {
            "sku": item["id"],
            "title": item["name"],
            "pricing": {"current": item["price"], "currency": item["currency"]},
            "inventory": {"available": item["stock"]},
            "category": item["category"],
            "brand": item["brand"],
            "rating": item["rating"],
            "sales_count": item["sales_count"],
            "updated_at": item["updated_at"],
        }}
    if shape == "shopify":
        price = item["price"]  # Shopify sends prices as strings
        if isinstance(price, (int, float)):
            price = f"{price:.2f}"
        return {"product": {
            "id": item["id"],
            "title": item["name"],
            "body_html": f"<p>{item['description']}</p>",
            "vendor": item["brand"],
            "product_type": item["category"],
            "variants": [{"id": item["id"] * 10 + 1,
                          "price": price,
                          "inventory_quantity": item["stock"]}],
            "images": [{"src": src} for src in item["images"]],
            "updated_at": item["updated_at"],
        }}
    raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
