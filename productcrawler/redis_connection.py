"""The one factory for Redis clients: our defaults, then REDIS_URL."""

from __future__ import annotations

import redis

#: Short timeouts: a call on the reactor thread must fail fast when Redis is
#: away (the callers retry), not freeze the crawl for half a minute.
CLIENT_DEFAULTS = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 2.0,
    "health_check_interval": 15,
}


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, **CLIENT_DEFAULTS)
