"""Before a budget is known, only probes go: at most PROBES in flight, until an answer tells the budget.
Then the waits the budget imposes: ended by a newer answer, or by the crawl's stop."""

from __future__ import annotations

import asyncio
import time

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from productcrawler.budget.pacer import PROBES, BudgetPacer
from productcrawler.budget.plan import LocalBudgetGate
from productcrawler.budget.stop import STOP_CHECK, StopWatch
from productcrawler.meta import ABANDONED as META_ABANDONED

BUDGET = {"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "990", "X-RateLimit-Reset": "1"}


def pacer() -> BudgetPacer:
    return BudgetPacer(MemoryStatsCollector(get_crawler()), LocalBudgetGate(), ("x-ratelimit",), 500.0)


def answer(request: Request, headers: dict[str, str] | None = None) -> Response:
    return Response(request.url, status=200, headers=headers or {}, request=request)


async def let_through(budget: BudgetPacer, count: int) -> tuple[list[Request], list[asyncio.Task[None]]]:
    requests = [Request(f"http://127.0.0.1/v1/product/{i}") for i in range(count)]
    tasks = [asyncio.ensure_future(budget.admit(request)) for request in requests]
    await asyncio.sleep(0.05)
    return requests, tasks


def test_only_probes_go_until_an_answer_announces_the_budget() -> None:
    async def run() -> None:
        budget = pacer()
        requests, tasks = await let_through(budget, 6)
        assert sum(task.done() for task in tasks) == PROBES
        first = next(r for r, t in zip(requests, tasks, strict=True) if t.done())
        assert await budget.observe(first, answer(first, BUDGET))
        await asyncio.sleep(0.05)
        assert all(task.done() for task in tasks)  # the budget is known: paced by it, not probed
        assert budget.probes == PROBES

    asyncio.run(run())


def test_an_api_without_budget_headers_is_not_held_up_after_the_probes() -> None:
    async def run() -> None:
        budget = pacer()
        requests, tasks = await let_through(budget, 5)
        assert sum(task.done() for task in tasks) == PROBES
        for request, task in list(zip(requests, tasks, strict=True))[:PROBES]:
            assert task.done()
            assert not await budget.observe(request, answer(request))
        await asyncio.sleep(0.01)
        assert all(task.done() for task in tasks)
        assert budget.announced is False

    asyncio.run(run())


def test_a_failed_probe_lets_the_next_one_go() -> None:
    async def run() -> None:
        budget = pacer()
        requests, tasks = await let_through(budget, 3)
        assert [task.done() for task in tasks] == [True, True, False]
        budget.done(requests[0])  # a download error
        await asyncio.sleep(0.01)
        assert tasks[2].done()

    asyncio.run(run())


STALL = {"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "900000000"}


def test_a_stop_ends_every_wait_and_leaves_the_requests_unsent() -> None:
    async def run() -> None:
        stopping = False
        stop = StopWatch(lambda: stopping)
        budget = BudgetPacer(MemoryStatsCollector(get_crawler()), LocalBudgetGate(stop=stop), ("x-ratelimit",),
                             500.0, max_wait=300.0)
        budget.start()
        requests, tasks = await let_through(budget, 6)  # 2 probes go, 4 wait for an answer
        first = next(r for r, t in zip(requests, tasks, strict=True) if t.done())
        await budget.observe(first, answer(first, STALL))  # nothing left for 300 s: they wait for the reset
        await asyncio.sleep(0.3)
        waiting = [(r, t) for r, t in zip(requests, tasks, strict=True) if not t.done()]
        assert len(waiting) == 4
        stopping = True
        started = time.monotonic()
        await asyncio.wait([t for _r, t in waiting], timeout=5)
        assert time.monotonic() - started <= STOP_CHECK + 0.2
        for request, task in waiting:
            assert isinstance(task.exception(), IgnoreRequest)
            assert request.meta[META_ABANDONED]  # no outcome: the next run fetches the id
        await budget.close()

    asyncio.run(run())


def test_a_newer_answer_ends_a_wait_an_older_one_announced() -> None:
    async def run() -> None:
        budget = BudgetPacer(MemoryStatsCollector(get_crawler()), LocalBudgetGate(), ("x-ratelimit",), 500.0,
                             max_wait=300.0)
        requests, tasks = await let_through(budget, 3)
        probes = [r for r, t in zip(requests, tasks, strict=True) if t.done()]
        await budget.observe(probes[0], answer(probes[0], STALL))
        await asyncio.sleep(0.3)
        assert not tasks[2].done()
        # The other probe was sent later; its answer says the window has room.
        await budget.observe(probes[1], answer(probes[1], BUDGET))
        started = time.monotonic()
        await asyncio.wait_for(tasks[2], 5)
        # At once: not the 300 s the older answer announced, nor the probe due a second after the probes.
        assert time.monotonic() - started <= 0.2

    asyncio.run(run())
