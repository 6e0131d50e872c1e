"""A listing pass's ledger in the database: which pages it knows of, which are done, what a complete one removes.

A listing pass (``PRODUCT_LIST_URL``) is a pass over pages: page 1 is the
listing's first URL, and each page's answer makes later pages known (the next
page of a chain, or every page of a numbered listing once page 1 gives the
total). ``listing_pages`` holds each known page's URL; a page is done when its
row has ``done_at``, set in the transaction that stores its products
(``write_pages``), so a run stopped at any moment resumes at the pages whose
products were not all committed. Plain functions of a DB-API cursor, run in the
pool's worker threads like the rest of the SQL.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from productcrawler.passes.database_sql import PassInfo, as_datetime
from productcrawler.storage.changes import REMOVED
from productcrawler.storage.listing_pages import reveal
from productcrawler.storage.schema import PASS_COLUMN

if TYPE_CHECKING:
    from datetime import datetime

    from productcrawler.storage.target import Dialect

#: ``crawl_passes.start_id``/``end_id`` of a listing pass: it runs over pages, not ids.
LISTING_START, LISTING_END = 1, 0


def listing_digest(first_url: str) -> str:
    """What tells one listing from another in ``crawl_passes.ids_digest``: a digest of its first URL."""
    return hashlib.sha256(f"listing:{first_url}".encode()).hexdigest()


def open_listing_pass(cursor: Any, dialect: Dialect, first_url: str, *, fresh: bool, now: datetime) -> PassInfo:
    """Resume the unfinished pass over this listing, or start one with its first page known."""
    p = dialect.placeholder
    digest = listing_digest(first_url)
    cursor.execute(f"SELECT pass_id, started_at FROM crawl_passes WHERE ids_digest = {p} AND finished_at IS NULL "
                   f"AND redis_token IS NULL ORDER BY pass_id DESC LIMIT 1", (digest,))
    row = cursor.fetchone()
    if row is not None and not fresh:
        return PassInfo(int(row[0]), LISTING_START, LISTING_END, as_datetime(row[1]), resumed=True)
    if row is not None:
        cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}", (dialect.value(now), row[0]))
    pass_id = dialect.inserted_id(cursor, f"INSERT INTO crawl_passes (start_id, end_id, started_at, ids_digest, "
                                          f"ids_count) VALUES ({p}, {p}, {p}, {p}, {p})",
                                  (LISTING_START, LISTING_END, dialect.value(now), digest, 0), PASS_COLUMN)
    reveal(cursor, dialect, pass_id, {1: first_url})
    return PassInfo(pass_id, LISTING_START, LISTING_END, now, resumed=False)


def known_pages(cursor: Any, dialect: Dialect, pass_id: int) -> list[tuple[int, str, bool]]:
    """Every page the pass knows of: (page, URL, done), in page order."""
    cursor.execute(f"SELECT page, url, done_at FROM listing_pages WHERE {PASS_COLUMN} = {dialect.placeholder} "
                   f"ORDER BY page", (pass_id,))
    return [(int(page), str(url), done_at is not None) for page, url, done_at in cursor.fetchall()]


def failed_pages(cursor: Any, dialect: Dialect, pass_id: int) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM listing_pages WHERE {PASS_COLUMN} = {dialect.placeholder} "
                   f"AND failure IS NOT NULL", (pass_id,))
    return int(cursor.fetchone()[0])


def mark_unlisted(cursor: Any, dialect: Dialect, pass_id: int, now: datetime, *, tracking: bool) -> int:
    """After a complete, unfiltered listing: every stored product it did not list is removed.

    A product the pass listed carries its ``pass_id``; one that does not and is
    not removed yet gets ``removed_at`` and, with change tracking, a ``removed``
    change row, as a 404 does for a pass by id. Returns how many.
    """
    p = dialect.placeholder
    unlisted = f"FROM products WHERE removed_at IS NULL AND ({PASS_COLUMN} IS NULL OR {PASS_COLUMN} <> {p})"
    if tracking:
        cursor.execute(f"INSERT INTO product_changes (product_id, {PASS_COLUMN}, changed_at, field, old_value, "
                       f"new_value) SELECT product_id, {p}, {p}, {p}, NULL, {p} {unlisted}",
                       (pass_id, dialect.value(now), REMOVED, now.strftime("%Y-%m-%d %H:%M:%S"), pass_id))
    cursor.execute(f"UPDATE products SET removed_at = {p} WHERE removed_at IS NULL "
                   f"AND ({PASS_COLUMN} IS NULL OR {PASS_COLUMN} <> {p})", (dialect.value(now), pass_id))
    return int(cursor.rowcount)
