"""The tables, once for MySQL/MariaDB, SQLite and PostgreSQL: a SQLAlchemy ``MetaData``.

The CREATE statements, the columns added to tables made before them
(``evolve.py``) and each database's upserts (``target.py``) are compiled from it.
``sql/init.sql`` is its MySQL output (``python -m productcrawler.storage.schema
> sql/init.sql``); a test keeps the two equal.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    CHAR,
    JSON,
    TIMESTAMP,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    Numeric,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from productcrawler.answer.declared import read_type

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import Dialect as SaDialect
    from sqlalchemy.types import TypeEngine

#: The article's columns, which every crawl writes (``storage/changes.py``).
ARTICLE_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating",
                   "sales_count", "update_time")
FAILURE_COLUMNS = ("product_id", "outcome", "http_status", "reason", "attempts", "updated_at")
#: The tables whose product_id takes PRODUCT_ID_TYPE's type.
ID_TABLES = ("products", "crawl_failures", "product_changes", "product_variants")
#: Every row also carries the pass (crawl_passes) that wrote it, database or Redis-shared.
PASS_COLUMN = "pass_id"
#: A pass's counts in crawl_passes, written once the pass is complete (NULL until then).
SUMMARY_COUNTS = ("stored", "missing", "failed", "changed", "removed")

#: The SQLAlchemy dialect of each database the crawl writes to (statements are compiled for them).
SA_DIALECTS: dict[str, SaDialect] = {
    "mysql": mysql.pymysql.dialect(paramstyle="format"),
    "sqlite": sqlite.pysqlite.dialect(paramstyle="qmark"),
    "postgresql": postgresql.psycopg.dialect(paramstyle="format"),
}
_TABLE_OPTIONS: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
                                   "mysql_collate": "utf8mb4_unicode_ci", "implicit_returning": False}


def id_type(kind: str) -> TypeEngine[Any]:
    """product_id's column type per PRODUCT_ID_TYPE. String ids compare byte for byte on MySQL
    (utf8mb4_bin): 'ab-1' and 'AB-1 ' are two SKUs, not one row; SQLite's VARCHAR has TEXT
    affinity, so '00123' stays '00123'; SQLite's INTEGER is 64-bit."""
    if kind == "string":
        return String(64).with_variant(mysql.VARCHAR(64, charset="utf8mb4", collation="utf8mb4_bin"), "mysql")
    return BigInteger().with_variant(Integer(), "sqlite")


def _row_id() -> Column[int]:
    # BIGINT: InnoDB's upsert consumes an auto-increment value on every update, so an
    # hourly re-crawl of 50,000 ids would exhaust an INT within years. SQLite's
    # AUTOINCREMENT needs INTEGER PRIMARY KEY.
    return Column("id", BigInteger().with_variant(mysql.BIGINT(unsigned=True), "mysql")
                  .with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True)


def _int() -> TypeEngine[int]:
    return Integer()


@lru_cache(maxsize=32)
def tables(kind: str = "int", extra: tuple[tuple[str, str], ...] = (),
           variant_extra: tuple[tuple[str, str], ...] = ()) -> MetaData:
    """Every table, with product_id of PRODUCT_ID_TYPE ``kind``, ``extra`` product columns
    (PRODUCT_COLUMNS: name and type, ``column_type``'s spelling) and ``variant_extra`` variant
    columns (VARIANT_FIELDS' declared ones).

    ``pass_id`` on products and crawl_failures: the pass (crawl_passes) that wrote
    the row, so a pass knows its own rows without comparing timestamps.
    ``first_seen``: when the product was first stored; ``removed_at``: when the API
    answered 404 for a product it had (NULL again once it answers a product).
    ``crawl_passes.redis_token``: the Redis-shared pass the row stands for (NULL:
    a database pass); every instance of that pass finds its row by it. Its id list:
    ``ids_digest`` NULL for a range, else a file's SHA-256 and ``ids_count``;
    ``source_pass_id``, for a pass over the ids recorded failed, the pass it re-fetches.
    ``listing_pages``: the pages of a listing pass (PRODUCT_LIST_URL) it knows of, each
    with its URL; ``done_at`` is set in the transaction that stores the page's products,
    ``failure`` says why a page ended without them (the listing is then not complete).
    ``product_variants``: a product's variants (VARIANTS), one row each, written with the
    product; ``removed_at`` when a later answer of the product lacked it. Their changes are
    ``product_changes`` rows with the ``variant_id``.
    """
    metadata = MetaData()
    Table("products", metadata,
          _row_id(),
          Column("product_id", id_type(kind), nullable=False),
          Column("name", String(255), nullable=False),
          Column("price", Numeric(10, 2)),
          Column("stock", _int()),
          Column("category", String(100)),
          Column("brand", String(100)),
          Column("rating", Numeric(3, 2)),
          Column("sales_count", _int()),
          Column("update_time", DateTime(), nullable=False),
          Column("created_at", TIMESTAMP(), nullable=False, server_default=func.current_timestamp()),
          Column(PASS_COLUMN, _int()),
          Column("first_seen", DateTime()),
          Column("removed_at", DateTime()),
          # KEEP_ANSWER: the product's JSON as received, and its SHA-256 (hex) to compare.
          Column("answer", json_type()),
          Column("answer_digest", CHAR(64)),
          *(Column(name, column_type(spec)) for name, spec in extra),
          UniqueConstraint("product_id", name="uk_product_id"),
          Index("idx_category", "category"),
          Index("idx_brand", "brand"),
          sqlite_autoincrement=True,
          **_TABLE_OPTIONS)
    Table("crawl_failures", metadata,
          Column("product_id", id_type(kind), primary_key=True, autoincrement=False),
          Column("outcome", String(16), nullable=False),
          Column("http_status", SmallInteger()),
          Column("reason", String(255), nullable=False),
          Column("attempts", _int(), nullable=False),
          Column("updated_at", DateTime(), nullable=False),
          Column(PASS_COLUMN, _int()),
          Index("idx_outcome", "outcome"),
          **_TABLE_OPTIONS)
    Table("crawl_passes", metadata,
          Column(PASS_COLUMN, _int(), primary_key=True, autoincrement=True),
          Column("start_id", BigInteger(), nullable=False),
          Column("end_id", BigInteger(), nullable=False),
          Column("started_at", DateTime(), nullable=False),
          Column("finished_at", DateTime()),
          Column("ids_digest", CHAR(64)),
          Column("ids_count", BigInteger()),
          Column("source_pass_id", _int()),
          *(Column(count, _int()) for count in SUMMARY_COUNTS),
          Column("coverage", Text()),
          Column("redis_token", String(64)),
          # A listing pass's {since}: NULL for a pass that lists everything (docs/listing.md).
          Column("list_since", DateTime()),
          Index("uk_redis_token", "redis_token", unique=True),
          sqlite_autoincrement=True,
          **_TABLE_OPTIONS)
    Table("product_changes", metadata,
          _row_id(),
          Column("product_id", id_type(kind), nullable=False),
          Column(PASS_COLUMN, _int()),
          Column("changed_at", DateTime(), nullable=False),
          Column("field", String(64), nullable=False),
          Column("old_value", String(255)),
          Column("new_value", String(255)),
          Column("variant_id", String(64)),
          Index("idx_changes_product", "product_id", "changed_at"),
          Index("idx_changes_pass", PASS_COLUMN, "field"),
          sqlite_autoincrement=True,
          **_TABLE_OPTIONS)
    Table("product_variants", metadata,
          _row_id(),
          Column("product_id", id_type(kind), nullable=False),
          Column("variant_id", String(64), nullable=False),
          Column("sku", String(64)),
          Column("price", Numeric(10, 2)),
          Column("stock", _int()),
          *(Column(name, column_type(spec)) for name, spec in variant_extra),
          Column("update_time", DateTime(), nullable=False),
          Column(PASS_COLUMN, _int()),
          Column("first_seen", DateTime()),
          Column("removed_at", DateTime()),
          UniqueConstraint("product_id", "variant_id", name="uk_variant"),
          Index("idx_variants_sku", "sku"),
          sqlite_autoincrement=True,
          **_TABLE_OPTIONS)
    Table("listing_pages", metadata,
          Column(PASS_COLUMN, _int(), primary_key=True, autoincrement=False),
          Column("page", _int(), primary_key=True, autoincrement=False),
          Column("url", Text(), nullable=False),
          Column("products", _int()),
          Column("done_at", DateTime()),
          Column("failure", String(255)),
          **_TABLE_OPTIONS)
    return metadata


def column_type(spec: str) -> TypeEngine[Any]:
    """A declared column's type (:func:`~productcrawler.answer.declared.read_type`; ValueError says what is
    allowed)."""
    name, sizes = read_type(spec)
    if name == "text":
        return String(sizes[0])
    if name == "decimal":
        return Numeric(sizes[0], sizes[1])
    return _PLAIN_TYPES[name]()


def json_type() -> TypeEngine[Any]:
    """A JSON value: MySQL/MariaDB JSON, SQLite text, PostgreSQL jsonb."""
    return JSON().with_variant(postgresql.JSONB(), "postgresql").with_variant(Text(), "sqlite")


_PLAIN_TYPES: dict[str, Callable[[], TypeEngine[Any]]] = {
    "integer": BigInteger, "boolean": Boolean, "datetime": DateTime, "json": json_type}


def ddl(dialect: str, kind: str = "int") -> tuple[str, ...]:
    """The CREATE statements of ``dialect`` for ids of ``kind``, tables and their indexes."""
    sa_dialect = SA_DIALECTS[dialect]
    statements = []
    for table in tables(kind).sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=sa_dialect)).strip())
        statements.extend(str(CreateIndex(index).compile(dialect=sa_dialect)).strip()
                          for index in sorted(table.indexes, key=lambda index: str(index.name)))
    return tuple(statements)


def mysql_init_sql() -> str:
    return "".join(f"{statement};\n\n" for statement in ddl("mysql"))


if __name__ == "__main__":
    print(mysql_init_sql(), end="")
