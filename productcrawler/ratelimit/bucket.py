"""A local token bucket: GCRA arithmetic with an injectable clock.

The bucket is kept as a *theoretical arrival time* (TAT, the generic cell rate
algorithm / virtual scheduling): every reservation is granted at once and
returns the time at which its request may be sent, so ``n`` waiting requests
get ``n`` distinct send times and each sleeps exactly once.

With ``interval = 1 / effective_rate`` and ``tau = (burst - 1) * interval``, a
reservation made at ``now`` gets ``max(now, max(tat, now) - tau)`` and moves the
TAT on by one interval. Any two granted slots ``i < j`` then satisfy
``slot_j - slot_i >= (j - i) * interval - tau``, so any window of one second
holds fewer than ``rate + burst`` slots.

The effective rate is ``rate * factor``; a 429 multiplies the factor by
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

# A request woken later than this after its slot is not sent: it takes a new
# slot instead (the missed one is lost capacity). This bounds how far sends
# can drift behind their slots when the event loop lags, so any 1-second
# window of sends holds at most rate * (1 + LATE_TOLERANCE) + burst requests:
# 520 at 500/s with the default burst of 10, 4 % over the rate.
LATE_TOLERANCE = 0.02


class Reservation(NamedTuple):
    """A send slot granted by a rate limiter."""

    at: float
    """Local ``time.monotonic()`` time at which the request may be sent."""
    granted_at: float
    """When the bucket granted it, in the bucket's clock; pass it to ``backoff()``."""
    slot: float
    """The slot in the bucket's clock (equals ``at`` for a local bucket)."""


class RateLimiter(Protocol):
    """What the middleware needs from a bucket, local or shared."""

    @property
    def rate(self) -> float: ...

    @property
    def burst(self) -> float: ...

    @property
    def factor(self) -> float: ...

    async def acquire(self) -> Reservation: ...

    async def backoff(self, granted_at: float | None) -> bool: ...

    async def close(self) -> None: ...


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


class Lease(NamedTuple):
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
        return self.rate * self.factor(now)

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
        return Lease(tat - (self.burst - 1.0) * interval, interval, count, now)

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
        slot = self.bucket.reserve(now)
        return Reservation(at=slot, granted_at=now, slot=slot)

    async def backoff(self, granted_at: float | None) -> bool:
        return self.bucket.backoff(granted_at)

    async def close(self) -> None:
        return None
