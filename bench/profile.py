"""Where does the crawl's CPU go? One crawl under py-spy, samples grouped by component.

Usage (from the repository root; py-spy from requirements-bench.txt, run as a
user allowed to ptrace its children)::

    .venv/bin/python bench/profile.py                          # 20,000 ids unthrottled, Redis + MySQL
    .venv/bin/python bench/profile.py --ids 10000 --rate 500 --keep profile.txt

Each sample (py-spy ``--format raw``, idle samples excluded) is charged to its
*owning frame*: walking from the innermost frame outwards, the first frame
whose file belongs to a component below. So JSON decoding called by the
cleaning code counts as cleaning, and the event loop's own frames count as
glue only when nothing more specific is running. The table gives each
component's share of the samples and its CPU milliseconds per response
(samples / sampling rate / responses: py-spy's own CPU is not in it; start-up
is, so use enough ids); ``bench/pyspy_top.py`` reads the same raw profile
function by function.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REDIS_URL,
    ROOT,
    crawl_command,
    create_database,
    delete_redis_prefix,
    drop_database,
    run_measured,
    simulator,
    unique_prefix,
)

PY_SPY = str(Path(sys.executable).with_name("py-spy"))
SAMPLING_RATE = 250  # samples per second

# (component, pattern on the frame's file path), most specific first.
COMPONENTS: list[tuple[str, str]] = [
    ("rate limit (ours)", r"productcrawler/ratelimit"),
    ("retry / auth / stats middlewares (ours)", r"productcrawler/(middlewares|retry|stats)"),
    ("cleaning + parse (ours)", r"productcrawler/(cleaning|spiders)"),
    ("storage pipeline + MySQL", r"productcrawler/(pipelines|storage)|pymysql/|twisted/enterprise/"),
    ("scheduler + pass (Redis)", r"productcrawler/passes|redis/"),
    ("other ours", r"productcrawler/"),
    ("aiohttp handler", r"aiohttp/|yarl/|multidict/|scrapy/core/downloader/handlers/"),
    ("Request / Response / Headers", r"scrapy/http/|w3lib/"),
    ("Scrapy downloader + middleware chain", r"scrapy/core/downloader/|scrapy/middleware\.py"),
    ("Scrapy engine + scraper + scheduler glue", r"scrapy/core/|scrapy/pipelines/|scrapy/spidermiddlewares/"),
    ("signals + stats + logging", r"scrapy/(signalmanager|statscollectors|logformatter)|pydispatch/|/logging/"),
    ("Twisted / asyncio glue (Deferreds, tasks)", r"twisted/|scrapy/utils/(defer|asyncio|asyncgen)|/asyncio/"),
    ("other Scrapy", r"scrapy/"),
    ("garbage collection + other stdlib", r"/lib/python3\.\d+/|<frozen"),
]
FRAME = re.compile(r"(.*) \((.*?):(\d+)\)$")
# A thread-pool worker waiting for work (the database's and Redis's threads).
# py-spy's idle detection misses some of these on a busy virtual machine, and
# their frames are Twisted's, so they were charged to the glue (~20 % of the
# samples in one run): they are counted apart and left out of the table.
IDLE_WAIT = re.compile(r"^(Condition\.wait|Queue\.get|Event\.wait) \(.*(threading|queue)\.py:\d+\)$")


def idle(stack: list[str]) -> bool:
    return bool(IDLE_WAIT.match(stack[-1])) and any("_threads/_threadworker.py" in frame for frame in stack)


def component(stack: list[str]) -> str:
    for frame in reversed(stack):
        match = FRAME.match(frame)
        path = match.group(2) if match else frame
        for name, pattern in COMPONENTS:
            if re.search(pattern, path):
                return name
    return "unattributed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1_000_000, help="MAX_REQUESTS_PER_SECOND (default: unthrottled)")
    parser.add_argument("--keep", type=Path, help="keep the raw py-spy profile here")
    args = parser.parse_args()
    database, prefix = create_database("benchprof"), unique_prefix("benchprof")
    raw = args.keep or Path(tempfile.mkstemp(suffix=".txt")[1])
    try:
        with simulator() as sim:
            settings = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}", "REDIS_URL": REDIS_URL,
                        "REDIS_KEY_PREFIX": prefix, "MAX_REQUESTS_PER_SECOND": args.rate, "LOG_LEVEL": "WARNING"}
            command = [PY_SPY, "record", "--format", "raw", "--rate", str(SAMPLING_RATE), "--output", str(raw), "--",
                       *crawl_command(1, args.ids, sim.base_url, settings)]
            run = run_measured("profile", command, cwd=ROOT, timeout=max(600.0, 3 * args.ids / args.rate))
            responses = sim.stats()["total"]
    finally:
        drop_database(database)
        delete_redis_prefix(prefix)
    samples: Counter[str] = Counter()
    idle_samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if idle(frames):
            idle_samples += int(count)
        else:
            samples[component(frames)] += int(count)
    total = sum(samples.values()) or 1
    print(f"exit {run.returncode}, {responses} responses, {run.wall:.1f} s wall, {total} samples "
          f"({total / SAMPLING_RATE:.1f} CPU s of the crawl); {idle_samples} samples of idle pool threads left out")
    print("\n| component | share of samples | CPU ms per response |\n|---|---|---|")
    for name, count in samples.most_common():
        share = count / total
        print(f"| {name} | {100 * share:.1f} % | {1000 * count / SAMPLING_RATE / max(responses, 1):.3f} |")
    if args.keep is None:
        raw.unlink()
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
