"""Bring a database to the schema (``schema.tables``): create what is missing, add what tables lack.

A table made by an earlier version, or before a column was declared
(PRODUCT_COLUMNS), gets the columns and indexes it lacks, every row kept;
SQLAlchemy's reflection says what a table has today. Then ``migrate.py``
converts product ids to PRODUCT_ID_TYPE. Everything runs through a SQLAlchemy
connection over the caller's own DB-API connection, in a worker thread or a
start-up check, never on the reactor thread.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable

from productcrawler.storage.migrate import migrate, refuse_declared_types, refuse_id_type
from productcrawler.storage.schema import tables

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy.engine import Connection

    from productcrawler.storage.target import Dialect

logger = logging.getLogger(__name__)

_DRIVERS = {"mysql": "mysql+pymysql://", "sqlite": "sqlite+pysqlite://", "postgresql": "postgresql+psycopg://"}


@contextmanager
def sa_connection(raw: Any, dialect: Dialect) -> Iterator[Connection]:
    """A SQLAlchemy connection over the DB-API connection ``raw`` (left open, its work committed
    by the caller or by ``Connection.commit``). Pending work of ``raw`` is committed first:
    SQLAlchemy rolls a connection back once when it first meets it."""
    raw.commit()
    engine = create_engine(_DRIVERS[dialect.name], creator=lambda: raw, poolclass=StaticPool,
                           pool_reset_on_return=None)
    connection = engine.connect()
    try:
        yield connection
    finally:
        if connection.in_transaction():
            connection.commit()
        connection.close()


def ensure_schema(cursor: Any, dialect: Dialect, id_type: str = "int",
                  extra: tuple[tuple[str, str], ...] = (), variant_extra: tuple[tuple[str, str], ...] = ()) -> None:
    """Create the tables, add the columns and indexes existing ones lack, convert ids; committed."""
    metadata = tables(id_type, extra, variant_extra)
    with sa_connection(cursor.connection, dialect) as connection:
        refuse_id_type(connection, id_type)
        refuse_declared_types(connection, extra)
        refuse_declared_types(connection, variant_extra, "product_variants", "VARIANT_FIELDS")
        existing = set(inspect(connection).get_table_names())
        for table in metadata.sorted_tables:
            connection.execute(CreateTable(table, if_not_exists=True))
            if table.name in existing:
                _add_columns(connection, dialect, table)
            _add_indexes(connection, dialect, table)
        migrate(connection, dialect, id_type)


def _add_columns(connection: Connection, dialect: Dialect, table: Any) -> None:
    # Rows made before a column existed get NULL (rows made before pass_id count as
    # done in no pass, so an unfinished pass is fetched again once).
    have = {column["name"].lower() for column in inspect(connection).get_columns(table.name)}
    for column in table.columns:
        if column.name in have:
            continue
        spec = CreateColumn(column).compile(dialect=connection.dialect)
        guard = "IF NOT EXISTS " if dialect.name == "postgresql" else ""
        try:
            connection.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {guard}{spec}")
        except Exception:
            # Another process (instances started together) may have added it first.
            if column.name not in {c["name"].lower() for c in inspect(connection).get_columns(table.name)}:
                raise
        logger.info("Added column %s.%s", table.name, column.name)


def _add_indexes(connection: Connection, dialect: Dialect, table: Any) -> None:
    inspector = inspect(connection)
    # SQLite's own indexes of UNIQUE columns (sqlite_autoindex_*) are left out unless asked for.
    options: dict[str, Any] = {"include_auto_indexes": True} if dialect.name == "sqlite" else {}
    found = inspector.get_indexes(table.name, **options)
    have = {index["name"] for index in found}
    # A column declared UNIQUE in an older CREATE has its index already, under another name.
    unique = {tuple(index["column_names"]) for index in found if index["unique"]} | {
        tuple(constraint["column_names"]) for constraint in inspector.get_unique_constraints(table.name)}
    for index in table.indexes:
        if index.name in have or (index.unique and tuple(c.name for c in index.columns) in unique):
            continue
        # MySQL has no CREATE INDEX IF NOT EXISTS (MariaDB has): a second process's is caught below.
        try:
            connection.execute(CreateIndex(index, if_not_exists=dialect.name != "mysql"))
        except Exception:
            if index.name not in {i["name"] for i in inspect(connection).get_indexes(table.name)}:
                raise
