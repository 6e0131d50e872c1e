"""The crawl's SQL, for MySQL and SQLite: schema and batched upserts.

The pass's own queries (which ids a pass has done) are ``passes/database_sql.py``.

Every method that touches the database has two forms: a plain function of a
DB-API cursor (run in a worker thread by Twisted's adbapi pool, or directly in
start-up checks and tools) and, on ``Database``, a Deferred-returning wrapper.
Nothing here runs SQL on the reactor thread.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.enterprise import adbapi

from productcrawler.items import MISSING, FailureItem, PageItem, ProductItem
from productcrawler.storage.changes import Written, write_products
from productcrawler.storage.evolve import ensure_schema
from productcrawler.storage.listing_pages import write_pages
from productcrawler.storage.target import SQLITE, DatabaseTarget, Dialect, sqlite_prepare
from productcrawler.storage.variants import write_variants

if TYPE_CHECKING:
    from collections.abc import Iterable

    from twisted.internet.defer import Deferred

#: The columns whose changes are recorded when the caller names none (TRACK_CHANGES's default).
DEFAULT_TRACKED = ("price", "stock")

logger = logging.getLogger(__name__)


def utcnow() -> datetime:
    """Naive UTC now, to the second: DATETIME columns keep no zone and no fraction."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


# --- functions of a cursor: they run in a worker thread -------------------------

def write_batch(cursor: Any, dialect: Dialect, products: list[ProductItem],
                failures: list[tuple[FailureItem, datetime]], pass_id: int | None = None,
                tracked: Iterable[str] = DEFAULT_TRACKED, pages: list[PageItem] | None = None,
                declared: tuple[tuple[str, str], ...] = (),
                variant_declared: tuple[tuple[str, str], ...] = ()) -> Written:
    """Write products (by what changed: ``changes.py``) and failures in the caller's transaction.

    A stored product clears that id's failure; a `missing` id's product row
    is kept and marked removed (the API no longer has it), so each id has one
    current outcome. A `failed` id keeps its last good row: a transient
    failure is no reason to throw good data away; its failure row says the
    refresh did not happen. ``tracked`` names the columns whose changes are
    recorded (``TRACK_CHANGES``). ``pages``: listing pages whose products are among ``products``,
    marked done in the pass's ledger in the same transaction. ``declared``: the PRODUCT_COLUMNS
    (name, type), written and compared as the article's columns are; ``variant_declared``:
    VARIANT_FIELDS' (the products' variants are written in the same transaction).
    """
    missing = [(f.product_id, at) for f, at in failures if f.outcome == MISSING]
    written = write_products(cursor, dialect, products, missing, pass_id, tracked, declared)
    written.change_rows += write_variants(cursor, dialect, products, pass_id, tuple(tracked), variant_declared)
    if products:
        # One IN (...) per batch: executemany runs a DELETE once per row.
        _delete_ids(cursor, dialect, "crawl_failures", [p.product_id for p in products])
    if failures:
        rows = [(f.product_id, f.outcome, f.http_status, f.reason[:255], f.attempts, at, pass_id)
                for f, at in failures]
        cursor.executemany(dialect.upsert_failure, dialect.rows(rows))
    if pages:
        write_pages(cursor, dialect, pages, pass_id, utcnow())
    return written


def _delete_ids(cursor: Any, dialect: Dialect, table: str, ids: list[int | str]) -> None:
    if ids:
        cursor.execute(f"DELETE FROM {table} WHERE product_id IN ({dialect.params(len(ids))})", ids)


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
        assert self._connection is not None  # the constructor connects
        try:
            self._connection.rollback()
        except Exception as error:  # noqa: BLE001 - the connection is gone; say so quietly
            logger.debug("Rollback failed (%s); dropping the connection", error)
            self._pool.disconnect(self._connection)


class Database:
    """A pool of connections in worker threads; every call returns a Deferred."""

    def __init__(self, target: DatabaseTarget, id_type: str = "int",
                 declared: tuple[tuple[str, str], ...] = (),
                 variant_declared: tuple[tuple[str, str], ...] = ()) -> None:
        self.target = target
        self.id_type = id_type
        #: PRODUCT_COLUMNS as (name, type): the schema's extra columns and the writes'.
        self.declared = declared
        self.declared_names = tuple(name for name, _ in declared)
        self.variant_declared = variant_declared
        self.dialect = target.dialect
        kwargs = dict(target.connect_kwargs)
        if self.dialect is SQLITE:
            Path(kwargs["database"]).parent.mkdir(parents=True, exist_ok=True)
            # One connection: SQLite has one writer; a second would only wait on the lock.
            self.pool = adbapi.ConnectionPool("sqlite3", cp_min=1, cp_max=1, cp_openfun=sqlite_prepare,
                                              **kwargs)
        else:
            # Two: batched writes and the ledger's reads don't queue behind each other.
            self.pool = adbapi.ConnectionPool(self.dialect.module, cp_min=1, cp_max=2, **kwargs)
            self.pool.connectionFactory = _Connection
        self._schema_ready = False

    async def ensure_schema(self) -> None:
        """Create the tables if need be, once per process (the pass and the pipeline both need them)."""
        if not self._schema_ready:
            await maybe_deferred_to_future(self.run(ensure_schema, self.id_type, self.declared,
                                                    self.variant_declared))
            self._schema_ready = True

    def run(self, function: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """Run ``function(cursor, dialect, *args)`` in a transaction in a worker thread."""
        return self.pool.runInteraction(function, self.dialect, *args, **kwargs)

    def close(self) -> None:
        self.pool.close()
