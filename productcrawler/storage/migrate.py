"""Tables made by earlier versions, brought to PRODUCT_ID_TYPE's ids with nothing lost.

Run by ``evolve.ensure_schema`` after the CREATE statements, on a SQLAlchemy connection:

- product_id INT (32-bit) becomes BIGINT (MySQL, PostgreSQL; SQLite's INTEGER is 64-bit already);
- with PRODUCT_ID_TYPE=string, an integer product_id becomes VARCHAR(64), each id
  its decimal text (MySQL and PostgreSQL convert in place; SQLite, whose INTEGER affinity would
  turn '00123' into 123, rebuilds the table: renamed, created anew, copied, dropped);
- a string product_id with PRODUCT_ID_TYPE=int is refused: turning strings into
  integers could merge or lose ids ('00123' and '123'), so the crawl stops, exit 2;
- crawl_passes gets 64-bit start_id/end_id.

``refuse_declared_types`` stops the crawl at start when a column declared in
PRODUCT_COLUMNS exists with another type, before anything is changed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect
from sqlalchemy import types as sqltypes
from sqlalchemy.schema import CreateIndex, CreateTable

from productcrawler.config import ConfigError
from productcrawler.storage.schema import ID_TABLES, column_type, tables
from productcrawler.storage.schema import id_type as id_column_type

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from productcrawler.storage.target import Dialect

logger = logging.getLogger(__name__)


def migrate(connection: Connection, dialect: Dialect, id_type: str) -> None:
    if dialect.name == "sqlite":
        _sqlite(connection, id_type)
    else:
        _alter(connection, dialect, id_type)


def refuse_id_type(connection: Any, id_type: str) -> None:
    """Raise ``ConfigError`` if existing tables hold string ids and ``id_type`` is int (a start-up check)."""
    if id_type != "int":
        return
    for table, found, is_integer in _id_columns(connection):
        if not is_integer:
            raise _refuse(table, found)


def refuse_declared_types(connection: Any, extra: tuple[tuple[str, str], ...], table: str = "products",
                          setting: str = "PRODUCT_COLUMNS") -> None:
    """Raise ``ConfigError`` if ``table`` has a declared column (``setting``'s) of another type."""
    if not extra or table not in inspect(connection).get_table_names():
        return
    have = {c["name"].lower(): c["type"] for c in inspect(connection).get_columns(table)}
    for name, spec in extra:
        if name in have and not same_type(column_type(spec), have[name]):
            raise ConfigError(f"{setting} declares {name}:{spec}, but {table}.{name} is "
                              f"{have[name]}: declare its type as the table has it, or rename the column")


def same_type(declared: Any, found: Any) -> bool:
    """Whether a reflected column type is the one declared (each database's spelling of it)."""
    if isinstance(declared, sqltypes.Boolean):
        # MySQL's BOOLEAN is TINYINT(1); SQLite keeps the name.
        return isinstance(found, sqltypes.Boolean) or (
            isinstance(found, sqltypes.Integer) and getattr(found, "display_width", None) == 1)
    if isinstance(declared, sqltypes.JSON):
        # SQLite stores JSON as text; MariaDB reports JSON as LONGTEXT: text without a length.
        return isinstance(found, sqltypes.JSON) or (isinstance(found, sqltypes.String) and found.length is None)
    if isinstance(declared, sqltypes.Numeric) and not isinstance(declared, sqltypes.Float):
        return (isinstance(found, sqltypes.Numeric) and not isinstance(found, sqltypes.Float)
                and (found.precision, found.scale) == (declared.precision, declared.scale))
    if isinstance(declared, sqltypes.Integer):
        return isinstance(found, sqltypes.Integer) and getattr(found, "display_width", None) != 1
    if isinstance(declared, sqltypes.DateTime):
        return isinstance(found, sqltypes.DateTime)
    if isinstance(declared, sqltypes.String):
        return isinstance(found, sqltypes.String) and found.length == declared.length
    return False


def _id_columns(connection: Any) -> list[tuple[str, str, bool]]:
    """(table, product_id's type, whether it holds integers) of each existing id table."""
    inspector = inspect(connection)
    existing = set(inspector.get_table_names())
    found = []
    for table in ID_TABLES:
        if table not in existing:
            continue
        for column in inspector.get_columns(table):
            if column["name"].lower() == "product_id":
                kind = column["type"]
                found.append((table, str(kind).lower(), isinstance(kind, sqltypes.Integer)))
    return found


def _refuse(table: str, column_type: str) -> ConfigError:
    return ConfigError(f"PRODUCT_ID_TYPE=int, but {table}.product_id holds string ids ({column_type}): "
                       "set PRODUCT_ID_TYPE=string, or use another database")


def _alter(connection: Connection, dialect: Dialect, id_type: str) -> None:
    """MySQL and PostgreSQL convert in place: 32-bit ids widen, integer ids become their text."""
    inspector = inspect(connection)
    target = id_column_type(id_type).compile(dialect=connection.dialect)
    for table in (*ID_TABLES, "crawl_passes"):
        for column in inspector.get_columns(table):
            name, kind = column["name"].lower(), column["type"]
            if table == "crawl_passes":
                if name in ("start_id", "end_id") and not isinstance(kind, sqltypes.BigInteger):
                    _modify(connection, dialect, table, name, "BIGINT")
                continue
            if name != "product_id" or not isinstance(kind, sqltypes.Integer):
                continue  # strings already (refuse_id_type has refused them for int ids)
            if id_type == "string":
                logger.warning("%s.product_id holds integers: converting it to VARCHAR(64) for "
                               "PRODUCT_ID_TYPE=string (each id keeps its decimal text)", table)
            if id_type == "string" or not isinstance(kind, sqltypes.BigInteger):
                _modify(connection, dialect, table, "product_id", target)


def _modify(connection: Connection, dialect: Dialect, table: str, column: str, kind: str) -> None:
    if dialect.name == "mysql":
        connection.exec_driver_sql(f"ALTER TABLE {table} MODIFY {column} {kind} NOT NULL")
    else:
        connection.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {kind} "
                                   f"USING {column}::{kind.split('(')[0]}")


def _sqlite(connection: Connection, id_type: str) -> None:
    inspector = inspect(connection)
    for table in ID_TABLES:
        columns = {c["name"].lower(): c["type"] for c in inspector.get_columns(table)}
        if id_type == "string" and isinstance(columns["product_id"], sqltypes.Integer):
            logger.warning("%s.product_id holds integers: rebuilding the table for PRODUCT_ID_TYPE=string "
                           "(each id keeps its decimal text)", table)
            _sqlite_rebuild(connection, table, list(columns))


def _sqlite_rebuild(connection: Connection, table: str, old_columns: list[str]) -> None:
    """Recreate ``table`` with string ids and copy every row, in the caller's transaction."""
    old = f"{table}_integer_ids"
    for (index,) in connection.exec_driver_sql(
            f"SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}' "
            "AND sql IS NOT NULL").fetchall():
        connection.exec_driver_sql(f"DROP INDEX {index}")  # recreated below, on the new table
    connection.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {old}")
    new_table = tables("string").tables[table]
    connection.execute(CreateTable(new_table))
    for index in new_table.indexes:
        connection.execute(CreateIndex(index))
    new_columns = [c.name for c in new_table.columns]
    kept = [c for c in old_columns if c in new_columns]
    # Columns declared later (PRODUCT_COLUMNS) are in old_columns but not in the CREATE: keep them too.
    for column in old_columns:
        if column not in new_columns:
            connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column}")
            kept.append(column)
    selected = ", ".join("CAST(product_id AS TEXT)" if c == "product_id" else c for c in kept)
    connection.exec_driver_sql(f"INSERT INTO {table} ({', '.join(kept)}) SELECT {selected} FROM {old}")
    connection.exec_driver_sql(f"DROP TABLE {old}")
