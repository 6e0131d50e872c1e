"""A GraphQL listing's query-cost budget (Shopify's ``extensions.cost``), paced as announced budgets are.

Shopify's GraphQL Admin API puts its budget in every answer's body, in points:
``throttleStatus {maximumAvailable, currentlyAvailable, restoreRate}`` and the
query's ``requestedQueryCost``. This downloader middleware reads it off each
listing page's answer and announces it to the rate limit in queries, as the
IETF ``RateLimit``/``RateLimit-Policy`` headers say a budget: ``r`` queries
fit in the points available now, the next one fits in ``t`` seconds, and the
restore rate allows ``q`` queries per ``w`` seconds. The budget machinery
(``ratelimit/``: paced, shared through Redis) then holds the queries to it,
as it holds a REST API to its headers, so that a query is sent when its
points are there rather than refused ``THROTTLED``. It sits after the rate
limit in the response's way back (a higher order), so the rate limit reads
the headers it adds.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from productcrawler.config.crawler import crawl_config
from productcrawler.meta import LISTING_PAGE

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

#: The policy's window: long enough that its whole number of queries loses under 2 % of the restore rate.
WINDOW = 600


def announced(cost: dict[str, Any]) -> dict[str, str] | None:
    """The RateLimit headers that say ``extensions.cost``'s budget in queries; None if it is not readable."""
    try:
        status = cost["throttleStatus"]
        per_query = float(cost["requestedQueryCost"])
        available = float(status["currentlyAvailable"])
        restore = float(status["restoreRate"])
    except (KeyError, TypeError, ValueError):
        return None
    if per_query <= 0 or restore <= 0 or available < 0:
        return None
    fits = math.floor(available / per_query)
    until_next = math.ceil((per_query * (fits + 1) - available) / restore)
    per_window = max(1, math.floor(restore * WINDOW / per_query))
    return {"RateLimit-Policy": f'"cost";q={per_window};w={WINDOW}',
            "RateLimit": f'"cost";r={fits};t={max(1, until_next)}'}


class GraphqlCostBudget:
    """Adds the RateLimit headers of a GraphQL listing page's cost to its answer (off without PRODUCT_LIST_QUERY)."""

    def __init__(self) -> None:
        self.seen = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GraphqlCostBudget:
        listing = crawl_config(crawler).listing.url
        if listing is None or listing.graphql is None:
            raise NotConfigured
        return cls()

    def process_response(self, request: Request, response: Response) -> Response:
        if LISTING_PAGE not in request.meta or response.status != 200 or b'"cost"' not in response.body:
            return response
        try:
            cost = json.loads(response.body)["extensions"]["cost"]
        except (ValueError, KeyError, TypeError):
            return response
        headers = announced(cost)
        if headers is None:
            return response
        self.seen += 1
        merged = response.headers.copy()
        merged.update(headers)
        return response.replace(headers=merged)
