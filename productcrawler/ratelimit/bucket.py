"""A local token bucket: GCRA arithmetic with an injectable clock.

The bucket is kept as a *theoretical arrival time* (TAT, the generic cell rate
algorithm / virtual scheduling): every reservation is granted at once and
returns the time at which its request may be sent, so ``n`` waiting requests
get ``n`` distinct send times and each sleeps exactly once.

With ``interval = 1 / effective_rate`` and ``tau = (b - 1) / rate``, a
reservation made at ``now`` gets ``max(now, max(tat, now) - tau)`` and moves the
TAT on by one interval. Every interval is at least ``1 / rate`` (the effective
rate never exceeds the cap), so any two granted slots ``i < j`` satisfy
``slot_j - slot_i >= (j - i) / rate - tau``, whatever paces and backoffs came
between them, and any window of L seconds holds at most ``L * rate + b`` slots.
``b`` is :func:`granting_burst`, part of the configured burst: the rest covers
the lateness a slot may be used with (:func:`late_tolerance`, also measured in
the cap's interval), so that *sends* stay within ``L * rate + burst``. Both
spans are measured in the cap's interval, not the pace's: a slot granted at a
slow pace and sent late would otherwise crowd the fast slots after
AutoThrottle speeds the pace back up (docs/design-notes.md#how-the-burst-is-split-and-wake-up-ticks).

The effective rate is ``rate * factor``, or a lower ``pace`` when one is set
(AutoThrottle's latency-based target, :mod:`.autothrottle`); a 429 multiplies the factor by
``BackoffPolicy.multiplier`` (never below ``floor``) and it then recovers
linearly by ``recovery_per_second`` up to 1. A 429 caused by a request that
was granted before the latest backoff does not back off again: it answers the
old rate, not the new one.

Nothing here does I/O; :class:`LocalRateLimiter` adapts the bucket to the
async interface that the middleware shares with the Redis bucket.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

# How late after its slot a request may still be sent, as a share of the
# burst's span: a request that finds its slot older than that (the event loop
# or the downloader held it) gives the slot up and takes a new one, so passed
# slots are lost, never sent in a clump. The bucket grants slots with the rest
# of the burst, so sends in any window of L seconds stay within
# L * rate + burst: at 500/s with a burst of 10, slots are granted with a
# burst of 2.8 and may be used up to 14.4 ms late.
LATE_SHARE = 0.8
MIN_LATE_TOLERANCE = 0.005  # seconds; a burst of 1 leaves no span to share (see late_tolerance)
# A request that has to wait for its slot wakes at the first tick at or after
# it, on a grid of TICK_SHARE of its send window (at most TICK_MAX): the
# requests of one tick are woken, sent and answered together, in one turn of
# the event loop instead of one or two turns each: at 500/s, 3-4 requests
# every 7.2 ms (docs/design-notes.md#how-the-burst-is-split-and-wake-up-ticks).
# The rest of the window is left for the loop's lag. A tick never moves a send
# out of its window, so the bound above does not change.
TICK_SHARE = 0.5
TICK_MAX = 0.010  # seconds: the window grows with RATE_LIMIT_BURST, a tick need not


def granting_burst(burst: float) -> float:
    """The burst slots are granted with; the rest is left for lateness at send time."""
    return 1.0 + (1.0 - LATE_SHARE) * (burst - 1.0)


def late_tolerance(interval: float, burst: float) -> float:
    """Seconds after its slot a request may still be sent, for a cap of one request per ``interval``.

    At least ``MIN_LATE_TOLERANCE``: a wake-up is rarely more punctual on a busy
    machine. With a burst below ``1 + MIN_LATE_TOLERANCE / interval`` sends may
    then exceed ``L * rate + burst`` by that fraction of a request (half a
    request at 100/s with a burst of 1).
    """
    return max(MIN_LATE_TOLERANCE, LATE_SHARE * (burst - 1.0) * interval)


def wake_time(at: float, deadline: float, interval: float) -> float:
    """When a request whose slot is ``at`` and goes stale after ``deadline`` should wake to be sent.

    The first tick at or after ``at`` on a grid of ``TICK_SHARE`` of the send
    window (at most ``TICK_MAX``): never before the slot, always in the first
    part of its window, and the same for the slots that fall between two ticks.
    When a tick could not hold two slots ``interval`` apart (the cap's
    interval: low rates, small bursts), the slot itself: a tick would only
    spend the window's margin for lag.
    """
    tick = min(TICK_MAX, TICK_SHARE * (deadline - at))
    if tick < 2 * interval:
        return at
    return max(at, math.ceil(at / tick) * tick)


class Reservation(NamedTuple):
    """A send slot granted by a rate limiter."""

    at: float
    """Local ``time.monotonic()`` time at which the request may be sent."""
    granted_at: float
    """When the bucket granted it, in the bucket's clock; pass it to ``backoff()``."""
    slot: float
    """The slot in the bucket's clock (equals ``at`` for a local bucket)."""
    deadline: float
    """Local time after which the slot is stale: it must not be used any more."""


class RateLimiter(Protocol):
    """What the middleware needs from a bucket, local or shared."""

    @property
    def rate(self) -> float: ...

    @property
    def burst(self) -> float: ...

    @property
    def factor(self) -> float: ...

    @property
    def expired_slots(self) -> int: ...

    async def acquire(self) -> Reservation: ...

    def set_pace(self, pace: float | None) -> None: ...

    async def backoff(self, granted_at: float | None) -> bool: ...


@dataclass(frozen=True)
class BackoffPolicy:
    """How the effective rate reacts to 429 responses."""

    multiplier: float = 0.5
    floor: float = 0.1
    recovery_per_second: float = 0.02  # +10 % of the cap per 5 s without a backoff

    def __post_init__(self) -> None:
        if not 0 < self.multiplier < 1:
            raise ValueError(f"BackoffPolicy.multiplier={self.multiplier!r} must be between 0 and 1")
        if not 0 < self.floor <= 1:
            raise ValueError(f"BackoffPolicy.floor={self.floor!r} must be in (0, 1]")
        if self.recovery_per_second < 0:
            raise ValueError(f"BackoffPolicy.recovery_per_second={self.recovery_per_second!r} "
                             "must be at least 0")

    def recovered(self, factor: float, since: float, now: float) -> float:
        """``factor`` set at ``since``, after recovering until ``now``."""
        return min(1.0, factor + self.recovery_per_second * max(0.0, now - since))

    def backed_off(self, factor: float) -> float:
        return max(self.floor, factor * self.multiplier)


@dataclass(frozen=True, slots=True)
class Lease:
    """``count`` consecutive slots: ``max(not_before, base + k * interval)``."""

    base: float
    interval: float
    count: int
    not_before: float

    def slots(self) -> list[float]:
        return [max(self.not_before, self.base + k * self.interval) for k in range(self.count)]


def check_rate(rate: float, burst: float) -> None:
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate={rate!r} must be a number greater than 0")
    if not (isinstance(burst, (int, float)) and math.isfinite(burst) and burst >= 1):
        raise ValueError(f"burst={burst!r} must be a number of at least 1")


class TokenBucket:
    """GCRA token bucket of ``rate`` per second and capacity ``burst``."""

    def __init__(self, rate: float, burst: float, *, policy: BackoffPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        check_rate(rate, burst)
        self.rate: float = float(rate)
        self.burst: float = float(burst)
        self.policy: BackoffPolicy = policy or BackoffPolicy()
        self.clock: Callable[[], float] = clock
        self.pace: float | None = None  # a rate below the cap (latency-based pacing), or none
        self._tat: float = -math.inf
        self._factor: float = 1.0
        self._factor_at: float = -math.inf
        self._backoff_at: float = -math.inf

    def _now(self, now: float | None) -> float:
        return self.clock() if now is None else now

    def factor(self, now: float | None = None) -> float:
        """Current fraction of ``rate`` in effect (1 when no 429 was seen)."""
        return self.policy.recovered(self._factor, self._factor_at, self._now(now))

    def effective_rate(self, now: float | None = None) -> float:
        capped = self.rate * self.factor(now)
        return capped if self.pace is None else min(capped, self.pace)

    def set_rate(self, rate: float, burst: float | None = None) -> None:
        """Change the cap; slots already granted keep their times."""
        burst = self.burst if burst is None else burst
        check_rate(rate, burst)
        self.rate, self.burst = float(rate), float(burst)

    def lease(self, count: int, now: float | None = None) -> Lease:
        """Reserve ``count`` consecutive slots at once."""
        if count < 1:
            raise ValueError(f"count={count!r} must be at least 1")
        now = self._now(now)
        interval = 1.0 / self.effective_rate(now)
        tat = max(self._tat, now)
        self._tat = tat + count * interval
        return Lease(tat - (granting_burst(self.burst) - 1.0) / self.rate, interval, count, now)

    def reserve(self, now: float | None = None) -> float:
        """Reserve one slot; return the time at which it may be used."""
        lease = self.lease(1, now)
        return max(lease.not_before, lease.base)

    def backoff(self, granted_at: float | None = None, now: float | None = None) -> bool:
        """React to a 429 for a request granted at ``granted_at``.

        Return False, changing nothing, if that request was granted before the
        latest backoff (``None``: unknown, treated as granted now).
        """
        now = self._now(now)
        if granted_at is not None and granted_at < self._backoff_at:
            return False
        self._factor = self.policy.backed_off(self.factor(now))
        self._factor_at = self._backoff_at = now
        return True


class LocalRateLimiter:
    """The async :class:`RateLimiter` interface over one in-process bucket."""

    expired_slots: int = 0  # a local slot is granted only when a request asks for it

    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket: TokenBucket = bucket

    def __str__(self) -> str:
        return "local bucket"

    @property
    def rate(self) -> float:
        return self.bucket.rate

    @property
    def burst(self) -> float:
        return self.bucket.burst

    @property
    def factor(self) -> float:
        return self.bucket.factor()

    async def acquire(self) -> Reservation:
        now = self.bucket.clock()
        lease = self.bucket.lease(1, now)
        slot = max(lease.not_before, lease.base)
        return Reservation(at=slot, granted_at=now, slot=slot,
                           deadline=slot + late_tolerance(1.0 / self.bucket.rate, self.bucket.burst))

    def set_pace(self, pace: float | None) -> None:
        """Grant new slots at no more than ``pace`` per second (None: up to the cap)."""
        self.bucket.pace = pace

    async def backoff(self, granted_at: float | None) -> bool:
        return self.bucket.backoff(granted_at)
