"""The announced budget in a crawl: every answer read, every request let through by the budget gate.

Built by :class:`~productcrawler.ratelimit.middleware.RateLimitMiddleware`
when ``RATE_LIMIT_HEADERS`` is not ``off``. Each request is let through by the
gate (:mod:`.budget_plan`, or :mod:`.redis_budget` with ``REDIS_URL``) before it
takes its token-bucket slot, and carries its number in ``meta``; each answer,
whatever its status, is read for budget headers (:mod:`.budget_headers`) and
reported (:mod:`.budget_reader`). The pace in force, the budget left and its
reset go into the stats (``productcrawler/ratelimit/budget/*``), which the
progress line and the Prometheus metrics read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from productcrawler import stat_keys
from productcrawler.ratelimit.budget_headers import BudgetHeaders
from productcrawler.ratelimit.budget_plan import LocalBudgetGate
from productcrawler.ratelimit.budget_reader import BudgetReader
from productcrawler.ratelimit.redis_budget import RedisBudgetGate

if TYPE_CHECKING:
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector

    from productcrawler.config import CrawlConfig
    from productcrawler.ratelimit.budget_plan import Budget

META_BUDGET_SEQ = "ratelimit_budget_seq"
STATS_INTERVAL = 0.25  # seconds between updates of the budget stats


class BudgetPacer:
    def __init__(self, stats: StatsCollector, gate: LocalBudgetGate | RedisBudgetGate, formats: tuple[str, ...],
                 cap: float) -> None:
        self.stats = stats
        self.gate = gate
        self.headers = BudgetHeaders(formats)
        self.reader = BudgetReader()
        self.cap = cap
        self.format: str | None = None  # the format last seen
        self._stats_at: float = -1.0

    @classmethod
    def from_config(cls, stats: StatsCollector, config: CrawlConfig) -> BudgetPacer | None:
        if not config.rate_limit_headers:
            return None
        cap = config.max_requests_per_second
        gate: LocalBudgetGate | RedisBudgetGate
        if config.redis_url is None:
            gate = LocalBudgetGate()
        else:
            gate = RedisBudgetGate.from_url(config.redis_url, key_prefix=config.redis_key_prefix, cap=cap)
        return cls(stats, gate, config.rate_limit_headers, cap)

    async def admit(self, request: Request) -> None:
        """Wait until the budget lets ``request`` go."""
        request.meta[META_BUDGET_SEQ] = await self.gate.admit()

    async def observe(self, request: Request, response: Response) -> bool:
        """Read ``response``'s budget headers; whether it had any."""
        budget = self.headers.parse(response.headers, time.time())
        if self.headers.malformed:
            self.stats.set_value(stat_keys.BUDGET_MALFORMED, self.headers.malformed)
        if budget is None:
            return False
        now = time.monotonic()
        report = self.reader.read(budget, request.meta.get(META_BUDGET_SEQ), now, time.time())
        self.stats.inc_value(stat_keys.BUDGET_ANSWERS)
        if self.format != budget.format:
            self.format = budget.format
            self.stats.set_value(stat_keys.BUDGET_FORMAT, budget.format)
        if report is not None:
            await self.gate.report(report)
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
        self.record(self.budget())
        await self.gate.close()
