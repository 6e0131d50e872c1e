"""The pace an announced budget allows: when the next request may go, from the newest report.

Every request that is sent is first *let through* by the budget gate, which
numbers it (``seq``) and says when it may go; the token bucket's slot comes
after, so the budget only ever lowers the pace below the cap. The newest
report (by ``seq``: the answer to the latest request let through) decides:

* fixed window: ``remaining`` minus the requests let through after the
  reported one (in flight, or about to be) minus a margin is what may still go
  before the reset; it is spread evenly up to the reset. When it is spent, or
  the reset has passed, the next window opens at the reset with the whole
  quota, spread over the window (when the quota and the window are known;
  otherwise the gate stays open until an answer tells the new budget);
* fixed window whose reset was clamped (``RATE_LIMIT_HEADERS_MAX_WAIT``):
  the reset is not believed, only the count. While some of it is usable,
  requests go at the cap (numbered as they go, not ahead of the token
  bucket), the margin ``SKEW`` larger, up to a quarter of the quota (at the
  cap, more requests reach the API out of order). Once it is spent, one request (a probe) goes
  ``FIRST_PROBE_WAIT`` after the last, and each further probe waits twice as
  long as the one before, until an answer tells of room again (a new window)
  or the clamped reset passes; a probe is not let through before its time, so
  that such an answer applies to it;
* leaky bucket: the level the API will see is the reported level plus the
  requests let through since (each its cost: one, or a GraphQL query's
  points), less what leaked at the measured (or announced) rate; the next
  request goes when that stays below the size less a margin. Before the leak
  is measured, one request goes every ``PROBE_INTERVAL`` while the bucket has
  room, so that answers keep coming and measure it.

A request whose time is more than ``HOLD`` seconds away is not let through:
it is told when to ask again (``HOLD`` later at most, or as soon as this
process takes a newer answer), so that a newer answer (from a request already
in flight, or another instance) applies to it, and a wait for a reset (up to
``RATE_LIMIT_HEADERS_MAX_WAIT``) holds no number and no place in the sequence
of requests let through.

A report older than its window (for a leaky bucket, the time it takes to
drain, at least a second) is ignored. :mod:`.redis_plan` runs the same
arithmetic in Redis (``lua/budget_claim.lua``) for instances that share a budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from typing import TYPE_CHECKING, NamedTuple, Protocol

from productcrawler.budget.reader import SKEW, LeakyReport, Report, WindowReport
from productcrawler.budget.stop import StopWatch

if TYPE_CHECKING:
    from collections.abc import Callable

QUOTA_MARGIN = 0.02  # of the quota (or the remaining count, when the quota is unknown), at least 1
LEVEL_MARGIN = 0.05  # of a leaky bucket's size, at least 1 (and SKEW, up to a quarter of the size)
LEAK_SAFETY = 0.97  # of the measured leak rate
PROBE_INTERVAL = 0.1  # seconds between requests while a leak rate is unknown
RESET_MARGIN = 0.005  # seconds after a reset before the new window's first request
HOLD = 1.0  # seconds: a request whose time is further away asks again, at most this much later
#: Seconds from the last request to the first probe of a spent window whose reset was clamped: a whole
#: second, the shortest window APIs commonly announce, so that a probe seldom finds the same window spent.
FIRST_PROBE_WAIT = 1.0
#: Requests of one process let through and not yet gone: enough that a late wake-up or a
#: Redis round trip does not hold the next one up, few enough that a new report soon applies.
AHEAD = 4


class Budget(NamedTuple):
    """What the progress line, the stats and the metrics show."""

    pace: float  # requests per second the budget allows now
    remaining: float  # requests that may still go in this window (room left in a leaky bucket)
    reset_in: float | None  # seconds to the reset; None for a leaky bucket


def margin(report: WindowReport) -> float:
    """Requests of a window kept unspent; under a clamped reset, whose count goes at the cap, SKEW more
    (up to a quarter of the quota)."""
    base = report.quota if report.quota is not None else report.remaining
    kept = max(1.0, QUOTA_MARGIN * base)
    return kept + min(float(SKEW), base / 4) if report.clamped else kept


def level_margin(size: int) -> float:
    """Room kept free in a leaky bucket: answers may not count a few requests already sent (SKEW)."""
    return max(1.0, LEVEL_MARGIN * size, min(float(SKEW), size / 4))


def report_window(report: Report) -> float:
    """How long a report stays worth reading."""
    if isinstance(report, WindowReport):
        return report.window if report.window is not None else max(1.0, report.reset_at - report.observed_at)
    return max(1.0, report.size / report.leak) if report.leak else 1.0


class Plan:
    """The local gate's arithmetic; clock-free (``now`` passed in). ``cap``: the rate limit's, per second."""

    def __init__(self, cap: float = math.inf) -> None:
        self.interval: float = 1.0 / cap  # between requests let through at the cap
        self.report: Report | None = None
        self.seq: int = 0  # requests let through so far
        self.last_at: float = -math.inf  # when the latest one was let through
        #: The wait before the next probe of a spent window whose reset was clamped; doubles with each probe.
        self.probe_wait: float = FIRST_PROBE_WAIT
        self._probe_next: float | None = None  # the wait after the probe being let through, if it is one

    def accept(self, report: Report, now: float) -> bool:
        """Take ``report`` if it is the newest and not older than its window."""
        current = self.report
        if current is not None:
            if report.seq is None or (current.seq is not None and report.seq < current.seq):
                return False
        if now - report.observed_at > report_window(report):
            return False
        if report.seq is None:  # a request let through before the gate knew of a budget
            report = dataclasses.replace(report, seq=self.seq)
        self.report = report
        return True

    def claim(self, now: float) -> tuple[int | None, float]:
        """Number the next request and say when it may go; None and when to ask again if not within ``HOLD``."""
        report = self.report
        self.seq += 1
        self._probe_next = None
        at = now
        if isinstance(report, WindowReport):
            at = self._window_slot(report, now)
        elif isinstance(report, LeakyReport):
            at = self._leaky_slot(report, now)
        # A probe is let through only at its time: an answer meanwhile may tell of room again.
        if at - now > HOLD or (self._probe_next is not None and at > now):
            self.seq -= 1
            self.report = report  # a window opened by this claim opens for the one that goes
            return None, min(at, now + HOLD)
        if self._probe_next is not None:
            self.probe_wait = self._probe_next
        self.last_at = at
        return self.seq, at

    def _behind(self, report: Report) -> int:
        """Requests let through after the reported one, before the one being let through."""
        return self._since(report) - 1

    def _since(self, report: Report) -> int:
        """Requests let through after the reported one."""
        return self.seq - (report.seq or 0)

    def _window_slot(self, report: WindowReport, now: float) -> float:
        usable = report.remaining - self._behind(report) - margin(report)
        start = max(now, self.last_at)
        if report.clamped and start < report.reset_at + RESET_MARGIN:
            if usable >= 1:  # at the cap, not spread up to a reset that is not believed
                self.probe_wait = FIRST_PROBE_WAIT
                return max(start, self.last_at + self.interval)
            probe_at = max(start, self.last_at + self.probe_wait)
            if probe_at < report.reset_at + RESET_MARGIN:
                self._probe_next = min(2 * self.probe_wait, report.reset_at - report.observed_at)
                return probe_at
        elif usable >= 1 and start < report.reset_at + RESET_MARGIN:
            base = max(self.last_at, report.observed_at)
            return max(start, base + (report.reset_at - base) / usable)
        # This window is spent or over: the next opens at the reset.
        opened = max(start, report.reset_at + RESET_MARGIN)
        if report.quota is None or report.window is None:
            self.report = None  # the new window's budget is unknown until an answer tells it
            return opened
        reset_at = report.reset_at + report.window
        while reset_at + RESET_MARGIN <= opened:  # idle for whole windows
            reset_at += report.window
        self.report = dataclasses.replace(report, seq=self.seq - 1, remaining=report.quota,
                                          reset_at=reset_at, observed_at=opened)
        return opened

    def _leaky_slot(self, report: LeakyReport, now: float) -> float:
        level = report.level + (self._behind(report) + 1) * report.cost  # with this request, before any leak
        excess = level - (report.size - level_margin(report.size))
        if excess <= 0:
            return now
        if report.leak:
            return max(now, report.observed_at + excess / (report.leak * LEAK_SAFETY))
        # Unmeasured: a probe while there is room, to get answers that measure the leak.
        interval = PROBE_INTERVAL if level <= report.size else 5 * PROBE_INTERVAL
        return max(now, self.last_at + interval)

    def budget(self, now: float, cap: float) -> Budget | None:
        report = self.report
        if isinstance(report, WindowReport):
            usable = max(0.0, report.remaining - self._since(report) - margin(report))
            reset_in = max(0.0, report.reset_at - now)
            if report.clamped:
                return Budget(cap if usable >= 1 else 0.0, usable, reset_in)
            return Budget(min(cap, usable / reset_in) if reset_in > 0 else cap, usable, reset_in)
        if isinstance(report, LeakyReport):
            room = report.size - report.level - self._since(report) * report.cost
            leaked = (report.leak or 0.0) * max(0.0, now - report.observed_at)
            pace = min(cap, report.leak * LEAK_SAFETY / report.cost) if report.leak else 1.0 / PROBE_INTERVAL
            return Budget(pace, max(0.0, min(report.size, room + leaked)) / report.cost, None)
        return None


class BudgetGate(Protocol):
    """Where the plan is kept: in this process (:class:`LocalBudgetGate`), or in Redis for every instance
    (:class:`~.redis_plan.RedisBudgetGate`).

    Its waits end with :class:`~.stop.Stopping` once ``stop`` says the crawl stops.
    """

    stop: StopWatch

    def known(self) -> bool:
        """Whether a budget is known (an answer announced one, here or, shared, at another instance)."""

    async def admit(self) -> int | None:
        """Wait until the budget lets one more request go; its number (None: the shared plan failed)."""

    async def report(self, report: Report) -> None:
        """Take an answer's report into the plan."""

    def budget(self, cap: float) -> Budget | None:
        """The budget as of now, for the stats."""


class LocalBudgetGate:
    """The plan of one process; at most ``AHEAD`` requests let through wait for their time at once.

    A wait ends early, with :class:`~.stop.Stopping`, once ``stop`` says the crawl stops.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, stop: StopWatch | None = None,
                 cap: float = math.inf) -> None:
        self.plan = Plan(cap)
        self.clock = clock
        self.stop = stop if stop is not None else StopWatch()
        self._ahead = asyncio.Semaphore(AHEAD)
        self._reported = asyncio.Event()  # set (and replaced) when a report is taken

    def __str__(self) -> str:
        return "local budget"

    async def admit(self) -> int:
        """Wait until the budget lets one more request go; its number."""
        if self.plan.report is None and not self._ahead.locked():
            seq, _at = self.plan.claim(self.clock())
            assert seq is not None  # no budget known: at once
            return seq
        async with self._ahead:
            while True:
                self.stop.check()  # waiters behind a stopped one leave at once
                reported = self._reported
                seq, at = self.plan.claim(self.clock())
                if seq is not None:
                    await self.stop.sleep(at - self.clock())
                    return seq
                # Not let through: a newer answer (a probe's, telling of a new window) applies at once.
                await self.stop.wait_for(reported, at - self.clock())

    def known(self) -> bool:
        """Whether a budget is known (an answer announced one)."""
        return self.plan.report is not None

    async def report(self, report: Report) -> None:
        if self.plan.accept(report, self.clock()):
            self._reported.set()
            self._reported = asyncio.Event()

    def budget(self, cap: float) -> Budget | None:
        return self.plan.budget(self.clock(), cap)
