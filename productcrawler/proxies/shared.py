"""The pool's health in Redis, so every instance sees the same scores and rests.

One hash, ``{REDIS_KEY_PREFIX}:proxies:health``
(:attr:`~productcrawler.redis_keys.Keys.proxy_health`), holds per proxy (by its key:
a hash of scheme, user and host:port, never the password) its score ``:s``,
the end of its rest ``:r`` in Redis server time, and its rests in a row ``:n``.
A Lua script (``lua/health_sync.lua``) applies one instance's counted outcomes and answers every
proxy's state in the same atomic call (the arithmetic of
:mod:`productcrawler.proxies.health`), on the server's clock; the offset
between that clock and this process's monotonic one
(:class:`~productcrawler.redis_clock.ServerClock`, as for the shared
rate-limit bucket) turns rest ends into local times. Calls go through
``redis.asyncio``, so none blocks the reactor thread.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from productcrawler.proxies.books import Snapshot
from productcrawler.proxies.health import SCORE_MAX, HealthPolicy, ProxyHealth
from productcrawler.redis_clock import ServerClock
from productcrawler.redis_lua import lua_script

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from productcrawler.redis_connection import AsyncClient

#: Seconds the hash outlives the last call: a pool idle for an hour starts afresh.
KEY_TTL = 3600

SYNC_SCRIPT = lua_script("productcrawler.proxies", "health_sync.lua")


class RedisHealthBook:
    def __init__(self, client: AsyncClient, *, key: str, keys: Sequence[str],
                 policy: HealthPolicy, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.key = key
        self.keys = list(keys)
        self.policy = policy
        self.clock = clock
        self.rng = rng or random.Random()
        self.calls = 0
        self.server_clock = ServerClock()
        self._script = client.register_script(SYNC_SCRIPT)

    def __str__(self) -> str:
        return f"shared through Redis ({self.key})"

    async def sync(self, deltas: Sequence[tuple[int, int]]) -> Snapshot:
        p = self.policy
        args: list[str | int] = [repr(SCORE_MAX), repr(p.success), repr(p.failure), repr(p.minimum),
                                 repr(p.rest_base), repr(p.rest_max), KEY_TTL]
        for key, (successes, failures) in zip(self.keys, deltas):
            args += [key, successes, failures, repr(self.rng.random())]
        started = self.clock()
        self.calls += 1
        reply = await self._script(keys=[self.key], args=args)
        received = self.clock()
        server_now = float(reply[0])
        offset = self.server_clock.observe(server_now, started, received)
        health: list[ProxyHealth] = []
        rested: dict[int, float] = {}
        for index in range(len(self.keys)):
            score, rest_until, rests, rest = reply[1 + 4 * index: 5 + 4 * index]
            health.append(ProxyHealth(score=float(score), rest_until=float(rest_until) - offset,
                                      rests=int(rests)))
            if float(rest) >= 0:
                rested[index] = float(rest)
        return Snapshot(health, rested)
