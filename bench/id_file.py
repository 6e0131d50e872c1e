"""A 10,000,000-line id file against a 10,000,000-id range: start-up memory and the shared pass's Redis.

Usage (by hand, not in CI; about 2 minutes, and 150 MB of disk for the file)::

    .venv/bin/python bench/id_file.py                 # 10,000,000 ids, the first 200,000 leased
    .venv/bin/python bench/id_file.py --ids 1000000 --lease 50000

For each of the two id lists, a fresh child process does what a crawl process
does at start-up and while it leases, and nothing else (no HTTP: fetching ten
million products is not what is measured): it imports the project and Scrapy,
builds the configuration (for the file: the one streaming scan that checks
every line, counts the ids, computes the SHA-256 and builds the offset index),
opens the shared pass in Redis (``RedisPass``), then leases ``--lease``
positions in the scheduler's batches of 32, maps each batch to its ids as the
scheduler does, and acknowledges them in the pipeline's batches of 200. The
peak RSS is the child's ru_maxrss; "after imports" is its RSS before the
configuration is built. Then the last position is acknowledged as well, so
the done bitmap has its full size (as at the end of a pass), and MEMORY USAGE
of every key of the pass is summed. Everything is deleted afterwards.

The file holds sparse 13-digit ids (Shopify-like: 7,000,000,000,000 + n * 7,919).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REDIS_URL, ROOT, delete_redis_prefix, redis_keys_memory, unique_prefix

MIB = 1024 * 1024
LEASE_BATCH = 32
ACK_BATCH = 200


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def write_file(path: Path, count: int) -> None:
    with open(path, "w") as out:
        step = 100_000
        for first in range(0, count, step):
            out.write("".join(f"{7_000_000_000_000 + n * 7919}\n" for n in range(first, min(first + step, count))))


def child(args: argparse.Namespace) -> None:
    import scrapy  # noqa: F401 - what a crawl process has loaded

    from productcrawler.config import CrawlConfig
    from productcrawler.passes import scheduler  # noqa: F401
    from productcrawler.passes.redis_pass import RedisPass
    from productcrawler.redis_connection import async_redis_client

    after_imports = rss_mib()
    settings = {"PRODUCT_ID_START": 1, "PRODUCT_ID_END": args.ids}
    if args.file:
        settings["PRODUCT_IDS"] = f"@{args.file}"
    started = time.perf_counter()
    config = CrawlConfig.from_settings(settings)
    configured = time.perf_counter() - started
    ids = config.ids.file
    if ids is None:
        from productcrawler.ids import RangeIds

        ids = RangeIds(config.ids.start_id, config.ids.end_id)

    async def main() -> dict[str, float]:
        client = async_redis_client(REDIS_URL)
        try:
            redis_pass = RedisPass(client, args.prefix, ids)
            await redis_pass.open(fresh=True)
            started = time.perf_counter()
            leased = 0
            unacked: list[int] = []
            last_id = None
            while leased < args.lease:
                lease = await redis_pass.lease(LEASE_BATCH)
                positions = [entry.position for entry in lease.entries]
                last_id = redis_pass.ids.ids_at(positions)[-1]
                leased += len(positions)
                unacked += positions
                if len(unacked) >= ACK_BATCH:
                    await redis_pass.acknowledge(unacked)
                    unacked = []
            await redis_pass.acknowledge([*unacked, ids.total])  # the bitmap at its full size
            leasing = time.perf_counter() - started
            await client.delete(redis_pass.heartbeat_key())
            return {"leasing_s": leasing, "last_id": float(last_id or 0)}
        finally:
            await client.aclose()

    result = asyncio.run(main())
    print(json.dumps({"after_imports_mib": after_imports, "configured_s": configured,
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **result}))


def measure(name: str, args: argparse.Namespace, file: Path | None) -> dict[str, object]:
    prefix = unique_prefix("bench-idfile")
    command = [PYTHON, __file__, "--child", "--ids", str(args.ids), "--lease", str(args.lease), "--prefix", prefix]
    if file is not None:
        command += ["--file", str(file)]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        keys = redis_keys_memory(prefix)
    finally:
        delete_redis_prefix(prefix)
    return {"name": name, **result, "redis_bytes": sum(keys.values()), "keys": keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--lease", type=int, default=200_000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ids.txt"
        write_file(path, args.ids)
        size = path.stat().st_size
        rows = [measure(f"range 1..{args.ids:,}", args, None),
                measure(f"file of {args.ids:,} ids ({size / MIB:.0f} MB)", args, path)]
    print(f"{args.ids:,} ids, the first {args.lease:,} leased and acknowledged; Redis: every key of the pass\n")
    print("| id list | RSS after imports | peak RSS | start-up (config, scan) | leasing | Redis for the pass |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['name']} | {row['after_imports_mib']:.0f} MB | {row['peak_mib']:.0f} MB | "
              f"{row['configured_s']:.2f} s | {row['leasing_s']:.1f} s | {row['redis_bytes'] / MIB:.2f} MB |")
    for row in rows:
        keys = sorted(row["keys"].items())  # type: ignore[attr-defined]
        print(f"\n{row['name']}: " + ", ".join(f"{key.split(':pass', 1)[-1] or 'pass'} {size:,} B"
                                               for key, size in keys))


if __name__ == "__main__":
    main()
