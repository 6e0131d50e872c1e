"""One announced budget shared by every instance through Redis.

The plan of :mod:`.plan` kept in one hash,
``{REDIS_KEY_PREFIX}:ratelimit:budget`` (:attr:`~productcrawler.redis_keys.Keys.budget`), and run by two Lua scripts
(``lua/budget_claim.lua``, ``lua/budget_report.lua``) in the server's clock:
every instance's answers report into it (the newest, by the number the
answered request was let through with, wins; one older than its window is
dropped), and every instance's requests are let through by it, numbered in one
sequence, so the requests in flight of all instances count against the
budget and N instances spend one budget between them.

Every request let through is one call (the probes of
:mod:`.pacer` too, so that an instance starting next to one that
knows the budget is paced by it from its first request), then the wait until
its time, at most ``AHEAD`` at once per instance, with no blocking call on
the reactor (redis-py's asyncio client). A crawl of an API that announces no
budget makes only its few probes' calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from productcrawler.budget import plan
from productcrawler.budget.plan import AHEAD, Budget
from productcrawler.budget.reader import SKEW, LeakyReport, Report
from productcrawler.budget.stop import StopWatch
from productcrawler.redis_lua import lua_script

if TYPE_CHECKING:
    from collections.abc import Callable

    from productcrawler.redis_connection import AsyncClient

logger = logging.getLogger(__name__)

KEY_TTL = 120.0  # seconds the shared budget outlives its last use
MAX_WAIT = 1e12  # seconds: "no bound" as a number Lua reads


CLAIM_SCRIPT = lua_script("productcrawler.budget", "budget_claim.lua")
REPORT_SCRIPT = lua_script("productcrawler.budget", "budget_report.lua")


class RedisBudgetGate:
    """The shared plan, in the hash ``key``: a :class:`~.plan.BudgetGate`."""

    def __init__(self, client: AsyncClient, *, key: str, cap: float,
                 clock: Callable[[], float] = time.monotonic, stop: StopWatch | None = None,
                 max_wait: float = MAX_WAIT) -> None:
        self.client: AsyncClient = client
        self.max_wait: float = min(max_wait, MAX_WAIT)
        self.stop: StopWatch = stop if stop is not None else StopWatch()
        self.key: str = key
        self.cap: float = cap
        self.clock: Callable[[], float] = clock
        self.redis_calls: int = 0
        self._budget: Budget | None = None
        self._ahead = asyncio.Semaphore(AHEAD)
        self._reported = asyncio.Event()  # set (and replaced) when this instance records a report
        self._error_logged: bool = False
        self._claim = client.register_script(CLAIM_SCRIPT)
        self._report = client.register_script(REPORT_SCRIPT)

    def __str__(self) -> str:
        return f"Redis budget {self.key}"

    def known(self) -> bool:
        """Whether the shared budget was known at the latest call (or this instance just recorded one)."""
        return self._budget is not None

    async def admit(self) -> int | None:
        """Wait until the shared budget lets one more request go; its number (None: Redis failed)."""
        args = [repr(KEY_TTL), repr(plan.QUOTA_MARGIN), repr(plan.LEVEL_MARGIN),
                repr(plan.LEAK_SAFETY), repr(plan.PROBE_INTERVAL),
                repr(plan.RESET_MARGIN), repr(self.cap), repr(SKEW), repr(plan.HOLD),
                repr(self.max_wait), repr(plan.FIRST_PROBE_WAIT)]
        async with self._ahead:
            while True:
                self.stop.check()  # waiters behind a stopped one leave at once
                reported = self._reported
                try:
                    self.redis_calls += 1
                    reply = await self._claim(keys=[self.key], args=args)
                except RedisError as exc:
                    self._log_error("let a request through", exc)
                    return None
                received = self.clock()
                server_now, at, seq, pace, left, reset_in = (float(value) for value in reply)
                self._budget = (None if pace < 0 else
                                Budget(pace, left, None if reset_in < 0 else reset_in))
                wait = received + at - server_now - self.clock()
                if seq >= 0:
                    await self.stop.sleep(wait)
                    return int(seq)
                # Not let through: ask again then, or as soon as this instance records a newer answer.
                await self.stop.wait_for(reported, wait)

    async def report(self, report: Report) -> None:
        age = max(0.0, self.clock() - report.observed_at)
        seq = -1 if report.seq is None else report.seq
        if isinstance(report, LeakyReport):
            values: list[Any] = ["l", seq, repr(age), report.level, report.size,
                                 -1 if report.leak is None else repr(report.leak), report.cost]
        else:
            values = ["w", seq, repr(age), report.remaining, repr(report.reset_at - report.observed_at),
                      -1 if report.quota is None else report.quota,
                      -1 if report.window is None else repr(report.window),
                      repr((report.reset_from if report.reset_from is not None else report.reset_at)
                           - report.observed_at), int(report.clamped)]
        try:
            self.redis_calls += 1
            if await self._report(keys=[self.key], args=[repr(KEY_TTL), *values]):
                self._reported.set()
                self._reported = asyncio.Event()
            if self._budget is None:
                self._budget = Budget(0.0, 0.0, None)  # the next call tells the shared figures
        except RedisError as exc:
            self._log_error("record a budget", exc)

    def budget(self, cap: float) -> Budget | None:
        return self._budget

    def _log_error(self, what: str, exc: Exception) -> None:
        if self._error_logged:
            logger.debug("Rate limit: could not %s in Redis: %s", what, exc)
            return
        self._error_logged = True
        logger.warning("Rate limit: could not %s in Redis: %s (the budget is not kept while Redis "
                       "fails; no more of these messages will be shown)", what, exc)
