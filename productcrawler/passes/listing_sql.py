"""A listing pass's ledger in the database: which pages it knows of, which are done, what a complete one removes.

A listing pass (``PRODUCT_LIST_URL``) is a pass over pages: page 1 is the
listing's first URL, and each page's answer makes later pages known (the next
page of a chain, or every page of a numbered listing once page 1 gives the
total). ``listing_pages`` holds each known page's URL; a page is done when its
row has ``done_at``, set in the transaction that stores its products
(``storage/listing_pages.py``), so a run stopped at any moment resumes at the
pages whose products were not all committed. A pass records its ``{since}``
(``list_since``; NULL for a pass that lists everything). Plain functions of a
DB-API cursor, run in the pool's worker threads like the rest of the SQL.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from productcrawler.passes.database_sql import PassInfo, as_datetime
from productcrawler.storage.changes import REMOVED
from productcrawler.storage.listing_pages import reveal
from productcrawler.storage.schema import PASS_COLUMN

if TYPE_CHECKING:
    from datetime import datetime

    from productcrawler.listing.since import FullPassEvery, ListUrl
    from productcrawler.storage.target import Dialect

#: ``crawl_passes.start_id``/``end_id`` of a listing pass: it runs over pages, not ids.
LISTING_START, LISTING_END = 1, 0


def listing_digest(template: str) -> str:
    """What tells one listing from another in ``crawl_passes.ids_digest``: a digest of PRODUCT_LIST_URL."""
    return hashlib.sha256(f"listing:{template}".encode()).hexdigest()


def listing_since(cursor: Any, dialect: Dialect, url: ListUrl, now: datetime, lag: float,
                  full_every: FullPassEvery) -> datetime | None:
    """The ``{since}`` of a new pass over ``url``: None for a pass that lists everything.

    The last complete pass over the same listing (finished, no page failed) gives its start
    minus ``lag``; a listing without ``{since}``, one never completed, or a full pass that
    ``full_every`` says is due lists everything.
    """
    if not url.incremental:
        return None
    p = dialect.placeholder
    cursor.execute(f"SELECT started_at, list_since FROM crawl_passes WHERE ids_digest = {p} "
                   f"AND finished_at IS NOT NULL AND stored IS NOT NULL AND failed = 0 ORDER BY pass_id DESC",
                   (listing_digest(url.identity),))
    complete = cursor.fetchall()
    if not complete:
        return None
    since_full = next((n for n, (_, since) in enumerate(complete) if since is None), None)
    last_full = None if since_full is None else as_datetime(complete[since_full][0])
    if full_every.due(len(complete) if since_full is None else since_full, last_full, now):
        return None
    return as_datetime(complete[0][0]) - timedelta(seconds=lag)


def open_listing_pass(cursor: Any, dialect: Dialect, url: ListUrl, *, fresh: bool, now: datetime, lag: float,
                      full_every: FullPassEvery) -> PassInfo:
    """Resume the unfinished pass over this listing, or start one with its first page known."""
    p = dialect.placeholder
    digest = listing_digest(url.identity)
    cursor.execute(f"SELECT pass_id, started_at FROM crawl_passes WHERE ids_digest = {p} AND finished_at IS NULL "
                   f"AND redis_token IS NULL ORDER BY pass_id DESC LIMIT 1", (digest,))
    row = cursor.fetchone()
    if row is not None and not fresh:
        return PassInfo(int(row[0]), LISTING_START, LISTING_END, as_datetime(row[1]), resumed=True)
    if row is not None:
        cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}", (dialect.value(now), row[0]))
    since = listing_since(cursor, dialect, url, now, lag, full_every)
    pass_id = dialect.inserted_id(cursor, f"INSERT INTO crawl_passes (start_id, end_id, started_at, ids_digest, "
                                          f"ids_count, list_since) VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
                                  (LISTING_START, LISTING_END, dialect.value(now), digest, 0,
                                   None if since is None else dialect.value(since)), PASS_COLUMN)
    reveal(cursor, dialect, pass_id, {1: url.first_locator(since)})
    return PassInfo(pass_id, LISTING_START, LISTING_END, now, resumed=False)


def set_since(cursor: Any, dialect: Dialect, pass_id: int, since: datetime | None) -> None:
    """A shared pass's ``{since}``, recorded by the instance whose first page the pass took."""
    p = dialect.placeholder
    cursor.execute(f"UPDATE crawl_passes SET list_since = {p} WHERE pass_id = {p}",
                   (None if since is None else dialect.value(since), pass_id))


def known_pages(cursor: Any, dialect: Dialect, pass_id: int) -> list[tuple[int, str, bool]]:
    """Every page the pass knows of: (page, URL, done), in page order."""
    cursor.execute(f"SELECT page, url, done_at FROM listing_pages WHERE {PASS_COLUMN} = {dialect.placeholder} "
                   f"ORDER BY page", (pass_id,))
    return [(int(page), str(url), done_at is not None) for page, url, done_at in cursor.fetchall()]


def failed_pages(cursor: Any, dialect: Dialect, pass_id: int) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM listing_pages WHERE {PASS_COLUMN} = {dialect.placeholder} "
                   f"AND failure IS NOT NULL", (pass_id,))
    return int(cursor.fetchone()[0])


def lists_everything(cursor: Any, dialect: Dialect, pass_id: int) -> bool:
    """Whether the pass listed everything (no ``{since}`` filter): only such a pass may remove products."""
    cursor.execute(f"SELECT list_since FROM crawl_passes WHERE pass_id = {dialect.placeholder}", (pass_id,))
    row = cursor.fetchone()
    return row is not None and row[0] is None


def mark_unlisted(cursor: Any, dialect: Dialect, pass_id: int, now: datetime, *, tracking: bool) -> int:
    """After a complete listing of everything: every stored product it did not list is removed.

    A product the pass listed carries its ``pass_id``; one that does not and is
    not removed yet gets ``removed_at`` and, with change tracking, a ``removed``
    change row, as a 404 does for a pass by id. Returns how many.
    """
    p = dialect.placeholder
    # Listed but failed (PRODUCT_IDS=list: its product answer did not come): not removed.
    unlisted = (f"removed_at IS NULL AND ({PASS_COLUMN} IS NULL OR {PASS_COLUMN} <> {p}) AND product_id NOT IN "
                f"(SELECT product_id FROM crawl_failures WHERE {PASS_COLUMN} = {p})")
    if tracking:
        cursor.execute(f"INSERT INTO product_changes (product_id, {PASS_COLUMN}, changed_at, field, old_value, "
                       f"new_value) SELECT product_id, {p}, {p}, {p}, NULL, {p} FROM products WHERE {unlisted}",
                       (pass_id, dialect.value(now), REMOVED, now.strftime("%Y-%m-%d %H:%M:%S"), pass_id, pass_id))
    cursor.execute(f"UPDATE products SET removed_at = {p} WHERE {unlisted}", (dialect.value(now), pass_id, pass_id))
    return int(cursor.rowcount)
