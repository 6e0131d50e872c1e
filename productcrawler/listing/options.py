"""The listing settings (``LIST_*``) checked, as ``ListingOptions`` (declared in productcrawler/config/declared.py).

Every value is checked when the options are built: a bad one is a
``ListingError`` (a ``ValueError``) naming the setting, the value and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from productcrawler.listing.answer import ListingError, split_path
from productcrawler.listing.clues import Total, says_pages

STYLES = ("link_header", "next_url", "cursor", "page_number", "offset")
NUMBERED_STYLES = ("page_number", "offset")
#: Parameters recognised in the listing URL when LIST_PAGE_PARAM / LIST_OFFSET_PARAM / LIST_LIMIT_PARAM are unset.
PAGE_PARAMS = ("page", "searchCriteria[currentPage]", "currentPage", "pageNumber", "page_number")
OFFSET_PARAMS = ("offset", "skip", "start")
LIMIT_PARAMS = ("limit", "per_page", "pageSize", "page_size", "searchCriteria[pageSize]", "size", "count")
_PARAM = re.compile(r"[^\s&=#?]+")
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _param(name: str, value: str) -> str:
    if not _PARAM.fullmatch(value):
        raise ListingError(f"{name}={value!r} is not a query parameter name (no spaces, &, =, # or ?)")
    return value


def _path(name: str, value: str, shown: str | None = None) -> str:
    try:
        split_path(value)
    except ValueError as error:
        raise ListingError(f"{name}={shown or value!r} {error}") from None
    return value


@dataclass(frozen=True)
class ListingOptions:
    """The ``LIST_*`` settings; None where a setting is unset (found in the answer, or its default)."""

    pagination: str = "auto"
    products: str | None = None
    next: str | None = None
    cursor_param: str | None = None
    page_param: str | None = None
    offset_param: str | None = None
    limit_param: str | None = None
    total: str | None = None
    total_counts: str = "auto"

    def __post_init__(self) -> None:
        if self.pagination not in ("auto", *STYLES):
            raise ListingError(f"LIST_PAGINATION={self.pagination!r} is not a pagination style; "
                               f"allowed: auto, {', '.join(STYLES)}")
        if self.total_counts not in ("auto", "pages", "items"):
            raise ListingError(f"LIST_TOTAL_COUNTS={self.total_counts!r}; allowed: auto, pages, items")
        for name in ("products", "next"):
            value = getattr(self, name)
            if value is not None:
                _path(f"LIST_{name.upper()}", value)
        for name in ("cursor_param", "page_param", "offset_param", "limit_param"):
            value = getattr(self, name)
            if value is not None:
                _param(f"LIST_{name.upper()}", value)
        self.total_spec()  # checks LIST_TOTAL
        if self.next is not None and self.pagination in ("link_header", *NUMBERED_STYLES):
            raise ListingError(f"LIST_NEXT={self.next!r} is for LIST_PAGINATION=next_url or cursor, "
                               f"not {self.pagination}")
        if self.total is not None and self.pagination in ("link_header", "next_url", "cursor"):
            raise ListingError(f"LIST_TOTAL={self.total!r} is for LIST_PAGINATION=page_number or offset, "
                               f"not {self.pagination}")

    def total_spec(self) -> Total | None:
        """``LIST_TOTAL`` as a ``Total``; None when unset (found in the answer)."""
        if self.total is None:
            return None
        source, sep, name = self.total.partition(":")
        source, name = source.strip().lower(), name.strip()
        if not sep or source not in ("header", "body") or not name:
            raise ListingError(f"LIST_TOTAL={self.total!r}: expected header:NAME (header:X-WP-TotalPages) "
                               "or body:PATH (body:meta.pagination.total_pages)")
        if source == "header" and not _HEADER.fullmatch(name):
            raise ListingError(f"LIST_TOTAL={self.total!r}: {name!r} is not a header name")
        if source == "body":
            _path("LIST_TOTAL", name, self.total)
        return Total(source, name, self.counts_for(name))

    def counts_for(self, name: str) -> str:
        """What a total of this name counts: ``LIST_TOTAL_COUNTS``, or what its name says."""
        if self.total_counts != "auto":
            return self.total_counts
        return "pages" if says_pages(name) else "items"

    @property
    def forced_counts(self) -> str | None:
        """``LIST_TOTAL_COUNTS`` when set (it overrides what a found total's name says)."""
        return None if self.total_counts == "auto" else self.total_counts
