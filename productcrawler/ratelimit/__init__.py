"""Rate limiting: a token bucket, local or shared through Redis.

``bucket`` holds the GCRA arithmetic (:class:`TokenBucket`, pure, with an
injectable clock) and its async adapter (:class:`LocalRateLimiter`);
``redis_bucket`` holds the shared bucket (:class:`RedisTokenBucket`);
``wait`` the wait for a slot (never before it, never on a stale one);
``handler`` the download handler that waits for each slot right before
sending. The downloader middleware that builds them is
:mod:`productcrawler.ratelimit.middleware`, whose docstring explains how the
limit, AutoThrottle and ``CONCURRENT_REQUESTS`` fit together.
"""

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
    "wake_time",
]
