"""The simulator's aiohttp application: products, fault modes, a rate limit and an arrival record.

Routes::

    GET  /v1/product/{id}   the product (200, in the configured shape), 404 for missing ids,
                            400 for invalid ones, 401 without the configured API key
    GET  /_sim/arrivals     {"arrivals": [[time, id, status, fault], ...]}, optional ?since=<time>
    GET  /_sim/stats        {"total": n, "by_status": {...}, "by_fault": {...}}
    POST /_sim/reset        forget arrivals, attempt counts and the rate-limit window
    POST /_sim/faults       replace the fault configuration, see Simulator.handle_faults
    GET  anything else      404, recorded in the arrivals with no id
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import logging
import math
import signal
import ssl
import time
import zlib
from array import array
from collections import Counter, deque
from email.utils import formatdate
from typing import Any

import brotli
from aiohttp import web

from . import catalog
from .faults import MODES, PRODUCT_VARIANT_MODES, FaultConfig, FaultPlan
from .process import LISTENING
from .shapes import shaped

logger = logging.getLogger(__name__)

RATE_LIMITED = "rate_limited"
UNAUTHORIZED = "unauthorized"  # no or wrong API key (--api-key)
REVOKED = "revoked"  # the key was revoked (--revoke-after)
HANG_SECONDS = 600.0
NO_RESPONSE = 0  # the status recorded for `hang`, reported as None

_FAULT_NAMES = ("", RATE_LIMITED, UNAUTHORIZED, REVOKED, *sorted(MODES))
_FAULT_CODES = {name: code for code, name in enumerate(_FAULT_NAMES)}
_ERROR_MESSAGES = {
    400: "bad request", 401: "invalid API key", 403: "forbidden", 404: "product not found", 429: "too many requests",
    500: "internal server error", 502: "bad gateway", 503: "service unavailable",
}
#: The compressed modes: each coding's encoder, from the standard library or Google's brotli.
_ENCODERS = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}
#: What ``gzipbomb`` inflates to: 10 MB of a JSON string, about 10 KB on the wire.
_BOMB_SIZE = 10_000_000
_NESTED_BODY = b"[" * 100_000 + b"]" * 100_000
_BAD_UTF8_MARK = "\u2063BADUTF8\u2063"
_MAINTENANCE_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>系统维护中</title></head>
<body><h1>系统维护中 / Service under maintenance</h1>
<p>网关正在升级，请稍后再试。The gateway is being upgraded, please try again later.</p>
</body></html>
""".encode()


#: The options of POST /_sim/faults besides the fault list (FaultConfig.build's keywords).
_OPTIONS = ("retry_after", "slow_delay", "rate_limit", "shape", "api_key", "revoke_after")


@functools.cache
def _gzip_bomb() -> bytes:
    return gzip.compress(b'"' + b"0" * (_BOMB_SIZE - 2) + b'"')


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _json(status: int, body: bytes, retry_after: str | None = None) -> web.Response:
    headers = None if retry_after is None else {"Retry-After": retry_after}
    return web.Response(body=body, status=status, headers=headers,
                        content_type="application/json", charset="utf-8")


def _error(status: int, message: str | None = None, retry_after: str | None = None) -> web.Response:
    return _json(status, _dumps({"error": message or _ERROR_MESSAGES[status]}), retry_after)


def _parse_id(text: str) -> int | None:
    if not (text.isascii() and text.isdigit() and len(text) <= 19):
        return None
    product_id = int(text)
    return product_id if 1 <= product_id <= catalog.MAX_PRODUCT_ID else None


class ArrivalLog:
    """Every product request, in parallel arrays (about 19 bytes per request)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._times = array("d")
        self._ids = array("q")  # 0: no valid id
        self._statuses = array("H")
        self._faults = array("B")  # index into _FAULT_NAMES

    def append(self, arrived: float, product_id: int | None, status: int, fault: str) -> None:
        self._times.append(arrived)
        self._ids.append(product_id or 0)
        self._statuses.append(status)
        self._faults.append(_FAULT_CODES[fault])

    def records(self, since: float | None = None) -> list[list[Any]]:
        """``[time, id or None, status or None, fault]`` for arrivals at or after ``since``."""
        return [[arrived, product_id or None, status or None, _FAULT_NAMES[fault]]
                for arrived, product_id, status, fault
                in zip(self._times, self._ids, self._statuses, self._faults)
                if since is None or arrived >= since]

    def stats(self) -> dict[str, Any]:
        statuses = Counter(self._statuses)
        faults = Counter(self._faults)
        return {
            "total": len(self._times),
            "by_status": {str(status) if status else "none": count
                          for status, count in sorted(statuses.items())},
            "by_fault": {_FAULT_NAMES[fault]: count for fault, count in sorted(faults.items()) if fault},
        }


class SlidingWindow:
    """Admits a request unless more than ``limit`` requests arrived in the last second."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._arrivals: deque[float] = deque()

    def admit(self, now: float) -> bool:
        arrivals = self._arrivals
        cutoff = now - 1.0
        while arrivals and arrivals[0] <= cutoff:
            arrivals.popleft()
        arrivals.append(now)
        return len(arrivals) <= self.limit


class Simulator:
    """State of one simulated API: the fault plan, the rate-limit window, the arrival log."""

    def __init__(self, config: FaultConfig, *, catalog_version: int | None = None) -> None:
        self.startup_config = config
        self.catalog_version = catalog_version
        self.arrivals = ArrivalLog()
        self._configure(config)

    def _configure(self, config: FaultConfig) -> None:
        self.plan = FaultPlan(config)
        self.window = None if config.rate_limit is None else SlidingWindow(config.rate_limit)
        self._authorization = None if config.api_key is None else f"Bearer {config.api_key}"
        self._answered = 0  # product requests since the configuration, for revoke_after

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/product/{product_id}", self.handle_product)
        app.router.add_get("/_sim/arrivals", self.handle_arrivals)
        app.router.add_get("/_sim/stats", self.handle_stats)
        app.router.add_post("/_sim/reset", self.handle_reset)
        app.router.add_post("/_sim/faults", self.handle_faults)
        # Any other path (a crawler with a wrong API_BASE_URL): a 404, recorded with no id.
        app.router.add_get("/{path:.*}", self.handle_unknown)
        return app

    async def handle_unknown(self, request: web.Request) -> web.Response:
        self.arrivals.append(time.time(), None, 404, "")
        return _error(404, "no such route")

    async def handle_product(self, request: web.Request) -> web.Response:
        arrived = time.time()
        product_id = _parse_id(request.match_info["product_id"])
        fault = ""
        config = self.plan.config
        self._answered += 1
        if config.revoke_after is not None and self._answered > config.revoke_after:
            fault = REVOKED
            response = _error(401, "API key revoked")
        elif (self._authorization is not None
              and request.headers.get("Authorization") != self._authorization):
            fault = UNAUTHORIZED
            response = _error(401)
        elif self.window is not None and not self.window.admit(arrived):
            fault = RATE_LIMITED
            response = _error(429, retry_after="1")
        elif product_id is None:
            response = _error(400, "invalid product id")
        else:
            fault = self.plan.decide(product_id)
            version = int(arrived // 3600) if self.catalog_version is None else self.catalog_version
            response = self._answer(fault, product_id, version, arrived)
        self.arrivals.append(arrived, product_id, NO_RESPONSE if fault == "hang" else response.status, fault)
        if fault == "slow":
            await asyncio.sleep(self.plan.config.slow_delay)
        elif fault == "hang":
            await asyncio.sleep(HANG_SECONDS)
        return response

    def _answer(self, fault: str, product_id: int, version: int, now: float) -> web.Response:
        config = self.plan.config
        shape = config.shape
        if fault in ("", "slow", "hang"):
            if catalog.is_missing(product_id):
                return _error(404)
            return _json(200, _dumps(shaped(catalog.product(product_id, version), shape)))
        if fault in PRODUCT_VARIANT_MODES:
            return _json(200, _dumps(shaped(catalog.variant(fault, product_id, version), shape)))
        if fault in ("429s", "503ra"):
            return _error(int(fault[:3]), retry_after=str(config.retry_after))
        if fault == "429date":
            return _error(429, retry_after=formatdate(math.ceil(now + config.retry_after), usegmt=True))
        if fault in ("400", "403", "500", "502", "503"):
            return _error(int(fault))
        if fault == "truncated":
            body = _dumps(shaped(catalog.product(product_id, version), shape))
            return _json(200, body[:len(body) // 2])
        if fault == "html":
            return web.Response(body=_MAINTENANCE_PAGE, content_type="text/html", charset="utf-8")
        if fault == "notproduct":
            return _json(200, b'{"status":"ok","data":null}')
        if fault == "error200":  # an API that reports errors in a 200 envelope
            return _json(200, b'{"code":40004,"msg":"product offline","data":null}')
        if fault == "nested":
            return _json(200, _NESTED_BODY)
        if fault in _ENCODERS:  # whether the request asked for it or not, as some APIs do
            response = _json(200, _ENCODERS[fault](_dumps(shaped(catalog.product(product_id, version), shape))))
            response.headers["Content-Encoding"] = fault
            return response
        if fault == "gzipbomb":
            response = _json(200, _gzip_bomb())
            response.headers["Content-Encoding"] = "gzip"
            return response
        if fault == "badutf8":
            item = catalog.product(product_id, version)
            item["name"] = item["name"].replace(" ", f" {_BAD_UTF8_MARK}", 1)
            return _json(200, _dumps(shaped(item, shape)).replace(_BAD_UTF8_MARK.encode(), b"\xff\xfe\xc3", 1))
        raise AssertionError(f"unhandled fault mode {fault!r}")

    async def handle_arrivals(self, request: web.Request) -> web.Response:
        since_text = request.query.get("since")
        try:
            since = None if since_text is None else float(since_text)
        except ValueError:
            return _error(400, f"since={since_text!r} is not a number")
        return _json(200, _dumps({"arrivals": self.arrivals.records(since)}))

    async def handle_stats(self, request: web.Request) -> web.Response:
        return _json(200, _dumps(self.arrivals.stats()))

    async def handle_reset(self, request: web.Request) -> web.Response:
        self.arrivals.clear()
        self._configure(self.plan.config)
        return _json(200, b'{"status":"ok"}')

    async def handle_faults(self, request: web.Request) -> web.Response:
        """Replace the fault configuration and forget attempt counts.

        Body: ``{"faults": [...], "retry_after": S, "slow_delay": S, "rate_limit": R or null,
        "shape": NAME, "api_key": KEY or null, "revoke_after": N or null}``; an option left
        out takes the value the server was started with.
        """
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            unknown = set(body) - {"faults", *_OPTIONS}
            if unknown:
                raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))}")
            startup = self.startup_config
            config = FaultConfig.build(
                body.get("faults", []),
                **{name: body.get(name, getattr(startup, name)) for name in _OPTIONS},
            )
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return _error(400, str(exc))
        self._configure(config)
        logger.info("Fault configuration replaced: %d rule(s), retry_after=%s, slow_delay=%s, rate_limit=%s, "
                    "shape=%s, api_key=%s, revoke_after=%s", len(config.rules), config.retry_after,
                    config.slow_delay, config.rate_limit, config.shape,
                    "set" if config.api_key else "none", config.revoke_after)
        return _json(200, b'{"status":"ok"}')


async def serve(simulator: Simulator, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
    """Listen on ``host:port`` (0: any free port; https with ``tls``), announce it on stdout, run until
    SIGTERM/SIGINT."""
    runner = web.AppRunner(simulator.make_app(), access_log=None, handler_cancellation=True,
                           shutdown_timeout=0.25)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, backlog=1024, ssl_context=tls).start()
        bound_port = runner.addresses[0][1]
        url_host = f"[{host}]" if ":" in host else host
        scheme = "http" if tls is None else "https"
        print(f"{LISTENING} {scheme}://{url_host}:{bound_port}", flush=True)
        config = simulator.startup_config
        logger.info("Simulator on %s://%s:%d: catalog version %s, shape %s, %d fault rule(s), "
                    "rate limit %s", scheme, url_host, bound_port,
                    "current hour" if simulator.catalog_version is None else simulator.catalog_version,
                    config.shape, len(config.rules), config.rate_limit)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        logger.info("Simulator stopping")
    finally:
        await runner.cleanup()
