"""What a listing answer says about its pages: a total, a next URL or a cursor, and where.

Used by detection (which style fits the first answer) and by the styles
themselves where a setting leaves the place to be found (``LIST_TOTAL``,
``LIST_NEXT`` unset). Names are compared without case, ``_`` or ``-``:
``total_pages``, ``totalPages`` and ``TotalPages`` are one name.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from productcrawler.listing.answer import MISSING, ListAnswer, lookup

#: Response headers that hold a total, pages first (WooCommerce's, then the common ones).
TOTAL_HEADERS = ("X-WP-TotalPages", "X-Total-Pages", "X-Pagination-Page-Count",
                 "X-WP-Total", "X-Total-Count", "X-Total", "X-Pagination-Total-Count")
#: Body keys that count pages (BigCommerce total_pages, Best Buy totalPages) and items (Magento total_count).
PAGE_TOTAL_NAMES = frozenset({"totalpages", "totalpage", "pagecount", "numpages", "lastpage"})
ITEM_TOTAL_NAMES = frozenset({"total", "totalcount", "totalitems", "totalresults", "totalrecords",
                              "totalelements", "totalproducts"})
#: Body keys that hold the next page's URL (a string, or an object with href/url).
NEXT_URL_NAMES = frozenset({"next", "nextpageurl", "nexturl", "nextlink", "@odata.nextlink", "nextpage"})
#: Body keys that hold the next cursor; ``next``/``after`` count only under a ``cursor(s)`` object.
CURSOR_NAMES = frozenset({"nextcursor", "nextcursormark", "nextpageinfo", "pageinfo", "nextpagetoken", "nexttoken"})
CURSOR_PARENTS = frozenset({"cursor", "cursors"})
#: How deep clues are looked for (BigCommerce's ``meta.pagination.links.next`` is depth 4).
CLUE_DEPTH = 4


def squash(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def says_pages(name: str) -> bool:
    """A total whose name says pages counts pages (``X-WP-TotalPages``, ``totalPages``); else items."""
    return "page" in name.lower()


@dataclass(frozen=True)
class Total:
    """Where the total is (``header`` or ``body``, the header name or dotted path) and what it counts."""

    source: str
    name: str
    counts: str  # 'pages' | 'items'

    def __str__(self) -> str:
        return f"{self.source}:{self.name}"

    def read(self, answer: ListAnswer) -> int | None:
        """The total in this answer; None when it is absent or not a whole number."""
        if self.source == "header":
            value: Any = answer.headers.get(self.name)
        else:
            value = lookup(answer.body, self.name)
        return whole_number(value)

    def pages(self, answer: ListAnswer, page_size: int | None) -> int | None:
        """How many pages the listing has: the total itself, or the items over the page size, rounded up."""
        total = self.read(answer)
        if total is None or self.counts == "pages":
            return total
        return math.ceil(total / page_size) if page_size else None

    def items(self, answer: ListAnswer, page_size: int | None) -> int | None:
        """How many items the listing has: the total itself, or (counting pages) pages times the page size."""
        total = self.read(answer)
        if total is None or self.counts == "items":
            return total
        return total * page_size if page_size else None


def whole_number(value: Any) -> int | None:
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _walk(body: Any) -> Iterator[tuple[str, str, Any]]:
    """``(path, parent key, value)`` of every key of the body's objects, breadth-first, ``CLUE_DEPTH`` deep."""
    level: list[tuple[str, str, Any]] = [("", "", body)]
    for _ in range(CLUE_DEPTH):
        below = []
        for prefix, _parent, node in level:
            if type(node) is not dict:
                continue
            for key, value in node.items():
                path = f"{prefix}{key}"
                yield path, _parent_name(prefix), value
                below.append((f"{path}.", str(key), value))
        level = below


def _parent_name(prefix: str) -> str:
    return squash(prefix.rstrip(".").rpartition(".")[2])


def find_total(answer: ListAnswer, prefer: str, counts: str | None = None) -> Total | None:
    """The total this answer gives, preferring one that counts ``prefer`` (pages or items).

    ``counts`` (``LIST_TOTAL_COUNTS``) overrides what a found total is taken to count.
    """
    found: list[Total] = []
    for name in TOTAL_HEADERS:
        if whole_number(answer.headers.get(name)) is not None:
            found.append(Total("header", name, counts or ("pages" if says_pages(name) else "items")))
    for path, _parent, value in _walk(answer.body):
        key = squash(path.rpartition(".")[2])
        if (key in PAGE_TOTAL_NAMES or key in ITEM_TOTAL_NAMES) and whole_number(value) is not None:
            found.append(Total("body", path, counts or ("pages" if key in PAGE_TOTAL_NAMES else "items")))
    preferred = [total for total in found if total.counts == prefer]
    return next(iter(preferred or found), None)


def looks_like_url(value: Any) -> bool:
    return isinstance(value, str) and value.strip().startswith(("http://", "https://", "/", "?"))


def next_url_at(body: Any, path: str) -> str | None:
    """The next page's URL at ``path``: a URL string, or an object's ``href``/``url``; None when there is none."""
    value = lookup(body, path)
    if type(value) is dict:
        value = value.get("href", value.get("url"))
    return value.strip() if looks_like_url(value) else None


def find_next_url(body: Any) -> str | None:
    """The path of the first next-page URL in the body (``next``, ``links.next``, ``meta.pagination.links.next``)."""
    for path, _parent, _value in _walk(body):
        if squash(path.rpartition(".")[2]) in NEXT_URL_NAMES and next_url_at(body, path) is not None:
            return path
    return None


def cursor_at(body: Any, path: str) -> str | None:
    """The cursor at ``path`` as text; None when absent, null or empty (the end of the listing)."""
    value = lookup(body, path)
    if value is MISSING or value is None or isinstance(value, (bool, dict, list)):
        return None
    return str(value) or None


def find_cursor(body: Any) -> str | None:
    """The path of the first next-cursor key in the body (``nextCursorMark``, ``next_cursor``, ``cursor.next``)."""
    for path, parent, value in _walk(body):
        key = squash(path.rpartition(".")[2])
        named = key in CURSOR_NAMES or (key in ("next", "after") and parent in CURSOR_PARENTS)
        if named and not looks_like_url(value) and cursor_at(body, path) is not None:
            return path
    return None
