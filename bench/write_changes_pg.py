"""bench/write_changes.py's measured pass on PostgreSQL: rows written, WAL bytes, server CPU.

Usage (by hand; starts a PostgreSQL of its own with Debian's /usr/lib/postgresql/15/bin,
as tests/support/postgres.py does, on port 27432 + TEST_SERVER_PORT_OFFSET)::

    .venv/bin/python bench/write_changes_pg.py --ids 50000 --rounds 3

The same items and writer as write_changes.py's ``ours`` (``write_batch``,
batches of 200, one transaction each). Rows written are the server's own
counters (pg_stat_database's tup_inserted + tup_updated + tup_deleted of the
bench database, flushed by the writing backend); WAL bytes are
``pg_current_wal_lsn()`` before and after; the server's CPU is user+sys of
every postgres process (the postmaster and its children) from /proc.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.write_changes import BATCH, items  # noqa: E402
from productcrawler.storage.database import DatabaseTarget, ensure_schema, write_batch  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402


def server_cpu(postmaster: int) -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def counters(monitor: Any, database: str) -> tuple[int, int]:
    row = monitor.execute("SELECT tup_inserted + tup_updated + tup_deleted, "
                          "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_database "
                          "WHERE datname = %s", (database,)).fetchone()
    return int(row[0]), int(row[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--changed", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import psycopg

    first, second = items(args.ids, args.changed, changed=False), items(args.ids, args.changed, changed=True)
    server = PostgresServer()
    server.start()
    assert server.process is not None
    postmaster = int((server.directory / "data" / "postmaster.pid").read_text().split()[0])
    results = []
    try:
        for round_ in range(args.rounds):
            name = f"bench_wc_{round_}"
            server.admin(f"CREATE DATABASE {name}")
            target = DatabaseTarget.from_url(server.url(name))
            connection = target.connect()
            ensure_schema(connection.cursor(), target.dialect)
            for pass_id, products in ((1, first), (2, second)):
                if pass_id == 2:
                    # The first pass's counters reach pg_stat_database when its backend flushes them.
                    connection.execute("SELECT pg_stat_force_next_flush()")
                    connection.commit()
                    time.sleep(1.5)
                    monitor = psycopg.connect(server.url(name), autocommit=True)
                    before, cpu = counters(monitor, name), server_cpu(postmaster)
                    began = time.monotonic()
                cursor = connection.cursor()
                for start in range(0, len(products), BATCH):
                    write_batch(cursor, target.dialect, products[start:start + BATCH], [], pass_id)
                    connection.commit()
            seconds = time.monotonic() - began
            connection.execute("SELECT pg_stat_force_next_flush()")
            connection.commit()
            cpu_after = server_cpu(postmaster)
            connection.close()
            time.sleep(1.5)  # the backend's counters reach pg_stat_database when it flushes them
            after = counters(monitor, name)
            monitor.close()
            results.append((after[0] - before[0], after[1] - before[1], cpu_after - cpu, seconds))
            server.admin(f"DROP DATABASE {name} WITH (FORCE)")
    finally:
        server.stop()
    results.sort()
    rows, wal, cpu, seconds = (sorted(r[i] for r in results)[len(results) // 2] for i in range(4))
    print(f"PostgreSQL 15, {args.ids} products, {args.changed:g} % changed in the measured pass, "
          f"{args.rounds} round(s); medians per pass")
    print("| writer | row writes | WAL MB | PostgreSQL CPU s | wall s |\n|---|---|---|---|---|")
    print(f"| ours | {rows} | {wal / 1e6:.1f} | {cpu:.2f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
