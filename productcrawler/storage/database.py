"""MySQL and SQLite behind one small interface: schema and batched upserts.

The pass's own queries (which ids a pass has done) are ``passes/database_sql.py``.

Every method that touches the database has two forms: a plain function of a
DB-API cursor (run in a worker thread by Twisted's adbapi pool, or directly in
start-up checks and tools) and, on ``Database``, a Deferred-returning wrapper.
Nothing here runs SQL on the reactor thread.
"""

from __future__ import annotations

import logging
import sqlite3
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.enterprise import adbapi

from productcrawler.config import ConfigError, mask_url
from productcrawler.items import MISSING, FailureItem, ProductItem
from productcrawler.storage.schema import MYSQL_DDL, SQLITE_DDL
from productcrawler.url_options import MYSQL_OPTIONS, parse_options

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

PRODUCT_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating",
                   "sales_count", "update_time")
FAILURE_COLUMNS = ("product_id", "outcome", "http_status", "reason", "attempts", "updated_at")
#: Every row also carries the pass that wrote it (NULL: a Redis-shared pass, which keeps its ledger in Redis).
PASS_COLUMN = "pass_id"


def utcnow() -> datetime:
    """Naive UTC now, to the second: DATETIME columns keep no zone and no fraction."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


@dataclass(frozen=True)
class Dialect:
    name: str
    module: str
    ddl: tuple[str, ...]
    upsert_product: str
    upsert_failure: str
    placeholder: str

    def params(self, count: int) -> str:
        return ", ".join([self.placeholder] * count)

    def value(self, value: Any) -> Any:
        """A query parameter as this database's driver takes it."""
        return _sqlite_value(value) if self.name == "sqlite" else value

    def rows(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Rows of query parameters (``executemany``) as this database's driver takes them."""
        if self.name != "sqlite":
            return rows
        return [tuple(_sqlite_value(v) for v in row) for row in rows]


def _dialect(name: str, module: str, ddl: tuple[str, ...], placeholder: str,
             upsert_suffix: str, excluded: str) -> Dialect:
    def upsert(table: str, columns: tuple[str, ...], key: str) -> str:
        values = ", ".join([placeholder] * len(columns))
        updates = ", ".join(f"{c} = {excluded.format(c)}" for c in columns if c != key)
        return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values}) "
                f"{upsert_suffix.format(key)} {updates}")

    return Dialect(
        name=name, module=module, ddl=ddl, placeholder=placeholder,
        upsert_product=upsert("products", (*PRODUCT_COLUMNS, PASS_COLUMN), "product_id"),
        upsert_failure=upsert("crawl_failures", (*FAILURE_COLUMNS, PASS_COLUMN), "product_id"),
    )


# VALUES(col) rather than MySQL 8's row alias: MariaDB has no row alias.
MYSQL = _dialect("mysql", "pymysql", MYSQL_DDL, "%s", "ON DUPLICATE KEY UPDATE", "VALUES({})")
SQLITE = _dialect("sqlite", "sqlite3", SQLITE_DDL, "?", "ON CONFLICT({}) DO UPDATE SET", "excluded.{}")


@dataclass(frozen=True)
class DatabaseTarget:
    """Where DATABASE_URL points, as connect() arguments for its DB-API module."""

    dialect: Dialect
    connect_kwargs: dict[str, Any]
    shown_url: str  # password masked

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: float = 5.0) -> DatabaseTarget:
        shown = mask_url(url) or ""
        parts = urlsplit(url)
        if parts.scheme == "sqlite":
            path = Path(unquote(url[len("sqlite:///"):]))
            return cls(SQLITE, {"database": str(path), "check_same_thread": False,
                                "timeout": 30.0}, shown)
        if parts.scheme in ("mysql", "mysql+pymysql"):
            kwargs = {
                "host": parts.hostname, "port": parts.port or 3306,
                "user": unquote(parts.username or "root"), "password": unquote(parts.password or ""),
                "database": parts.path.strip("/"), "charset": "utf8mb4", "autocommit": False,
                "connect_timeout": max(1, int(connect_timeout)), "read_timeout": 60, "write_timeout": 60,
                **_mysql_options(parts.query),
            }
            return cls(MYSQL, kwargs, shown)
        raise ConfigError(f"DATABASE_URL={shown!r} has an unknown scheme")

    def connect(self) -> Any:
        """A plain DB-API connection (start-up checks, tools, tests)."""
        if self.dialect is SQLITE:
            Path(self.connect_kwargs["database"]).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(**self.connect_kwargs)
            _sqlite_prepare(conn)
            return conn
        import pymysql

        return pymysql.connect(**self.connect_kwargs)


def _mysql_options(query: str) -> dict[str, Any]:
    """DATABASE_URL's query options as PyMySQL ``connect()`` arguments (validated in config)."""
    options = parse_options(query, MYSQL_OPTIONS)
    if "ssl_ca" in options:
        # PyMySQL alone would encrypt without checking the certificate against
        # the CA it was given; whoever names a CA means "verify with it".
        options.setdefault("ssl_verify_cert", True)
    elif options.get("ssl_verify_identity"):
        # Without a CA file PyMySQL turns the host name check off whatever
        # ssl_verify_identity says: verify with the system's CAs, host name
        # included, through a context of our own.
        return {**{k: v for k, v in options.items() if not k.startswith("ssl_")},
                "ssl": _system_ca_context(options)}
    return options


def _system_ca_context(options: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context()  # the system's CAs, CERT_REQUIRED, host name checked
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT  # as PyMySQL: MySQL's own certificates fail it
    if "ssl_cert" in options:
        try:
            context.load_cert_chain(options["ssl_cert"], options.get("ssl_key"), options.get("ssl_key_password"))
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError: a wrong key or passphrase
            raise ConfigError(f"DATABASE_URL options ssl_cert={options['ssl_cert']!r}, ssl_key=***: "
                              f"cannot load the client certificate ({error})") from None
    return context


def _sqlite_prepare(conn: sqlite3.Connection) -> None:
    # WAL lets `scrapy progress` and users read while the crawl writes.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")


def _sqlite_value(value: Any) -> Any:
    # sqlite3 has no Decimal or datetime adapters worth relying on (the
    # datetime one is deprecated); store exact text.
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if value is not None and not isinstance(value, (int, str, float, bytes)):
        return str(value)
    return value


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
            self.pool = adbapi.ConnectionPool("sqlite3", cp_min=1, cp_max=1, cp_openfun=_sqlite_prepare,
                                              **kwargs)
        else:
            # Two: batched writes and the ledger's reads don't queue behind each other.
            self.pool = adbapi.ConnectionPool("pymysql", cp_min=1, cp_max=2, **kwargs)
            self.pool.connectionFactory = _Connection
        self._schema_ready = False

    async def ensure_schema(self) -> None:
        """Create the tables if need be, once per process (the pass and the pipeline both need them)."""
        if not self._schema_ready:
            await maybe_deferred_to_future(self.run(ensure_schema))
            self._schema_ready = True

    def run(self, function: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """Run ``function(cursor, dialect, *args)`` in a transaction in a worker thread."""
        return self.pool.runInteraction(function, self.dialect, *args, **kwargs)

    def close(self) -> None:
        self.pool.close()
