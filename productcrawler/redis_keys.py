"""Every Redis key the crawl uses, named from ``REDIS_KEY_PREFIX`` in one place.

A Redis Cluster runs a script only when all its keys are in one slot. The
pass's scripts each touch several keys, so the pass's keys share one hash tag:
the prefix in braces (``{prefix}:products:...``; ``REDIS_KEY_PREFIX`` may not
hold braces of its own, config/crawl.py). The rate limit's bucket, the
budget and the proxies' health are one key per script each, so they need no
tag and may sit on any master (docs/operations.md). The names are what running
deployments and ``scrapy progress`` read: changing one loses the state under
the old name.
"""

from __future__ import annotations

#: The spider whose pass the keys name (the project has one).
SPIDER = "products"


class PassKeys:
    """The keys of the shared pass, all under one Cluster hash tag (``base``: ``{prefix}:products``).

    ``current`` is the hash of the pass in progress (its id, ids, cursor,
    status), ``sequence`` the counter that numbers passes, ``heartbeats`` the
    SCAN pattern of every instance's heartbeat.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.current, self.sequence = f"{base}:pass", f"{base}:pass_seq"
        self.heartbeats = f"{base}:instance:*"

    def of_pass(self, pass_id: int | None, name: str) -> str:
        """The key ``name`` (``queue``, ``delayed``, ``done``, ``inflight:<instance>``...) of pass ``pass_id``."""
        return f"{self.base}:pass:{pass_id}:{name}"

    def heartbeat(self, instance: str) -> str:
        return f"{self.base}:instance:{instance}"


class Keys:
    """The keys of one ``REDIS_KEY_PREFIX``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: The token bucket of MAX_REQUESTS_PER_SECOND (ratelimit/redis_bucket.py).
        self.rate_bucket = f"{prefix}:ratelimit:bucket"
        #: The API's announced budget (budget/redis_plan.py).
        self.budget = f"{prefix}:ratelimit:budget"
        #: Every proxy's score and rest (proxies/shared.py).
        self.proxy_health = f"{prefix}:proxies:health"

    def proxy_bucket(self, proxy: str) -> str:
        """The token bucket of one proxy (by its key, never its password): PROXY_MAX_REQUESTS_PER_SECOND."""
        return f"{self.prefix}:proxy:{proxy}:ratelimit:bucket"

    def passes(self, spider: str = SPIDER) -> PassKeys:
        """The shared pass's keys (passes/redis_pass.py), tagged ``{prefix}`` for a Cluster."""
        return PassKeys(f"{{{self.prefix}}}:{spider}")
