"""What the simulator's catalogue holds, and what a crawl of it must leave in the database."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from simulator import catalog
from tests.support.services import mysql_query

#: Pinned so that expected products don't change when the hour does.
CATALOG_VERSION = 490000
#: The id range most crawl tests use.
END = 3000
PRODUCT_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating", "sales_count")
_CENT = Decimal("0.01")
#: Ids a crawl killed with -9 may have committed to the database but not yet marked done
#: in Redis (the mark follows the commit); the shared pass fetches those again.
REDIS_UNMARKED_MAX = 400


def present_ids(end: int = END, start: int = 1) -> list[int]:
    """Ids of ``start..end`` the simulator answers with a product (the others are 404s)."""
    return [i for i in range(start, end + 1) if not catalog.is_missing(i)]


def missing_ids(end: int = END, start: int = 1) -> list[int]:
    """Ids of ``start..end`` the simulator answers 404."""
    return [i for i in range(start, end + 1) if catalog.is_missing(i)]


def catalogue_row(product_id: int, version: int) -> tuple[Any, ...]:
    """The ``products`` row a crawl must store for ``product_id`` (PRODUCT_COLUMNS), straight
    from the simulator's catalogue: its values are clean already."""
    item = catalog.product(product_id, version)
    return (product_id, item["name"], Decimal(repr(item["price"])).quantize(_CENT), item["stock"],
            item["category"], item["brand"], Decimal(repr(item["rating"])).quantize(_CENT),
            item["sales_count"])


def assert_pass_complete(url: str, end: int = END) -> None:
    """Every id of 1..end has its outcome: a product row, or a 'missing' row for a 404; none failed."""
    stored = [r[0] for r in mysql_query(url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == present_ids(end)
    missing = [r[0] for r in mysql_query(url, "SELECT product_id FROM crawl_failures "
                                              "WHERE outcome = 'missing' ORDER BY product_id")]
    assert missing == missing_ids(end)
    assert mysql_query(url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'")[0][0] == 0


def done_ids(url: str) -> set[int]:
    """Ids with an outcome row of any pass: a product or a failure."""
    return {row[0] for row in mysql_query(url, "SELECT product_id FROM products UNION "
                                               "SELECT product_id FROM crawl_failures")}


def outcome_stamps(url: str) -> dict[int, Any]:
    """Each id's latest outcome time: its product's update_time or its failure's updated_at."""
    stamps: dict[int, Any] = {}
    for product_id, stamp in mysql_query(url, "SELECT product_id, update_time FROM products UNION ALL "
                                              "SELECT product_id, updated_at FROM crawl_failures"):
        stamps[product_id] = max(stamp, stamps.get(product_id, stamp))
    return stamps


def assert_resumed(arrivals: list[tuple], done_before: set[int], end: int, use_redis: bool) -> None:
    """A resumed run (its ``arrivals``) fetched every id not done before it, and not the done ones.

    With the database as the ledger a committed row is exactly "done"; through
    Redis a few ids committed just before a kill -9 may be fetched again.
    """
    fetched = {a[1] for a in arrivals}
    assert fetched >= set(range(1, end + 1)) - done_before, "an id left undone was not fetched"
    again = fetched & done_before
    if use_redis:
        assert len(again) <= min(REDIS_UNMARKED_MAX, len(done_before) // 2), (len(again), len(done_before))
    else:
        assert again == set(), sorted(again)[:20]
