"""The crawl's SQL, for MySQL and SQLite: schema, batched upserts, the pass ledger.

Every method that touches the database has two forms: a plain function of a
DB-API cursor (run in a worker thread by Twisted's adbapi pool, or directly in
start-up checks and tools) and, on ``Database``, a Deferred-returning wrapper.
Nothing here runs SQL on the reactor thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.enterprise import adbapi

from productcrawler.items import MISSING, FailureItem, ProductItem
from productcrawler.storage.schema import PASS_COLUMN, PRODUCT_COLUMNS
from productcrawler.storage.target import SQLITE, DatabaseTarget, Dialect, sqlite_prepare

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)


def utcnow() -> datetime:
    """Naive UTC now, to the second: DATETIME columns keep no zone and no fraction."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


@dataclass(frozen=True)
class PassInfo:
    pass_id: int
    start_id: int
    end_id: int
    started_at: datetime
    resumed: bool


# --- functions of a cursor: they run in a worker thread -------------------------

def ensure_schema(cursor: Any, dialect: Dialect) -> None:
    for statement in dialect.ddl:
        cursor.execute(statement)
    # Tables made before rows carried their pass: add the column (their rows
    # count as done in no pass, so an unfinished pass is fetched again once).
    for table in ("products", "crawl_failures"):
        try:
            cursor.execute(f"SELECT {PASS_COLUMN} FROM {table} WHERE 1 = 0")
            cursor.fetchall()
        except Exception:  # noqa: BLE001 - the driver's "unknown column", whichever it is
            cursor.execute(f"ALTER TABLE {table} ADD COLUMN {PASS_COLUMN} INT NULL")


def _rows(dialect: Dialect, items: list[Any], columns: tuple[str, ...],
          pass_id: int | None) -> list[tuple[Any, ...]]:
    return dialect.rows([(*(getattr(item, c) for c in columns), pass_id) for item in items])


def write_batch(cursor: Any, dialect: Dialect, products: list[ProductItem],
                failures: list[tuple[FailureItem, datetime]], pass_id: int | None = None) -> None:
    """Upsert products and failures in the caller's transaction.

    A stored product clears that id's failure; a `missing` id loses its product
    row (the API no longer has it), so each id has one current outcome. A
    `failed` id keeps its last good row: a transient failure is no reason to
    throw good data away; its failure row says the refresh did not happen.
    """
    if products:
        cursor.executemany(dialect.upsert_product, _rows(dialect, products, PRODUCT_COLUMNS, pass_id))
        # One IN (...) per batch: executemany runs a DELETE once per row.
        _delete_ids(cursor, dialect, "crawl_failures", [p.product_id for p in products])
    if failures:
        rows = [(f.product_id, f.outcome, f.http_status, f.reason[:255], f.attempts, at, pass_id)
                for f, at in failures]
        cursor.executemany(dialect.upsert_failure, dialect.rows(rows))
        _delete_ids(cursor, dialect, "products", [f.product_id for f, _ in failures if f.outcome == MISSING])


def _delete_ids(cursor: Any, dialect: Dialect, table: str, ids: list[int]) -> None:
    if ids:
        cursor.execute(f"DELETE FROM {table} WHERE product_id IN ({dialect.params(len(ids))})", ids)


def _done_union(dialect: Dialect) -> str:
    p = dialect.placeholder
    return (f"SELECT product_id FROM products WHERE product_id BETWEEN {p} AND {p} AND {PASS_COLUMN} = {p} "
            f"UNION SELECT product_id FROM crawl_failures "
            f"WHERE product_id BETWEEN {p} AND {p} AND {PASS_COLUMN} = {p}")


def done_ids(cursor: Any, dialect: Dialect, first: int, last: int, pass_id: int) -> set[int]:
    """Ids in [first, last] with an outcome written by pass ``pass_id``."""
    cursor.execute(_done_union(dialect), (first, last, pass_id, first, last, pass_id))
    return {int(row[0]) for row in cursor.fetchall()}


def done_count(cursor: Any, dialect: Dialect, first: int, last: int, pass_id: int) -> int:
    """How many ids in [first, last] have an outcome written by pass ``pass_id``."""
    cursor.execute(f"SELECT COUNT(*) FROM ({_done_union(dialect)}) AS done",
                   (first, last, pass_id, first, last, pass_id))
    return int(cursor.fetchone()[0])


def as_datetime(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.strptime(str(value), "%Y-%m-%d %H:%M:%S")


def open_pass(cursor: Any, dialect: Dialect, start_id: int, end_id: int, *, fresh: bool,
              now: datetime) -> PassInfo:
    """Resume the unfinished pass over the same range, or start a new one."""
    p = dialect.placeholder
    cursor.execute(
        f"SELECT pass_id, started_at FROM crawl_passes WHERE start_id = {p} AND end_id = {p} "
        f"AND finished_at IS NULL ORDER BY pass_id DESC LIMIT 1",
        (start_id, end_id),
    )
    row = cursor.fetchone()
    if row is not None and not fresh:
        return PassInfo(int(row[0]), start_id, end_id, as_datetime(row[1]), resumed=True)
    if row is not None:
        cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}",
                       (dialect.value(now), row[0]))
    cursor.execute(
        f"INSERT INTO crawl_passes (start_id, end_id, started_at) VALUES ({p}, {p}, {p})",
        (start_id, end_id, dialect.value(now)),
    )
    return PassInfo(int(cursor.lastrowid), start_id, end_id, now, resumed=False)


def finish_pass(cursor: Any, dialect: Dialect, pass_id: int, now: datetime) -> None:
    p = dialect.placeholder
    cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}",
                   (dialect.value(now), pass_id))


def outcome_counts(cursor: Any, dialect: Dialect, first: int, last: int, pass_id: int) -> dict[str, int]:
    """Stored / missing / failed in [first, last] by pass ``pass_id`` (summaries, progress)."""
    p = dialect.placeholder
    cursor.execute(f"SELECT COUNT(*) FROM products WHERE product_id BETWEEN {p} AND {p} "
                   f"AND {PASS_COLUMN} = {p}", (first, last, pass_id))
    counts = {"stored": int(cursor.fetchone()[0]), "missing": 0, "failed": 0}
    cursor.execute(f"SELECT outcome, COUNT(*) FROM crawl_failures WHERE product_id BETWEEN {p} AND {p} "
                   f"AND {PASS_COLUMN} = {p} GROUP BY outcome", (first, last, pass_id))
    for outcome, count in cursor.fetchall():
        counts[str(outcome)] = int(count)
    return counts


# --- the reactor-side handle -------------------------------------------------------

class _Connection(adbapi.Connection):
    """adbapi's connection wrapper, minus its traceback on every lost connection.

    When a connection dies mid-transaction, adbapi's rollback logs "Rollback
    failed" with a traceback (twice) before the caller even sees the error.
    The caller classifies and retries that error itself (``pipelines/storage``),
    so here the dead connection is just dropped: the next transaction opens a
    new one, and the original error propagates unchanged.
    """

    def rollback(self) -> None:
        try:
            self._connection.rollback()
        except Exception as error:  # noqa: BLE001 - the connection is gone; say so quietly
            logger.debug("Rollback failed (%s); dropping the connection", error)
            self._pool.disconnect(self._connection)


class Database:
    """A pool of connections in worker threads; every call returns a Deferred."""

    def __init__(self, target: DatabaseTarget) -> None:
        self.target = target
        self.dialect = target.dialect
        kwargs = dict(target.connect_kwargs)
        if self.dialect is SQLITE:
            Path(kwargs["database"]).parent.mkdir(parents=True, exist_ok=True)
            # One connection: SQLite has one writer; a second would only wait on the lock.
            self.pool = adbapi.ConnectionPool("sqlite3", cp_min=1, cp_max=1, cp_openfun=sqlite_prepare,
                                              **kwargs)
        else:
            # Two: batched writes and the ledger's reads don't queue behind each other.
            self.pool = adbapi.ConnectionPool("pymysql", cp_min=1, cp_max=2, **kwargs)
            self.pool.connectionFactory = _Connection

    def run(self, function: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """Run ``function(cursor, dialect, *args)`` in a transaction in a worker thread."""
        return self.pool.runInteraction(function, self.dialect, *args, **kwargs)

    def close(self) -> None:
        self.pool.close()
