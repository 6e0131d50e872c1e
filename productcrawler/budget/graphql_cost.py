"""A GraphQL listing's query-cost budget (Shopify's ``extensions.cost``), read as a leaky bucket of points.

Shopify's GraphQL Admin API puts its budget in every answer's body, in points:
``throttleStatus {maximumAvailable, currentlyAvailable, restoreRate}`` and the
query's ``requestedQueryCost``. That is a leaky bucket whose size, level and
leak the API says: ``maximumAvailable`` points, ``maximumAvailable -
currentlyAvailable`` of them in use, ``restoreRate`` back each second, and
each query takes its requested cost (the same query pages the whole listing,
so the previous answer's cost is the next query's). The pacer
(:mod:`.pacer`) reads it off each listing page's answer, in place of budget
headers, whatever format ``RATE_LIMIT_HEADERS`` names, and the gate
(:mod:`.plan`, shared through Redis by :mod:`.redis_plan`) sends a query when
its points are there rather than have it refused ``THROTTLED``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from productcrawler.budget.headers import LeakyBudget

#: The format the budget stats name (``productcrawler/ratelimit/budget/format``).
GRAPHQL_COST = "graphql-cost"


def cost_budget(body: bytes) -> LeakyBudget | None:
    """The points bucket an answer's ``extensions.cost`` says; None if the body does not say one."""
    if b'"cost"' not in body:
        return None
    try:
        cost: Any = json.loads(body)["extensions"]["cost"]
        status = cost["throttleStatus"]
        per_query = math.ceil(float(cost["requestedQueryCost"]))
        size = math.floor(float(status["maximumAvailable"]))
        available = math.floor(float(status["currentlyAvailable"]))
        restore = float(status["restoreRate"])
    except (ValueError, KeyError, TypeError, OverflowError):
        return None
    if per_query <= 0 or size <= 0 or not 0 < restore < math.inf or not 0 <= available <= size:
        return None
    return LeakyBudget(GRAPHQL_COST, size - available, size, leak=restore, cost=per_query)
