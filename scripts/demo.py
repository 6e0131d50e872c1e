"""The main job on the embedded default: start the simulator, crawl ids 1..50,000
into SQLite (data/products.db), print a summary. Run it with ``make demo``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from productcrawler.config import SIMULATOR_PORT  # noqa: E402
from simulator.process import SimulatorProcess  # noqa: E402


def main() -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with SimulatorProcess(port=SIMULATOR_PORT):
        crawl = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "products", *sys.argv[1:]],
                               cwd=ROOT, env=env, check=False)
    database = ROOT / "data" / "products.db"
    if database.exists():
        connection = sqlite3.connect(database)
        stored = connection.execute("SELECT COUNT(*) FROM products").fetchone()[0]
        failures = dict(connection.execute("SELECT outcome, COUNT(*) FROM crawl_failures GROUP BY outcome"))
        passes = connection.execute("SELECT pass_id, started_at, finished_at FROM crawl_passes "
                                    "ORDER BY pass_id DESC LIMIT 1").fetchone()
        connection.close()
        print(f"\n{database.relative_to(ROOT)}: {stored} products, {failures.get('missing', 0)} missing, "
              f"{failures.get('failed', 0)} failed; last pass {passes[0]} started {passes[1]} UTC, "
              f"finished {passes[2] or '(not finished)'}")
    return crawl.returncode


if __name__ == "__main__":
    sys.exit(main())
