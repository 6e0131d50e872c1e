"""Shopify's GraphQL Admin API 2024-10 over the REST imitation's catalogue: ``POST /admin/api/2024-10/graphql.json``.

Written from shopify.dev ("GraphQL Admin API rate limits", "Paginating results
with GraphQL", "Shopify API search syntax") and the Shopify Engineering post on
calculated query cost. The catalogue, the token and ``mutate()`` are those of
``shopify.Shopify`` (its REST endpoints still answer here), so REST and GraphQL
of one imitation agree; a product's id is ``gid://shopify/Product/<REST id>``.

A request is ``{"query": ..., "variables": {...}, "operationName": ...}`` with
``X-Shopify-Access-Token``; a wrong token is a 401 as in REST. Every other
answer is a 200 with ``extensions.cost`` = ``{requestedQueryCost,
actualQueryCost, throttleStatus: {maximumAvailable, currentlyAvailable,
restoreRate}}`` (see ``graphql_cost`` for the cost); a query that is not
GraphQL, or asks for a field the schema lacks, is a 200 with ``errors``.

The budget: a leaky bucket of ``maximum`` points (1,000) restoring ``restore``
points a second (50). A query whose requested cost exceeds the points
available runs not at all: ``errors: [{"message": "Throttled", "extensions":
{"code": "THROTTLED", ...}}]``, no data. Otherwise the requested cost is taken
before it runs and the difference to the actual cost given back after. A
requested cost above 1,000 is refused whatever the bucket holds
(``MAX_COST_EXCEEDED``).

``products(first, after, last, before, query, reverse, sortKey)`` (the schema
in ``shopify_graphql_schema``): the
products by id (``sortKey: UPDATED_AT``: by modification time), edges with
cursors and ``nodes``, ``pageInfo``; ``query`` takes Shopify's search syntax
for ``updated_at`` and ``id`` (``updated_at:>='2024-01-01T00:00:00Z'``,
``updated_at:>2024-01-01``, ``id:>123``, terms joined by spaces or ``AND``);
another field is ignored with a warning in ``extensions.search``, as Shopify
does. ``product(id:)`` answers one product or null; ``shop`` the shop.
"""

from __future__ import annotations

import math
import time
from typing import Any

from aiohttp import web
from graphql import (
    ExecutionResult,
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    execute,
    get_operation_ast,
    parse,
    validate,
)
from graphql.execution.values import get_variable_values

from tests.support.imitations._base import ARRIVAL, json_answer
from tests.support.imitations.graphql_cost import Cost, CostError
from tests.support.imitations.shopify import Shopify
from tests.support.imitations.shopify_graphql_schema import (
    COMPARE,
    QUERY_ROOT,
    SCHEMA,
    SHOP,
    connection,
    product_node,
    search,
)

PATH = "/admin/api/2024-10/graphql.json"
DOCUMENTATION = "https://shopify.dev/api/usage/rate-limits"
#: The largest requested cost of one query, whatever the plan.
SINGLE_QUERY_MAX = 1000


class Points:
    """The leaky bucket of cost points: ``maximum`` at most, ``restore`` more each second."""

    def __init__(self, maximum: int, restore: float) -> None:
        self.maximum, self.restore = maximum, restore
        self.reset()

    def reset(self) -> None:
        self.available, self.at = float(self.maximum), time.time()

    def refill(self, now: float) -> None:
        self.available = min(float(self.maximum), self.available + (now - self.at) * self.restore)
        self.at = now

    def take(self, cost: int) -> bool:
        if cost > self.available:
            return False
        self.available -= cost
        return True

    def give_back(self, points: int) -> None:
        self.available = min(float(self.maximum), self.available + points)

    def status(self) -> dict[str, Any]:
        return {"maximumAvailable": float(self.maximum), "currentlyAvailable": math.floor(self.available),
                "restoreRate": float(self.restore)}


class ShopifyGraphql(Shopify):
    name = "shopify-graphql"

    def __init__(self, size: int | None = None, maximum: int = 1000, restore: float = 50.0,
                 bucket: int = 40, leak: float = 2.0) -> None:
        self.points = Points(maximum, restore)
        super().__init__(size, bucket, leak)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_post(PATH, self._graphql)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    def reset_budget(self) -> None:
        super().reset_budget()
        self.points.reset()
        self.queried = 0

    # The resolvers.
    def root(self, searched: list[dict[str, Any]]) -> dict[str, Any]:
        def products(info: Any, **arguments: Any) -> dict[str, Any]:
            terms, warnings = search(arguments.get("query") or "")
            if warnings:
                searched.append({"path": ["products"], "query": arguments["query"], "warnings": warnings})
            keys = [key for key in self.ordered() if all(COMPARE[op](self.value(key, field), value)
                                                         for field, op, value in terms)]
            by_time = arguments.get("sortKey") == "UPDATED_AT"
            entries = [([self.modified[key].timestamp(), key] if by_time else [key],
                        product_node(self.products[key])) for key in keys]
            return connection(sorted(entries, key=lambda entry: entry[0]), arguments)

        def product(info: Any, id: str) -> dict[str, Any] | None:
            key = id.rpartition("/")[2]
            found = self.products.get(int(key)) if id.startswith("gid://shopify/Product/") and key.isdigit() else None
            return None if found is None else product_node(found)

        return {"products": products, "product": product, "shop": SHOP}

    def value(self, key: int, field: str) -> Any:
        return self.modified[key] if field == "updated_at" else key

    # Serving.
    async def _graphql(self, request: web.Request) -> web.StreamResponse:
        refused = self.refuse(request)
        if refused is not None:
            return refused
        self.queried += 1
        fault = self.faults.get(f"graphql#{self.queried}")
        if fault == "always" or (fault == "once" and f"graphql#{self.queried}" not in self.faulted):
            self.faulted.add(f"graphql#{self.queried}")
            return json_answer({"errors": "Internal Server Error"}, 500 if fault == "always" else 503)
        try:
            asked = await request.json()
            assert isinstance(asked, dict) and isinstance(asked.get("query"), str)
            variables = asked.get("variables") or {}
            assert isinstance(variables, dict)
        except (ValueError, AssertionError):
            return json_answer({"errors": {"query": "Required parameter missing or invalid"}}, 400)
        self.points.refill(time.time())
        answer = self.run(asked["query"], variables, asked.get("operationName"))
        request[ARRIVAL]["cost"] = answer["extensions"]["cost"]
        return json_answer(answer)

    def run(self, query: str, variables: dict[str, Any], operation_name: str | None) -> dict[str, Any]:
        """The answer's body: data and errors, and the cost it charged."""
        try:
            document = parse(query)
        except GraphQLError as error:
            return self.refusal([error.formatted], 0)
        invalid = validate(SCHEMA, document)
        if invalid:
            return self.refusal([error.formatted for error in invalid], 0)
        operation = get_operation_ast(document, operation_name)
        if not isinstance(operation, OperationDefinitionNode):
            return self.refusal([{"message": "An operation name is required"}], 0)
        if SCHEMA.get_root_type(operation.operation) is not QUERY_ROOT:
            return self.refusal([{"message": f"Schema is not configured for {operation.operation.value}s."}], 0)
        coerced = get_variable_values(SCHEMA, operation.variable_definitions or (), variables)
        if isinstance(coerced, list):
            return self.refusal([error.formatted for error in coerced], 0)
        fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
        cost = Cost(SCHEMA, fragments, coerced)
        assert QUERY_ROOT is not None
        try:
            requested = cost.requested(operation.selection_set, QUERY_ROOT)
        except CostError as error:
            return self.refusal([{"message": str(error)}], 0)
        if requested > SINGLE_QUERY_MAX:
            return self.refusal([{
                "message": f"Query cost is {requested}, which exceeds the single query max cost limit "
                           f"({SINGLE_QUERY_MAX}).",
                "extensions": {"code": "MAX_COST_EXCEEDED", "cost": requested, "maxCost": SINGLE_QUERY_MAX,
                               "documentation": DOCUMENTATION}}], requested)
        if not self.points.take(requested):
            return self.refusal([{"message": "Throttled", "extensions": {"code": "THROTTLED",
                                                                         "documentation": DOCUMENTATION}}], requested)
        searched: list[dict[str, Any]] = []
        result = execute(SCHEMA, document, root_value=self.root(searched), operation_name=operation_name,
                         variable_values=variables)
        assert isinstance(result, ExecutionResult)
        actual = cost.actual(operation.selection_set, QUERY_ROOT, result.data)
        self.points.give_back(requested - actual)
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [error.formatted for error in result.errors]
        body["extensions"] = {"cost": self.cost(requested, actual)}
        if searched:
            body["extensions"]["search"] = searched
        return body

    def refusal(self, errors: list[Any], requested: int) -> dict[str, Any]:
        return {"errors": errors, "extensions": {"cost": self.cost(requested, None)}}

    def cost(self, requested: int, actual: int | None) -> dict[str, Any]:
        return {"requestedQueryCost": requested, "actualQueryCost": actual, "throttleStatus": self.points.status()}
