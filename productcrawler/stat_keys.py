"""Names of the crawl stats this project records, in one place.

Everything lives under ``productcrawler/``; keys that carry a variable part are
built by the functions below so that their shape is defined once. A duration
(``.../wait_seconds``, ``.../delay_seconds``) is summed into its stat with
:func:`add_seconds`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

PREFIX = "productcrawler"

STORED = f"{PREFIX}/stored"
MISSING = f"{PREFIX}/missing"
FAILED = f"{PREFIX}/failed"
DB_BATCHES = f"{PREFIX}/db/batches"
DB_WRITE_ERRORS = f"{PREFIX}/db/write_errors"
DB_ROWS_REJECTED = f"{PREFIX}/db/rows_rejected"
#: 1 while the database is unreachable, 0 once it is back (set on each change only).
DB_OUTAGE = f"{PREFIX}/db/outage"
REDIS_ERRORS = f"{PREFIX}/redis/errors"
#: 1 while Redis is unreachable, 0 once it is back (set on each change only).
REDIS_OUTAGE = f"{PREFIX}/redis/outage"

RATELIMIT_WAITS = f"{PREFIX}/ratelimit/waits"
RATELIMIT_WAIT_SECONDS = f"{PREFIX}/ratelimit/wait_seconds"
RATELIMIT_EFFECTIVE_RATE = f"{PREFIX}/ratelimit/effective_rate"
RATELIMIT_BACKOFFS = f"{PREFIX}/ratelimit/backoffs"
RATELIMIT_429 = f"{PREFIX}/ratelimit/responses_429"
RATELIMIT_LATE_WAKEUPS = f"{PREFIX}/ratelimit/late_wakeups"
#: Of those, slots that went stale while the request waited for a connection (re-paced, not sent).
RATELIMIT_LATE_CONNECTIONS = f"{PREFIX}/ratelimit/late_connections"
RATELIMIT_EXPIRED_SLOTS = f"{PREFIX}/ratelimit/expired_slots"
#: The budget the API announces in its headers (RATE_LIMIT_HEADERS): answers that carried one,
#: unreadable ones, the format, the pace it allows (requests/s), what is left and the seconds to its reset.
BUDGET_ANSWERS = f"{PREFIX}/ratelimit/budget/answers"
BUDGET_MALFORMED = f"{PREFIX}/ratelimit/budget/malformed"
#: Answers whose reset or window was beyond RATE_LIMIT_HEADERS_MAX_WAIT, and clamped.
BUDGET_CLAMPED = f"{PREFIX}/ratelimit/budget/clamped"
BUDGET_FORMAT = f"{PREFIX}/ratelimit/budget/format"
BUDGET_PACE = f"{PREFIX}/ratelimit/budget/pace"
BUDGET_REMAINING = f"{PREFIX}/ratelimit/budget/remaining"
BUDGET_RESET_SECONDS = f"{PREFIX}/ratelimit/budget/reset_seconds"
#: Requests sent while no budget was known (at most a few in flight).
BUDGET_PROBES = f"{PREFIX}/ratelimit/budget/probes"
#: 429s that carried budget headers: the pace is set from them, the rate is not halved.
BUDGET_429 = f"{PREFIX}/ratelimit/budget/responses_429"

#: A listing pass (PRODUCT_LIST_URL): pages stored, pages that ended without their products.
LISTING_PAGES = f"{PREFIX}/listing/pages"
LISTING_PAGES_FAILED = f"{PREFIX}/listing/pages_failed"

RETRY_DELAYED = f"{PREFIX}/retry/delayed"
RETRY_DELAY_SECONDS = f"{PREFIX}/retry/delay_seconds"
RETRY_AFTER_HONOURED = f"{PREFIX}/retry/retry_after_honoured"
RETRY_AFTER_CAPPED = f"{PREFIX}/retry/retry_after_capped"
RETRY_AFTER_MALFORMED = f"{PREFIX}/retry/retry_after_malformed"

#: What the stored products' batches did: new rows, rows whose values changed, rows only
#: touched (last seen), rows marked removed (a 404), removed rows that came back.
PRODUCTS_NEW = f"{PREFIX}/products/new"
PRODUCTS_CHANGED = f"{PREFIX}/products/changed"
PRODUCTS_UNCHANGED = f"{PREFIX}/products/unchanged"
PRODUCTS_REMOVED = f"{PREFIX}/products/removed"
PRODUCTS_RETURNED = f"{PREFIX}/products/returned"
CHANGE_ROWS = f"{PREFIX}/products/change_rows"
#: KEEP_ANSWER: raw answers written (new or changed: their digest differed), and answers over
#: KEEP_ANSWER_MAX_BYTES, whose digest alone is kept.
ANSWERS_WRITTEN = f"{PREFIX}/answers/written"
ANSWERS_TOO_LARGE = f"{PREFIX}/answers/too_large"

GUARD_HELD = f"{PREFIX}/guard/held"  # outcomes held back while a streak was open
GUARD_DROPPED = f"{PREFIX}/guard/dropped"  # held outcomes dropped when the guard tripped
GUARD_UNSENT = f"{PREFIX}/guard/unsent"  # requests not sent because the guard had stopped the crawl
#: Products held while the field-drift check looked at the pass's first answers.
GUARD_DRIFT_HELD = f"{PREFIX}/guard/drift_held"
#: 1 once a Pushgateway push failed (the crawl goes on; a WARNING says why).
PUSHGATEWAY_FAILED = f"{PREFIX}/pushgateway/failed"


def cleaning_invalid(field: str) -> str:
    """A value of ``field`` that had to be dropped (stored as NULL)."""
    return f"cleaning/invalid/{field}"


def cleaning_absent(field: str) -> str:
    """An answer without ``field`` at all (stored as NULL): a renamed or dropped field shows here."""
    return f"cleaning/absent/{field}"


def bad_response(reason: str) -> str:
    """A 200 whose body was not a product, by reason."""
    return f"{PREFIX}/bad_response/{reason}"


def failed_reason(reason: str) -> str:
    return f"{PREFIX}/failed_reason/{reason}"

#: Why the crawl stopped when that is not Scrapy's own finish reason (e.g. database_unavailable).
EXIT_REASON = f"{PREFIX}/exit_reason"


def add_seconds(stats: StatsCollector, key: str, seconds: float) -> None:
    stats.inc_value(key, seconds, start=0.0)  # type: ignore[arg-type]  # Scrapy types it int; it sums any number
