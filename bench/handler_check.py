"""Does a download handler change what the crawl records? The same faults, two handlers, compared.

Usage (from the repository root; under a minute)::

    .venv/bin/python bench/handler_check.py      # the project's lean handler against Scrapy's aiohttp one

Crawls ids 1..300 twice against a simulator with transient and permanent
faults (503, 429 with Retry-After, a hung connection, truncated bodies, 500,
403, HTML, bad UTF-8, slow answers), once with ``--reference`` (default:
Scrapy's own aiohttp handler, paced) and once with ``--handler`` (default: the
project's, productcrawler/download/handler.py), each into its own MySQL
database with the project's settings, and compares the outcome of every id:
stored, or missing/failed with which reason and how many attempts. Exit status
1 if they differ. (Both must wait for the rate limit's slot: the crawl refuses
a handler that does not.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    crawl_command,
    create_database,
    drop_database,
    mysql_connect,
    run_measured,
    simulator,
)

SCRAPY_AIOHTTP = "bench.scrapy_handler.PacedScrapyAiohttpDownloadHandler"
OURS = "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler"
FAULTS = ("503=10-19@2", "429s=20-24@1", "hang=30@1", "truncated=40-44@1", "500=50@*", "403=60",
          "html=70@1", "badutf8=80@1", "slow=90-94", "502=100-104@*", "notproduct=110@1")


def outcomes(database: str) -> dict[int, Any]:
    conn = mysql_connect(database)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT product_id FROM products")
            result: dict[int, Any] = {row[0]: "stored" for row in cursor.fetchall()}
            cursor.execute("SELECT product_id, outcome, http_status, reason, attempts FROM crawl_failures")
            for product_id, outcome, status, reason, attempts in cursor.fetchall():
                result[product_id] = (outcome, status, reason, attempts)
        return result
    finally:
        conn.close()


def crawl(handler: str, base_url: str) -> dict[int, Any]:
    database = create_database("benchhandler")
    try:
        settings: dict[str, Any] = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
                                    "MAX_REQUESTS_PER_SECOND": 1000, "API_TIMEOUT": 2, "RETRY_BACKOFF_BASE": 0.1,
                                    "RETRY_BACKOFF_MAX": 0.5}
        settings["DOWNLOAD_HANDLERS"] = {"http": handler, "https": handler}
        name = handler.rsplit(".", 1)[-1]
        run = run_measured(name, crawl_command(1, 300, base_url, settings), timeout=180,
                           log_path=Path(f"/tmp/bench-handler-{name}.log"))
        if run.returncode != 0:
            print(f"{name} exited {run.returncode}:\n{run.stderr_tail}")
        return outcomes(database)
    finally:
        drop_database(database)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", default=SCRAPY_AIOHTTP)
    parser.add_argument("--handler", default=OURS)
    args = parser.parse_args()
    args_faults = [part for fault in FAULTS for part in ("--fault", fault)]
    results = []
    for handler in (args.reference, args.handler):
        with simulator("--retry-after", "1", "--slow-delay", "0.5", *args_faults) as sim:
            results.append(crawl(handler, sim.base_url))
    reference, other = results
    differ = {pid: (reference.get(pid), other.get(pid)) for pid in sorted(set(reference) | set(other))
              if reference.get(pid) != other.get(pid)}
    print(f"ids with an outcome: reference {len(reference)}, handler {len(other)}; "
          f"stored: {sum(v == 'stored' for v in reference.values())} vs {sum(v == 'stored' for v in other.values())}")
    for pid in sorted(p for p in reference if reference[p] != "stored"):
        print(f"  {pid}: reference {reference[pid]}  |  handler {other.get(pid)}")
    if differ:
        print(f"{len(differ)} ids differ:")
        for pid, (a, b) in differ.items():
            print(f"  {pid}: reference {a}  |  handler {b}")
        return 1
    print("same outcome for every id")
    return 0


if __name__ == "__main__":
    sys.exit(main())
