"""Where does a burst form between the token and the API? Time stamps along one request's way.

Usage (from the repository root)::

    .venv/bin/python bench/where_bursts.py --ids 10000 --rate 500 [--redis]

One crawl against ``tests/support/arrival_server.py`` with three probes installed
through settings: the time each request leaves the rate-limit middleware
(``token``), enters the download handler (``handler``) and has its headers
written to the socket (``socket``, aiohttp's ``on_request_headers_sent``
trace), plus the server's own arrival clock (``arrival``). For each it prints
the busiest sliding 1-s and 100-ms windows: the stage where they first exceed
cap + burst and cap/10 + burst is where the clump forms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # last: bench/profile.py would shadow the stdlib's

try:  # the pacing handler; Scrapy's own on code from before it
    from productcrawler.ratelimit.handler import PacedAiohttpDownloadHandler as BaseHandler
except ImportError:
    from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler as BaseHandler
from productcrawler.config import burst_for_rate  # noqa: E402
from productcrawler.ratelimit import late_tolerance  # noqa: E402
from productcrawler.ratelimit.middleware import RateLimitMiddleware  # noqa: E402

PROBE_FILE = "WHERE_BURSTS_FILE"
STAMPS: dict[str, list[float]] = {"token": [], "handler": [], "socket": [], "queue": [],
                                  "stale_wake": [], "send_wake": []}


def _dump() -> None:
    with open(os.environ[PROBE_FILE], "w") as out:
        json.dump(STAMPS, out)


class ProbedMiddleware(RateLimitMiddleware):
    if hasattr(RateLimitMiddleware, "process_request"):  # code from before the pacing handler
        async def process_request(self, request):  # type: ignore[no-untyped-def]
            await super().process_request(request)
            STAMPS["token"].append(time.monotonic())

    def spider_opened(self) -> None:
        super().spider_opened()
        # Each task's latest slot: how late its wake-up came is taken at its next
        # acquire (the slot was stale) or when it may send.
        slots: dict[int, float] = {}
        acquire = self.limiter.acquire

        async def probed_acquire():  # type: ignore[no-untyped-def]
            task = id(asyncio.current_task())
            if task in slots:
                STAMPS["stale_wake"].append(time.monotonic() - slots[task])
            reservation = await acquire()
            slots[task] = reservation.at
            STAMPS["queue"].append(self.waiting)
            return reservation

        self.limiter.acquire = probed_acquire  # type: ignore[method-assign]
        self._probe_slots = slots

    async def wait_for_slot(self, request):  # type: ignore[no-untyped-def]
        deadline = await super().wait_for_slot(request)
        now = time.monotonic()
        STAMPS["token"].append(now)
        slot = self._probe_slots.pop(id(asyncio.current_task()), None)
        if slot is not None:
            STAMPS["send_wake"].append(now - slot)
        return deadline

    async def spider_closed(self) -> None:
        await super().spider_closed()
        STAMPS["counts"] = [self.late_wakeups, getattr(self.limiter, "expired_slots", 0)]
        _dump()


class ProbedHandler(BaseHandler):
    def __init__(self, crawler):  # type: ignore[no-untyped-def]
        super().__init__(crawler)
        trace = aiohttp.TraceConfig()

        async def sent(session, context, params):  # type: ignore[no-untyped-def]
            STAMPS["socket"].append(time.monotonic())

        trace.on_request_headers_sent.append(sent)
        trace.freeze()
        self._session._trace_configs.append(trace)

    async def download_request(self, request):  # type: ignore[no-untyped-def]
        STAMPS["handler"].append(time.monotonic())
        return await super().download_request(request)


def main() -> int:
    from _common import (
        busiest_window,
        crawl_command,
        create_database,
        delete_redis_prefix,
        drop_database,
        unique_prefix,
    )

    from tests.support.arrival_server import ArrivalServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--redis", action="store_true")
    parser.add_argument("--stall", action="store_true", help="block the reactor 0.1-0.2 s every 0.7 s")
    parser.add_argument("--hold", action="store_true", help="the API holds its answers 0.3 s every 1.2 s")
    args = parser.parse_args()
    database, prefix = create_database("bursts"), unique_prefix("bursts")
    settings: dict[str, object] = {
        "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{database}", "MAX_REQUESTS_PER_SECOND": args.rate,
        "LOG_LEVEL": "WARNING",
        "DOWNLOADER_MIDDLEWARES": {"productcrawler.ratelimit.middleware.RateLimitMiddleware": None,
                                   "bench.where_bursts.ProbedMiddleware": 950},
        "DOWNLOAD_HANDLERS": {"http": "bench.where_bursts.ProbedHandler",
                              "https": "bench.where_bursts.ProbedHandler"}}
    if args.redis:
        settings.update(REDIS_URL="redis://127.0.0.1:6379/0", REDIS_KEY_PREFIX=prefix)
    if args.stall:
        settings.update(EXTENSIONS={"tests.support.stall_extension.ReactorStall": 0})
    try:
        with tempfile.NamedTemporaryFile(suffix=".json") as probe, ArrivalServer() as server:
            if args.hold:
                server.hold(0.3, every=1.2)
            env = {**os.environ, PROBE_FILE: probe.name,
                   "PYTHONPATH": str(ROOT)}
            subprocess.run(crawl_command(1, args.ids, server.base_url, settings), cwd=ROOT, env=env, check=True)
            stamps = json.load(open(probe.name))
            stamps["arrival"] = server.arrivals()
    finally:
        drop_database(database)
        delete_redis_prefix(prefix)
    for stage in ("token", "handler", "socket", "arrival"):
        times = stamps[stage]
        print(f"{stage:8} n={len(times):6}  busiest 1 s {busiest_window(times):4}  "
              f"busiest 100 ms {busiest_window(times, 0.1):3}  busiest 10 ms {busiest_window(times, 0.01):3}")
    account(stamps, args.rate)
    return 0


def account(stamps: dict[str, list[float]], rate: float) -> None:
    """Where the slots of the pass went: sent, dropped as stale, expired unused, never granted."""
    arrivals = sorted(stamps["arrival"])
    if len(arrivals) < 2 or "counts" not in stamps:
        return
    span = arrivals[-1] - arrivals[0]
    capacity = span * rate
    stale, expired = stamps["counts"]
    never = capacity - len(arrivals) - stale - expired
    print(f"slots of the pass (cap x {span:.2f} s of arrivals) {capacity:.0f}: arrived {len(arrivals)} "
          f"({100 * (len(arrivals) - 1) / capacity:.2f} %), dropped stale in the handler {stale} "
          f"({100 * stale / capacity:.2f} %), leased but expired before a request took them {expired} "
          f"({100 * expired / capacity:.2f} %), never granted (no request asked in time) {never:.0f} "
          f"({100 * never / capacity:.2f} %)")
    queue = stamps["queue"]
    if queue:
        print(f"requests waiting in the handler at each slot taken: none besides it "
              f"{100 * sum(q <= 1 for q in queue) / len(queue):.1f} %, 10 or more "
              f"{100 * sum(q >= 10 for q in queue) / len(queue):.1f} %")
    wakes = sorted(stamps["send_wake"] + stamps["stale_wake"])
    if wakes:
        def at(share: float) -> float:
            return 1000 * wakes[int(share * (len(wakes) - 1))]

        # Up to half the send window after the slot is the tick (wake_time); past the window, the slot is stale.
        window = late_tolerance(1 / rate, burst_for_rate(rate))
        print(f"wake-up after the slot, ms (n={len(wakes)}): median {at(0.5):.2f}, p90 {at(0.9):.2f}, "
              f"p99 {at(0.99):.1f}; later than half the send window ({500 * window:.1f} ms) "
              f"{sum(w > window / 2 for w in wakes)}, than the window {sum(w > window for w in wakes)}")


if __name__ == "__main__":
    sys.exit(main())
