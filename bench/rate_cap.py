"""Does the 500 requests/second cap hold? One instance, then three sharing one Redis.

Usage (from the repository root; about 3 minutes)::

    .venv/bin/python bench/rate_cap.py                 # 30,000 ids at 500/s
    .venv/bin/python bench/rate_cap.py --ids 10000 --rate 300 --instances 1,3

The simulator rejects with 429 (fault ``rate_limited``) whatever exceeds its
own limit, set 5 % above the cap, and records when every request arrived.
Per run it reports the achieved rate over the pass (requests / span of
arrivals), the busiest 1-second window, the rate-limit 429s, the wall time
and the number of ids with no outcome (must be 0).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pymysql
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import busiest_window  # noqa: E402

from productcrawler.simulator.process import SimulatorProcess  # noqa: E402

MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
REDIS_URL = "redis://127.0.0.1:6379/0"


def run(simulator: SimulatorProcess, ids: int, rate: float, instances: int) -> dict[str, object]:
    database = f"pc_bench_{uuid.uuid4().hex[:8]}"
    prefix = f"pcbench:{uuid.uuid4().hex[:8]}"
    connection = pymysql.connect(**MYSQL)
    connection.cursor().execute(f"CREATE DATABASE {database}")
    settings = {"API_BASE_URL": simulator.base_url, "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
                "MAX_REQUESTS_PER_SECOND": rate, "LOG_LEVEL": "WARNING"}
    if instances > 1:
        settings.update(REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix)
    command = [sys.executable, "-m", "scrapy", "crawl", "products", "-a", f"end_id={ids}"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    simulator.reset()
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
    arrivals = simulator.arrivals()
    times = [a[0] for a in arrivals]
    cursor = connection.cursor()
    cursor.execute(f"SELECT (SELECT COUNT(*) FROM {database}.products) + "
                   f"(SELECT COUNT(*) FROM {database}.crawl_failures)")
    accounted = cursor.fetchone()[0]
    cursor.execute(f"DROP DATABASE {database}")
    connection.close()
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    span = max(times) - min(times)
    return {
        "instances": instances, "ids": ids, "cap": rate,
        "exit codes": ",".join(str(p.returncode) for p in processes),
        "requests": len(times), "achieved/s": round((len(times) - 1) / span, 1),
        "achieved % of cap": round(100 * (len(times) - 1) / span / rate, 1),
        "busiest 1-s window": busiest_window(times),
        "rate-limit 429s": sum(1 for a in arrivals if a[3] == "rate_limited"),
        "wall s": round(wall, 1), "ids without outcome": ids - accounted,
        "stderr errors": sum(e.count(" ERROR: ") for e in errors),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--instances", default="1,3", help="comma list of instance counts to run")
    args = parser.parse_args()
    rows = []
    with SimulatorProcess("--catalog-version", "1", "--rate-limit", str(args.rate * 1.05)) as simulator:
        for count in (int(n) for n in args.instances.split(",")):
            rows.append(run(simulator, args.ids, args.rate, count))
            print(rows[-1], flush=True)
    columns = list(rows[0])
    print("\n| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
