"""The one factory for Redis clients: our defaults, then REDIS_URL.

A crawler has one client, :func:`crawler_redis` (asyncio, one connection
pool, named for this instance in ``CLIENT LIST``), which the shared pass, rate
limit, budget and proxies' health all use; ``scrapy progress`` and the
start-up checks get theirs here too, so TLS (``rediss://``,
``ssl_ca_certs=...``), ACL users (``user:password@``) and Redis Cluster
(``redis+cluster://`` / ``rediss+cluster://``) work the same way for all of
them. URL options win over the defaults (redis-py's rule), ``client_name``
included.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

#: Short timeouts: a call on the reactor thread must fail fast when Redis is
#: away (the callers retry), not freeze the crawl for half a minute.
CLIENT_DEFAULTS = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 2.0,
    "health_check_interval": 15,
}

#: The asyncio calls a request waits for (the shared rate limit and budget, the
#: proxies' shared health): they hold no thread, and their callers ride out an
#: outage themselves, so a Redis a few seconds slow is waited for, not failed.
WAITED_FOR_TIMEOUTS = {
    "socket_connect_timeout": 5.0,
    "socket_timeout": 5.0,
}

#: Cluster scheme -> the scheme redis-py's cluster clients parse.
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

#: Where a crawler keeps its client.
_ATTRIBUTE = "_productcrawler_redis"

SyncClient = redis.Redis | RedisCluster
AsyncClient = redis.asyncio.Redis | AsyncRedisCluster


def reply_text(reply: bytes | str) -> str:
    """A reply as text: these clients leave replies as bytes, which redis-py types as bytes or str."""
    return reply.decode() if isinstance(reply, bytes) else reply


def is_cluster(url: str) -> bool:
    return url.split("://", 1)[0].lower() in _CLUSTER_SCHEMES


def _cluster_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{_CLUSTER_SCHEMES[scheme.lower()]}://{rest}"


def redis_client(url: str, **overrides: Any) -> SyncClient:
    """A synchronous client (for threads and start-up checks, never the reactor thread)."""
    kwargs = {**CLIENT_DEFAULTS, **overrides}
    if is_cluster(url):
        return RedisCluster.from_url(_cluster_url(url), **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def async_redis_client(url: str, **overrides: Any) -> AsyncClient:
    """An asyncio client (the shared rate limit, on the reactor's event loop)."""
    kwargs = {**CLIENT_DEFAULTS, **overrides}
    if is_cluster(url):
        return AsyncRedisCluster.from_url(_cluster_url(url), **kwargs)
    return redis.asyncio.Redis.from_url(url, **kwargs)


def client_name() -> str:
    """What ``CLIENT LIST`` calls this process's connections: ``productcrawler:host:pid``."""
    return f"productcrawler:{socket.gethostname()}:{os.getpid()}"


def crawler_redis(crawler: Crawler, url: str) -> AsyncClient:
    """The crawler's one Redis client (whoever asks first builds it), closed once the engine stops.

    Its calls are the ones a request or the pass waits for on the reactor's
    event loop, so they get :data:`WAITED_FOR_TIMEOUTS`.
    """
    client: AsyncClient | None = getattr(crawler, _ATTRIBUTE, None)
    if client is None:
        client = async_redis_client(url, **{"client_name": client_name(), **WAITED_FOR_TIMEOUTS})
        setattr(crawler, _ATTRIBUTE, client)
        crawler.signals.connect(client.aclose, signal=signals.engine_stopped, weak=False)
    return client
