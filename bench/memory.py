"""Memory at scale: the crawler's RSS over a 1,000,000-id range, and Redis per 1,000,000-id pass.

Usage (from the repository root; about 4 minutes with the defaults)::

    .venv/bin/python bench/memory.py                      # RSS and Redis parts
    .venv/bin/python bench/memory.py --part rss --seconds 60 --peers
    .venv/bin/python bench/memory.py --part redis

``rss``: the project's crawl (MySQL upserts, unthrottled), once with the
Redis-shared pass (``ours``) and once with the local scheduler and database
ledger (``ours-local``, what runs without REDIS_URL), over ids 1..20,000 to the end, then over ids
1..1,000,000 stopped with SIGINT after ``--seconds``; RSS is sampled every
second (with the simulator's response count) and the peak is the child's
ru_maxrss. Targets: peak <= 150 MB, and the 1,000,000-id peak within 10 % of
the 20,000-id one. ``--peers`` adds the aiohttp crawler over the same two
ranges (it creates a coroutine per id up front).

``redis``: MEMORY USAGE of every key of a whole 1,000,000-id pass, driven
through the project's own ``RedisPass`` (its Lua scripts: lease 1,000 ids,
acknowledge them, until the pass is finished) without HTTP, measured at the
end of the pass; the keys of the bounded crawl above are reported too. For
scale, the same for the designs it replaces: the article's Redis set of done
ids and scrapy-redis's dupefilter (one 40-hex-digit fingerprint per request).
Target: <= ~100 MB per pass. Everything is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH,
    PYTHON,
    REDIS_URL,
    crawl_command,
    create_database,
    delete_redis_prefix,
    drop_database,
    redis_client,
    redis_keys_memory,
    run_measured,
    simulator,
    unique_prefix,
)

UNTHROTTLED = 1_000_000
MIB = 1024 * 1024


class RssSampler(threading.Thread):
    """Samples VmRSS of the newest child whose command line contains ``marker``, once a second."""

    def __init__(self, marker: str, sim: Any) -> None:
        super().__init__(daemon=True)
        self.marker = marker
        self.sim = sim
        self.samples: list[tuple[float, int, float]] = []  # seconds, responses, RSS MB
        self.done = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(1.0):
            pid = _find_child(self.marker)
            if pid is None:
                continue
            rss = _vm_rss_mb(pid)
            if rss is not None:
                self.samples.append((time.monotonic() - started, int(self.sim.stats()["total"]), rss))


def _find_child(marker: str) -> int | None:
    mine = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if ppid == mine and marker in cmdline:
            return int(entry.name)
    return None


def _vm_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def rss_run(crawler: str, end: int, seconds: float | None, sim: Any, work: Path) -> dict[str, Any]:
    database = create_database("benchmem")
    prefix = unique_prefix("benchmem")
    marker = prefix
    try:
        if crawler == "aiohttp":
            command = [PYTHON, str(BENCH / "aiohttp_crawler.py"), "--base-url", sim.base_url, "--end", str(end),
                       "--rate", str(UNTHROTTLED), "--database", database, "--redis-key", f"{prefix}:done"]
            if seconds is not None:
                command += ["--max-seconds", str(seconds)]
            stop_after = None
        else:
            settings = {"DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}",
                        "MAX_REQUESTS_PER_SECOND": UNTHROTTLED}
            if crawler == "ours":
                settings.update(REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix)
            command = crawl_command(1, end, sim.base_url, settings)
            stop_after = seconds
        sim.reset()
        sampler = RssSampler(marker, sim)
        sampler.start()
        run = run_measured(crawler, command, log_path=work / f"rss-{crawler}-{end}.log",
                           stop_after=stop_after, timeout=(seconds or 600) + 120)
        sampler.done.set()
        sampler.join()
        keys = redis_keys_memory(prefix)
        return {"crawler": crawler, "ids": end, "stopped_after_s": seconds, "returncode": run.returncode,
                "wall_s": run.wall, "cpu_s": run.cpu, "responses": int(sim.stats()["total"]),
                "peak_rss_mb": run.maxrss_mb, "samples": sampler.samples,
                "redis_keys": keys, "redis_keys_bytes": sum(keys.values())}
    finally:
        drop_database(database)
        delete_redis_prefix(prefix)


def redis_pass_memory(total: int) -> dict[str, Any]:
    """Drive a whole pass of ``total`` ids through RedisPass and measure its keys at the end."""
    return asyncio.run(_redis_pass_memory(total))


async def _redis_pass_memory(total: int) -> dict[str, Any]:
    from productcrawler.ids import RangeIds
    from productcrawler.passes.base import FINISHED
    from productcrawler.passes.redis_pass import RedisPass
    from productcrawler.redis_connection import async_redis_client

    prefix = unique_prefix("benchmem-pass")
    client = async_redis_client(REDIS_URL)
    try:
        redis_pass = RedisPass(client, prefix, RangeIds(1, total))
        await redis_pass.open(fresh=True)
        midway: dict[str, int] = {}
        done = 0
        status = None
        started = time.monotonic()
        while True:
            entries = (await redis_pass.lease(1000)).entries
            if not entries:
                break
            if not midway and done >= total // 2:  # leased and not yet acknowledged: mid-pass state
                midway = redis_keys_memory(prefix)
            status = await redis_pass.acknowledge([e.product_id for e in entries])
            done += len(entries)
        elapsed = time.monotonic() - started
        keys = redis_keys_memory(prefix)
        return {"design": "RedisPass (this project)", "ids": total, "finished": status == FINISHED,
                "seconds": elapsed, "keys": keys, "bytes": sum(keys.values()),
                "midway_bytes": sum(midway.values())}
    finally:
        await client.aclose()
        delete_redis_prefix(prefix)


def redis_set_memory(total: int, kind: str) -> dict[str, Any]:
    """The designs this project replaces: a set of done ids, or scrapy-redis's fingerprint set."""
    key = f"{unique_prefix('benchmem-set')}:{kind}"
    client = redis_client()
    try:
        for start in range(1, total + 1, 10_000):
            ids = range(start, min(start + 10_000, total + 1))
            if kind == "done_ids":
                members = [str(i) for i in ids]
            else:  # a SHA1 hex fingerprint per request, as scrapy-redis's RFPDupeFilter stores
                members = [hashlib.sha1(f"GET http://api/v1/product/{i}".encode()).hexdigest() for i in ids]
            client.sadd(key, *members)
        size = int(client.memory_usage(key, samples=0))
        design = {"done_ids": "Redis set of done ids (the article)",
                  "fingerprints": "scrapy-redis dupefilter (SHA1 hex per request)"}[kind]
        return {"design": design, "ids": total, "keys": {key: size}, "bytes": size}
    finally:
        client.delete(key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("rss", "redis", "all"), default="all")
    parser.add_argument("--small", type=int, default=20_000, help="the small range, crawled to the end")
    parser.add_argument("--large", type=int, default=1_000_000, help="the large range, stopped early")
    parser.add_argument("--seconds", type=float, default=60.0, help="when to stop the large-range crawl")
    parser.add_argument("--peers", action="store_true", help="also the aiohttp crawler")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    out: dict[str, Any] = {}
    if args.part in ("rss", "all"):
        rows = []
        with simulator() as sim:
            for crawler in ["ours", "ours-local", *(["aiohttp"] if args.peers else [])]:
                small = rss_run(crawler, args.small, None, sim, work)
                large = rss_run(crawler, args.large, args.seconds, sim, work)
                for row in (small, large):
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k not in ("samples", "redis_keys")}),
                          flush=True)
                growth = large["peak_rss_mb"] / small["peak_rss_mb"] - 1
                print(f"{crawler}: peak RSS {small['peak_rss_mb']:.0f} MB over {args.small} ids (whole run), "
                      f"{large['peak_rss_mb']:.0f} MB over {args.large} ids (first {args.seconds:.0f} s, "
                      f"{large['responses']} responses): {100 * growth:+.1f} %", flush=True)
        out["rss"] = rows
        _print_rss(rows)
    if args.part in ("redis", "all"):
        rows = [redis_pass_memory(args.large), redis_set_memory(args.large, "done_ids"),
                redis_set_memory(args.large, "fingerprints")]
        out["redis"] = rows
        print(f"\n| design | Redis bytes for a {args.large:,}-id pass | keys |")
        print("|---|---|---|")
        for row in rows:
            keys = ", ".join(f"{k.split(':', 1)[1]}={v / 1024:.0f} KB" for k, v in sorted(row["keys"].items()))
            print(f"| {row['design']} | {row['bytes'] / MIB:.2f} MB | {keys} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"logs: {work}")
    return 0


def _print_rss(rows: list[dict[str, Any]]) -> None:
    print("\n| crawler | id range | run | responses | peak RSS MB | RSS MB at 10 s / 30 s / last sample |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        samples = row["samples"]

        def at(t: float, samples: list = samples) -> str:
            value = next((rss for s, _, rss in samples if s >= t), None)
            return f"{value:.0f}" if value is not None else "-"

        last = f"{samples[-1][2]:.0f}" if samples else "-"
        run = "to the end" if row["stopped_after_s"] is None else f"stopped after {row['stopped_after_s']:.0f} s"
        print(f"| {row['crawler']} | 1..{row['ids']:,} | {run} | {row['responses']} | {row['peak_rss_mb']:.0f} | "
              f"{at(10)} / {at(30)} / {last} |")


if __name__ == "__main__":
    sys.exit(main())
