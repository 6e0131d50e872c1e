"""The shared budget's Lua scripts against the real Redis at REDIS_TEST_URL: two instances, one budget.

Each "instance" is a RedisBudgetGate with a client of its own; requests are
``admit()`` calls, timed when they return (a loaded machine only makes them
later, so the bounds asserted on the earliest times cannot be met by luck).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from productcrawler.budget import plan as budget_plan
from productcrawler.budget.headers import BudgetHeaders, WindowBudget
from productcrawler.budget.reader import SKEW, BudgetReader, LeakyReport, WindowReport
from productcrawler.budget.redis_plan import KEY_TTL, RedisBudgetGate
from productcrawler.redis_connection import WAITED_FOR_TIMEOUTS, async_redis_client
from productcrawler.redis_keys import Keys
from tests.support.services import REDIS_URL

#: Real time (a window of half a second): `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing

CAP = 500.0


def gate(prefix: str, **kwargs: Any) -> RedisBudgetGate:
    """A shared gate with a client of its own (a crawler's is ``crawler_redis``), closed by the test."""
    return RedisBudgetGate(async_redis_client(REDIS_URL, **WAITED_FOR_TIMEOUTS), key=Keys(prefix).budget, cap=CAP,
                           **kwargs)


def shared(prefix: str) -> dict[str, str]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        return client.hgetall(f"{prefix}:ratelimit:budget")
    finally:
        client.close()


def run(prefix: str, body: Callable[[RedisBudgetGate, RedisBudgetGate], Awaitable[object]]) -> object:
    async def main() -> object:
        first, second = gate(prefix), gate(prefix)
        try:
            return await body(first, second)
        finally:
            await first.client.aclose()
            await second.client.aclose()

    return asyncio.run(main())


def window(seq: int, remaining: int, reset_in: float, *, quota: int = 20, length: float = 10.0,
           age: float = 0.0) -> WindowReport:
    observed = time.monotonic() - age
    return WindowReport(seq, observed, remaining, observed + reset_in, observed + reset_in - 0.001, quota, length)


async def admit_times(gates: tuple[RedisBudgetGate, ...], count: int, workers: int = 2) -> list[float]:
    """At least ``count`` requests let through by ``gates`` between them, ``workers`` at once each; sorted times."""
    times: list[float] = []

    async def worker(instance: RedisBudgetGate) -> None:
        while len(times) < count:
            await instance.admit()
            times.append(time.monotonic())

    await asyncio.gather(*(worker(instance) for instance in gates for _ in range(workers)))
    return sorted(times)


def test_the_newest_report_wins_whichever_instance_sends_it(redis_prefix: str) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> None:
        for _ in range(8):
            await (first if _ % 2 else second).admit()
        await first.report(window(5, 30, 5.0))
        await second.report(window(3, 90, 5.0))  # answered later, sent earlier: an older reading
        assert shared(redis_prefix)["remaining"] == "30"
        await second.report(window(7, 10, 5.0))
        assert shared(redis_prefix)["remaining"] == "10"

    run(redis_prefix, body)


@pytest.mark.parametrize(("age", "recorded"), [(2.5, False), (0.3, True)])
def test_a_report_older_than_its_window_is_ignored(redis_prefix: str, age: float, recorded: bool) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> None:
        await first.admit()
        await first.report(window(1, 5, 0.5, length=1.0, age=age))

    run(redis_prefix, body)
    assert ("kind" in shared(redis_prefix)) is recorded


def test_two_instances_never_spend_more_than_is_left_before_the_reset(redis_prefix: str) -> None:
    reset_in, left, in_flight = 0.5, 20, 4

    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> list[float]:
        await first.admit()  # the request answered below
        for _ in range(in_flight - 1):  # the second instance's probes, in flight when that answer comes
            await second.admit()
        report = window(1, left, reset_in)
        await first.report(report)
        return [t - report.observed_at for t in await admit_times((first, second), 17)]

    times = run(redis_prefix, body)
    assert isinstance(times, list)
    # 20 left less the margin of 1, less the 3 sent after the answered one: 16 before the reset.
    usable = left - 1 - (in_flight - 1)
    # The last of them goes at the latest the reset can be; the next window's first a margin after it.
    assert times[usable] >= reset_in + 0.004, times
    assert times[usable - 1] < reset_in + 0.05, times  # and they are spent, not held back


def test_two_instances_fill_a_leaky_bucket_only_to_its_room_until_the_leak_is_known(redis_prefix: str) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> tuple[list[float], float]:
        await first.admit()
        report = LeakyReport(1, time.monotonic(), 1, 40, None)
        await first.report(report)
        times = await admit_times((first, second), 40)
        return [t - report.observed_at for t in times], float(shared(redis_prefix)["size"])

    times, size = run(redis_prefix, body)  # type: ignore[misc]
    assert size == 40
    immediate = [t for t in times if t < 0.09]
    # Level 1 of 40 and one sent: the room kept free (a 5 % margin, at least the reordering skew) caps the
    # requests that go at once, both instances together; the rest go one probe interval apart.
    assert 20 <= len(immediate) <= 40 - 1 - 2, len(immediate)
    assert times[len(immediate)] >= 0.09


def test_an_instance_without_a_leak_keeps_the_one_another_measured(redis_prefix: str) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> None:
        for _ in range(3):
            await first.admit()
        await first.report(LeakyReport(2, time.monotonic(), 10, 40, 180.0))
        await second.report(LeakyReport(3, time.monotonic(), 12, 40, None))

    run(redis_prefix, body)
    state = shared(redis_prefix)
    assert state["remaining"] == "12" and float(state["leak"]) == 180.0


def test_two_instances_wait_for_the_points_of_each_other_s_graphql_queries(redis_prefix: str) -> None:
    # A bucket of 300 points restoring 100 a second, queries of 152: the first instance's query left 15.
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> list[float]:
        seq = await first.admit()
        assert seq is not None
        report = LeakyReport(seq, time.monotonic(), 285, 300, 100.0, cost=152)
        await first.report(report)
        times = []
        for instance in (second, first):
            await instance.admit()
            times.append(time.monotonic() - report.observed_at)
        return times

    times = run(redis_prefix, body)
    assert isinstance(times, list)
    # 152 more points over the 285 used, with 15 (5 %) kept free: 152 must be restored (at 97 % of the rate) first.
    wait = 152 / (100.0 * budget_plan.LEAK_SAFETY)
    assert wait <= times[0] <= wait + 0.3, times
    assert 2 * wait <= times[1] <= 2 * wait + 0.3, times  # and as much again after the other's query


def absurd(seq: int, max_wait: float, remaining: int = 0) -> WindowReport:
    """The report of an answer saying ``remaining`` of 200 are left until a reset 900000000 s away, clamped to
    ``max_wait``."""
    budget = BudgetHeaders(("x-ratelimit",), max_wait=max_wait).parse(
        {"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": "900000000"},
        time.time())
    assert isinstance(budget, WindowBudget)
    report = BudgetReader().read(budget, seq, time.monotonic(), time.time())
    assert isinstance(report, WindowReport)
    return report


def test_under_an_absurd_reset_two_instances_spend_what_is_left_at_the_cap_then_probe(redis_prefix: str) -> None:
    left = 40 - 4 - SKEW  # 40 left, less the quota's margin and SKEW for requests reaching the API out of order

    async def spend(gates: tuple[RedisBudgetGate, RedisBudgetGate], count: int) -> float:
        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(instance.admit() for instance in gates for _ in range(count // 2))),
                               10)
        return time.monotonic() - started

    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> tuple[float, float, float]:
        seq = await first.admit()
        assert seq is not None
        await first.report(absurd(seq, max_wait=300.0, remaining=40))
        burst = await spend((first, second), left)  # spread over the clamped 300 s, these would take 230 s
        started = time.monotonic()
        probe = await second.admit()  # spent: one request, a second after the last
        waited = time.monotonic() - started
        assert probe is not None
        await second.report(absurd(probe, max_wait=300.0, remaining=199))  # its answer: a new window
        return burst, waited, await spend((first, second), 100)

    burst, waited, resumed = run(redis_prefix, body)  # type: ignore[misc]
    assert burst <= 0.5, burst  # 28 at 500/s: 56 ms
    assert 0.95 <= waited <= 1.5, waited
    assert resumed <= 0.8, resumed  # 100 at 500/s: 0.2 s


def test_an_absurd_reset_is_probed_at_doubling_intervals_no_longer_than_the_longest_wait(redis_prefix: str) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> list[float]:
        seq = await first.admit()
        assert seq is not None
        started = time.monotonic()
        await first.report(absurd(seq, max_wait=3.5))  # nothing left, the reset clamped to 3.5 s
        times = []
        for _ in range(3):  # the probes, unanswered (lost)
            await asyncio.wait_for(second.admit(), 10)
            times.append(time.monotonic() - started)
        return times

    times = run(redis_prefix, body)
    assert isinstance(times, list)
    # One a second after the last request, the next two seconds later, the third at the clamped reset.
    assert 0.95 <= times[0] <= 1.4 and 2.95 <= times[1] <= 3.4 and 3.45 <= times[2] <= 4.2, times
    # That window over, what follows is unknown: no budget is kept (the next requests are probes).
    assert "kind" not in shared(redis_prefix)
    assert 0 < redis.Redis.from_url(REDIS_URL).pttl(f"{redis_prefix}:ratelimit:budget") <= KEY_TTL * 1000


def test_a_newer_answer_ends_a_wait_another_one_announced(redis_prefix: str) -> None:
    async def body(first: RedisBudgetGate, second: RedisBudgetGate) -> float:
        old, new = await first.admit(), await second.admit()
        assert old is not None and new is not None
        await first.report(absurd(old, max_wait=30.0))
        waiting = asyncio.ensure_future(second.admit())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await second.report(window(new, 50, 1.0))  # the answer to a later request: 50 left
        started = time.monotonic()
        await asyncio.wait_for(waiting, 10)
        return time.monotonic() - started

    waited = run(redis_prefix, body)
    # At once: this instance's own answer wakes its waiting request, due to probe a second after the last.
    assert isinstance(waited, float) and waited <= 0.3, waited


def test_a_budget_recorded_under_a_longer_bound_holds_an_instance_only_as_long_as_its_own(redis_prefix: str) -> None:
    # An earlier run (or another instance) with RATE_LIMIT_HEADERS_MAX_WAIT=30 recorded "nothing left for 30 s";
    # an instance started with a bound of 1 s waits no longer than that after the answer.
    async def main() -> float:
        earlier = gate(redis_prefix)
        bounded = gate(redis_prefix, max_wait=1.0)
        try:
            seq = await earlier.admit()
            assert seq is not None
            await earlier.report(absurd(seq, max_wait=30.0))
            started = time.monotonic()
            await asyncio.wait_for(bounded.admit(), 10)
            return time.monotonic() - started
        finally:
            await earlier.client.aclose()
            await bounded.client.aclose()

    waited = asyncio.run(main())
    assert 0.9 <= waited <= 1.6, waited
