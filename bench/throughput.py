"""Unthrottled throughput of the full pipeline: one process, then two sharing one Redis pass.

Usage (from the repository root; about 2-3 minutes with the defaults)::

    .venv/bin/python bench/throughput.py                  # 20,000 ids, the project's settings
    .venv/bin/python bench/throughput.py --ids 10000 --json throughput.json

Both runs crawl the same id range into MySQL with the Redis-shared pass
(MAX_REQUESTS_PER_SECOND=1e6). In the two-process run both instances start
together with the same REDIS_KEY_PREFIX and database: the first opens the
pass, the second joins it, and both stop when it is finished. Reported: wall
time until the last instance exits, ids stored, responses per second, and
CPU seconds of each instance. On a 2-core machine that also runs the
simulator, MariaDB and Redis, a second process mostly shows what the shared
pass costs, not a doubling.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REDIS_URL,
    count_rows,
    crawl_command,
    create_database,
    delete_redis_prefix,
    drop_database,
    run_measured,
    simulator,
    unique_prefix,
)


def run(processes: int, ids: int, sim: Any, work: Path) -> dict[str, Any]:
    database = create_database("benchtput")
    prefix = unique_prefix("benchtput")
    settings: dict[str, Any] = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}", "REDIS_URL": REDIS_URL,
                                "REDIS_KEY_PREFIX": prefix, "MAX_REQUESTS_PER_SECOND": 1_000_000}
    command = crawl_command(1, ids, sim.base_url, settings)
    try:
        sim.reset()
        started = time.monotonic()
        with ThreadPoolExecutor(processes) as pool:
            runs = list(pool.map(lambda n: run_measured(f"p{n}", command, timeout=600,
                                                        log_path=work / f"{processes}p-{n}.log"),
                                 range(processes)))
        wall = time.monotonic() - started
        stats = sim.stats()
        stored = count_rows(database)
        return {"processes": processes, "ids": ids, "wall_s": wall, "stored": stored,
                "responses": int(stats["total"]), "responses_per_s": int(stats["total"]) / wall,
                "cpu_s": [r.cpu for r in runs], "cpu_ms_per_stored": 1000 * sum(r.cpu for r in runs) / stored
                if stored else None, "returncodes": [r.returncode for r in runs],
                "maxrss_mb": [r.maxrss_mb for r in runs]}
    finally:
        drop_database(database)
        delete_redis_prefix(prefix)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    rows = []
    with simulator() as sim:
        for processes in (1, 2):
            row = run(processes, args.ids, sim, work)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| processes | wall s | stored | responses/s | CPU s per process | CPU ms / stored | exit codes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        per_stored = f"{r['cpu_ms_per_stored']:.2f}" if r["cpu_ms_per_stored"] else "-"
        print(f"| {r['processes']} | {r['wall_s']:.1f} | {r['stored']} | {r['responses_per_s']:.0f} | "
              f"{' + '.join(f'{c:.1f}' for c in r['cpu_s'])} | {per_stored} | {r['returncodes']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"logs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
