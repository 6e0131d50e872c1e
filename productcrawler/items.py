"""The two things a crawl produces per id: a product, or a recorded failure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal


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
