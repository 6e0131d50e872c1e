"""Rate limiting, the cap: a token bucket, local or shared through Redis.

The budget the API announces, which paces below the cap, is
:mod:`productcrawler.budget`'s.

``bucket`` holds the GCRA arithmetic (:class:`TokenBucket`, pure, with an
injectable clock), the interface (:class:`RateLimiter`) and its local
implementation (:class:`LocalRateLimiter`); ``redis_bucket`` holds the shared
bucket (:class:`RedisTokenBucket`); :func:`new_limiter` picks one;
``wait`` the wait for a slot (never before it, never on a stale one);
``handler`` the download handler that waits for each slot right before
sending. The downloader middleware that builds them is
:mod:`productcrawler.ratelimit.middleware`, whose docstring explains how the
limit, AutoThrottle and ``CONCURRENT_REQUESTS`` fit together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.ratelimit.bucket import (
    BackoffPolicy,
    Lease,
    LocalRateLimiter,
    RateLimiter,
    Reservation,
    TokenBucket,
    granting_burst,
    late_tolerance,
    wake_time,
)
from productcrawler.ratelimit.redis_bucket import RedisTokenBucket

if TYPE_CHECKING:
    from productcrawler.redis_connection import AsyncClient

__all__ = [
    "BackoffPolicy",
    "Lease",
    "LocalRateLimiter",
    "RateLimiter",
    "RedisTokenBucket",
    "Reservation",
    "TokenBucket",
    "granting_burst",
    "late_tolerance",
    "new_limiter",
    "wake_time",
]


def new_limiter(client: AsyncClient | None, key: str, rate: float, burst: float) -> RateLimiter:
    """A bucket of ``rate`` and ``burst``: in this process without a client, else shared in Redis at ``key``."""
    if client is None:
        return LocalRateLimiter(TokenBucket(rate, burst))
    return RedisTokenBucket(client, key=key, rate=rate, burst=burst)
