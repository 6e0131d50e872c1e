"""The one factory for Redis clients: our defaults, then the caller's overrides, then REDIS_URL.

Every client of the project comes from here (the shared pass, the shared rate
limit, the start-up check, ``scrapy progress``), so a timeout or a TLS option
is set in one place.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

#: Short timeouts: a call must fail fast when Redis is away (the callers
#: retry), not freeze the crawl for half a minute.
CLIENT_DEFAULTS: dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 2.0,
    "health_check_interval": 15,
}


def redis_client(url: str, **overrides: Any) -> redis.Redis:
    return redis.Redis.from_url(url, **{**CLIENT_DEFAULTS, **overrides})


def async_redis_client(url: str, **overrides: Any) -> redis.asyncio.Redis:
    """The same client for ``redis.asyncio`` (the rate limiter's hot path runs on the reactor's loop)."""
    return redis.asyncio.Redis.from_url(url, **{**CLIENT_DEFAULTS, **overrides})
