"""One listing page's answer as the paginators see it, and where its products are.

``ListAnswer`` is the recorded answer (URL, status, headers, parsed JSON);
``find_products`` finds the list of product objects in its body, at
``LIST_PRODUCTS`` or under a common key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from productcrawler.answer.payload import ABSENT, resolve

#: Keys that hold the products in common list answers, tried in this order at each depth.
PRODUCT_KEYS = ("products", "data", "items", "results", "records", "entries")
#: Keys whose lists of objects are never the products (errors, navigation, the query echoed back).
NOT_PRODUCT_KEYS = frozenset({"errors", "error", "warnings", "messages", "links", "meta", "filter_groups",
                              "sort_orders", "facets", "aggregations"})
#: How deep under the root find_products looks (``result.products`` is depth 2).
SEARCH_DEPTH = 3
KEYS_SHOWN = 12

#: A path that is not in the body at all (as opposed to JSON ``null``).
#: What ``lookup`` gives for a path the answer does not have (PRODUCT_FIELDS paths share the rule).
MISSING: Any = ABSENT


class ListingError(ValueError):
    """The listing cannot be walked as configured; the message names the setting to set and what was found."""


class AnswerHeaders(Mapping[str, str]):
    """Response headers looked up case-insensitively; a repeated header's values joined by ``, ``.

    Built from a dict of strings or from Scrapy's ``Headers`` (bytes keys, lists of bytes values).
    """

    def __init__(self, raw: Mapping[Any, Any] | None = None) -> None:
        self._values: dict[str, tuple[str, str]] = {}
        for key, value in (raw or {}).items():
            name = _text(key)
            values = value if isinstance(value, (list, tuple)) else [value]
            joined = ", ".join(_text(v) for v in values)
            previous = self._values.get(name.lower())
            self._values[name.lower()] = (name, f"{previous[1]}, {joined}" if previous else joined)

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()][1]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._values.values())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"AnswerHeaders({dict(self.items())!r})"


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class ListAnswer:
    """One page's answer: the URL that was requested (absolute), its status, headers and parsed JSON body."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: Any

    def __post_init__(self) -> None:
        if not isinstance(self.headers, AnswerHeaders):
            object.__setattr__(self, "headers", AnswerHeaders(self.headers))


def split_path(path: str) -> tuple[str, ...]:
    """A dotted path's keys; ValueError when a key is empty or has spaces around it."""
    segments = tuple(path.split("."))
    if not path or any(not s.strip() or s != s.strip() for s in segments):
        raise ValueError("must be keys separated by dots, e.g. meta.pagination.total_pages")
    return segments


def lookup(body: Any, path: str | tuple[str, ...]) -> Any:
    """The value at a dotted path (a whole number indexes a list), ``MISSING`` if there is none."""
    return resolve(body, split_path(path) if isinstance(path, str) else path)


def shown_keys(body: Any) -> str:
    """The body's top-level keys (and one level of nested objects' keys) for a message."""
    if type(body) is list:
        return "a JSON array"
    if type(body) is not dict:
        return f"JSON {type(body).__name__}"
    keys: list[str] = []
    for key, value in body.items():
        keys += [f"{key}.{inner}" for inner in value] if type(value) is dict and value else [str(key)]
    more = f", … ({len(keys) - KEYS_SHOWN} more)" if len(keys) > KEYS_SHOWN else ""
    return "keys " + ", ".join(keys[:KEYS_SHOWN]) + more if keys else "an empty object"


def _objects(value: Any) -> bool:
    return type(value) is list and all(type(item) is dict for item in value)


def find_products(body: Any, path: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """The product objects of a page and where they were found (the path, ``''`` for a top-level array).

    With ``path`` (``LIST_PRODUCTS``) exactly there; without it the answer itself when it is an
    array, else the first list of objects under a common key (``PRODUCT_KEYS``), then under any
    key, breadth-first and at most ``SEARCH_DEPTH`` deep. ``ListingError`` when there is none.
    """
    if path is not None:
        found = lookup(body, path)
        if found is MISSING:
            raise ListingError(f"LIST_PRODUCTS={path!r}: the answer has no such path ({shown_keys(body)})")
        if not _objects(found):
            kind = "a list of other values" if type(found) is list else f"JSON {type(found).__name__}"
            raise ListingError(f"LIST_PRODUCTS={path!r}: holds {kind}, not a list of product objects")
        return found, path
    if type(body) is list:
        if not _objects(body):
            raise ListingError("the answer is a JSON array of other values than objects: no products; "
                               "set LIST_PRODUCTS to where they are")
        return body, ""
    if type(body) is not dict:
        raise ListingError(f"the answer is {shown_keys(body)}, not a list of products or an object holding one; "
                          "set LIST_PRODUCTS to where they are")
    level: list[tuple[str, Any]] = [("", body)]
    for _ in range(SEARCH_DEPTH):
        for prefix, node in level:
            for key in PRODUCT_KEYS:
                if key in node and _objects(node[key]):
                    return node[key], prefix + key
        for prefix, node in level:
            for key, value in node.items():
                if key not in NOT_PRODUCT_KEYS and value and _objects(value):
                    return value, prefix + str(key)
        level = [(f"{prefix}{key}.", value) for prefix, node in level for key, value in node.items()
                 if type(value) is dict and key not in NOT_PRODUCT_KEYS]
    raise ListingError(f"no list of products in the answer ({shown_keys(body)}); set LIST_PRODUCTS to their path")
