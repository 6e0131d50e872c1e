"""What a crawl produces: per id a product or a recorded failure; per listing page, its products."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any


@dataclass
class VariantItem:
    """One variant of a product (VARIANTS), as stored in ``product_variants``."""

    variant_id: str
    sku: str | None
    price: Decimal | None
    stock: int | None
    #: Its declared columns (VARIANT_FIELDS' name:type=path), by name.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProductItem:
    """One cleaned product, as stored in the ``products`` table."""

    product_id: int | str  # str when PRODUCT_ID_TYPE=string
    name: str
    price: Decimal | None
    stock: int | None
    category: str | None
    brand: str | None
    rating: Decimal | None
    sales_count: int | None
    update_time: datetime  # when it was fetched, UTC, naive (DATETIME has no zone)
    #: The PRODUCT_COLUMNS values, by column name (answer/declared.py).
    extra: dict[str, Any] = field(default_factory=dict)
    #: KEEP_ANSWER: the product's JSON as the API sent it (None: not kept, or over KEEP_ANSWER_MAX_BYTES)
    #: and the SHA-256 of it, hex (None: KEEP_ANSWER is off). Written only when the digest changed.
    answer: str | None = None
    answer_digest: str | None = None
    #: VARIANTS: its variants (None: not kept, or the answer had no list: the stored ones stay).
    variants: list[VariantItem] | None = None


MISSING = "missing"  # the API answered 404
FAILED = "failed"  # given up after retries, or a permanent error


@dataclass
class FailureItem:
    """One id that ended without a product, as stored in ``crawl_failures``."""

    product_id: int | str  # str when PRODUCT_ID_TYPE=string
    outcome: str  # MISSING or FAILED
    http_status: int | None
    reason: str
    attempts: int


@dataclass
class PageItem:
    """One page of a listing (``PRODUCT_LIST_URL``): its products and the pages its answer made known.

    The storage pipeline writes the products and the page's mark in the pass's
    ledger in one transaction, so a page counts as done only once all its
    products are committed.
    """

    page: int  # its position in the listing pass, 1 for PRODUCT_LIST_URL
    url: str
    products: list[ProductItem]
    #: Pages this answer made known, position -> URL: the next page of a chain,
    #: or every page after the first of a numbered listing whose total it gives.
    revealed: dict[int, str]
    #: Why the page ended without its products (its retries used up, an answer that is no listing):
    #: the listing is then not complete, and a complete pass over it removes nothing.
    failure: str | None = None
    http_status: int | None = None
