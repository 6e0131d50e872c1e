"""The budget an API announces in its answers (``RATE_LIMIT_HEADERS``), kept below the rate limit's cap.

The cap (``MAX_REQUESTS_PER_SECOND``) is :mod:`productcrawler.ratelimit`'s;
this package paces requests by what the API says is left of its own budget:

- ``headers`` reads an answer's budget headers (each format), ``bounds``
  tells a reset's magnitude and clamps it to ``RATE_LIMIT_HEADERS_MAX_WAIT``;
- ``reader`` turns them into reports (a window's remaining count, a leaky
  bucket's level and measured leak);
- ``plan`` is the arithmetic of when the next request may go, the interface
  of where it is kept (:class:`~.plan.BudgetGate`) and its local
  implementation; ``redis_plan`` keeps it in Redis for every instance
  (``lua/``); :func:`new_gate` picks one;
- ``pacer`` applies it in a crawl (probes while no budget is known, the
  stats), ``stop`` ends its waits when the crawl stops;
- ``middleware`` is the downloader middleware that owns it;
- ``limited`` says whether an answer is "over the rate limit" (a 429, or a
  403 that says it is one), for the rate limit, the retries and the guard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.budget.plan import LocalBudgetGate
from productcrawler.budget.redis_plan import RedisBudgetGate

if TYPE_CHECKING:
    from productcrawler.budget.plan import BudgetGate
    from productcrawler.budget.stop import StopWatch
    from productcrawler.redis_connection import AsyncClient


def new_gate(client: AsyncClient | None, key: str, *, cap: float, stop: StopWatch, max_wait: float) -> BudgetGate:
    """The plan in this process without a client, else shared in Redis at ``key``; its waits end with ``stop``."""
    if client is None:
        return LocalBudgetGate(stop=stop, cap=cap)
    return RedisBudgetGate(client, key=key, cap=cap, stop=stop, max_wait=max_wait)
