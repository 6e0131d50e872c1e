"""CPU per response: the project's crawl under setting variants, each run beside stock Scrapy.

Usage (from the repository root)::

    .venv/bin/python bench/cpu.py --list                   # the variants and their settings
    .venv/bin/python bench/cpu.py --variants ours          # ~3 min: 5,000 ids, 3 rounds
    .venv/bin/python bench/cpu.py                          # DEFAULT_VARIANTS: ~8 min
    .venv/bin/python bench/cpu.py --cprofile ours          # where the reactor thread's CPU goes
    .venv/bin/python bench/cpu.py --profile ours           # py-spy (wall-clock samples; see below)

Method. The machine is shared and has 2 cores, so CPU seconds drift with
whatever else runs. Each variant therefore runs *at the same time as* the
reference (``--reference``, default ``stock-info``: bench/stock_spider.py with
Scrapy's default settings and LOG_LEVEL=INFO), both against one simulator,
and the result is the ratio of their CPU per response; ``--repeat`` rounds
give its spread (the reference beside itself measures the noise). CPU is
user+sys of the whole process, all threads, between spider_opened and
spider_closed (``bench/cpuprobe.py``), so start-up (~1 s) is left out; the
total with start-up (wait4) is shown too. Our crawl runs unthrottled
(MAX_REQUESTS_PER_SECOND=1e6) with the real pipeline: MySQL upserts and the
Redis-shared pass (``--no-redis``: the database ledger). Each run gets its own
MySQL database and Redis prefix, removed afterwards.

Profilers: py-spy samples wall-clock stacks, and on a busy machine a thread
that is runnable but preempted is charged to the call it was in (socket
sends, mostly); sys time is ~3 % of these runs. ``--cprofile`` uses a
CPU-time clock instead (slow: ~5x, so read it for proportions only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH,
    REDIS_URL,
    SCRAPY,
    Run,
    count_rows,
    crawl_command,
    create_database,
    delete_redis_prefix,
    downloader_middlewares,
    drop_database,
    run_measured,
    simulator,
    unique_prefix,
)

STOCK = "stock"

AIOHTTP_HANDLER = "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler"  # lean, paced
SCRAPY_AIOHTTP_HANDLER = "bench.scrapy_handler.PacedScrapyAiohttpDownloadHandler"  # Scrapy's, paced
TWISTED_HANDLER = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
GC_TUNING = "productcrawler.run.gc_tuning.GcTuning"
DOWNLOADER_STATS = "scrapy.downloadermiddlewares.stats.DownloaderStats"
TRAFFIC_STATS = "productcrawler.monitoring.traffic_stats.TrafficStats"
SCRAPY_STATS = "scrapy.statscollectors.MemoryStatsCollector"
START_MW = "scrapy.spidermiddlewares.start.StartSpiderMiddleware"
HTTPERROR_MW = "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware"
REQUEST_MWS = ("scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware",
               "scrapy.downloadermiddlewares.defaultheaders.DefaultHeadersMiddleware",
               "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware")
CORESTATS = "scrapy.extensions.corestats.CoreStats"
DEFAULT_LOOP = "asyncio.SelectorEventLoop"  # what asyncio.new_event_loop() makes on Linux


def variants() -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (kind, settings). Kind "stock" runs bench/stock_spider.py with no project settings.

    "ours" is the project as it is; each other variant takes one of its CPU
    choices back, to show what that choice buys. (Earlier variants, and the
    ladder that led to today's settings, are in git history and BENCHMARKS.md's.)
    """
    dl = downloader_middlewares()
    sm = _project_spider_middlewares()
    return {
        STOCK: (STOCK, {}),
        "stock-info": (STOCK, {"LOG_LEVEL": "INFO"}),
        "ours": ("ours", {}),
        "ours-ci100": ("ours", {"CONCURRENT_ITEMS": 100}),
        "ours-autothrottle": ("ours", {"AUTOTHROTTLE_ENABLED": False}),
        "ours-gc-tuning": ("ours", {"EXTENSIONS": {**_project_extensions(), GC_TUNING: None}}),
        "ours-traffic-stats": ("ours", {"DOWNLOADER_MIDDLEWARES": {**dl, DOWNLOADER_STATS: 850, TRAFFIC_STATS: None},
                                        "STATS_CLASS": SCRAPY_STATS}),
        # The unpaced Twisted handler: only without the rate limit (it refuses unpaced handlers).
        "ours+twisted-handler": ("ours", {"DOWNLOAD_HANDLERS": {"http": TWISTED_HANDLER, "https": TWISTED_HANDLER},
                                          "RATE_LIMIT_ENABLED": False}),
        # The Prometheus endpoint and its per-request latency histogram.
        "ours+metrics": ("ours", {"METRICS_PORT": 0}),
        "ours-no-ratelimit": ("ours", {"DOWNLOADER_MIDDLEWARES": _without_ratelimit(dl), "RATE_LIMIT_ENABLED": False}),
        # Issue 20's candidates: default components that do nothing for our requests.
        "ours-start-mw": ("ours", {"SPIDER_MIDDLEWARES": {**sm, START_MW: None}}),
        "ours-httperror-mw": ("ours", {"SPIDER_MIDDLEWARES": {**sm, HTTPERROR_MW: None}}),
        "ours-spider-mws": ("ours", {"SPIDER_MIDDLEWARES": {**sm, START_MW: None, HTTPERROR_MW: None}}),
        # Measurement only: without the headers and timeout they add, requests differ.
        "ours-request-mws": ("ours", {"DOWNLOADER_MIDDLEWARES": {**dl, **dict.fromkeys(REQUEST_MWS)}}),
        "ours-corestats": ("ours", {"EXTENSIONS": {**_project_extensions(), CORESTATS: None}}),
        # asyncio's own event loop instead of uvloop's (settings.py's ASYNCIO_EVENT_LOOP).
        "ours-uvloop": ("ours", {"ASYNCIO_EVENT_LOOP": DEFAULT_LOOP}),
        # Scrapy's aiohttp handler instead of the lean one (productcrawler/download/handler.py).
        "ours+scrapy-handler": ("ours", {"DOWNLOAD_HANDLERS": {"http": SCRAPY_AIOHTTP_HANDLER,
                                                               "https": SCRAPY_AIOHTTP_HANDLER}}),
    }


# A run without --variants.
DEFAULT_VARIANTS = ("stock-info", "ours", "ours-gc-tuning", "ours-traffic-stats", "ours+twisted-handler")


def _project_extensions() -> dict[str, Any]:
    from _common import project_settings

    return dict(project_settings()["EXTENSIONS"])


def _project_spider_middlewares() -> dict[str, Any]:
    from _common import project_settings

    return dict(project_settings()["SPIDER_MIDDLEWARES"])


def _without_ratelimit(middlewares: dict[str, Any]) -> dict[str, Any]:
    return {name: (None if "ratelimit" in name else order) for name, order in middlewares.items()}


PROBE = "bench.cpuprobe.CpuProbe"


def prepare(name: str, kind: str, settings: dict[str, Any], base_url: str, ids: int, *, redis: bool,
            work: Path, tag: str, rate: float = 1_000_000) -> dict[str, Any]:
    """The command of one run, and what to create before it and remove after it."""
    probe = work / f"{name}.{tag}.probe.json"
    log = work / f"{name}.{tag}.log"
    job: dict[str, Any] = {"name": name, "probe": probe, "log": log, "database": None, "prefix": None,
                           "env": {"BENCH_CPU_PROBE": str(probe)}}
    if kind == STOCK:
        command = [SCRAPY, "runspider", str(BENCH / "stock_spider.py"), "-a", f"base_url={base_url}",
                   "-a", "start_id=1", "-a", f"end_id={ids}", "-s", f"EXTENSIONS={json.dumps({PROBE: 0})}"]
        for key, value in settings.items():
            command += ["-s", f"{key}={json.dumps(value) if isinstance(value, dict) else value}"]
        job.update(command=command, cwd=tempfile.gettempdir())
        return job
    database = create_database("benchcpu")
    prefix = unique_prefix("benchcpu")
    full = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
            "MAX_REQUESTS_PER_SECOND": rate, "PROGRESS_INTERVAL": 3600, **settings}
    full["EXTENSIONS"] = {**full.get("EXTENSIONS", _project_extensions()), PROBE: 0}
    if redis:
        full.update(REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix)
    job.update(command=crawl_command(1, ids, base_url, full), cwd=None, database=database, prefix=prefix)
    return job


def execute(job: dict[str, Any], ids: int, profile: Path | None = None, cprofile: Path | None = None) -> Run:
    command = job["command"] if profile is None else _py_spy(profile) + job["command"]
    if cprofile is not None:
        command = _cprofile(cprofile) + job["command"][1:]
    try:
        kwargs = {"cwd": job["cwd"]} if job["cwd"] else {}
        run = run_measured(job["name"], command, env=job["env"], log_path=job["log"], **kwargs)
        run.responses = ids  # one response per id: the simulator runs without faults (checked by the caller)
        if job["database"]:
            run.stored = count_rows(job["database"])
        if job["probe"].exists():
            run.extra.update(json.loads(job["probe"].read_text()))
        return run
    finally:
        if job["database"]:
            drop_database(job["database"])
        if job["prefix"]:
            delete_redis_prefix(job["prefix"])


def crawl_ms(run: Run) -> float:
    """CPU ms per response between spider_opened and spider_closed (start-up excluded)."""
    cpu = run.extra.get("cpu")
    return 1000.0 * cpu / run.responses if cpu is not None and run.responses else float("nan")


def _cprofile(output: Path) -> list[str]:
    """Run the command's Python entry point under cProfile with a CPU-time clock.

    ``time.thread_time`` counts the reactor thread's CPU only: a wall clock (or
    py-spy's sampling) charges a preempted thread's waiting to whatever call it
    was in, which on a busy 2-core machine is mostly socket sends.
    """
    code = ("import cProfile, sys, time; from scrapy.cmdline import execute; "
            "sys.argv = ['scrapy', *sys.argv[1:]]; p = cProfile.Profile(time.thread_time); p.enable()\n"
            f"try:\n    execute()\nfinally:\n    p.disable(); p.dump_stats({str(output)!r})")
    return [sys.executable, "-c", code]


def _py_spy(output: Path) -> list[str]:
    return [str(Path(sys.executable).with_name("py-spy")), "record", "--format", "raw", "--rate", "250",
            "--nonblocking", "-o", str(output), "--"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", default="", help="comma list (default: all)")
    parser.add_argument("--reference", default="stock-info", help="the variant each one runs beside")
    parser.add_argument("--both-orders", action="store_true",
                        help="run every pair twice, the reference started first and then second "
                             "(the first-started process is measured ~5 %% cheaper in some series)")
    parser.add_argument("--sequential", action="store_true",
                        help="run variants one at a time instead of beside the reference")
    parser.add_argument("--no-redis", action="store_true", help="single-process pass (database ledger)")
    parser.add_argument("--rate", type=float, default=1_000_000,
                        help="MAX_REQUESTS_PER_SECOND of our crawl (e.g. 500 with --sequential: CPU at the "
                             "operating point, and whether the crawl keeps up)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--profile", metavar="VARIANT", help="py-spy one run of VARIANT, print the top frames")
    parser.add_argument("--cprofile", metavar="VARIANT",
                        help="cProfile (reactor thread CPU time) one run of VARIANT, print the top functions")
    parser.add_argument("--json", type=Path, help="also write the runs here")
    args = parser.parse_args()

    table = variants()
    if args.list:
        for name, (kind, settings) in table.items():
            print(f"{name:24s} {kind:6s} {json.dumps(settings)[:300]}")
        return 0
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()] or list(DEFAULT_VARIANTS)
    reference = None if args.reference == "none" else args.reference
    unknown = [v for v in [*chosen, *([reference] if reference else [])] if v not in table]
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(unknown)}; see --list")

    work = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    runs: dict[str, list[Run]] = {name: [] for name in [*([reference] if reference else []), *chosen]}
    ratios: dict[str, list[float]] = {name: [] for name in chosen}
    with simulator() as sim:
        if args.profile:
            out = work / f"{args.profile}.pyspy.txt"
            kind, settings = table[args.profile]
            job = prepare(args.profile, kind, settings, sim.base_url, args.ids, redis=not args.no_redis,
                          work=work, tag="profile")
            run = execute(job, args.ids, profile=out)
            print(f"profile written to {out}; run: {run.cpu:.2f} s CPU (py-spy included)")
            subprocess.run([sys.executable, str(BENCH / "pyspy_top.py"), str(out)], check=False)
            return 0
        if args.cprofile:
            out = work / f"{args.cprofile}.pstats"
            job = prepare(args.cprofile, *table[args.cprofile], sim.base_url, args.ids,
                          redis=not args.no_redis, work=work, tag="cprofile")
            run = execute(job, args.ids, cprofile=out)
            print(f"profile written to {out}; run: {run.cpu:.2f} s CPU (profiler included)")
            import pstats

            for key in ("tottime", "cumulative"):
                pstats.Stats(str(out)).strip_dirs().sort_stats(key).print_stats(45)
            return 0
        orders = (False, True) if args.both_orders and reference else (False,)
        for round_no in range(args.repeat):
            for name in chosen:
                for swapped in orders:
                    run_pair(sim, table, name, reference, swapped, args, work, round_no, runs, ratios)
    print_table(runs, ratios, reference or "-")
    if args.json:
        args.json.write_text(json.dumps({"runs": {n: [r.__dict__ for r in rs] for n, rs in runs.items()},
                                         "ratios": ratios}, indent=1, default=str))
    print(f"logs: {work}")
    return 0


def run_pair(sim: Any, table: dict[str, tuple[str, dict[str, Any]]], name: str, reference: str | None,
             swapped: bool, args: argparse.Namespace, work: Path, round_no: int,
             runs: dict[str, list[Run]], ratios: dict[str, list[float]]) -> None:
    """One run of ``name``, at the same time as one of ``reference`` (started first unless ``swapped``)."""
    sim.reset()
    names = (reference, name) if reference else (name,)
    if swapped:
        names = names[::-1]
    jobs = [prepare(n, *table[n], sim.base_url, args.ids, redis=not args.no_redis, work=work,
                    tag=f"{round_no}-{name}-{int(swapped)}", rate=args.rate) for n in names]
    started = time.time()
    if args.sequential or len(jobs) == 1:
        pair = [execute(job, args.ids) for job in jobs]
    else:
        with ThreadPoolExecutor(2) as pool:
            pair = list(pool.map(lambda job: execute(job, args.ids), jobs))
    total = int(sim.stats()["total"])
    for run in pair:
        runs[run.name].append(run)
        flag = "" if run.returncode == 0 else f"  EXIT {run.returncode}: {run.stderr_tail[-300:]}"
        print(f"round {round_no + 1} {run.name:24s} cpu {run.cpu:6.2f} s (crawl "
              f"{run.extra.get('cpu', float('nan')):6.2f} s)  wall {run.wall:6.1f} s  "
              f"stored {run.stored if run.stored is not None else '-':>6}  "
              f"{run.ms_per_response:.3f} ms/resp, crawl {crawl_ms(run):.3f}{flag}", flush=True)
    if total != len(jobs) * args.ids:
        print(f"  warning: the simulator answered {total} requests, expected {len(jobs) * args.ids}")
    variant = pair[0] if swapped else pair[-1]
    if args.rate < 1_000_000:
        times = sorted(a[0] for a in sim.arrivals(since=started))
        span = times[-1] - times[0]
        variant.extra["span"] = span
        print(f"  {name}: requests over {span:.2f} s (ideal {args.ids / args.rate:.2f} s), "
              f"{100 * variant.extra['cpu'] / span:.0f} % of a core while crawling", flush=True)
    if reference:
        ref = pair[1] if swapped else pair[0]
        ratios[name].append(crawl_ms(variant) / crawl_ms(ref))
        print(f"  {name} / {reference}{' (started second)' if swapped else ''}: {ratios[name][-1]:.3f}",
              flush=True)


def print_table(runs: dict[str, list[Run]], ratios: dict[str, list[float]], reference: str) -> None:
    print(f"\n| variant | crawl CPU ms/response, median (runs) | total incl. start-up | "
          f"ratio to {reference} run beside it, median (runs) | request span s, median |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        crawl = [crawl_ms(r) for r in rs]
        total = statistics.median(r.ms_per_response for r in rs)
        paired = ratios.get(name)
        ratio = (f"{statistics.median(paired):.2f} ({', '.join(f'{v:.2f}' for v in paired)})"
                 if paired else ("1" if name == reference else "-"))
        spans = [r.extra["span"] for r in rs if "span" in r.extra]
        span = f"{statistics.median(spans):.2f}" if spans else "-"
        print(f"| {name} | {statistics.median(crawl):.3f} ({', '.join(f'{v:.2f}' for v in crawl)}) | "
              f"{total:.3f} | {ratio} | {span} |")


if __name__ == "__main__":
    sys.exit(main())
