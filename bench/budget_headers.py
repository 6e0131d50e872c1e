"""The announced budget: 429 share and throughput as % of the budget, per format, one and two instances.

Run by hand (not in CI), alone on the machine if possible::

    .venv/bin/python bench/budget_headers.py [--seconds 5] [--runs 1]

Each format's imitation (tests/support/imitations/budgets.py) enforces its quota by its
own clock; a crawl of ``seconds`` x the budget ids runs with
``RATE_LIMIT_HEADERS=auto`` and with ``RATE_LIMIT_HEADERS=off`` (the crawler
without header pacing: the cap, the 429 halving and Retry-After only), with
MAX_REQUESTS_PER_SECOND=500, against MariaDB (and Redis for two instances).
Judged at the imitation: 429s / requests, and requests per second between the
first and the last arrival over the announced budget.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import uuid
from pathlib import Path

import pymysql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.imitations.budgets import BUDGETS, BudgetServers, rate_of  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"
MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


def crawl(servers: BudgetServers, name: str, headers: str, instances: int, seconds: float) -> tuple[float, float]:
    database = f"pc_bench_{uuid.uuid4().hex[:10]}"
    connection = pymysql.connect(**MYSQL)
    connection.cursor().execute(f"CREATE DATABASE {database}")
    try:
        servers.reset(name)
        end = int(rate_of(name) * seconds)
        command = [sys.executable, "-m", "scrapy", "crawl", "products", "-a", f"end_id={end}"]
        settings = {"API_BASE_URL": servers.base_url(name), "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
                    "MAX_REQUESTS_PER_SECOND": 500, "RATE_LIMIT_HEADERS": headers, "LOG_LEVEL": "WARNING"}
        if instances > 1:
            settings.update({"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": f"pcbench:{uuid.uuid4().hex[:10]}"})
        for key, value in settings.items():
            command += ["-s", f"{key}={value}"]
        processes = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for _ in range(instances)]
        for process in processes:
            process.wait(timeout=600)
        arrivals = servers.arrivals(name)
    finally:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS {database}")
        connection.close()
    times = sorted(at for at, _status, _id in arrivals)
    share_429 = sum(status == 429 for _at, status, _id in arrivals) / len(arrivals)
    rate = (len(times) - 1) / (times[-1] - times[0])
    return 100 * share_429, 100 * rate / rate_of(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    print("| format | budget | instances | RATE_LIMIT_HEADERS | 429s (% of requests) | throughput (% of budget) |")
    print("|---|---|---|---|---|---|")
    with BudgetServers() as servers:
        for name in BUDGETS:
            for instances in (1, 2):
                for headers in ("off", "auto"):
                    for _ in range(options.runs):
                        share, rate = crawl(servers, name, headers, instances, options.seconds)
                        print(f"| {name} | {rate_of(name):g}/s | {instances} | {headers} | {share:.1f} | {rate:.0f} |",
                              flush=True)


if __name__ == "__main__":
    main()
