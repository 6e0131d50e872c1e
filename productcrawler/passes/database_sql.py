"""The database pass's queries: which pass runs over an id list, which of its ids are done, which failed.

An id is done in a pass when its product or failure row carries the pass's
id (the ``pass_id`` column, stamped by the pipeline in the row's own
transaction), so nothing counts as done before its row is committed. Plain
functions of a DB-API cursor, run in the pool's worker threads
(``Database.run``) like the rest of ``storage/database.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from productcrawler.storage.schema import PASS_COLUMN
from productcrawler.storage.target import Dialect


@dataclass(frozen=True)
class PassInfo:
    pass_id: int
    start_id: int
    end_id: int
    started_at: datetime
    resumed: bool


#: Ids asked about per query when a pass over a file resumes (each appears twice in the query).
DONE_AMONG_CHUNK = 10_000


def _done_union(dialect: Dialect) -> str:
    p = dialect.placeholder
    return (f"SELECT product_id FROM products WHERE product_id BETWEEN {p} AND {p} AND {PASS_COLUMN} = {p} "
            f"UNION SELECT product_id FROM crawl_failures "
            f"WHERE product_id BETWEEN {p} AND {p} AND {PASS_COLUMN} = {p}")


def done_ids(cursor: Any, dialect: Dialect, first: int, last: int, pass_id: int) -> set[int]:
    """Ids in [first, last] with an outcome written by pass ``pass_id``."""
    cursor.execute(_done_union(dialect), (first, last, pass_id, first, last, pass_id))
    return {int(row[0]) for row in cursor.fetchall()}


def done_among(cursor: Any, dialect: Dialect, ids: list[Any], pass_id: int) -> set[Any]:
    """Which of ``ids`` have an outcome written by pass ``pass_id``."""
    p, marks = dialect.placeholder, dialect.params(len(ids))
    cursor.execute(f"SELECT product_id FROM products WHERE {PASS_COLUMN} = {p} AND product_id IN ({marks}) "
                   f"UNION SELECT product_id FROM crawl_failures WHERE {PASS_COLUMN} = {p} "
                   f"AND product_id IN ({marks})", (pass_id, *ids, pass_id, *ids))
    return {row[0] for row in cursor.fetchall()}


def done_count(cursor: Any, dialect: Dialect, first: int, last: int, pass_id: int) -> int:
    """How many ids in [first, last] have an outcome written by pass ``pass_id``."""
    cursor.execute(f"SELECT COUNT(*) FROM ({_done_union(dialect)}) AS done",
                   (first, last, pass_id, first, last, pass_id))
    return int(cursor.fetchone()[0])


def as_datetime(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.strptime(str(value), "%Y-%m-%d %H:%M:%S")


def open_pass(cursor: Any, dialect: Dialect, start_id: int, end_id: int, *, fresh: bool,
              now: datetime, digest: str | None = None, source_pass_id: int | None = None) -> PassInfo:
    """Resume the unfinished pass over the same id list, or start a new one.

    A range is ``start_id..end_id``; a file (``digest``, its SHA-256) is
    positions ``1..end_id``, its id count. ``source_pass_id``: the pass whose
    failed ids this one fetches.
    """
    p = dialect.placeholder
    if digest is None:
        cursor.execute(
            f"SELECT pass_id, started_at FROM crawl_passes WHERE start_id = {p} AND end_id = {p} "
            f"AND ids_digest IS NULL AND finished_at IS NULL AND redis_token IS NULL "
            f"ORDER BY pass_id DESC LIMIT 1",
            (start_id, end_id),
        )
    else:
        cursor.execute(
            f"SELECT pass_id, started_at FROM crawl_passes WHERE ids_digest = {p} AND ids_count = {p} "
            f"AND finished_at IS NULL AND redis_token IS NULL ORDER BY pass_id DESC LIMIT 1",
            (digest, end_id),
        )
    row = cursor.fetchone()
    if row is not None and not fresh:
        return PassInfo(int(row[0]), start_id, end_id, as_datetime(row[1]), resumed=True)
    if row is not None:
        cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}",
                       (dialect.value(now), row[0]))
    pass_id = dialect.inserted_id(
        cursor, f"INSERT INTO crawl_passes (start_id, end_id, started_at, ids_digest, ids_count, source_pass_id) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
        (start_id, end_id, dialect.value(now), digest, None if digest is None else end_id, source_pass_id),
        PASS_COLUMN)
    return PassInfo(pass_id, start_id, end_id, now, resumed=False)


def finish_pass(cursor: Any, dialect: Dialect, pass_id: int, now: datetime) -> None:
    p = dialect.placeholder
    cursor.execute(f"UPDATE crawl_passes SET finished_at = {p} WHERE pass_id = {p}",
                   (dialect.value(now), pass_id))


def id_bounds(dialect: Dialect, first: int | None, last: int | None,
              column: str = "product_id") -> tuple[str, tuple[int | None, ...]]:
    """A ``column BETWEEN first AND last AND `` clause and its parameters; nothing when ``first`` is None."""
    if first is None:
        return "", ()
    p = dialect.placeholder
    return f"{column} BETWEEN {p} AND {p} AND ", (first, last)


def outcome_counts(cursor: Any, dialect: Dialect, first: int | None, last: int | None,
                   pass_id: int) -> dict[str, int]:
    """Stored / missing / failed in [first, last] by pass ``pass_id`` (summaries, progress).

    ``first`` and ``last`` None: every row of the pass (a pass over a file).
    """
    p = dialect.placeholder
    within, bounds = id_bounds(dialect, first, last)
    cursor.execute(f"SELECT COUNT(*) FROM products WHERE {within}{PASS_COLUMN} = {p}", (*bounds, pass_id))
    counts = {"stored": int(cursor.fetchone()[0]), "missing": 0, "failed": 0}
    cursor.execute(f"SELECT outcome, COUNT(*) FROM crawl_failures WHERE {within}{PASS_COLUMN} = {p} "
                   f"GROUP BY outcome", (*bounds, pass_id))
    for outcome, count in cursor.fetchall():
        counts[str(outcome)] = int(count)
    return counts


def write_failed_ids(cursor: Any, dialect: Dialect, out: IO[str]) -> tuple[int, int | None, int | None]:
    """The ids recorded ``failed`` in the latest pass, one a line into ``out``, in id order:
    (how many, that pass, the pass a new run over them names as its source).

    The latest pass is crawl_passes' newest row, a database pass's or a
    Redis-shared pass's alike. A pass over failed ids counts with the pass it
    re-fetches (its source) and that source's other failed-id passes: an
    interrupted re-run leaves some ids stamped by the source, and they are
    still owed.
    """
    p = dialect.placeholder
    cursor.execute("SELECT pass_id, source_pass_id FROM crawl_passes ORDER BY pass_id DESC LIMIT 1")
    row = cursor.fetchone()
    if row is None:
        return 0, None, None
    latest, root = int(row[0]), int(row[1] if row[1] is not None else row[0])
    cursor.execute(f"SELECT product_id FROM crawl_failures WHERE outcome = 'failed' AND {PASS_COLUMN} IN "
                   f"(SELECT pass_id FROM crawl_passes WHERE pass_id = {p} OR source_pass_id = {p}) "
                   f"ORDER BY product_id", (root, root))
    return _write_rows(cursor, out), latest, root


def _write_rows(cursor: Any, out: IO[str]) -> int:
    count = 0
    while rows := cursor.fetchmany(10_000):
        out.writelines(f"{row[0]}\n" for row in rows)
        count += len(rows)
    return count


def shared_pass_row(cursor: Any, dialect: Dialect, token: str, start_id: int, end_id: int,
                    started_at: datetime, digest: str | None = None,
                    source_pass_id: int | None = None) -> int:
    """The crawl_passes row of the Redis-shared pass ``token``: found, or made by the first instance.

    ``digest``: the SHA-256 of the pass's id file (``start_id``..``end_id`` are then its positions);
    ``source_pass_id``: the pass whose failed ids it fetches.
    """
    p = dialect.placeholder
    select = f"SELECT pass_id FROM crawl_passes WHERE redis_token = {p}"
    cursor.execute(select, (token,))
    row = cursor.fetchone()
    if row is not None:
        return int(row[0])
    # PostgreSQL aborts the whole transaction at an error: a savepoint keeps it usable.
    savepoint = dialect.name == "postgresql"
    if savepoint:
        cursor.execute("SAVEPOINT shared_pass_row")
    try:
        return dialect.inserted_id(
            cursor, f"INSERT INTO crawl_passes (start_id, end_id, started_at, redis_token, ids_digest, "
                    f"ids_count, source_pass_id) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})",
            (start_id, end_id, dialect.value(started_at), token, digest, None if digest is None else end_id,
             source_pass_id), PASS_COLUMN)
    except Exception:
        if savepoint:
            cursor.execute("ROLLBACK TO SAVEPOINT shared_pass_row")
        # Another instance made it meanwhile (the token is unique): its row is the pass's. A
        # locking read: a plain one would read this transaction's snapshot, from before it.
        cursor.execute(select + ("" if dialect.name == "sqlite" else " FOR UPDATE"), (token,))
        row = cursor.fetchone()
        if row is None:
            raise
        return int(row[0])
