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

from dataclasses import dataclass

#: The spider whose pass the keys name (the project has one).
SPIDER = "products"


@dataclass(frozen=True)
class PassKeys:
    """The keys of the shared pass, all under one Cluster hash tag (``base``)."""

    base: str

    @property
    def current(self) -> str:
        """The hash of the pass in progress (its id, ids, cursor, status)."""
        return f"{self.base}:pass"

    @property
    def sequence(self) -> str:
        """The counter that numbers passes."""
        return f"{self.base}:pass_seq"

    def of_pass(self, pass_id: int | None, name: str) -> str:
        """The key ``name`` (``queue``, ``delayed``, ``done``, ``inflight:<instance>``...) of pass ``pass_id``."""
        return f"{self.base}:pass:{pass_id}:{name}"

    def heartbeat(self, instance: str) -> str:
        return f"{self.base}:instance:{instance}"

    @property
    def heartbeats(self) -> str:
        """The SCAN pattern of every instance's heartbeat."""
        return f"{self.base}:instance:*"


@dataclass(frozen=True)
class Keys:
    """The keys of one ``REDIS_KEY_PREFIX``."""

    prefix: str

    @property
    def rate_bucket(self) -> str:
        """The token bucket of MAX_REQUESTS_PER_SECOND (ratelimit/redis_bucket.py)."""
        return f"{self.prefix}:ratelimit:bucket"

    def proxy_bucket(self, proxy: str) -> str:
        """The token bucket of one proxy (by its key, never its password): PROXY_MAX_REQUESTS_PER_SECOND."""
        return f"{self.prefix}:proxy:{proxy}:ratelimit:bucket"

    @property
    def budget(self) -> str:
        """The API's announced budget (budget/redis_gate.py)."""
        return f"{self.prefix}:ratelimit:budget"

    @property
    def proxy_health(self) -> str:
        """Every proxy's score and rest (proxies/shared.py)."""
        return f"{self.prefix}:proxies:health"

    def passes(self, spider: str = SPIDER) -> PassKeys:
        """The shared pass's keys (passes/redis_pass.py), tagged ``{prefix}`` for a Cluster."""
        return PassKeys(f"{{{self.prefix}}}:{spider}")
