"""GraphQL listings (``PRODUCT_LIST_QUERY``): the query POSTed with its variables, pages by ``pageInfo``.

Shopify's GraphQL Admin API (and any Relay-style API) pages a connection:
``products(first: 100, after: $cursor) { edges { node { ... } } pageInfo
{ hasNextPage endCursor } }`` (or ``nodes`` instead of ``edges``). Each page is
a POST of ``{"query": ..., "variables": ...}`` to PRODUCT_LIST_URL; the first
page's variables are ``PRODUCT_LIST_VARIABLES`` (``{since}`` filled in) with
the cursor null, the next page's the same with the cursor set to the
connection's ``endCursor``. A page's variables, as JSON, are what the pass's
ledger keeps for it (its "locator", where a REST listing keeps a URL).

An answer's ``errors`` that say ``THROTTLED`` are an exhausted budget (retried
after the wait its cost needs, as a 429 is); any other errors make the page
no listing page (the guard stops the crawl, exit 3, as for a wrong mapping),
at once for ``MAX_COST_EXCEEDED``: the same query costs as much again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from productcrawler.listing.answer import ListingError

#: The error code of a query refused for the points it would cost now (Shopify).
THROTTLED = "THROTTLED"
#: The error code of a query that costs more than any one query may (Shopify: 1,000 points).
MAX_COST_EXCEEDED = "MAX_COST_EXCEEDED"
#: The reason of an answer with other errors (``bad_response/graphql_errors``).
GRAPHQL_ERRORS = "graphql_errors"
#: How deep an answer's ``data`` is searched for the connection.
SEARCH_DEPTH = 4


class GraphqlErrors(Exception):
    """An answer with GraphQL errors (its messages); ``throttled`` when every one says THROTTLED,
    ``over_cost_limit`` when one says the query costs more than any one query may."""

    def __init__(self, errors: list[Any]) -> None:
        self.errors = errors
        codes = [error.get("extensions", {}).get("code") if isinstance(error, dict) else None for error in errors]
        self.throttled = bool(codes) and all(code == THROTTLED for code in codes)
        self.over_cost_limit = MAX_COST_EXCEEDED in codes
        messages = "; ".join(str(error.get("message", error)) if isinstance(error, dict) else str(error)
                             for error in errors[:3])
        super().__init__(messages[:500])


@dataclass(frozen=True)
class GraphqlQuery:
    """PRODUCT_LIST_QUERY with PRODUCT_LIST_VARIABLES and the cursor's variable name."""

    query: str
    #: The first page's variables as JSON text, perhaps with {since} (listing/since.py fills it in).
    variables: str
    cursor_variable: str = "cursor"

    @classmethod
    def parse(cls, raw_query: Any, raw_variables: Any, cursor_variable: str | None) -> GraphqlQuery:
        text = str(raw_query).strip()
        if text.startswith("@"):
            try:
                text = Path(text[1:].strip()).read_text(encoding="utf-8").strip()
            except OSError as error:
                raise ListingError(f"PRODUCT_LIST_QUERY={raw_query!r}: cannot read the file: {error}") from None
        if "{" not in text or "}" not in text:
            raise ListingError(f"PRODUCT_LIST_QUERY={raw_query!r} is not a GraphQL query (or @file with one)")
        variables = str(raw_variables).strip() if raw_variables not in (None, "") else "{}"
        try:
            parsed = json.loads(re.sub(r"\{since(?::[^{}]*)?\}", "0", variables))
        except ValueError as error:
            raise ListingError(f"PRODUCT_LIST_VARIABLES={raw_variables!r} is not a JSON object: {error}") from None
        if not isinstance(parsed, dict):
            raise ListingError(f"PRODUCT_LIST_VARIABLES={raw_variables!r} is not a JSON object")
        name = cursor_variable or "cursor"
        if f"${name}" not in text:
            raise ListingError(f"PRODUCT_LIST_QUERY has no ${name} variable for the cursor (the connection's "
                              f"after: ${name}); name it, or set LIST_CURSOR_PARAM to the variable it uses")
        return cls(text, variables, name)

    def body(self, locator: str) -> bytes:
        """The POST body of the page whose variables are ``locator``."""
        return json.dumps({"query": self.query, "variables": json.loads(locator)}).encode()

    def next_locator(self, locator: str, page_info: dict[str, Any]) -> str | None:
        """The next page's variables, or None at the end of the connection."""
        cursor = page_info.get("endCursor")
        if page_info.get("hasNextPage") is not True or not isinstance(cursor, str) or not cursor:
            return None
        variables = json.loads(locator)
        if variables.get(self.cursor_variable) == cursor:
            return None  # the same page again: never loop
        return json.dumps({**variables, self.cursor_variable: cursor}, sort_keys=True)


def first_locator(variables: str) -> str:
    """The first page's variables (``{since}`` filled in already), as the ledger keeps them."""
    return json.dumps(json.loads(variables), sort_keys=True)


def read_page(body: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A GraphQL answer's products (the connection's nodes) and its ``pageInfo``.

    Raises ``GraphqlErrors`` for an answer with errors, ``ValueError`` for one without a connection.
    """
    if not isinstance(body, dict):
        raise ValueError(f"a GraphQL answer is a JSON object, not {type(body).__name__}")
    errors = body.get("errors")
    if errors:
        raise GraphqlErrors(errors if isinstance(errors, list) else [errors])
    level: list[Any] = [body.get("data")]
    for _ in range(SEARCH_DEPTH):
        following: list[Any] = []
        for node in level:
            if not isinstance(node, dict):
                continue
            if isinstance(node.get("pageInfo"), dict) and ("edges" in node or "nodes" in node):
                return _nodes(node), node["pageInfo"]
            following += node.values()
        level = following
    raise ValueError("no connection (an object with pageInfo and edges or nodes) in the answer's data")


def _nodes(connection: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(connection.get("nodes"), list):
        return [node for node in connection["nodes"] if isinstance(node, dict)]
    return [edge["node"] for edge in connection.get("edges") or [] if isinstance(edge, dict)
            and isinstance(edge.get("node"), dict)]


def cost_wait(body: Any, fallback: float) -> float:
    """Seconds until a THROTTLED query's points are back: (cost - available) / restore rate (Shopify's
    ``extensions.cost``); ``fallback`` when the answer does not say."""
    try:
        cost = body["extensions"]["cost"]
        status = cost["throttleStatus"]
        missing = float(cost["requestedQueryCost"]) - float(status["currentlyAvailable"])
        return max(0.0, missing) / float(status["restoreRate"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return fallback
