"""The budget an API announces in its response headers, read into one observation.

Four formats, by the names ``RATE_LIMIT_HEADERS`` takes:

``x-ratelimit``
    express-rate-limit and many Node APIs: ``X-RateLimit-Limit`` (the quota),
    ``X-RateLimit-Remaining``, ``X-RateLimit-Reset``. The reset is Unix epoch
    seconds on some servers, epoch milliseconds or delta seconds on others
    under the same name: they are told apart by magnitude (:func:`reset_seconds`).
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
    rate is not announced (:mod:`.budget_reader` measures it).

Whole seconds are what servers send for resets, rounded up (express-rate-limit
takes the ceiling), so a reset read from them is an upper bound, coarse by its
``resolution``. A format whose headers are present but unreadable (not
numbers, a negative count, a part missing) is ignored for that answer and
logged once per format.

No header may make the crawl wait longer than ``RATE_LIMIT_HEADERS_MAX_WAIT``:
a reset or a window beyond it is clamped to it (logged once per header, with
its value), and a clamped reset says nothing of the window's length.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import http_sf

from productcrawler.config.defaults import RATE_LIMIT_HEADER_FORMATS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

#: Tried in this order by ``auto``: the standard first, the vendor formats after.
FORMATS = IETF, X_RATELIMIT, BIGCOMMERCE, SHOPIFY = RATE_LIMIT_HEADER_FORMATS
#: A reset of at least this is a Unix time in seconds, not a delay: 2001-09-09 as a date, 31.7 years as a
#: delay (today's epoch seconds, about 1.8e9, are above it; no API's window is that long).
EPOCH_SECONDS_FROM = 1e9
#: A reset of at least this is a Unix time in milliseconds: 1973 in milliseconds, the year 5138 in
#: seconds (today's epoch milliseconds, about 1.8e12, are well above it; today's seconds well below).
EPOCH_MILLISECONDS_FROM = 1e11
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
    """A leaky bucket filled to ``level`` of ``size``."""

    format: str
    level: int
    size: int


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


def reset_seconds(value: float, resolution: float, wall_now: float) -> tuple[float, float, bool]:
    """A reset as seconds from now, its resolution and whether it was a Unix time.

    Told apart by magnitude: below ``EPOCH_SECONDS_FROM``, delta seconds; below
    ``EPOCH_MILLISECONDS_FROM``, epoch seconds; from it, epoch milliseconds. An
    epoch in the past (the two clocks disagree) is a reset now.
    """
    if value >= EPOCH_MILLISECONDS_FROM:
        return max(0.0, value / 1000.0 - wall_now), resolution / 1000.0, True
    if value >= EPOCH_SECONDS_FROM:
        return max(0.0, value - wall_now), resolution, True
    return value, resolution, False


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
        self.max_wait: float = max_wait
        self.malformed: int = 0
        self.clamped: int = 0  # answers with a reset or a window beyond max_wait
        self._logged: set[str] = set()
        self._clamp_logged: set[str] = set()

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
                return self._bounded(budget) if isinstance(budget, WindowBudget) else budget
        return None

    def _bounded(self, budget: WindowBudget) -> WindowBudget:
        """``budget`` with its reset and window clamped to ``max_wait``.

        A clamped reset says only that the window ends within ``max_wait``: its
        resolution covers the whole bound (a later answer's reset narrows it),
        and it measures no window length.
        """
        changes: dict[str, Any] = {}
        if budget.reset_after > self.max_wait:
            self._warn(budget.reset_header, "reset", budget.reset_after)
            changes.update(reset_after=self.max_wait, resolution=self.max_wait, epoch=False, clamped=True)
        if budget.window is not None and budget.window > self.max_wait:
            self._warn(budget.window_header, "window", budget.window)
            changes.update(window=self.max_wait)
        if not changes:
            return budget
        self.clamped += 1
        return dataclasses.replace(budget, **changes)

    def _warn(self, header: str, what: str, seconds: float) -> None:
        name = header.partition(":")[0]
        if name in self._clamp_logged:
            return
        self._clamp_logged.add(name)
        logger.warning("Rate limit: %s announces a %s %.0f s away; waiting at most "
                       "RATE_LIMIT_HEADERS_MAX_WAIT=%g s instead (no more of these messages will be shown "
                       "for this header)", header, what, seconds, self.max_wait)
