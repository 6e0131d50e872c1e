"""The pool's health in Redis, so every instance sees the same scores and rests.

One hash, ``{REDIS_KEY_PREFIX}:proxies:health``, holds per proxy (by its key:
a hash of scheme, user and host:port, never the password) its score ``:s``,
the end of its rest ``:r`` in Redis server time, and its rests in a row ``:n``.
A Lua script applies one instance's counted outcomes and answers every
proxy's state in the same atomic call (the arithmetic of
:mod:`productcrawler.proxies.health`), on the server's clock; the offset
between that clock and this process's monotonic one turns rest ends into
local times, as the shared rate-limit bucket does. Calls go through
``redis.asyncio``, so none blocks the reactor thread.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from productcrawler.proxies.books import Snapshot
from productcrawler.proxies.health import SCORE_MAX, HealthPolicy, ProxyHealth

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from productcrawler.redis_connection import AsyncClient

#: Seconds the hash outlives the last call: a pool idle for an hour starts afresh.
KEY_TTL = 3600

# KEYS[1] the hash. ARGV: score_max, success, failure, minimum, rest_base,
# rest_max, ttl, then per proxy: key, successes, failures, draw.
# Returns server_now, then per proxy: score, rest_until, rests, rested (-1 or seconds).
SYNC_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local smax, up, down, minimum = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local base, rmax = tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {string.format('%.6f', now)}
for i = 8, #ARGV, 4 do
  local key, s, f, draw = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local v = redis.call('HMGET', KEYS[1], key .. ':s', key .. ':r', key .. ':n')
  local score, rest_until, rests = tonumber(v[1]) or smax, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  local rested = -1
  if now >= rest_until and (s > 0 or f > 0) then
    score = math.min(smax, score + s * up)
    score = math.max(0, score - f * down)
    if score >= smax then rests = 0 end
    if f > 0 and score < minimum then
      rests = rests + 1
      local ceiling = math.min(rmax, base * 2 ^ (rests - 1))
      rested = ceiling / 2 + draw * ceiling / 2
      rest_until = now + rested
      score = minimum
    end
    redis.call('HSET', KEYS[1], key .. ':s', string.format('%.6f', score),
               key .. ':r', string.format('%.6f', rest_until), key .. ':n', rests)
  end
  table.insert(out, string.format('%.6f', score))
  table.insert(out, string.format('%.6f', rest_until))
  table.insert(out, tostring(rests))
  table.insert(out, string.format('%.6f', rested))
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[7]))
return out
"""


class RedisHealthBook:
    def __init__(self, client: AsyncClient, *, key_prefix: str, keys: Sequence[str],
                 policy: HealthPolicy, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.key = f"{key_prefix}:proxies:health"
        self.keys = list(keys)
        self.policy = policy
        self.clock = clock
        self.rng = rng or random.Random()
        self.calls = 0
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
        offset = server_now - (started + received) / 2  # server time minus local time
        health: list[ProxyHealth] = []
        rested: dict[int, float] = {}
        for index in range(len(self.keys)):
            score, rest_until, rests, rest = reply[1 + 4 * index: 5 + 4 * index]
            health.append(ProxyHealth(score=float(score), rest_until=float(rest_until) - offset,
                                      rests=int(rests)))
            if float(rest) >= 0:
                rested[index] = float(rest)
        return Snapshot(health, rested)

    async def close(self) -> None:
        await self.client.aclose()
