"""This project beside its peers, on one simulator, in one run.

Usage (from the repository root; about 6-8 minutes with the defaults)::

    .venv/bin/python bench/peers.py                        # 20,000 ids, unthrottled and at 500/s
    .venv/bin/python bench/peers.py --ids 5000 --modes unthrottled --crawlers ours,aiohttp

Crawlers:

- ``ours``: ``scrapy crawl products`` with the project's settings, Redis-shared
  pass and MySQL upserts (the real pipeline);
- ``stock``: ``bench/stock_spider.py``, Scrapy's default settings (LOG_LEVEL
  INFO), no storage; unthrottled only (it has no rate limit);
- ``aiohttp``: ``bench/aiohttp_crawler.py``, the articles' design (aiomysql
  upsert per item, Redis set of done ids);
- ``ours-uvloop`` (only when named): ``ours`` on asyncio's own event loop
  instead of uvloop's (``ASYNCIO_EVENT_LOOP=asyncio.SelectorEventLoop``);
- ``floor`` (only when named): ``bench/floor_spider.py``, Scrapy with the
  components a project can remove through settings removed, the project's
  lean handler and downloader, no storage; unthrottled only: a low floor for
  the CPU per product of a Scrapy crawl of this API;
- ``ours-autothrottle`` (only when named): ``ours`` without AutoThrottle, whose
  pace (``AUTOTHROTTLE_TARGET_CONCURRENCY`` / latency) is what limits an
  unthrottled crawl on a busy machine.

Modes: ``unthrottled`` (MAX_REQUESTS_PER_SECOND=1e6) and ``500`` (500/s; ideal
wall time ids/500). Per run: CPU seconds of the crawler process (user+sys,
wait4, start-up included) per stored product, wall time, peak RSS (ru_maxrss),
Redis memory (MEMORY USAGE of the run's keys at the end, and INFO used_memory
before/after, which other Redis users also move), and for rate-limited runs
the request span and the busiest 1-second window from the simulator's
arrival record. Runs go one at a time; each gets its own MySQL database and
Redis prefix, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH,
    PYTHON,
    REDIS_URL,
    SCRAPY,
    Run,
    busiest_window,
    count_rows,
    crawl_command,
    create_database,
    delete_redis_prefix,
    drop_database,
    machine,
    redis_keys_memory,
    redis_used_memory,
    run_measured,
    simulator,
    unique_prefix,
)

CRAWLERS = ("ours", "stock", "aiohttp")
#: Crawlers that store nothing: "stored" is the simulator's count of 200 answers; unthrottled only.
NO_STORAGE = ("stock", "floor")
#: Ours with extra settings, by --crawlers name (not run unless named).
OURS_VARIANTS: dict[str, dict[str, Any]] = {
    "ours-uvloop": {"ASYNCIO_EVENT_LOOP": "asyncio.SelectorEventLoop"},  # asyncio's loop, not uvloop's
    # Without AutoThrottle's latency-based pace (TARGET_CONCURRENCY / latency): what the engine itself can do.
    "ours-autothrottle": {"AUTOTHROTTLE_ENABLED": False},
}
MODES = ("unthrottled", "500")
UNTHROTTLED = 1_000_000


def run_one(crawler: str, rate: float, ids: int, base_url: str, work: Path, *,
            timeout: float) -> Run:
    database = create_database("benchpeer") if crawler not in NO_STORAGE else None
    prefix = unique_prefix("benchpeer")
    log = work / f"{crawler}.{int(rate)}.log"
    try:
        if crawler == "stock":
            command = [SCRAPY, "runspider", str(BENCH / "stock_spider.py"), "-a", f"base_url={base_url}",
                       "-a", "start_id=1", "-a", f"end_id={ids}", "-s", "LOG_LEVEL=INFO"]
            cwd: Path | str = tempfile.gettempdir()
        elif crawler == "floor":
            command = [SCRAPY, "runspider", str(BENCH / "floor_spider.py"), "-a", f"base_url={base_url}",
                       "-a", "start_id=1", "-a", f"end_id={ids}", "-s", "ASYNCIO_EVENT_LOOP=uvloop.Loop"]
            cwd = tempfile.gettempdir()
        elif crawler == "aiohttp":
            command = [PYTHON, str(BENCH / "aiohttp_crawler.py"), "--base-url", base_url, "--start", "1",
                       "--end", str(ids), "--rate", str(rate), "--database", str(database),
                       "--redis-key", f"{prefix}:done"]
            cwd = BENCH.parent
        else:
            settings: dict[str, Any] = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
                                        "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix,
                                        "MAX_REQUESTS_PER_SECOND": rate, **OURS_VARIANTS.get(crawler, {})}
            command = crawl_command(1, ids, base_url, settings)
            cwd = BENCH.parent
        before = redis_used_memory()
        run = run_measured(crawler, command, cwd=cwd, log_path=log, timeout=timeout)
        run.extra["redis_used_memory_delta"] = redis_used_memory() - before
        keys = redis_keys_memory(prefix)
        run.extra["redis_keys_bytes"] = sum(keys.values())
        run.extra["redis_keys"] = keys
        run.stored = count_rows(database) if database else None
        return run
    finally:
        if database:
            drop_database(database)
        delete_redis_prefix(prefix)


def arrival_profile(times: list[float]) -> dict[str, float]:
    """Span from the first to the last request, mean rate, busiest 1-second window."""
    if len(times) < 2:
        return {}
    times.sort()
    span = times[-1] - times[0]
    return {"span": span, "mean_rate": (len(times) - 1) / span, "busiest_1s": busiest_window(times)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--modes", default=",".join(MODES), help="unthrottled and/or a rate, e.g. 500")
    parser.add_argument("--crawlers", default=",".join(CRAWLERS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    crawlers = [c.strip() for c in args.crawlers.split(",") if c.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    results: list[dict[str, Any]] = []
    print(json.dumps(machine()))
    with simulator() as sim:
        for mode in modes:
            rate = UNTHROTTLED if mode == "unthrottled" else float(mode)
            # Generous: a rate-limited run must take ids/rate; nothing should take 3x that.
            timeout = max(300.0, 3 * args.ids / rate)
            for crawler in crawlers:
                if crawler in NO_STORAGE and mode != "unthrottled":
                    continue
                sim.reset()
                started = time.time()
                run = run_one(crawler, rate, args.ids, sim.base_url, work, timeout=timeout)
                stats = sim.stats()
                run.responses = int(stats["total"])
                run.ok = int(stats["by_status"].get("200", 0))
                row: dict[str, Any] = {
                    "mode": mode, "crawler": crawler, "returncode": run.returncode, "cpu_s": run.cpu,
                    "wall_s": run.wall, "responses": run.responses, "stored": run.stored
                    if run.stored is not None else run.ok, "cpu_ms_per_stored": run.ms_per_stored,
                    "throughput": run.responses / run.wall, "maxrss_mb": run.maxrss_mb,
                    "redis_keys_bytes": run.extra["redis_keys_bytes"],
                    "redis_used_memory_delta": run.extra["redis_used_memory_delta"],
                }
                if mode != "unthrottled":
                    row.update(arrival_profile([a[0] for a in sim.arrivals(since=started)]))
                    row["ideal_s"] = args.ids / rate
                results.append(row)
                print(json.dumps(row), flush=True)
                if run.returncode != 0:
                    print(f"  {crawler} exited {run.returncode}:\n{run.stderr_tail}", flush=True)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "ids": args.ids, "results": results}, indent=1))
    print(f"logs: {work}")
    return 0


def print_table(results: list[dict[str, Any]]) -> None:
    stock = next((r for r in results if r["crawler"] == "stock"), None)
    print("\n| mode | crawler | CPU ms / stored product | vs stock | wall s | responses/s | "
          "request span s (ideal) | busiest 1 s | peak RSS MB | Redis keys KB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ratio = f"{r['cpu_ms_per_stored'] / stock['cpu_ms_per_stored']:.2f}" if stock else "-"
        span = f"{r['span']:.1f} ({r['ideal_s']:.0f})" if "span" in r else "-"
        busiest = str(r.get("busiest_1s", "-"))
        redis_kb = f"{r['redis_keys_bytes'] / 1024:.0f}" if r["crawler"] not in NO_STORAGE else "-"
        print(f"| {r['mode']} | {r['crawler']} | {r['cpu_ms_per_stored']:.3f} | {ratio} | {r['wall_s']:.1f} | "
              f"{r['throughput']:.0f} | {span} | {busiest} | {r['maxrss_mb']:.0f} | {redis_kb} |")


if __name__ == "__main__":
    sys.exit(main())
