"""Four APIs that announce their budget in their headers, each enforcing a real quota by its own clock.

Written from the vendors' public descriptions only (no code shared with
``productcrawler`` or ``simulator``); one aiohttp app per format, each on a
port of its own, all in one subprocess (``python -m tests.support.imitations.budgets``
prints ``BUDGETS LISTENING name=http://HOST:PORT ...``):

``x-ratelimit`` (express-rate-limit v5 with its memory store)
    200 requests per 1-s window; the windows run from the server's start (or
    the last ``/_reset``), not from whole seconds. Every request counts,
    rejected ones too. ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
    ``X-RateLimit-Reset`` (the reset as epoch seconds, rounded up); over the
    quota, 429 with ``Retry-After`` in whole seconds.
``ietf`` (draft-ietf-httpapi-ratelimit-headers)
    300 requests per 2-s window: ``RateLimit-Policy: "default";q=300;w=2`` and
    ``RateLimit: "default";r=R;t=T`` (T whole seconds to the reset, rounded up).
``bigcommerce``
    100 requests per 500-ms window: ``X-Rate-Limit-Requests-Quota``,
    ``-Requests-Left``, ``-Time-Window-Ms``, ``-Time-Reset-Ms``; a 429 carries them.
``shopify``
    a leaky bucket of 40 leaking 200 per second; ``X-Shopify-Shop-Api-Call-Limit:
    used/40``; a request that finds it full gets 429 with ``Retry-After: 2.0``.

Besides, x-ratelimit's budget (200 per 1-s window) with other resets, by the
same name (``ODD_RESETS``): in epoch milliseconds, as many APIs send it
(``x-ratelimit-ms``); and absurd ones, a reset 10⁹ s away as delta seconds,
epoch seconds or epoch milliseconds with the true remaining count; and what
one broken answer said, ``X-RateLimit-Remaining: 0`` with
``X-RateLimit-Reset: 900000000``, in every answer (``stalling``).

``GET /v1/product/{id}`` answers a product, or 404 for multiples of 7, with
the budget headers either way. Control routes (not counted): ``GET /_arrivals``
gives ``[[time, status, id], ...]`` (Unix seconds when the request came),
``POST /_reset`` empties that log and starts the quota afresh.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
import time
import urllib.request
from typing import Any

from aiohttp import web

LISTENING = "BUDGETS LISTENING"
BUDGETS = {  # name: (quota, window seconds) or, for shopify, (bucket size, leak per second)
    "x-ratelimit": (200, 1.0),
    "ietf": (300, 2.0),
    "bigcommerce": (100, 0.5),
    "shopify": (40, 200.0),
}
#: x-ratelimit imitations with another X-RateLimit-Reset: name -> its value from the window's reset (Unix s).
ODD_RESETS: dict[str, Any] = {
    "x-ratelimit-ms": lambda reset_at: str(math.ceil(reset_at * 1000)),
    "absurd-delta": lambda reset_at: "900000000",
    "absurd-epoch-s": lambda reset_at: str(math.ceil(reset_at) + 10**9),
    "absurd-epoch-ms": lambda reset_at: str((math.ceil(reset_at) + 10**9) * 1000),
    "stalling": lambda reset_at: "900000000",
}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def rate_of(name: str) -> float:
    """The budget in requests per second."""
    quota, window = BUDGETS[_format(name)]
    return window if name == "shopify" else quota / window


def missing(product_id: int) -> bool:
    return product_id % 7 == 0


class FixedWindow:
    def __init__(self, quota: int, window: float) -> None:
        self.quota, self.window = quota, window
        self.reset()

    def reset(self) -> None:
        self.start, self.count = time.time(), 0

    def hit(self, now: float) -> tuple[bool, int, float]:
        """Count a request: (allowed, remaining, the window's reset time)."""
        if now >= self.start + self.window:
            self.start += math.floor((now - self.start) / self.window) * self.window
            self.count = 0
        self.count += 1
        return self.count <= self.quota, max(0, self.quota - self.count), self.start + self.window


class LeakyBucket:
    def __init__(self, size: int, leak: float) -> None:
        self.size, self.leak = size, leak
        self.reset()

    def reset(self) -> None:
        self.level, self.at = 0.0, time.time()

    def hit(self, now: float) -> tuple[bool, int]:
        self.level = max(0.0, self.level - (now - self.at) * self.leak)
        self.at = now
        if self.level + 1 > self.size:
            return False, math.ceil(self.level)
        self.level += 1
        return True, math.ceil(self.level)


def _format(name: str) -> str:
    return "x-ratelimit" if name in ODD_RESETS else name


def budget_headers(name: str, limiter: Any, now: float) -> tuple[bool, dict[str, str]]:
    quota, window = BUDGETS[_format(name)]
    if name == "shopify":
        allowed, level = limiter.hit(now)
        headers = {"X-Shopify-Shop-Api-Call-Limit": f"{level}/{quota}"}
        return allowed, headers if allowed else {**headers, "Retry-After": "2.0"}
    allowed, remaining, reset_at = limiter.hit(now)
    left = max(0.0, reset_at - now)
    if name in ODD_RESETS:
        headers = {"X-RateLimit-Limit": str(quota),
                   "X-RateLimit-Remaining": "0" if name == "stalling" else str(remaining),
                   "X-RateLimit-Reset": ODD_RESETS[name](reset_at)}
    elif name == "x-ratelimit":
        headers = {"X-RateLimit-Limit": str(quota), "X-RateLimit-Remaining": str(remaining),
                   "X-RateLimit-Reset": str(math.ceil(reset_at))}
    elif name == "ietf":
        headers = {"RateLimit-Policy": f'"default";q={quota};w={int(window)}',
                   "RateLimit": f'"default";r={remaining};t={math.ceil(left)}'}
    else:
        headers = {"X-Rate-Limit-Requests-Quota": str(quota), "X-Rate-Limit-Requests-Left": str(remaining),
                   "X-Rate-Limit-Time-Window-Ms": str(int(window * 1000)),
                   "X-Rate-Limit-Time-Reset-Ms": str(math.ceil(left * 1000))}
    if not allowed and name != "bigcommerce":
        headers["Retry-After"] = str(max(1, math.ceil(left)))
    return allowed, headers


def build_app(name: str) -> web.Application:
    quota, window = BUDGETS[_format(name)]
    limiter: Any = LeakyBucket(quota, window) if name == "shopify" else FixedWindow(quota, window)
    arrivals: list[list[float]] = []

    async def product(request: web.Request) -> web.Response:
        now = time.time()
        product_id = int(request.match_info["id"])
        allowed, headers = budget_headers(name, limiter, now)
        status = 429 if not allowed else 404 if missing(product_id) else 200
        arrivals.append([now, status, product_id])
        if status == 429:
            return web.json_response({"error": "Too many requests"}, status=429, headers=headers)
        if status == 404:
            return web.json_response({"error": "Not found"}, status=404, headers=headers)
        body = {"product_id": product_id, "name": f"{name} product {product_id}", "price": "12.50",
                "stock": product_id % 50, "category": "imitation", "brand": name, "rating": 4.0,
                "sales_count": 3}
        return web.json_response(body, headers=headers)

    async def get_arrivals(request: web.Request) -> web.Response:
        return web.json_response(arrivals)

    async def reset(request: web.Request) -> web.Response:
        arrivals.clear()
        limiter.reset()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get(r"/v1/product/{id:\d+}", product)
    app.router.add_get("/_arrivals", get_arrivals)
    app.router.add_post("/_reset", reset)
    return app


async def serve() -> None:
    urls = []
    for name in [*BUDGETS, *ODD_RESETS]:
        runner = web.AppRunner(build_app(name), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        urls.append(f"{name}=http://127.0.0.1:{port}")
    print(LISTENING, " ".join(urls), flush=True)
    await asyncio.Event().wait()


class BudgetServers:
    """The four imitations in a subprocess: ``with BudgetServers() as servers: servers.base_url("ietf")``."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.urls: dict[str, str] = {}

    def __enter__(self) -> BudgetServers:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.imitations.budgets"],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith(LISTENING):
            self.process.kill()
            raise RuntimeError(f"budget imitations did not start: {line!r}")
        self.urls = dict(part.split("=", 1) for part in line[len(LISTENING):].split())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def base_url(self, name: str) -> str:
        return f"{self.urls[name]}/v1"

    def _call(self, name: str, method: str, path: str) -> Any:
        request = urllib.request.Request(self.urls[name] + path, method=method,
                                         data=b"" if method == "POST" else None)
        with _OPENER.open(request, timeout=30) as answer:
            return json.load(answer)

    def arrivals(self, name: str) -> list[tuple[float, int, int]]:
        return [tuple(entry) for entry in self._call(name, "GET", "/_arrivals")]

    def reset(self, name: str) -> None:
        self._call(name, "POST", "/_reset")


if __name__ == "__main__":
    if re.fullmatch(r"-h|--help", " ".join(sys.argv[1:])):
        print(__doc__)
        sys.exit(0)
    asyncio.run(serve())
