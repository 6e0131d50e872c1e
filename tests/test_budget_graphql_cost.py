"""A GraphQL listing's cost budget (Shopify's ``extensions.cost``): read as a bucket of points, paced exactly.

The bucket is the imitation's (``tests/support/imitations/shopify_graphql.Points``,
written from Shopify's documentation), on a clock of our own: a cursor chain's
queries, one at a time, each sent as soon as the plan allows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from productcrawler.budget.graphql_cost import GRAPHQL_COST, cost_budget
from productcrawler.budget.headers import LeakyBudget
from productcrawler.budget.plan import Plan
from productcrawler.budget.reader import BudgetReader
from tests.support.imitations.shopify_graphql import Points


def answer(requested: Any, actual: Any, status: dict[str, Any]) -> bytes:
    return json.dumps({"data": {}, "extensions": {"cost": {"requestedQueryCost": requested,
                                                           "actualQueryCost": actual,
                                                           "throttleStatus": status}}}).encode()


def test_the_cost_is_a_bucket_of_points_whose_size_level_leak_and_cost_the_answer_says() -> None:
    status = {"maximumAvailable": 1000.0, "currentlyAvailable": 248, "restoreRate": 50.0}
    assert cost_budget(answer(752, 752, status)) == LeakyBudget(GRAPHQL_COST, 752, 1000, leak=50.0, cost=752)
    # A THROTTLED answer says it too: nothing ran, the bucket is as it was.
    assert cost_budget(answer(752, None, status)) == LeakyBudget(GRAPHQL_COST, 752, 1000, leak=50.0, cost=752)


@pytest.mark.parametrize("body", [
    b'{"data": {}}',
    b"not json, but \"cost\"",
    answer(752, 752, {"maximumAvailable": 1000.0, "currentlyAvailable": 248}),
    answer(752, 752, {"maximumAvailable": 1000.0, "currentlyAvailable": 248, "restoreRate": 0}),
    answer(0, 0, {"maximumAvailable": 1000.0, "currentlyAvailable": 248, "restoreRate": 50.0}),
    answer("a lot", 0, {"maximumAvailable": 1000.0, "currentlyAvailable": 248, "restoreRate": 50.0}),
    answer(752, 752, {"maximumAvailable": 1000.0, "currentlyAvailable": 1248, "restoreRate": 50.0}),
    answer(1e400, 0, {"maximumAvailable": 1000.0, "currentlyAvailable": 248, "restoreRate": 50.0}),
])
def test_an_answer_that_says_no_readable_cost_is_no_budget(body: bytes) -> None:
    assert cost_budget(body) is None


@pytest.mark.parametrize(("maximum", "restore", "cost"), [(300, 100.0, 152), (1000, 50.0, 752), (1000, 50.0, 102)])
def test_each_query_goes_once_its_points_are_restored_and_never_before(maximum: int, restore: float,
                                                                       cost: int) -> None:
    bucket, plan, reader = Points(maximum, restore), Plan(), BudgetReader()
    bucket.available, bucket.at = float(maximum), 0.0
    seconds, latency = 60.0, 0.05
    now, sent, throttled = 0.0, 0, 0
    while now < seconds and sent < 10_000:
        seq, at = plan.claim(now)
        if seq is None:  # asks again then
            now = at
            continue
        bucket.refill(at + latency)
        taken = bucket.take(cost)
        sent += 1
        throttled += not taken
        budget = cost_budget(answer(cost, cost if taken else None, bucket.status()))
        assert budget is not None
        report = reader.read(budget, seq, at + 2 * latency, 0.0)
        assert report is not None
        plan.accept(report, at + 2 * latency)
        now = at + 2 * latency  # the next page is known once this one is answered
    assert throttled == 0
    # What the bucket holds at the start, then its restore rate: at least 90 % of it.
    assert sent >= 0.9 * (maximum + restore * seconds) / cost, sent
