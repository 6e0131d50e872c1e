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

from productcrawler.passes.database_sql import as_datetime
from productcrawler.storage.schema import SUMMARY_COUNTS

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
    return PassSummary(
        int(pass_id), as_datetime(started_at), None if finished_at is None else as_datetime(finished_at),
        *(None if count is None else int(count) for count in counts),
        coverage=_coverage(coverage),
    )


def _coverage(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {str(column): float(share) for column, share in json.loads(text).items()}
