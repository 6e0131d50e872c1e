"""bench/write_changes.py's measured pass on SQLite: rows written, WAL bytes, CPU.

Usage (by hand)::

    .venv/bin/python bench/write_changes_sqlite.py --ids 50000 --rounds 3

The same items and writer as write_changes.py's ``ours``. SQLite runs in the
process: rows written are its own counter (``total_changes()``), WAL bytes the
growth of the ``-wal`` file with automatic checkpoints off during the pass, CPU
the process's user+sys time (the writer's Python included: there is no server).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.write_changes import BATCH, items  # noqa: E402
from productcrawler.storage.database import DatabaseTarget, ensure_schema, write_batch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--changed", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    first, second = items(args.ids, args.changed, changed=False), items(args.ids, args.changed, changed=True)
    results = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "bench.db"
            target = DatabaseTarget.from_url(f"sqlite:///{path}")
            connection = target.connect()
            ensure_schema(connection.cursor(), target.dialect)
            for pass_id, products in ((1, first), (2, second)):
                if pass_id == 2:
                    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    connection.execute("PRAGMA wal_autocheckpoint=0")
                    changes, cpu, began = connection.total_changes, os.times(), time.monotonic()
                cursor = connection.cursor()
                for start in range(0, len(products), BATCH):
                    write_batch(cursor, target.dialect, products[start:start + BATCH], [], pass_id)
                    connection.commit()
            after = os.times()
            results.append((connection.total_changes - changes, Path(f"{path}-wal").stat().st_size,
                            after.user + after.system - cpu.user - cpu.system, time.monotonic() - began))
            connection.close()
    rows, wal, cpu, seconds = (sorted(r[i] for r in results)[len(results) // 2] for i in range(4))
    print(f"SQLite, {args.ids} products, {args.changed:g} % changed in the measured pass, {args.rounds} round(s); "
          "medians per pass")
    print("| writer | row writes | WAL MB | process CPU s | wall s |\n|---|---|---|---|---|")
    print(f"| ours | {rows} | {wal / 1e6:.1f} | {cpu:.2f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
