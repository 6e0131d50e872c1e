"""The database pass's queries: which pass runs over a range, and which of its ids are done.

An id is done in a pass when its product or failure row carries the pass's
id (the ``pass_id`` column, stamped by the pipeline in the row's own
transaction), so nothing counts as done before its row is committed. Plain
functions of a DB-API cursor, run in the pool's worker threads
(``Database.run``) like the rest of ``storage/database.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from productcrawler.storage.schema import PASS_COLUMN
from productcrawler.storage.target import Dialect


@dataclass(frozen=True)
class PassInfo:
    pass_id: int
    start_id: int
    end_id: int
    started_at: datetime
    resumed: bool



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
        f"AND finished_at IS NULL AND redis_token IS NULL ORDER BY pass_id DESC LIMIT 1",
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


def shared_pass_row(cursor: Any, dialect: Dialect, token: str, start_id: int, end_id: int,
                    started_at: datetime) -> int:
    """The crawl_passes row of the Redis-shared pass ``token``: found, or made by the first instance."""
    p = dialect.placeholder
    select = f"SELECT pass_id FROM crawl_passes WHERE redis_token = {p}"
    cursor.execute(select, (token,))
    row = cursor.fetchone()
    if row is not None:
        return int(row[0])
    try:
        cursor.execute(f"INSERT INTO crawl_passes (start_id, end_id, started_at, redis_token) "
                       f"VALUES ({p}, {p}, {p}, {p})", (start_id, end_id, dialect.value(started_at), token))
        return int(cursor.lastrowid)
    except Exception:
        # Another instance made it meanwhile (the token is unique): its row is the pass's. A
        # locking read on MySQL: a plain one would read this transaction's snapshot, from before it.
        cursor.execute(select + (" FOR UPDATE" if dialect.name == "mysql" else ""), (token,))
        row = cursor.fetchone()
        if row is None:
            raise
        return int(row[0])
