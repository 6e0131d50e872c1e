"""Variants as rows: where a product's variants are (``VARIANTS``) and their columns (``VARIANT_FIELDS``).

``VARIANTS=product.variants`` names the list in the answer (from its root, as
PRODUCT_COLUMNS' paths; for a listed product, from the listed object). A list of
GraphQL edges (``variants.edges``, each ``{"cursor": "...", "node": {...}}``) is read
node by node: an item whose ``node`` is an object is that object's edge.
``VARIANT_FIELDS=variant_id=id,sku=sku,price=price,stock=inventory_quantity,
compare_at:decimal(10,2)=compare_at_price`` maps each variant's columns by paths
relative to the variant: ``variant_id`` (required), ``sku``, ``price`` and
``stock``, cleaned as the product's are, and declared columns (``name:type=path``)
as PRODUCT_COLUMNS' are. A variant without an id is left out and counted
``cleaning/invalid/variant_id``.

``PRODUCT_PRICE_FROM_VARIANTS`` (``min`` or ``max``) and
``PRODUCT_STOCK_FROM_VARIANTS`` (``sum``) derive the product's price and stock
from its variants' where the user asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from productcrawler.answer.cleaning import clean_count, clean_price
from productcrawler.answer.declared import DeclaredColumn, clean_value, parse_columns
from productcrawler.answer.payload import ABSENT, resolve
from productcrawler.items import VariantItem

#: The variant columns of their own (not declared), with their cleaners' names.
BUILT_IN = ("variant_id", "sku", "price", "stock")
SKU_MAX_LENGTH = 64
_BUILT_IN_ENTRY = re.compile(r"\s*(variant_id|sku|price|stock)\s*=\s*([^,]+?)\s*(?:,|$)")


@dataclass(frozen=True)
class VariantShape:
    path: tuple[str, ...]
    fields: tuple[tuple[str, tuple[str, ...]], ...]  # built-in column -> path in the variant
    declared: tuple[DeclaredColumn, ...]
    price_from: str | None = None  # min, max
    stock_from: str | None = None  # sum

    @property
    def declared_spec(self) -> tuple[tuple[str, str], ...]:
        return tuple((c.name, c.spec) for c in self.declared)

    def variants(self, answer: object, dropped: list[str], absent: list[str]) -> list[VariantItem] | None:
        """The cleaned variants of ``answer``; None if it has no list there (its stored ones stay as they are)."""
        found = resolve(answer, self.path)
        if found is ABSENT or type(found) is not list:
            absent.append("variants")
            return None
        variants: dict[str, VariantItem] = {}
        for raw in found:
            node = raw["node"] if type(raw) is dict and type(raw.get("node")) is dict else raw
            if type(node) is not dict:
                dropped.append("variant_id")
                continue
            variant = self._variant(node, dropped, absent)
            if variant is not None:
                variants[variant.variant_id] = variant  # an id twice: its last
        return list(variants.values())

    def _variant(self, node: dict[str, Any], dropped: list[str], absent: list[str]) -> VariantItem | None:
        paths = dict(self.fields)
        raw_id = resolve(node, paths["variant_id"])
        if type(raw_id) is str and raw_id.strip():
            variant_id = raw_id.strip()[:SKU_MAX_LENGTH]
        elif type(raw_id) is int or (raw_id is not ABSENT and type(raw_id).__name__ == "Decimal"
                                     and raw_id == int(raw_id)):
            variant_id = str(int(raw_id))
        else:
            dropped.append("variant_id")
            return None
        values: dict[str, Any] = {}
        for column, cleaner in (("sku", _sku), ("price", clean_price), ("stock", clean_count)):
            if column not in paths:
                values[column] = None
                continue
            raw = resolve(node, paths[column])
            if raw is ABSENT:
                absent.append(f"variant_{column}")
                values[column] = None
                continue
            values[column] = cleaner(raw)
            if values[column] is None and not (raw is None or (type(raw) is str and not raw.strip())):
                dropped.append(f"variant_{column}")
        extra = {c.name: clean_value(c, c.value(node), dropped, absent) for c in self.declared}
        return VariantItem(variant_id, values["sku"], values["price"], values["stock"], extra)

    def derive(self, price: Any, stock: Any, variants: list[VariantItem]) -> tuple[Any, Any]:
        """The product's price and stock, from its variants where PRODUCT_*_FROM_VARIANTS asks."""
        prices = [v.price for v in variants if v.price is not None]
        stocks = [v.stock for v in variants if v.stock is not None]
        if self.price_from and prices:
            price = min(prices) if self.price_from == "min" else max(prices)
        if self.stock_from and stocks:
            stock = sum(stocks)
        return price, stock


def _sku(raw: object) -> str | None:
    if type(raw) is int or type(raw).__name__ == "Decimal":
        raw = str(raw)
    if type(raw) is not str:
        return None
    return " ".join(raw.split())[:SKU_MAX_LENGTH] or None


def parse_variant_shape(path: object, fields: object, price_from: object = None,
                        stock_from: object = None) -> VariantShape | None:
    """VARIANTS and VARIANT_FIELDS (None: variants are not kept); ValueError names the setting."""
    text = "" if path is None else str(path).strip()
    if not text:
        for name, value in (("VARIANT_FIELDS", fields), ("PRODUCT_PRICE_FROM_VARIANTS", price_from),
                            ("PRODUCT_STOCK_FROM_VARIANTS", stock_from)):
            if value not in (None, ""):
                raise ValueError(f"{name} is set but VARIANTS is not: name the list of variants")
        return None
    segments = tuple(text.split("."))
    if any(not s.strip() or s != s.strip() for s in segments):
        raise ValueError(f"VARIANTS={text!r}: the path must be keys separated by dots, e.g. product.variants")
    built_in: dict[str, tuple[str, ...]] = {}
    declared_parts = []
    for entry in _entries(str(fields or "")):
        match = _BUILT_IN_ENTRY.fullmatch(entry)
        if match and ":" not in entry.split("=", 1)[0]:
            column, column_path = match.groups()
            if column in built_in:
                raise ValueError(f"VARIANT_FIELDS: column {column!r} is named twice")
            built_in[column] = tuple(column_path.split("."))
        else:
            declared_parts.append(entry)
    if "variant_id" not in built_in:
        raise ValueError("VARIANT_FIELDS must map variant_id (e.g. variant_id=id)")
    try:
        declared = parse_columns(",".join(declared_parts), reserved=frozenset(BUILT_IN) | _VARIANT_OWN)
    except ValueError as error:
        raise ValueError(f"VARIANT_FIELDS: {error}") from None
    price = None if price_from in (None, "") else str(price_from).strip().lower()
    stock = None if stock_from in (None, "") else str(stock_from).strip().lower()
    if price not in (None, "min", "max"):
        raise ValueError(f"PRODUCT_PRICE_FROM_VARIANTS={price_from!r} must be min or max")
    if stock not in (None, "sum"):
        raise ValueError(f"PRODUCT_STOCK_FROM_VARIANTS={stock_from!r} must be sum")
    return VariantShape(segments, tuple(built_in.items()), declared, price, stock)


#: product_variants' own columns, which a declared variant column may not take.
_VARIANT_OWN = frozenset({"id", "product_id", "first_seen", "removed_at", "pass_id", "update_time"})


def _entries(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses (``decimal(10,2)`` is one entry's)."""
    entries: list[str] = []
    depth, current = 0, list[str]()
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            entries.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    entries.append("".join(current).strip())
    return [entry for entry in entries if entry]
