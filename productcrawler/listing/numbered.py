"""The numbered pagination styles: page numbers and offsets, any page's URL built from the first.

With a total (a header or body key, ``LIST_TOTAL``) the listing ends where the
total says, never at an empty page alone: Magento answers a page past the end
with the last page again, WooCommerce with ``[]``. A total that counts items
(Magento's ``total_count``) is turned into pages with the page size, which is
how many products page 1 held (a server may cap the size asked for), else the
URL's page-size parameter. Without a total the listing ends at an empty page,
a page with fewer products than that size, or a page that repeats the one
before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from productcrawler.listing import urls
from productcrawler.listing.answer import ListAnswer, ListingError
from productcrawler.listing.clues import Total, find_total, whole_number
from productcrawler.listing.options import LIMIT_PARAMS
from productcrawler.listing.paginators import Walk


@dataclass(eq=False)
class Numbered(Walk):
    """What page numbers and offsets share: the parameter, the page size, the total."""

    numbered: ClassVar[bool] = True
    prefer: ClassVar[str] = "pages"
    param: str = "page"
    limit_param: str | None = None  # LIST_LIMIT_PARAM; None: the first of LIMIT_PARAMS the URL has
    total: Total | None = None  # LIST_TOTAL, or the total detection found
    find: bool = False  # look for a total in the first answer (LIST_TOTAL unset)
    counts: str | None = None  # LIST_TOTAL_COUNTS when set: what a found total counts
    _page_size: int | None = field(default=None, init=False, repr=False)
    _pages: int | None = field(default=None, init=False, repr=False)

    def value(self, url: str) -> int | None:
        """This URL's number in the paging parameter (None: absent or not a whole number)."""
        return whole_number(urls.query_value(url, self.param))

    def limit(self, url: str) -> int | None:
        names = [self.limit_param] if self.limit_param else LIMIT_PARAMS
        for name in names:
            size = whole_number(urls.query_value(url, name))
            if size:
                self.limit_param = name
                return size
        return None

    def page_size(self, answer: ListAnswer, products_on_page: int, page: int) -> int | None:
        """Products per page: what page 1 held, else the URL's page-size parameter."""
        if page == 1 and products_on_page:
            self._page_size = products_on_page
        return self._page_size or self.limit(answer.url)

    def total_of(self, answer: ListAnswer) -> Total | None:
        if self.total is None and self.find:
            self.total = find_total(answer, self.prefer, self.counts)
        return self.total

    def describe(self) -> str:
        size = f", page size in ?{self.limit_param}=" if self.limit_param else ""
        if self.total is None:
            end = ("; no total: the listing ends at an empty page, a page with fewer products than page 1 "
                   "or a page that repeats the one before")
        else:
            known = f"{self._pages} pages" if self._pages is not None else "the number of pages"
            end = f"; {known} from {self.total} (counts {self.total.counts})"
        return f"{self.what()}{size}{end}"

    def what(self) -> str:
        raise NotImplementedError

    def ended(self, products_on_page: int, size: int | None) -> bool:
        """Without a total: an empty page, or one with fewer products than a full page."""
        return not products_on_page or (size is not None and products_on_page < size)


@dataclass(eq=False)
class PageNumberPaginator(Numbered):
    """Page numbers in a query parameter (``page``, ``searchCriteria[currentPage]``); page 1 is the listing URL."""

    style: ClassVar[str] = "page_number"

    def what(self) -> str:
        return f"page numbers in ?{self.param}="

    def first_number(self, url: str, page: int) -> int:
        """The number the API gives page 1 of this walk (the listing URL's, else 1)."""
        number = self.value(url)
        return 1 if number is None else max(number - (page - 1), 0)

    def page_url(self, first_url: str, page: int) -> str:
        if page < 1:
            raise ValueError(f"page {page}: pages are numbered from 1")
        if page == 1:
            return urls.normalise(first_url)
        return urls.with_param(first_url, self.param, self.first_number(first_url, 1) + page - 1)

    def walk_pages(self, answer: ListAnswer, products_on_page: int, page: int) -> int | None:
        """Pages from the listing URL to the end, from this answer's total (None: no total)."""
        total = self.total_of(answer)
        pages = total.pages(answer, self.page_size(answer, products_on_page, page)) if total else None
        if pages is None:
            return self._pages  # an answer without the total: the one an earlier page gave
        start = self.first_number(answer.url, page)
        # An API that numbers from 0 has pages 0..N-1: N pages from 0; one from 1 has 1..N.
        self._pages = max(pages - (start - 1 if start else 0), 1)
        return self._pages

    def total_pages(self, first: ListAnswer, products_on_page: int) -> int | None:
        return self.walk_pages(first, products_on_page, 1)

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None:
        repeated = self.repeats(page, ids)
        pages = self.walk_pages(answer, products_on_page, page)
        if repeated or (pages is not None and page >= pages):
            return None
        if pages is None and self.ended(products_on_page, self.page_size(answer, products_on_page, page)):
            return None
        return urls.with_param(answer.url, self.param, self.first_number(answer.url, page) + page)


@dataclass(eq=False)
class OffsetPaginator(Numbered):
    """An item offset in a query parameter (``offset``, DummyJSON's ``skip``), stepping by the page size."""

    style: ClassVar[str] = "offset"
    prefer: ClassVar[str] = "items"
    param: str = "offset"
    _items: int | None = field(default=None, init=False, repr=False)

    def what(self) -> str:
        return f"offsets in ?{self.param}="

    def step(self, url: str) -> int:
        size = self._page_size or self.limit(url)
        if not size:
            raise ListingError(f"cannot tell the page size of {url}: no page-size parameter in it and page 1 "
                               "not seen; set LIST_LIMIT_PARAM")
        return size

    def page_url(self, first_url: str, page: int) -> str:
        if page < 1:
            raise ValueError(f"page {page}: pages are numbered from 1")
        if page == 1:
            return urls.normalise(first_url)
        start = self.value(first_url) or 0
        return urls.with_param(first_url, self.param, start + (page - 1) * self.step(first_url))

    def total_pages(self, first: ListAnswer, products_on_page: int) -> int | None:
        total = self.total_of(first)
        size = self.page_size(first, products_on_page, 1)
        items = self._items = total.items(first, size) if total else None
        if items is None or not size:
            return None
        self._pages = max(math.ceil((items - (self.value(first.url) or 0)) / size), 1)
        return self._pages

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None:
        repeated = self.repeats(page, ids)
        size = self.page_size(answer, products_on_page, page) or products_on_page
        total = self.total_of(answer)
        items = total.items(answer, size) if total else None
        if items is None:
            items = self._items  # an answer without the total: the one an earlier page gave
        self._items = items
        following = (self.value(answer.url) or 0) + size
        if repeated or not size or (items is not None and following >= items):
            return None
        if items is None and self.ended(products_on_page, size):
            return None
        return urls.with_param(answer.url, self.param, following)
