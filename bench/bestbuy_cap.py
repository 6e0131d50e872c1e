"""Best Buy's listing recipe with and without its hand-kept ``MAX_REQUESTS_PER_SECOND=5``.

Usage (from the repository root; about a minute with the defaults)::

    .venv/bin/python bench/bestbuy_cap.py                     # 1,500 and 10,000 products, 2 runs each
    .venv/bin/python bench/bestbuy_cap.py --sizes 1500 --runs 3

The ``bestbuy-list`` recipe (docs/cookbook.md) crawls the Best Buy imitation
(tests/support/imitations/bestbuy.py: 5 requests a second, a 403 "Over Quota"
beyond, no budget headers, no reset) into a fresh SQLite file, once as written
and once without its cap (the crawl's default 500/s), every other setting at
its default. Requests and 403s come from the imitation's arrival log, products
and failed pages from the pass's row. Prints one line per crawl.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.crawls import run_crawl
from tests.support.imitations import bestbuy
from tests.support.imitations.served import Served
from tests.support.recipes import recipe


def crawl(size: int, capped: bool) -> str:
    with Served(bestbuy.BestBuy(size=size)) as api, tempfile.TemporaryDirectory() as tmp:
        settings = dict(recipe("bestbuy-list"))
        if not capped:
            del settings["MAX_REQUESTS_PER_SECOND"]
        parts = urlsplit(settings["PRODUCT_LIST_URL"])
        settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace(f"{parts.scheme}://{parts.netloc}",
                                                                            api.url)
        database = Path(tmp) / "products.db"
        settings.update(DATABASE_URL=f"sqlite:///{database}", API_KEY=bestbuy.API_KEY)
        began = time.monotonic()
        done = run_crawl(settings=settings)
        seconds = time.monotonic() - began
        arrivals = api.arrivals()
        statuses = Counter(arrival["status"] for arrival in arrivals)
        connection = sqlite3.connect(database)
        try:
            stored, failed = connection.execute("SELECT stored, failed FROM crawl_passes").fetchone()
        finally:
            connection.close()
    return (f"{size:>6} products, {'capped 5/s' if capped else 'no cap':>10}: exit {done.returncode}, "
            f"{len(arrivals)} requests, {statuses[403]} refused 403 ({statuses[403] / len(arrivals):.0%}), "
            f"{stored} stored, {failed} pages failed, {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1500,10000", help="catalogue sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=2, help="crawls of each size and cap")
    args = parser.parse_args()
    for size in (int(size) for size in args.sizes.split(",")):
        for capped in (True, False):
            for _ in range(args.runs):
                print(crawl(size, capped), flush=True)


if __name__ == "__main__":
    main()
