"""One token bucket shared by every crawler instance through Redis.

The bucket is the GCRA of :mod:`.bucket`, run inside Redis by atomic Lua
scripts (``lua/bucket_lease.lua``, and ``lua/bucket_backoff.lua`` for a 429)
whose clock is the server's ``TIME``, so the instances' own clocks never
matter. To keep Redis well under one round trip per request, an
instance *leases* up to ``lease_max`` slots per call (2 % of the rate by
default; the lease doubles each time all its slots were used, and halves when
leased slots go unused). The script answers ``(server_now, base, interval,
factor)`` and the k-th leased slot is ``max(server_now, base + k * interval)`` in server time.
The same call bounds the offset between server time and local
``time.monotonic()`` (the server read its clock between the call's start and
its reply; :class:`~productcrawler.redis_clock.ServerClock` intersects the
bounds of all calls), so each leased slot becomes a local send time of its own.

Leased slots are written into the shared TAT before anyone uses them: an
instance that dies with unused slots leaves lost capacity, never extra. The
script grants with :func:`~.bucket.granting_burst`; a leased slot that has gone
stale locally (past its :func:`~.bucket.late_tolerance`) is dropped, not sent
late; so that a distant Redis's reply is not stale on arrival, a lease starts
no sooner than the fastest recent round trip after the script runs.

State lives in one hash, ``{REDIS_KEY_PREFIX}:ratelimit:bucket``
(:attr:`~productcrawler.redis_keys.Keys.rate_bucket`; fields
``tat``, ``factor``, ``factor_at``, ``backoff_at``, all server seconds), whose
TTL is renewed by every call to at least a minute past its TAT. All instances
must run with the same ``MAX_REQUESTS_PER_SECOND`` and ``RATE_LIMIT_BURST``, and
the same version of this project: instances that split a burst differently
between granting early and sending late (:mod:`.bucket`) can together exceed
the bound by a few requests (docs/design-notes.md#how-the-burst-is-split-and-wake-up-ticks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from productcrawler.config import mask_url
from productcrawler.config.driver_errors import describe
from productcrawler.config.values import ambiguous_userinfo
from productcrawler.ratelimit.bucket import (
    BackoffPolicy,
    Lease,
    Reservation,
    check_rate,
    granting_burst,
    late_tolerance,
)
from productcrawler.redis_clock import ServerClock
from productcrawler.redis_connection import WAITED_FOR_TIMEOUTS, AsyncClient, redis_client
from productcrawler.redis_lua import lua_script

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

LEASE_FRACTION = 0.02  # at most 2 % of a second's tokens per Redis call
KEY_TTL = 60.0  # seconds the state outlives its last reserved slot
OUTAGE_RETRY_DELAY = 1.0  # seconds between attempts while Redis is unreachable
OUTAGE_MAX = 30.0  # give up (the request fails) after this long without Redis
LEAD_MAX = 1.0  # seconds; the most a lease's first slot is put off for a slow round trip
LEAD_CALLS = 8  # the lead is the fastest of this many latest round trips: one slow call moves nothing

LEASE_SCRIPT = lua_script("productcrawler.ratelimit", "bucket_prelude.lua", "bucket_lease.lua")
BACKOFF_SCRIPT = lua_script("productcrawler.ratelimit", "bucket_prelude.lua", "bucket_backoff.lua")


def ping(url: str) -> None:
    """Fail at once, naming the masked URL, if Redis at ``url`` is unreachable.

    A synchronous one-off at start-up, closed at once: ``from_crawler`` cannot
    wait for the crawler's asyncio client, and a wrong REDIS_URL must stop the
    crawl before it starts, not fail its first request.
    redis-py's message is told as the start-up checks tell it
    (:func:`productcrawler.config.driver_errors.describe`): left out, and not chained,
    when the password is ambiguous, for it names pieces of the password.
    """
    client = redis_client(url, **WAITED_FOR_TIMEOUTS)
    try:
        client.ping()
    except RedisError as exc:
        raise RedisConnectionError(
            f"REDIS_URL={mask_url(url)!r}: cannot reach Redis for the shared rate limit: "
            f"{describe(exc, url, tls_option='ssl_ca_certs')}"
        ) from (None if ambiguous_userinfo(url) else exc)
    finally:
        client.close()


class RedisTokenBucket:
    """The async :class:`~productcrawler.ratelimit.bucket.RateLimiter` over Redis, in the hash ``key``."""

    def __init__(self, client: AsyncClient, *, key: str, rate: float, burst: float,
                 lease_max: int | None = None, policy: BackoffPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        check_rate(rate, burst)
        if lease_max is not None and lease_max < 1:
            raise ValueError(f"lease_max={lease_max!r} must be at least 1")
        self.client: AsyncClient = client
        self.key: str = key
        self.rate: float = float(rate)
        self.burst: float = float(burst)
        self.lease_max: int = lease_max or max(1, int(rate * LEASE_FRACTION))
        self.policy: BackoffPolicy = policy or BackoffPolicy()
        self.clock: Callable[[], float] = clock
        self.server_clock = ServerClock()
        self.redis_calls: int = 0
        self.expired_slots: int = 0
        self.pace: float | None = None
        self._factor: float = 1.0
        self._slots: deque[Reservation] = deque()
        self._lock = asyncio.Lock()
        self._pending: int = 0
        self._lease_size: int = 1  # doubles when a whole lease was used, halves on expiry
        self._expired_since_lease: bool = False
        self._outage_logged: bool = False
        # Recent lease calls' round trips: the next lease starts no sooner than
        # the fastest of them after the script runs. Slots granted for the
        # moment the script ran would be stale on arrival when the reply takes
        # longer than the late tolerance (a distant Redis): every lease
        # dropped, nothing sent. The fastest, so that one stalled call does not
        # push the shared TAT (every instance's slots) ahead.
        self._round_trips: deque[float] = deque(maxlen=LEAD_CALLS)
        self._lease_script = client.register_script(LEASE_SCRIPT)
        self._backoff_script = client.register_script(BACKOFF_SCRIPT)

    def __str__(self) -> str:
        return f"Redis bucket {self.key}"

    @property
    def factor(self) -> float:
        """The shared rate factor as of this instance's latest Redis call."""
        return self._factor

    async def acquire(self) -> Reservation:
        """The next send slot, leasing more from Redis when none is left."""
        self._pending += 1
        try:
            async with self._lock:
                while True:
                    now = self.clock()
                    while self._slots:
                        reservation = self._slots.popleft()
                        if now <= reservation.deadline:
                            return reservation
                        self.expired_slots += 1
                        self._expired_since_lease = True
                        self._lease_size = max(1, self._lease_size // 2)
                    if not self._expired_since_lease:
                        # Every slot of the last lease was used: ask for more per call.
                        self._lease_size = min(self.lease_max, self._lease_size * 2)
                    self._expired_since_lease = False
                    await self._lease(min(self.lease_max, max(self._pending, self._lease_size)))
        finally:
            self._pending -= 1

    async def _lease(self, count: int) -> None:
        args = [repr(self.rate), repr(granting_burst(self.burst)), count,
                repr(self.policy.recovery_per_second), repr(KEY_TTL),
                repr(self.rate if self.pace is None else min(self.rate, self.pace))]
        lead = min(self._round_trips, default=0.0)
        args.append(repr(lead))
        started = self.clock()
        reply = await self._run(self._lease_script, args)
        received = self.clock()
        self._round_trips.append(min(LEAD_MAX, received - started))
        server_now, base, interval, factor = (float(value) for value in reply)
        offset = self.server_clock.observe(server_now, started, received)
        self._factor = factor
        tolerance = late_tolerance(1.0 / self.rate, self.burst)
        for slot in Lease(base, interval, count, server_now + lead).slots():
            # Not clamped to ``received``: a slot that passed while the call was
            # on its way is as stale here as anywhere.
            at = slot - offset
            self._slots.append(Reservation(at=at, granted_at=server_now, slot=slot,
                                           deadline=at + tolerance))

    async def _run(self, script: Any, args: list[Any]) -> list[bytes]:
        """Call ``script``, waiting out a Redis outage of up to OUTAGE_MAX seconds."""
        give_up_at: float | None = None
        while True:
            self.redis_calls += 1
            try:
                reply: list[bytes] = await script(keys=[self.key], args=args)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                now = self.clock()
                if give_up_at is None:
                    give_up_at = now + OUTAGE_MAX
                if now >= give_up_at:
                    raise
                if self._outage_logged:
                    logger.debug("Rate limit: Redis still unreachable (%s)", exc)
                else:
                    self._outage_logged = True
                    logger.warning("Rate limit: Redis unreachable (%s); requests wait for it for "
                                   "up to %gs (no more of these messages will be shown)",
                                   exc, OUTAGE_MAX)
                await asyncio.sleep(OUTAGE_RETRY_DELAY)
            else:
                return reply

    def set_pace(self, pace: float | None) -> None:
        """Lease new slots at no more than ``pace`` per second (None: up to the cap).

        The pace is this instance's: its leases are spaced by it, other
        instances' by theirs.
        """
        self.pace = pace

    async def backoff(self, granted_at: float | None) -> bool:
        """Lower the shared factor for a 429; False if not applied."""
        args = [-1 if granted_at is None else repr(granted_at), repr(self.policy.multiplier),
                repr(self.policy.floor), repr(self.policy.recovery_per_second), repr(KEY_TTL)]
        try:
            self.redis_calls += 1
            applied, factor = await self._backoff_script(keys=[self.key], args=args)
        except RedisError as exc:
            logger.warning("Rate limit: could not record a 429 backoff in Redis: %s", exc)
            return False
        self._factor = float(factor)
        return applied == b"1"
