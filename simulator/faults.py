"""Fault modes chosen by product id: parsing ``MODE=IDSPEC[@TIMES]`` and the per-id decision.

``IDSPEC`` is a comma list of ids (``5``), inclusive ranges (``10-20``) and
residues (``%7`` = ids divisible by 7, ``%7+3`` = ids with ``id % 7 == 3``).
``TIMES`` is how many attempts of each matching id get the fault before it is
answered normally: a number (default 1) or ``*`` for every attempt.

When several rules match one id they take turns in the order given, each for
its own ``TIMES``: ``503=5@2`` then ``429s=5`` answers id 5 with 503, 503,
429, then the product.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .shapes import DEFAULT_SHAPE, SHAPES

# Modes whose answer is a (possibly altered) product object, see catalog.variant().
PRODUCT_VARIANT_MODES = frozenset({"wrongid", "dirty", "huge", "sqlish", "emoji", "outofrange"})
MODES = frozenset({
    "429s", "429date", "503", "503ra", "500", "502", "400", "403", "slow", "hang",
    "truncated", "html", "notproduct", "error200", "nested", "badutf8", "gzip", "deflate", "br", "gzipbomb",
}) | PRODUCT_VARIANT_MODES

DEFAULT_RETRY_AFTER = 2
DEFAULT_SLOW_DELAY = 2.0


@dataclass(frozen=True)
class IdSpec:
    """A set of product ids, tested without expanding ranges."""

    ids: frozenset[int]
    ranges: tuple[tuple[int, int], ...]
    residues: tuple[tuple[int, int], ...]  # (modulus, remainder)

    @classmethod
    def parse(cls, text: str) -> IdSpec:
        ids: set[int] = set()
        ranges: list[tuple[int, int]] = []
        residues: list[tuple[int, int]] = []
        for token in text.split(","):
            token = token.strip()
            if token.startswith("%"):
                modulus, _, remainder = token[1:].partition("+")
                n, r = _positive(modulus, token), _natural(remainder or "0", token)
                if r >= n:
                    raise ValueError(f"id spec {token!r}: the remainder must be below the modulus {n}")
                residues.append((n, r))
            elif "-" in token:
                first, _, last = token.partition("-")
                a, b = _positive(first, token), _positive(last, token)
                if a > b:
                    raise ValueError(f"id spec {token!r}: the range is empty")
                ranges.append((a, b))
            else:
                ids.add(_positive(token, token))
        return cls(frozenset(ids), tuple(ranges), tuple(residues))

    def __contains__(self, product_id: int) -> bool:
        return (product_id in self.ids
                or any(a <= product_id <= b for a, b in self.ranges)
                or any(product_id % n == r for n, r in self.residues))


def _natural(text: str, token: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"id spec {token!r}: {text!r} is not a whole number "
                         "(expected ID, FIRST-LAST, %N or %N+R)")
    return int(text)


def _positive(text: str, token: str) -> int:
    value = _natural(text, token)
    if value < 1:
        raise ValueError(f"id spec {token!r}: {value} must be at least 1")
    return value


@dataclass(frozen=True)
class FaultRule:
    mode: str
    ids: IdSpec
    times: int | None  # None: every attempt

    @classmethod
    def parse(cls, spec: str) -> FaultRule:
        """Parse ``MODE=IDSPEC[@TIMES]``; a bad spec raises ``ValueError`` naming it."""
        mode, sep, rest = spec.strip().partition("=")
        if not sep:
            raise ValueError(f"fault {spec!r} is not MODE=IDSPEC[@TIMES]")
        if mode not in MODES:
            raise ValueError(f"fault {spec!r}: unknown mode {mode!r}; expected one of {', '.join(sorted(MODES))}")
        id_text, _, times_text = rest.partition("@")
        try:
            ids = IdSpec.parse(id_text)
        except ValueError as exc:
            raise ValueError(f"fault {spec!r}: {exc}") from None
        if times_text == "*":
            return cls(mode, ids, None)
        times_text = times_text or "1"
        if not (times_text.isascii() and times_text.isdigit() and int(times_text) >= 1):
            raise ValueError(f"fault {spec!r}: TIMES {times_text!r} must be a whole number of at least 1, or *")
        return cls(mode, ids, int(times_text))


@dataclass(frozen=True)
class FaultConfig:
    """Everything that shapes faulty answers; replaced as a whole at runtime."""

    rules: tuple[FaultRule, ...] = ()
    retry_after: int = DEFAULT_RETRY_AFTER
    slow_delay: float = DEFAULT_SLOW_DELAY
    rate_limit: float | None = None  # requests per sliding second; None: unlimited
    shape: str = DEFAULT_SHAPE  # the JSON shape of a product, see shapes.py
    api_key: str | None = None  # None: no key needed; else 401 without "Bearer <key>"
    revoke_after: int | None = None  # every product request after the first N answers 401

    @classmethod
    def build(cls, faults: Iterable[str] = (), *, retry_after: object = DEFAULT_RETRY_AFTER,
              slow_delay: object = DEFAULT_SLOW_DELAY, rate_limit: object = None,
              shape: object = DEFAULT_SHAPE, api_key: object = None,
              revoke_after: object = None) -> FaultConfig:
        """Validate raw values (CLI strings or JSON); errors are ``ValueError`` naming the option."""
        if isinstance(faults, str):
            raise ValueError(f"faults={faults!r} must be a list of MODE=IDSPEC[@TIMES] strings")
        if shape not in SHAPES:
            raise ValueError(f"shape={shape!r} is not one of {', '.join(SHAPES)}")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValueError("api_key must be a non-empty string")
        return cls(
            rules=tuple(FaultRule.parse(str(spec)) for spec in faults),
            retry_after=int(_number("retry_after", retry_after, integer=True)),
            slow_delay=_number("slow_delay", slow_delay),
            rate_limit=None if rate_limit is None else _number("rate_limit", rate_limit, positive=True),
            shape=str(shape),
            api_key=api_key,
            revoke_after=None if revoke_after is None else int(_number("revoke_after", revoke_after,
                                                                       integer=True)),
        )


def _number(name: str, raw: object, *, integer: bool = False, positive: bool = False) -> float:
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name}={raw!r} is not a finite number")
    if integer and not value.is_integer():
        raise ValueError(f"{name}={raw!r} must be a whole number of seconds")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name}={raw!r} must be {'greater than' if positive else 'at least'} 0")
    return value


class FaultPlan:
    """The rules of a ``FaultConfig`` plus the attempt count of every id they match."""

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._attempts: dict[int, int] = {}

    def decide(self, product_id: int) -> str:
        """Count this attempt of ``product_id`` and return its fault mode, or ``""``."""
        if not self.config.rules:
            return ""
        matching = [rule for rule in self.config.rules if product_id in rule.ids]
        if not matching:
            return ""
        attempt = self._attempts.get(product_id, 0) + 1
        self._attempts[product_id] = attempt
        turns = 0
        for rule in matching:
            if rule.times is None:
                return rule.mode
            turns += rule.times
            if attempt <= turns:
                return rule.mode
        return ""

    def reset(self) -> None:
        """Forget every attempt: each id starts its faults from the first again."""
        self._attempts.clear()
