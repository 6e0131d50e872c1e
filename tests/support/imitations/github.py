"""A product listing served the way GitHub's REST API serves its lists, and refused the way GitHub refuses.

Written from docs.github.com: "Rate limits for the REST API", "Troubleshooting
the REST API", "Using pagination in the REST API". Not GitHub's own resources:
``GET /products?per_page=N&page=P`` (``per_page`` 30 by default, at most 100
— more is taken as 100, as GitHub does; a page past the end is ``[]``) and
``GET /products/{id}``, with GitHub's ``Link`` header (``rel="prev"``,
``"next"``, ``"last"``, ``"first"``; no ``next`` on the last page) and
``since`` (ISO 8601: the products updated at or after it).

Credentials: ``Authorization: Bearer <token>`` (or ``token <token>``).
``TOKEN`` reads; ``FORBIDDEN_TOKEN`` is a valid token that may not read the
products: a plain 403 ``{"message": "Resource not accessible by integration"}``
whose ``x-ratelimit-remaining`` is not 0 (it counts against the budget, as
GitHub counts it). A missing or unknown token is a 401 (``Requires
authentication``, ``Bad credentials``) carrying the unauthenticated budget's
headers (60 an hour).

The primary rate limit: ``limit`` requests (5,000) per ``window`` seconds
(3,600), a window opening at the first request after the last one closed.
Every answer to a valid token carries ``x-ratelimit-limit``,
``x-ratelimit-remaining``, ``x-ratelimit-used``, ``x-ratelimit-reset`` (the
window's end, UTC epoch seconds; the window ends then exactly) and
``x-ratelimit-resource: core``. With nothing remaining, every request is a
``exceeded_status`` (403; GitHub answers 403 or 429) with
``x-ratelimit-remaining: 0`` and ``{"message": "API rate limit exceeded for
user ID 1.", "documentation_url": ...}`` until the reset. The arrival log
records each counted request's reset (``reset``).
"""

from __future__ import annotations

import math
import random
import re
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web

from tests.support.imitations._base import ARRIVAL, Imitation, Refused, first_stamp, json_answer, parse_time

TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
FORBIDDEN_TOKEN = "ghp_0000ReadsNothing0000000000000000000000"
LIST_PATH = "/products"
PATH = re.compile(r"/products/([0-9]+)")
SIZE = 120
DOCUMENTATION = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
#: The budget of requests without a valid token, per window.
UNAUTHENTICATED = 60


def spell(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def item(rng: random.Random, product_id: int, when: datetime) -> dict[str, Any]:
    return {"id": product_id, "name": f"Octocat figurine {product_id}", "price": rng.randint(500, 9999) / 100,
            "created_at": spell(when), "updated_at": spell(when)}


class Window:
    """GitHub's primary rate limit: ``limit`` requests per window of ``seconds``, from its first request."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit, self.seconds = limit, seconds
        self.reset()

    def reset(self) -> None:
        self.used, self.resets_at = 0, 0

    def hit(self, now: float) -> tuple[bool, dict[str, str]]:
        """Count a request: (allowed, the x-ratelimit headers)."""
        if now >= self.resets_at:
            self.used, self.resets_at = 0, math.ceil(now + self.seconds)
        allowed = self.used < self.limit
        if allowed:
            self.used += 1
        return allowed, {"x-ratelimit-limit": str(self.limit), "x-ratelimit-remaining": str(self.limit - self.used),
                         "x-ratelimit-used": str(self.used), "x-ratelimit-reset": str(self.resets_at),
                         "x-ratelimit-resource": "core"}


def message(text: str, status: int, headers: dict[str, str], url: str = "https://docs.github.com/rest") -> web.Response:
    return json_answer({"message": text, "documentation_url": url, "status": str(status)}, status, headers)


class GitHub(Imitation):
    name = "github"

    def __init__(self, size: int | None = None, limit: int = 5000, window: float = 3600.0,
                 exceeded_status: int = 403) -> None:
        self.window = Window(limit, window)
        self.anonymous = Window(UNAUTHENTICATED, window)
        self.exceeded_status = exceeded_status
        super().__init__(size)

    # The catalogue.
    def catalogue(self, size: int | None) -> dict[Any, dict[str, Any]]:
        rng = random.Random("github")
        return {n: item(rng, n, first_stamp(n)) for n in range(1, (SIZE if size is None else size) + 1)}

    def modified_of(self, product: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(product["updated_at"])

    def spell(self, when: datetime) -> str:
        return spell(when)

    def set_modified(self, product: dict[str, Any], when: datetime) -> None:
        product["updated_at"] = spell(when)

    def reprice(self, product: dict[str, Any], rng: random.Random) -> None:
        product["price"] = rng.randint(500, 9999) / 100

    def new_product(self, rng: random.Random, last: Any, when: datetime) -> tuple[Any, dict[str, Any]]:
        product_id = (last or 0) + 1
        return product_id, item(rng, product_id, when)

    # Serving.
    async def _answer(self, request: web.Request) -> web.StreamResponse:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        allowed, headers = self.window.hit(time.time())
        request[ARRIVAL]["reset"] = self.window.resets_at  # what x-ratelimit-reset said, for the tests
        if not allowed:
            return message("API rate limit exceeded for user ID 1.", self.exceeded_status, headers, DOCUMENTATION)
        if self.token(request) == FORBIDDEN_TOKEN:
            return message("Resource not accessible by integration", 403, headers)
        answer = await super()._answer(request)
        answer.headers.update(headers)
        return answer

    @staticmethod
    def token(request: web.Request) -> str | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return token.strip() if scheme.lower() in ("bearer", "token") else None

    def refuse(self, request: web.Request) -> web.StreamResponse | None:
        token = self.token(request)
        if token in (TOKEN, FORBIDDEN_TOKEN):
            return None
        _, headers = self.anonymous.hit(time.time())
        return message("Requires authentication" if token is None else "Bad credentials", 401, headers)

    def product_key(self, request: web.Request) -> str | None:
        found = PATH.fullmatch(request.raw_path.partition("?")[0])
        return found[1] if found else None

    def product(self, key: str, request: web.Request) -> dict[str, Any] | None:
        return self.products.get(int(key))

    def not_found(self, request: web.Request, key: str) -> web.StreamResponse:
        return message("Not Found", 404, {})

    def is_listing(self, request: web.Request) -> bool:
        return request.raw_path.partition("?")[0] == LIST_PATH

    def listing(self, request: web.Request) -> web.Response:
        per_page, page = self.number(request, "per_page", 30), self.number(request, "page", 1)
        per_page = min(max(per_page, 1), 100)
        page = max(page, 1)
        keys = self.ordered()
        since = request.query.get("since")
        if since is not None:
            when = parse_time(since)
            if when is None:
                raise Refused(message("Validation Failed", 422, {}))
            keys = self.since(when, inclusive=True)
        last = max(1, math.ceil(len(keys) / per_page))
        chosen = keys[(page - 1) * per_page:page * per_page]
        links = []
        if page > 1:
            links.append(self.link(request, per_page, page - 1, "prev"))
        if page < last:
            links += [self.link(request, per_page, page + 1, "next"), self.link(request, per_page, last, "last")]
        if page > 1:
            links.append(self.link(request, per_page, 1, "first"))
        return json_answer([self.products[key] for key in chosen],
                           headers={"Link": ", ".join(links)} if links else None)

    @staticmethod
    def number(request: web.Request, name: str, default: int) -> int:
        raw = request.query.get(name, "")
        return int(raw) if raw.isdigit() else default

    @staticmethod
    def link(request: web.Request, per_page: int, page: int, rel: str) -> str:
        since = request.query.get("since")
        also = f"&since={quote(since, safe='')}" if since else ""
        return f'<{request.scheme}://{request.host}{LIST_PATH}?per_page={per_page}{also}&page={page}>; rel="{rel}"'
