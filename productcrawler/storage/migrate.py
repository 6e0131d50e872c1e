"""Tables made by earlier versions, brought to PRODUCT_ID_TYPE's ids with nothing lost.

Run inside ``ensure_schema``'s transaction, after the CREATE statements:

- product_id INT (32-bit) becomes BIGINT (MySQL; SQLite's INTEGER is 64-bit already);
- with PRODUCT_ID_TYPE=string, an integer product_id becomes VARCHAR(64), each id
  its decimal text (MySQL converts in place; SQLite, whose INTEGER affinity would
  turn '00123' into 123, rebuilds the table: renamed, created anew, copied, dropped);
- a string product_id with PRODUCT_ID_TYPE=int is refused: turning strings into
  integers could merge or lose ids ('00123' and '123'), so the crawl stops, exit 2;
- crawl_passes gets 64-bit start_id/end_id (the columns that name a pass's id list
  are ``ADDED_COLUMNS``, added before this runs).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from productcrawler.config import ConfigError
from productcrawler.storage.schema import ID_TABLES, MYSQL_ID_TYPES, ddl

if TYPE_CHECKING:
    from productcrawler.storage.target import Dialect

logger = logging.getLogger(__name__)

_MYSQL_INTEGERS = ("int", "bigint", "mediumint", "smallint", "tinyint")


def migrate(cursor: Any, dialect: Dialect, id_type: str) -> None:
    refuse_id_type(cursor, dialect, id_type)
    if dialect.name == "mysql":
        _mysql(cursor, id_type)
    else:
        _sqlite(cursor, id_type)


def refuse_id_type(cursor: Any, dialect: Dialect, id_type: str) -> None:
    """Raise ``ConfigError`` if existing tables hold string ids and ``id_type`` is int (a start-up check)."""
    if id_type != "int":
        return
    for table, column_type, is_integer in _id_columns(cursor, dialect):
        if not is_integer:
            raise _refuse(table, column_type)


def _id_columns(cursor: Any, dialect: Dialect) -> list[tuple[str, str, bool]]:
    """(table, product_id's type, whether it holds integers) of each existing id table."""
    found = []
    if dialect.name == "mysql":
        cursor.execute("SELECT table_name, data_type, column_type FROM information_schema.columns WHERE "
                       f"table_schema = DATABASE() AND table_name IN {ID_TABLES} "
                       "AND column_name = 'product_id'")
        for table, data_type, column_type in cursor.fetchall():
            found.append((str(table), str(column_type), str(data_type).lower() in _MYSQL_INTEGERS))
        return sorted(found, key=lambda column: ID_TABLES.index(column[0]))
    for table in ID_TABLES:
        cursor.execute(f"PRAGMA table_info({table})")
        types = {str(row[1]): str(row[2]).upper() for row in cursor.fetchall()}
        if "product_id" in types:
            found.append((table, types["product_id"], "INT" in types["product_id"]))
    return found


def _refuse(table: str, column_type: str) -> ConfigError:
    return ConfigError(f"PRODUCT_ID_TYPE=int, but {table}.product_id holds string ids ({column_type}): "
                       "set PRODUCT_ID_TYPE=string, or use another database")


def _mysql(cursor: Any, id_type: str) -> None:
    cursor.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                   f"WHERE table_schema = DATABASE() AND ((table_name IN {ID_TABLES} "
                   "AND column_name = 'product_id') OR (table_name = 'crawl_passes' "
                   "AND column_name IN ('start_id', 'end_id')))")
    for table, column, data_type in cursor.fetchall():
        table, column, data_type = str(table), str(column), str(data_type).lower()
        if column != "product_id":
            if data_type != "bigint":
                cursor.execute(f"ALTER TABLE crawl_passes MODIFY {column} BIGINT NOT NULL")
            continue
        if data_type not in _MYSQL_INTEGERS:
            continue  # strings already (refuse_id_type has refused them for int ids)
        if id_type == "string":
            logger.warning("%s.product_id holds integers: converting it to VARCHAR(64) for "
                           "PRODUCT_ID_TYPE=string (each id keeps its decimal text)", table)
        if id_type == "string" or data_type != "bigint":
            cursor.execute(f"ALTER TABLE {table} MODIFY product_id {MYSQL_ID_TYPES[id_type]} NOT NULL")


def _sqlite(cursor: Any, id_type: str) -> None:
    for table in ID_TABLES:
        cursor.execute(f"PRAGMA table_info({table})")
        columns = {str(row[1]): str(row[2]).upper() for row in cursor.fetchall()}
        if id_type == "string" and "INT" in columns["product_id"]:
            logger.warning("%s.product_id holds integers: rebuilding the table for PRODUCT_ID_TYPE=string "
                           "(each id keeps its decimal text)", table)
            _sqlite_rebuild(cursor, table, list(columns))


def _sqlite_rebuild(cursor: Any, table: str, old_columns: list[str]) -> None:
    """Recreate ``table`` with string ids and copy every row, in the caller's transaction."""
    old = f"{table}_integer_ids"
    cursor.execute(f"SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}' "
                   "AND sql IS NOT NULL")
    for (index,) in cursor.fetchall():
        cursor.execute(f"DROP INDEX {index}")  # recreated below, on the new table
    cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
    for statement in ddl("sqlite", "string"):
        if f" {table} " in statement or f"ON {table} " in statement:
            cursor.execute(statement)
    cursor.execute(f"PRAGMA table_info({table})")
    new_columns = [str(row[1]) for row in cursor.fetchall()]
    kept = [c for c in old_columns if c in new_columns]
    # Columns other helpers add later are in old_columns but not in the CREATE: keep them too.
    for column in old_columns:
        if column not in new_columns:
            cursor.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
            kept.append(column)
    selected = ", ".join("CAST(product_id AS TEXT)" if c == "product_id" else c for c in kept)
    cursor.execute(f"INSERT INTO {table} ({', '.join(kept)}) SELECT {selected} FROM {old}")
    cursor.execute(f"DROP TABLE {old}")
