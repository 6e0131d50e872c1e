"""Rate limiting: a token bucket, local or shared through Redis.

``bucket`` holds the GCRA arithmetic (:class:`TokenBucket`, pure, with an
injectable clock) and its async adapter (:class:`LocalRateLimiter`);
``redis_bucket`` holds the shared bucket (:class:`RedisTokenBucket`). The
downloader middleware that applies them is
:mod:`productcrawler.middlewares.ratelimit`, whose docstring explains how the
limit, AutoThrottle and ``CONCURRENT_REQUESTS`` fit together.
"""

from productcrawler.ratelimit.bucket import (
    LATE_TOLERANCE,
    BackoffPolicy,
    Lease,
    LocalRateLimiter,
    RateLimiter,
    Reservation,
    TokenBucket,
)
from productcrawler.ratelimit.redis_bucket import RedisTokenBucket

__all__ = [
    "LATE_TOLERANCE",
    "BackoffPolicy",
    "Lease",
    "LocalRateLimiter",
    "RateLimiter",
    "RedisTokenBucket",
    "Reservation",
    "TokenBucket",
]
