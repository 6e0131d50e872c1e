"""A pass's summary in ``crawl_passes``: its counts and per-column coverage.

Written once, when the pass is complete (``write_summary``); read by
``scrapy passes`` and by whatever compares one pass with the last
(``passes_summary``). Counts are NULL in a pass that is running, was
interrupted, or was recorded before summaries existed. Plain functions of a
DB-API cursor, like the rest of ``passes/database_sql.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from productcrawler.items import MISSING
from productcrawler.passes.database_sql import as_datetime, id_bounds, outcome_counts
from productcrawler.passes.listing_sql import failed_pages, lists_everything, mark_unlisted
from productcrawler.storage.changes import REMOVED
from productcrawler.storage.schema import PASS_COLUMN, SUMMARY_COUNTS

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from productcrawler.storage.target import Dialect


@dataclass(frozen=True)
class PassSummary:
    pass_id: int
    started_at: datetime
    finished_at: datetime | None
    stored: int | None = None
    missing: int | None = None
    failed: int | None = None
    changed: int | None = None
    removed: int | None = None
    #: Column -> share (0..1) of the pass's stored products with a non-NULL value; empty until written.
    coverage: Mapping[str, float] = field(default_factory=dict)

    @property
    def summarized(self) -> bool:
        """The pass is complete and its summary is written."""
        return self.stored is not None


def passes_summary(cursor: Any, dialect: Dialect, limit: int = 10) -> list[PassSummary]:
    """The last ``limit`` passes, newest first (database and Redis-shared passes alike)."""
    cursor.execute(f"SELECT pass_id, started_at, finished_at, {', '.join(SUMMARY_COUNTS)}, coverage "
                   f"FROM crawl_passes ORDER BY pass_id DESC LIMIT {dialect.placeholder}", (int(limit),))
    return [_summary(row) for row in cursor.fetchall()]


def _summary(row: tuple[Any, ...]) -> PassSummary:
    pass_id, started_at, finished_at, *counts, coverage = row
    stored, missing, failed, changed, removed = (None if count is None else int(count) for count in counts)
    return PassSummary(
        int(pass_id), as_datetime(started_at), None if finished_at is None else as_datetime(finished_at),
        stored, missing, failed, changed, removed, coverage=_coverage(coverage),
    )


def _coverage(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {str(column): float(share) for column, share in json.loads(text).items()}


#: The columns whose coverage a summary records (a product always has its id and name).
COVERAGE_COLUMNS = ("price", "stock", "category", "brand", "rating", "sales_count")


def finish_with_summary(cursor: Any, dialect: Dialect, pass_id: int, first: int | None, last: int | None,
                        now: datetime,
                        *, tracking: bool = True, listing_removals: bool | None = None,
                        declared: tuple[str, ...] = ()) -> bool:
    """Mark a complete pass finished and write its summary, unless it is finished already.

    True if this call did. The conditional update makes it once per pass
    when several instances of a shared pass close at the same time (the
    second waits on the first's row lock, then finds it finished).
    ``tracking``: whether change rows are written (``changed`` is NULL if not).
    ``first``, ``last``: the range's ids; None for a pass over a file (its rows are those it stamped).
    ``listing_removals``: None for a pass by id; for a listing pass, whether a complete listing (no page
    failed, no ``{since}``) removes the stored products it did not list (``mark_unlisted``). Its ``failed``
    counts pages.
    ``declared``: the PRODUCT_COLUMNS names, whose coverage is recorded too.
    """
    p = dialect.placeholder
    cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p} AND finished_at IS NULL",
                   (dialect.value(now), pass_id))
    if cursor.rowcount != 1:
        return False
    cursor.execute(f"SELECT started_at FROM crawl_passes WHERE pass_id = {p}", (pass_id,))
    started_at = as_datetime(cursor.fetchone()[0])
    counts: dict[str, int | None] = {**outcome_counts(cursor, dialect, first, last, pass_id)}
    if tracking:
        cursor.execute(f"SELECT COUNT(DISTINCT product_id) FROM product_changes WHERE pass_id = {p} "
                       f"AND (field <> {p} OR new_value IS NULL)", (pass_id, REMOVED))
        counts["changed"] = int(cursor.fetchone()[0])
    else:
        counts["changed"] = None
    # Removed in this pass: its 404 now, and a removal time no older than the pass.
    failures_within, bounds = id_bounds(dialect, first, last, "crawl_failures.product_id")
    cursor.execute(f"SELECT COUNT(*) FROM products JOIN crawl_failures ON crawl_failures.product_id = "
                   f"products.product_id WHERE {failures_within}"
                   f"crawl_failures.{PASS_COLUMN} = {p} AND crawl_failures.outcome = {p} "
                   f"AND products.removed_at >= {p}", (*bounds, pass_id, MISSING, dialect.value(started_at)))
    counts["removed"] = int(cursor.fetchone()[0])
    if listing_removals is not None:
        counts["failed"] = failed_pages(cursor, dialect, pass_id)
        if listing_removals and not counts["failed"] and lists_everything(cursor, dialect, pass_id):
            counts["removed"] = mark_unlisted(cursor, dialect, pass_id, now, tracking=tracking)
    within, bounds = id_bounds(dialect, first, last)
    covered = (*COVERAGE_COLUMNS, *declared)
    cursor.execute(f"SELECT {', '.join(f'COUNT({c})' for c in covered)} FROM products "
                   f"WHERE {within}{PASS_COLUMN} = {p}", (*bounds, pass_id))
    present = cursor.fetchone()
    stored = counts["stored"] or 0
    coverage = {c: round(int(n) / stored, 4) for c, n in zip(covered, present, strict=True)} if stored else {}
    cursor.execute(f"UPDATE crawl_passes SET {', '.join(f'{c} = {p}' for c in SUMMARY_COUNTS)}, coverage = {p} "
                   f"WHERE pass_id = {p}",
                   (*(counts[c] for c in SUMMARY_COUNTS), json.dumps(coverage, sort_keys=True), pass_id))
    return True
