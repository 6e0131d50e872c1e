"""What every imitation does alike: an arrival log, faults chosen by the test, JSON answers, a changing catalogue.

Shared by the imitations only (they share nothing with ``productcrawler``).
Each API's own module says what it answers, how it checks a credential, how
its list endpoint pages and filters, and what budget it enforces.

The catalogue is one dict (key -> product as the API shows it) behind both the
per-id endpoint and the list endpoint, so the two crawls of one imitation agree.
``mutate()`` changes it between passes: it reprices a share of the products,
removes some and adds some, and stamps each changed or added product with a
modification time later than any the catalogue held (the products start in
2024; a change is stamped with the wall clock, one second past the previous
change at least), in the API's own field and spelling.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

#: The arrival log's entry of the request being answered, for the handler to add to.
ARRIVAL = web.RequestKey("arrival", dict)

#: The products' first modification times: one minute apart from here, in catalogue order.
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def first_stamp(n: int) -> datetime:
    return EPOCH + timedelta(minutes=n)


class Refused(Exception):
    """A request the API answers with an error of its own (400, 422, ...): raised while reading it."""

    def __init__(self, answer: web.Response) -> None:
        super().__init__(answer.status)
        self.answer = answer


class Imitation:
    """One API: its catalogue, its check of a credential, the requests it got, its faults and its budget."""

    name = ""

    def __init__(self, size: int | None = None) -> None:
        self.arrivals: list[dict[str, Any]] = []
        self.size = size
        self.rebuild(size)
        self.reset()

    def rebuild(self, size: int | None = None) -> None:
        """The catalogue afresh: ``size`` products (None: the module's own default)."""
        self.size = size
        self.products: dict[Any, dict[str, Any]] = self.catalogue(size)
        self.modified = {key: self.modified_of(product) for key, product in self.products.items()}
        self.clock = max(self.modified.values(), default=EPOCH)
        self._order: list[Any] | None = None
        self.mutations = 0

    def reset(self) -> None:
        """Forget the arrivals and faults, and start the budget afresh (the catalogue stays as it is)."""
        self.arrivals.clear()
        #: key -> the fault: "once" (a 503, the first time), "always" (500 every time), "drop"
        #: (the connection closed without an answer, the first time). ``list#N`` is the Nth request
        #: to the list endpoint since the reset.
        self.faults: dict[str, str] = {}
        self.faulted: set[str] = set()
        self.listed = 0
        self.reset_budget()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    # The catalogue between passes.
    def ordered(self) -> list[Any]:
        """The keys in the list endpoint's own order (cached until the catalogue changes)."""
        if self._order is None:
            self._order = sorted(self.products)
        return self._order

    def stamp(self, key: Any, when: datetime) -> None:
        self.modified[key] = when
        self.set_modified(self.products[key], when)
        self._order = None

    def tick(self) -> datetime:
        """A modification time later than every one the catalogue holds, whole seconds."""
        now = datetime.now(UTC).replace(microsecond=0)
        self.clock = max(now, self.clock + timedelta(seconds=1))
        return self.clock

    def mutate(self, changed: float = 0.03, removed: int = 1, added: int = 1,
               seed: int | None = None) -> dict[str, Any]:
        """Reprice ``changed`` (a share) of the products, remove ``removed``, add ``added``.

        Returns the keys of each kind and the modification time they carry
        (``at``, the API's own spelling; ``at_utc``, ISO 8601 in UTC).
        """
        rng = random.Random(self.mutations if seed is None else seed)
        self.mutations += 1
        when = self.tick()
        keys = self.ordered()
        repriced = sorted(rng.sample(keys, round(len(keys) * changed))) if changed else []
        chosen = set(repriced)
        others = [key for key in keys if key not in chosen]
        gone = sorted(rng.sample(others, removed)) if removed else []
        for key in repriced:
            self.reprice(self.products[key], rng)
            self.stamp(key, when)
        for key in gone:
            del self.products[key]
            del self.modified[key]
        new = []
        for _ in range(added):
            key, product = self.new_product(rng, max(self.products, default=None), when)
            self.products[key] = product
            self.stamp(key, when)
            new.append(key)
        self._order = None
        return {"changed": repriced, "removed": gone, "added": new, "at": self.spell(when),
                "at_utc": when.isoformat()}

    def since(self, when: datetime, *, inclusive: bool) -> list[Any]:
        """The keys, in list order, modified after ``when`` (at it too, if ``inclusive``)."""
        return [key for key in self.ordered()
                if self.modified[key] > when or (inclusive and self.modified[key] == when)]

    # Serving.
    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        arrival = {"method": request.method, "path": path, "query": query,
                   "headers": [[name, value] for name, value in request.headers.items()], "time": time.time()}
        # aiohttp keeps the body it read, so the handler reads it again.
        arrival["body"] = (await request.read()).decode(errors="replace") if request.can_read_body else ""
        self.arrivals.append(arrival)
        request[ARRIVAL] = arrival
        response = await handler(request)
        arrival["status"] = response.status
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        if self.is_listing(request):
            self.listed += 1
            key = f"list#{self.listed}"
        else:
            asked = self.product_key(request)
            if asked is None:
                return self.not_found(request, "")
            key = asked
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
        if key.startswith("list#"):
            over, headers = self.spend(time.time())
            if over is not None:
                return over
            try:
                answer = self.listing(request)
            except Refused as refusal:
                answer = refusal.answer
            answer.headers.update(headers)
            return answer
        product = self.product(key, request)
        return self.not_found(request, key) if product is None else json_answer(product)

    # Each API's own.
    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        raise NotImplementedError

    def modified_of(self, product: dict[str, Any]) -> datetime:
        """The product's modification time, read from its own field."""
        raise NotImplementedError

    def spell(self, when: datetime) -> str:
        """A modification time as the API writes it."""
        raise NotImplementedError

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        raise NotImplementedError

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        raise NotImplementedError

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        """A product added after ``last`` (the greatest key), created at ``when``."""
        raise NotImplementedError

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

    def is_listing(self, request: web.Request) -> bool:
        """Whether the request's path is the list endpoint's."""
        raise NotImplementedError

    def listing(self, request: web.Request) -> web.Response:
        """One page of the list endpoint (raises ``Refused`` for a request the API rejects)."""
        raise NotImplementedError

    def reset_budget(self) -> None:
        """Start the budget afresh (no budget: nothing to do)."""

    def spend(self, now: float) -> tuple[web.Response | None, dict[str, str]]:
        """Count a list request against the budget: (the refusal when over it, the budget's headers)."""
        return None, {}


def json_answer(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers,
                        content_type="application/json")


def whole(request: web.Request, name: str, default: int, low: int, high: int | None,
          refusal: Any) -> int:
    """The integer query parameter ``name`` in [low, high]; ``refusal(message)`` answers a bad one."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Refused(refusal(name, f"{name} is not of type integer.")) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} (inclusive) and {high} (inclusive)" if high is not None else f"at least {low}"
        raise Refused(refusal(name, f"{name} must be {bound}."))
    return value


def parse_time(raw: str, zone: Any = UTC) -> datetime | None:
    """An ISO 8601 date or date-time (``Z`` or an offset; none: ``zone``), or None if it is not one."""
    try:
        when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=zone)
