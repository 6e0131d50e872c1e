"""A listing pass's pages in the database: the pages it knows of, and a page's mark once its products are stored.

``passes/listing_sql.py`` reads this ledger; the storage pipeline writes a
page's mark in the transaction that stores its products (``write_batch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.storage.schema import PASS_COLUMN

if TYPE_CHECKING:
    from datetime import datetime

    from productcrawler.items import PageItem
    from productcrawler.storage.target import Dialect


def reveal(cursor: Any, dialect: Dialect, pass_id: int, pages: dict[int, str]) -> None:
    """Record pages an answer made known; a page known already keeps its row."""
    if not pages:
        return
    cursor.executemany(dialect.insert_ignore("listing_pages", (PASS_COLUMN, "page", "url")),
                       [(pass_id, page, url) for page, url in sorted(pages.items())])


def write_pages(cursor: Any, dialect: Dialect, pages: list[PageItem], pass_id: int | None,
                now: datetime) -> None:
    """Mark pages done (or failed) and record the pages they revealed, in the caller's transaction."""
    if pass_id is None or not pages:
        return
    for page in pages:
        reveal(cursor, dialect, pass_id, {page.page: page.url, **page.revealed})
    p = dialect.placeholder
    cursor.executemany(
        f"UPDATE listing_pages SET products = {p}, done_at = {p}, failure = {p} "
        f"WHERE {PASS_COLUMN} = {p} AND page = {p}",
        dialect.rows([(None if page.failure else len(page.products), now, page.failure and page.failure[:255],
                       pass_id, page.page) for page in pages]))
