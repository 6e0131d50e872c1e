"""What every imitation does alike: an arrival log, faults chosen by the test, JSON answers.

Shared by the imitations only (they share nothing with ``productcrawler``).
Each API's own module says what it answers and how it checks a credential.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web


class Imitation:
    """One API: its catalogue, its check of a credential, the requests it got and its faults."""

    name = ""

    def __init__(self) -> None:
        self.arrivals: list[dict[str, Any]] = []
        self.reset()

    def reset(self) -> None:
        self.arrivals.clear()
        #: key -> the fault: "once" (a 503, the first time), "always" (500 every time), "drop"
        #: (the connection closed without an answer, the first time).
        self.faults: dict[str, str] = {}
        self.faulted: set[str] = set()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        arrival = {"method": request.method, "path": path, "query": query,
                   "headers": [[name, value] for name, value in request.headers.items()], "time": time.time()}
        self.arrivals.append(arrival)
        response = await handler(request)
        arrival["status"] = response.status
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        key = self.product_key(request)
        if key is None:
            return self.not_found(request, "")
        fault = self.faults.get(key)
        if fault == "always":
            return json_answer({"error": "internal error"}, 500)
        if fault in ("once", "drop") and key not in self.faulted:
            self.faulted.add(key)
            if fault == "drop":
                assert request.transport is not None
                request.transport.close()
                await asyncio.sleep(0)
            return json_answer({"error": "service unavailable"}, 503)
        product = self.product(key, request)
        return self.not_found(request, key) if product is None else json_answer(product)

    # Each API's own.
    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        """A 401/403 for a wrong or missing credential, else None."""
        raise NotImplementedError

    def product_key(self, request: web.Request) -> str | None:
        """The product's id (or SKU) in the request's path, decoded; None for any other path."""
        raise NotImplementedError

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        raise NotImplementedError

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        raise NotImplementedError


def json_answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers,
                        content_type="application/json")
