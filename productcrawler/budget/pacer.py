"""The announced budget in a crawl: every answer read, every request let through by the budget gate.

Built by :class:`~productcrawler.budget.middleware.BudgetGateMiddleware`
when ``RATE_LIMIT_HEADERS`` is not ``off``. Each request is let through by the
gate (:mod:`.plan`, or :mod:`.redis_plan` with ``REDIS_URL``) before it
takes its token-bucket slot, and carries its number in ``meta``; each answer,
whatever its status, is read for budget headers (:mod:`.headers`), a
GraphQL listing page's for its cost (:mod:`.graphql_cost`), and
reported (:mod:`.reader`). The pace in force, the budget left and its
reset go into the stats (``productcrawler/ratelimit/budget/*``), which the
progress line and the Prometheus metrics read.

Until a budget is known (from an answer of this instance, or recorded in
Redis by another), at most ``PROBES`` requests are in flight: sent at the cap,
the requests of the first round trip would spend a small budget before any
answer told it (a leaky bucket of 40 fills in a tenth of a second at 500/s,
and two instances fill it twice as fast). A probe ends with its answer or its
download error; should neither come (a request lost between the two), the
next probes go after ``PROBE_TIMEOUT``. Once ``PROBES`` answers in a row carried no budget and none
ever did, the API announces none and requests go unprobed; the first answer
that carries one turns the gate on again.

Once the crawl stops (:mod:`.stop`), a request still waiting here (for a
probe, for its time) is given up unsent and its id left for the next run, so
that a stop never waits for a reset.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from productcrawler import stat_keys
from productcrawler.budget.graphql_cost import cost_budget
from productcrawler.budget.headers import BudgetHeaders
from productcrawler.budget.reader import BudgetReader
from productcrawler.budget.stop import Stopping, StopWatch
from productcrawler.meta import ABANDONED, BUDGET_PROBE, BUDGET_SEQ, LISTING_PAGE, NOT_SENT_BUDGET

if TYPE_CHECKING:
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector

    from productcrawler.budget.headers import Budget as Announced
    from productcrawler.budget.plan import Budget, BudgetGate

#: Requests in flight while no budget is known: enough to learn one within a round trip,
#: few enough that they cannot overdraw a small budget between them.
PROBES = 2
PROBE_TIMEOUT = 2.0  # seconds a waiting request waits for a probe to end before it becomes one
STATS_INTERVAL = 0.25  # seconds between updates of the budget stats

logger = logging.getLogger(__name__)


class BudgetPacer:
    def __init__(self, stats: StatsCollector, gate: BudgetGate, formats: tuple[str, ...],
                 cap: float, max_wait: float = math.inf, *, graphql: bool = False) -> None:
        self.stats = stats
        self.gate = gate
        self.stop: StopWatch = gate.stop
        self.headers = BudgetHeaders(formats, max_wait)
        #: A GraphQL listing: its pages' answers say their budget in the body (:mod:`.graphql_cost`).
        self.graphql = graphql
        self.reader = BudgetReader()
        self.cap = cap
        self.format: str | None = None  # the format last seen
        #: Whether the API announces a budget: None until an answer tells either way.
        self.announced: bool | None = None
        self.probing: int = 0  # probes in flight
        self.probes: int = 0  # probes sent
        self._bare: int = 0  # answers in a row without a budget, before any with one
        self._probe_done = asyncio.Event()
        self._stats_at: float = -1.0
        self.abandoned: int = 0  # requests given up unsent because the crawl stopped

    def start(self) -> None:
        """The crawl runs: from now on, its stop ends the waits."""
        self.stop.start()

    async def admit(self, request: Request) -> None:
        """Wait until the budget lets ``request`` go; IgnoreRequest (its id left pending) if the crawl stops."""
        try:
            await self._admit(request)
        except Stopping:
            self.abandoned += 1
            request.meta[ABANDONED] = True
            raise IgnoreRequest(NOT_SENT_BUDGET) from None

    async def _admit(self, request: Request) -> None:
        self.stop.check()
        if self._unannounced(request):
            return
        while not self.gate.known():
            if self.probing < PROBES:
                self.probing += 1
                self.probes += 1
                request.meta[BUDGET_PROBE] = True
                break
            self._probe_done.clear()
            if not await self.stop.wait_for(self._probe_done, PROBE_TIMEOUT):
                self.probing = 0  # those probes are lost: their end no longer counts
            if self._unannounced(request):  # the answers to the probes said so meanwhile
                return
        request.meta[BUDGET_SEQ] = await self.gate.admit()

    def _unannounced(self, request: Request) -> bool:
        """The API announces no budget: ``request`` goes without one."""
        if self.announced is False:
            request.meta[BUDGET_SEQ] = None
            return True
        return False

    def done(self, request: Request) -> None:
        """``request`` was answered or failed: a probe among it ends."""
        if request.meta.pop(BUDGET_PROBE, False):
            self.probing = max(0, self.probing - 1)
            self._probe_done.set()

    async def observe(self, request: Request, response: Response) -> bool:
        """Read ``response``'s budget (its headers, or a GraphQL page's cost); whether it had any."""
        budget: Announced | None = None
        if self.graphql and LISTING_PAGE in request.meta:
            budget = cost_budget(response.body)
        if budget is None:
            budget = self.headers.parse(response.headers, time.time())
        if self.headers.malformed:
            self.stats.set_value(stat_keys.BUDGET_MALFORMED, self.headers.malformed)
        if self.headers.clamped:
            self.stats.set_value(stat_keys.BUDGET_CLAMPED, self.headers.clamped)
        if budget is None:
            if self.announced is None:
                self._bare += 1
                if self._bare >= PROBES:
                    self.announced = False
            self.done(request)
            return False
        self.announced = True
        now = time.monotonic()
        report = self.reader.read(budget, request.meta.get(BUDGET_SEQ), now, time.time())
        self.stats.inc_value(stat_keys.BUDGET_ANSWERS)
        if self.format != budget.format:
            self.format = budget.format
            self.stats.set_value(stat_keys.BUDGET_FORMAT, budget.format)
        if report is not None:
            await self.gate.report(report)
        self.done(request)
        if now - self._stats_at >= STATS_INTERVAL:
            self._stats_at = now
            self.record(self.budget())
        return True

    def budget(self) -> Budget | None:
        return self.gate.budget(self.cap)

    def record(self, budget: Budget | None) -> None:
        if budget is None:
            return
        self.stats.set_value(stat_keys.BUDGET_PACE, round(budget.pace, 3))
        self.stats.set_value(stat_keys.BUDGET_REMAINING, round(budget.remaining, 1))
        if budget.reset_in is not None:
            self.stats.set_value(stat_keys.BUDGET_RESET_SECONDS, round(budget.reset_in, 3))

    async def close(self) -> None:
        await self.stop.close()
        if self.abandoned:
            logger.info("%d requests waiting for the API's announced budget were not sent when the crawl "
                        "stopped; the next run fetches their ids", self.abandoned)
        if self.probes:
            self.stats.set_value(stat_keys.BUDGET_PROBES, self.probes)
        self.record(self.budget())
