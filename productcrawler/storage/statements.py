"""Each database's spelling of the writes that differ: upserts and "insert unless there".

Compiled once per (database, table, columns) by SQLAlchemy's dialects from
untyped table clauses, so that no dialect adds casts of its own; the result
is a plain DB-API statement with positional parameters in ``columns``' order.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, column, table
from sqlalchemy.dialects import mysql, postgresql, sqlite

from productcrawler.storage.schema import SA_DIALECTS

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ClauseElement

@lru_cache(maxsize=128)
def upsert(database: str, name: str, columns: tuple[str, ...], key: str | tuple[str, ...],
           kept: tuple[str, ...] = ()) -> str:
    """INSERT of ``columns``; a row whose ``key`` (a column, or the columns of a unique key) exists
    takes the new values but ``kept``'s."""
    keys = (key,) if isinstance(key, str) else key
    clause = table(name, *(column(c) for c in columns))
    values: dict[str, Any] = {c: bindparam(c) for c in columns}
    updated = [c for c in columns if c not in keys and c not in kept]
    if database == "mysql":
        # VALUES(col), not MySQL 8's row alias: MariaDB has no row alias (SQLAlchemy's default dialect
        # spells it VALUES()).
        on_mysql = mysql.insert(clause).values(values)
        return _compile(database, on_mysql.on_duplicate_key_update({c: on_mysql.inserted[c] for c in updated}))
    elsewhere = (postgresql.insert if database == "postgresql" else sqlite.insert)(clause).values(values)
    return _compile(database, elsewhere.on_conflict_do_update(
        index_elements=list(keys), set_={c: elsewhere.excluded[c] for c in updated}))


@lru_cache(maxsize=32)
def insert_ignore(database: str, name: str, columns: tuple[str, ...]) -> str:
    """INSERT of ``columns`` that leaves a row whose key exists as it is."""
    clause = table(name, *(column(c) for c in columns))
    values: dict[str, Any] = {c: bindparam(c) for c in columns}
    if database == "mysql":
        return _compile(database, mysql.insert(clause).values(values).prefix_with("IGNORE"))
    insert = postgresql.insert if database == "postgresql" else sqlite.insert
    return _compile(database, insert(clause).values(values).on_conflict_do_nothing())


def _compile(database: str, statement: ClauseElement) -> str:
    return str(statement.compile(dialect=SA_DIALECTS[database]))
