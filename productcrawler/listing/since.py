"""Incremental listing passes: ``{since}`` in PRODUCT_LIST_URL, and when a pass lists everything instead.

``{since}`` (ISO 8601 UTC, ``2026-12-03T09:55:00Z``) or ``{since:FORMAT}`` (a
``strftime`` format, ``{since:%Y-%m-%d %H:%M:%S}``) becomes the start of the
last complete pass over the same listing minus ``INCREMENTAL_LAG``, so that
writes the API made while that pass ran, or committed late, are listed again.
A pass with nothing to compare (the first), or one ``FULL_PASS_EVERY`` asks
for, lists everything: ``{since}`` is the Unix epoch, which every API's
modification filter passes. Only such a full pass may mark unlisted products
removed (``LIST_REMOVALS``): a filtered listing lacks every unchanged product.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from productcrawler.listing.answer import ListingError
from productcrawler.listing.graphql import GraphqlQuery, first_locator

_PLACEHOLDER = re.compile(r"\{since(?::([^{}]*))?\}")
#: ``{since}``'s value in a full pass: every product was modified after it.
EPOCH = datetime(1970, 1, 1)
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class ListUrl:
    """PRODUCT_LIST_URL: a URL, perhaps with one ``{since}`` placeholder; or a GraphQL endpoint whose
    query's variables (``PRODUCT_LIST_VARIABLES``) may hold it."""

    template: str
    #: The strftime format of ``{since}``; None: no placeholder (every pass is full).
    since_format: str | None
    #: PRODUCT_LIST_QUERY: the listing is a GraphQL connection POSTed to ``template``; None: REST.
    graphql: GraphqlQuery | None = None

    @classmethod
    def parse(cls, url: str, graphql: GraphqlQuery | None = None, shown: str | None = None) -> ListUrl:
        """``url`` as PRODUCT_LIST_URL; ``shown`` is how a message may show it (masked), ``url`` if None."""
        found = list(_PLACEHOLDER.finditer(url))
        rest = _PLACEHOLDER.sub("", url)
        if len(found) > 1 or "{" in rest or "}" in rest or (found and graphql is not None):
            raise ListingError(f"PRODUCT_LIST_URL={shown or url!r}: the only placeholder it may have is one "
                              "{since} or {since:FORMAT} (with PRODUCT_LIST_QUERY, in PRODUCT_LIST_VARIABLES); "
                              "percent-encode other braces (%7B, %7D)")
        if graphql is not None:
            found = list(_PLACEHOLDER.finditer(graphql.variables))
            if len(found) > 1:
                raise ListingError("PRODUCT_LIST_VARIABLES: at most one {since} or {since:FORMAT}")
        if not found:
            return cls(url, None, graphql)
        since_format = found[0][1] or ISO_FORMAT
        try:
            datetime(2026, 1, 2, 3, 4, 5).strftime(since_format)
        except ValueError as error:
            raise ListingError(f"{{since:{since_format}}} is not a strftime format: {error}") from None
        return cls(url, since_format, graphql)

    @property
    def incremental(self) -> bool:
        return self.since_format is not None

    @property
    def identity(self) -> str:
        """What tells this listing from another (passes over it resume each other): the URL, and the
        GraphQL query and variables."""
        if self.graphql is None:
            return self.template
        return f"{self.template}\n{self.graphql.query}\n{self.graphql.variables}"

    def resolve(self, since: datetime | None) -> str:
        """The first page's URL: ``{since}`` filled in (None: the epoch, a full pass), percent-encoded."""
        if self.since_format is None or self.graphql is not None:
            return self.template
        text = (since or EPOCH).strftime(self.since_format)
        return _PLACEHOLDER.sub(lambda _: quote(text, safe=""), self.template)

    def first_locator(self, since: datetime | None) -> str:
        """What the pass keeps for page 1: its URL, or for GraphQL its variables (``{since}`` filled in)."""
        if self.graphql is None:
            return self.resolve(since)
        variables = self.graphql.variables
        if self.since_format is not None:
            text = json.dumps((since or EPOCH).strftime(self.since_format))[1:-1]
            variables = _PLACEHOLDER.sub(lambda _: text, variables)
        return first_locator(variables)


@dataclass(frozen=True)
class FullPassEvery:
    """FULL_PASS_EVERY: every Nth pass, or a pass once the last full one began this long ago, is full."""

    passes: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, raw: Any) -> FullPassEvery:
        text = str(raw).strip() if raw is not None else ""
        if text.isdigit() and int(text) >= 1:
            return cls(passes=int(text))
        found = _DURATION.fullmatch(text)
        if found and float(found[1]) > 0:
            return cls(seconds=float(found[1]) * _UNIT_SECONDS[found[2].lower()])
        raise ListingError(f"FULL_PASS_EVERY={raw!r}: expected a number of passes (24) or a duration "
                          "(30m, 24h, 7d)")

    def due(self, incremental_since_full: int, last_full_started: datetime | None, now: datetime) -> bool:
        """Whether this pass is full: ``incremental_since_full`` passes ran since the last full one."""
        if last_full_started is None:
            return True
        if self.passes is not None:
            return incremental_since_full + 1 >= self.passes
        assert self.seconds is not None
        return now - last_full_started >= timedelta(seconds=self.seconds)
