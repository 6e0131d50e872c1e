"""Does the 500 requests/second cap hold at the wire? One instance, then three sharing one Redis.

Usage (from the repository root; about 1.5 minutes per run at the defaults)::

    .venv/bin/python bench/rate_cap.py                           # 20,000 ids at 500/s, 1 and 3 instances, 3 runs
    .venv/bin/python bench/rate_cap.py --ids 10000 --rate 300 --instances 1,3 --runs 1

The judge is ``tests/support/arrival_server.py``, a raw-socket HTTP server written
apart from the project's simulator, which takes each request's arrival time
from the kernel (``SO_TIMESTAMPNS``). Per run it reports the achieved rate (requests / span of
arrivals), the busiest sliding 1-s and 100-ms windows against their bounds
(cap + burst, cap/10 + burst), the wall time and the ids with no outcome
(must be 0). Every run, one instance or several, uses Redis and MySQL.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import (  # noqa: E402
    busiest_window,
    count_rows,
    crawl_command,
    create_database,
    delete_redis_prefix,
    drop_database,
    unique_prefix,
)

from productcrawler.config import CrawlConfig  # noqa: E402
from tests.support.arrival_server import ArrivalServer  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"


def run(server: ArrivalServer, ids: int, rate: float, instances: int) -> dict[str, object]:
    database, prefix = create_database("ratecap"), unique_prefix("ratecap")
    settings = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}", "MAX_REQUESTS_PER_SECOND": rate,
                "LOG_LEVEL": "WARNING", "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix}
    command = crawl_command(1, ids, server.base_url, settings)
    server.reset()
    began = time.monotonic()
    processes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(instances)]
    try:
        errors = [p.communicate(timeout=ids / rate * 3 + 120)[1] for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    wall = time.monotonic() - began
    times = sorted(server.arrivals())
    accounted = count_rows(database) + count_rows(database, "crawl_failures")
    drop_database(database)
    delete_redis_prefix(prefix)
    burst = CrawlConfig.from_settings({"MAX_REQUESTS_PER_SECOND": rate}).rate.burst
    span = times[-1] - times[0]
    return {
        "instances": instances, "ids": ids, "cap": rate,
        "exit codes": ",".join(str(p.returncode) for p in processes),
        "requests": len(times), "achieved/s": round((len(times) - 1) / span, 1),
        "% of cap": round(100 * (len(times) - 1) / span / rate, 1),
        "busiest 1 s": busiest_window(times), "bound 1 s": round(rate + burst),
        "busiest 100 ms": busiest_window(times, 0.1), "bound 100 ms": round(rate / 10 + burst),
        "wall s": round(wall, 1), "ids without outcome": ids - accounted,
        "stderr errors": sum(e.count(" ERROR: ") for e in errors),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--instances", default="1,3", help="comma list of instance counts to run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each instance count")
    args = parser.parse_args()
    rows = []
    with ArrivalServer() as server:
        for _ in range(args.runs):
            for count in (int(n) for n in args.instances.split(",")):
                rows.append(run(server, args.ids, args.rate, count))
                print(rows[-1], flush=True)
    columns = list(rows[0])
    print("\n| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in sorted(rows, key=lambda r: r["instances"]):
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
