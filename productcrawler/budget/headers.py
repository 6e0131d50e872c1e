"""The budget an API announces in its response headers, read into one observation.

Four formats, by the names ``RATE_LIMIT_HEADERS`` takes:

``x-ratelimit``
    express-rate-limit and many Node APIs: ``X-RateLimit-Limit`` (the quota),
    ``X-RateLimit-Remaining``, ``X-RateLimit-Reset``. The reset is Unix epoch
    seconds on some servers, epoch milliseconds or delta seconds on others
    under the same name: they are told apart by magnitude
    (:func:`~.bounds.reset_seconds`).
``ietf``
    draft-ietf-httpapi-ratelimit-headers: ``RateLimit-Policy: "p";q=100;w=60``
    and ``RateLimit: "p";r=50;t=30`` (RFC 8941 structured fields, parsed by
    ``http_sf``); or the older split ``RateLimit-Limit`` / ``RateLimit-Remaining``
    / ``RateLimit-Reset`` (delta seconds).
``bigcommerce``
    ``X-Rate-Limit-Requests-Quota``, ``X-Rate-Limit-Requests-Left``,
    ``X-Rate-Limit-Time-Window-Ms``, ``X-Rate-Limit-Time-Reset-Ms``.
``shopify``
    a leaky bucket, ``X-Shopify-Shop-Api-Call-Limit: used/size``; the leak
    rate is not announced (:mod:`.reader` measures it).

Whole seconds are what servers send for resets, rounded up (express-rate-limit
takes the ceiling), so a reset read from them is an upper bound, coarse by its
``resolution``. A format whose headers are present but unreadable (not
numbers, a negative count, a part missing) is ignored for that answer and
logged once per format.

No header may make the crawl wait longer than ``RATE_LIMIT_HEADERS_MAX_WAIT``
(:mod:`.bounds`).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import http_sf

from productcrawler.budget.bounds import BudgetBounds, reset_seconds
from productcrawler.config.parsers import RATE_LIMIT_HEADER_FORMATS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

#: Tried in this order by ``auto``: the standard first, the vendor formats after.
FORMATS = IETF, X_RATELIMIT, BIGCOMMERCE, SHOPIFY = RATE_LIMIT_HEADER_FORMATS
_INTEGER = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SHOPIFY = re.compile(r"([0-9]+)\s*/\s*([0-9]+)")


class Malformed(ValueError):
    """A format's headers are there but cannot be read."""


@dataclass(frozen=True)
class WindowBudget:
    """A fixed window: ``remaining`` requests until the reset, ``reset_after`` seconds from the answer."""

    format: str
    remaining: int
    reset_after: float
    resolution: float  # the reset may be up to this much earlier than reset_after
    quota: int | None = None
    window: float | None = None
    epoch: bool = False  # the reset came as a Unix time
    #: The headers the reset and the window were read from, as ``Name: value`` (what a warning quotes).
    reset_header: str = field(default="", compare=False)
    window_header: str = field(default="", compare=False)
    clamped: bool = False  # the reset was beyond RATE_LIMIT_HEADERS_MAX_WAIT: it is that bound


@dataclass(frozen=True)
class LeakyBudget:
    """A leaky bucket filled to ``level`` of ``size``, in the API's units (requests, or a GraphQL API's points)."""

    format: str
    level: int
    size: int
    #: Units that leak each second, when the API says (GraphQL's ``restoreRate``); None: measured from the answers.
    leak: float | None = None
    #: Units one request takes (a GraphQL query's ``requestedQueryCost``).
    cost: int = 1


Budget = WindowBudget | LeakyBudget


class Headers(Protocol):
    def get(self, key: str) -> Any: ...


def _text(headers: Headers, name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return text.strip(" \t")


def _count(name: str, text: str | None) -> int:
    if text is None or not _INTEGER.fullmatch(text):
        raise Malformed(f"{name}: {text!r} is not a whole number")
    return int(text)


def _seconds(name: str, text: str | None) -> tuple[float, float]:
    """A number of seconds and its resolution (1 for whole seconds, else 0.001)."""
    if text is None or not _NUMBER.fullmatch(text):
        raise Malformed(f"{name}: {text!r} is not a number of seconds")
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"{name}: {text!r} is not a number of seconds")
    return value, (1.0 if "." not in text else 0.001)


def _reset(name: str, text: str | None, wall_now: float) -> tuple[float, float, bool]:
    return reset_seconds(*_seconds(name, text), wall_now)


def _x_ratelimit(headers: Headers, wall_now: float) -> WindowBudget | None:
    remaining = _text(headers, "X-RateLimit-Remaining")
    if remaining is None:
        return None
    limit = _text(headers, "X-RateLimit-Limit")
    text = _text(headers, "X-RateLimit-Reset")
    reset, resolution, epoch = _reset("X-RateLimit-Reset", text, wall_now)
    return WindowBudget(X_RATELIMIT, _count("X-RateLimit-Remaining", remaining), reset, resolution,
                        quota=None if limit is None else _count("X-RateLimit-Limit", limit), epoch=epoch,
                        reset_header=f"X-RateLimit-Reset: {text}")


def _sf_list(name: str, text: str) -> list[tuple[Any, dict[str, Any]]]:
    try:
        # parse() is typed as any structure; a "list" is (member, parameters) pairs.
        parsed = cast("list[tuple[Any, dict[str, Any]]]", http_sf.parse(text.encode("latin-1"), tltype="list"))
    except http_sf.StructuredFieldError as error:
        raise Malformed(f"{name}: {text!r}: {error}") from None
    return [(value, params) for value, params in parsed if not isinstance(value, list)]


def _sf_optional_integer(name: str, params: dict[str, Any], key: str) -> int | None:
    return None if params.get(key) is None else _sf_integer(name, params, key)


def _sf_integer(name: str, params: dict[str, Any], key: str) -> int:
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"{name}: {key}={value!r} is not a non-negative integer")
    return value


def _ietf(headers: Headers, wall_now: float) -> WindowBudget | None:
    current = _text(headers, "RateLimit")
    if current is None:
        return _ietf_split(headers, wall_now)
    policies = {}
    policy_text = _text(headers, "RateLimit-Policy")
    if policy_text is not None:
        for name, params in _sf_list("RateLimit-Policy", policy_text):
            policies[name] = (_sf_integer("RateLimit-Policy", params, "q"),
                              _sf_optional_integer("RateLimit-Policy", params, "w"))
    budgets = []
    for name, params in _sf_list("RateLimit", current):
        remaining = _sf_integer("RateLimit", params, "r")
        # t is delta seconds by the draft; an epoch sent there is told apart as X-RateLimit-Reset's is.
        reset, resolution, epoch = reset_seconds(float(_sf_integer("RateLimit", params, "t")), 1.0, wall_now)
        quota, window = policies.get(name, (None, None))
        budgets.append(WindowBudget(IETF, remaining, reset, resolution, quota=quota,
                                    window=None if window is None else float(window), epoch=epoch,
                                    reset_header=f"RateLimit: {current}",
                                    window_header=f"RateLimit-Policy: {policy_text}"))
    if not budgets:
        raise Malformed(f"RateLimit: {current!r} names no policy")
    # Several policies (per second, per hour): the one that allows the fewest per second binds.
    return min(budgets, key=lambda budget: budget.remaining / max(budget.reset_after, 1.0))


def _ietf_split(headers: Headers, wall_now: float) -> WindowBudget | None:
    remaining = _text(headers, "RateLimit-Remaining")
    if remaining is None:
        return None
    text = _text(headers, "RateLimit-Reset")
    reset, resolution, epoch = _reset("RateLimit-Reset", text, wall_now)
    quota = window = None
    limit = _text(headers, "RateLimit-Limit")
    if limit is not None:
        # "100" or, in some drafts, "100, 100;w=60": the first member, its window if given.
        members = _sf_list("RateLimit-Limit", limit)
        if not members or isinstance(members[0][0], bool) or not isinstance(members[0][0], int):
            raise Malformed(f"RateLimit-Limit: {limit!r} is not a quota")
        quota = members[0][0]
        windows = [_sf_optional_integer("RateLimit-Limit", params, "w") for _value, params in members]
        window = next((float(w) for w in windows if w is not None), None)
    return WindowBudget(IETF, _count("RateLimit-Remaining", remaining), reset, resolution,
                        quota=quota, window=window, epoch=epoch, reset_header=f"RateLimit-Reset: {text}",
                        window_header=f"RateLimit-Limit: {limit}")


def _bigcommerce(headers: Headers, wall_now: float) -> WindowBudget | None:
    left = _text(headers, "X-Rate-Limit-Requests-Left")
    if left is None:
        return None
    quota = _count("X-Rate-Limit-Requests-Quota", _text(headers, "X-Rate-Limit-Requests-Quota"))
    window = _count("X-Rate-Limit-Time-Window-Ms", _text(headers, "X-Rate-Limit-Time-Window-Ms"))
    reset = _count("X-Rate-Limit-Time-Reset-Ms", _text(headers, "X-Rate-Limit-Time-Reset-Ms"))
    return WindowBudget(BIGCOMMERCE, _count("X-Rate-Limit-Requests-Left", left), reset / 1000.0, 0.001,
                        quota=quota, window=window / 1000.0 if window > 0 else None,
                        reset_header=f"X-Rate-Limit-Time-Reset-Ms: {reset}",
                        window_header=f"X-Rate-Limit-Time-Window-Ms: {window}")


def _shopify(headers: Headers, wall_now: float) -> LeakyBudget | None:
    text = _text(headers, "X-Shopify-Shop-Api-Call-Limit")
    if text is None:
        return None
    match = _SHOPIFY.fullmatch(text)
    if match is None or int(match.group(2)) == 0:
        raise Malformed(f"X-Shopify-Shop-Api-Call-Limit: {text!r} is not used/size")
    return LeakyBudget(SHOPIFY, int(match.group(1)), int(match.group(2)))


_PARSERS: dict[str, Callable[[Headers, float], Budget | None]] = {
    X_RATELIMIT: _x_ratelimit, IETF: _ietf, BIGCOMMERCE: _bigcommerce, SHOPIFY: _shopify,
}


class BudgetHeaders:
    """Reads the enabled formats from an answer's headers, within ``max_wait``; logs each format's first
    malformed answer and each header's first value beyond ``max_wait``."""

    def __init__(self, formats: Iterable[str], max_wait: float = math.inf) -> None:
        self.formats: tuple[str, ...] = tuple(name for name in FORMATS if name in set(formats))
        self.bounds = BudgetBounds(max_wait)
        self.malformed: int = 0
        self._logged: set[str] = set()

    @property
    def clamped(self) -> int:
        """Answers with a reset or a window beyond ``max_wait``."""
        return self.bounds.clamped

    def parse(self, headers: Headers, wall_now: float) -> Budget | None:
        """The first enabled format found in ``headers``; None when there is none (or none readable)."""
        for name in self.formats:
            try:
                budget = _PARSERS[name](headers, wall_now)
            except Malformed as error:
                self.malformed += 1
                if name not in self._logged:
                    self._logged.add(name)
                    logger.warning("Rate limit: ignoring malformed %s budget headers (%s) (no more "
                                   "of these messages will be shown for this format)", name, error)
                continue
            if budget is not None:
                return self.bounds.bounded(budget) if isinstance(budget, WindowBudget) else budget
        return None
