"""The pagination styles that follow a link: the ``Link`` header, a next URL in the body, a cursor.

Each style reads, from one page's answer, where the next page is; None is the
end of the listing. A page without products ends every one of these styles,
and so does a page that repeats the previous one (the same product ids), a
next link that points back at the page itself, and a cursor that comes back
unchanged (Best Buy's last ``nextCursorMark``). The numbered styles are in
:mod:`.numbered`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from productcrawler.listing import urls
from productcrawler.listing.answer import ListAnswer
from productcrawler.listing.clues import cursor_at, find_cursor, find_next_url, next_url_at, squash

#: The cursor's parameter when nothing else names it.
DEFAULT_CURSOR_PARAM = "cursor"
#: Values of a listing URL's parameter that mark the start of a cursor walk (Best Buy's, Solr's ``cursorMark=*``).
START_MARKS = ("*",)


class Paginator(Protocol):
    """One pagination style (see the package's docstring for the contract)."""

    style: ClassVar[str]  # 'link_header' | 'next_url' | 'cursor' | 'page_number' | 'offset'
    numbered: ClassVar[bool]  # any page's URL can be built (page_number, offset)

    def describe(self) -> str: ...

    def total_pages(self, first: ListAnswer, products_on_page: int) -> int | None: ...

    def page_url(self, first_url: str, page: int) -> str: ...

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None: ...

    def echoed(self, page: int) -> bool: ...


@dataclass(eq=False)
class Walk:
    """What every style shares: the echo check (a page with the same product ids as the one before)."""

    style: ClassVar[str] = ""
    numbered: ClassVar[bool] = False
    _last: tuple[int, tuple[object, ...]] | None = field(default=None, init=False, repr=False)
    _echo: int | None = field(default=None, init=False, repr=False)

    def repeats(self, page: int, ids: Sequence[object] | None) -> bool:
        """Whether ``ids`` (this page's product ids) are the previous page's; remembers them for the next page.

        Magento answers a page past the end with the last page again: without a
        total, the repeat is the end. Only the page just before is compared, so a
        resumed walk costs at most one page more.
        """
        if ids is None:
            return False
        current = tuple(ids)
        previous, self._last = self._last, (page, current)
        repeated = bool(current) and previous is not None and previous == (page - 1, current)
        if repeated:
            self._echo = page
        return repeated

    def echoed(self, page: int) -> bool:
        """Whether page ``page`` repeated the page before it: the end, and no products of its own."""
        return self._echo == page

    def total_pages(self, first: ListAnswer, products_on_page: int) -> int | None:
        return None

    def page_url(self, first_url: str, page: int) -> str:
        if page == 1:
            return urls.normalise(first_url)
        raise NotImplementedError(f"{self.style} pages are not addressable by number")


@dataclass(eq=False)
class LinkHeaderPaginator(Walk):
    """The ``Link`` header's ``rel="next"`` target (Shopify, WooCommerce, GitHub); none is the end."""

    style: ClassVar[str] = "link_header"
    why: str = "the Link header's rel=\"next\""

    def describe(self) -> str:
        return f"next page from {self.why}"

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None:
        targets = urls.link_targets(answer.headers.get("Link", ""), "next")
        if self.repeats(page, ids) or not products_on_page or not targets:
            return None
        return _onward(answer.url, urls.resolve(answer.url, targets[0]))


@dataclass(eq=False)
class NextUrlPaginator(Walk):
    """A next URL in the body (absolute, ``/path?query`` or BigCommerce's bare ``?limit=250&page=2``)."""

    style: ClassVar[str] = "next_url"
    path: str | None = None  # LIST_NEXT; None: found in the first answer that has one

    def describe(self) -> str:
        where = self.path if self.path is not None else "a key found in the answer (next, links.next, …)"
        return f"next page's URL in the body at {where}"

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None:
        if self.path is None:
            self.path = find_next_url(answer.body)
        link = next_url_at(answer.body, self.path) if self.path is not None else None
        if self.repeats(page, ids) or not products_on_page or link is None:
            return None
        return _onward(answer.url, urls.resolve(answer.url, link))


@dataclass(eq=False)
class CursorPaginator(Walk):
    """A cursor in the body sent back in a query parameter; absent, empty or unchanged is the end."""

    style: ClassVar[str] = "cursor"
    path: str | None = None  # LIST_NEXT; None: found in the first answer that has one
    param: str | None = None  # LIST_CURSOR_PARAM; None: chosen at the first answer (cursor_param)

    def describe(self) -> str:
        where = self.path if self.path is not None else "a key found in the answer (next_cursor, …)"
        return f"cursor in the body at {where}, sent back as ?{self.param or DEFAULT_CURSOR_PARAM}="

    def next_url(self, answer: ListAnswer, products_on_page: int, page: int,
                 ids: Sequence[object] | None = None) -> str | None:
        if self.path is None:
            self.path = find_cursor(answer.body)
        if self.param is None:
            self.param = cursor_param(answer.url, self.path)
        cursor = cursor_at(answer.body, self.path) if self.path is not None else None
        if self.repeats(page, ids) or not products_on_page or cursor is None:
            return None
        if cursor == urls.query_value(answer.url, self.param):
            return None
        return urls.with_param(answer.url, self.param, cursor)


def cursor_param(url: str, path: str | None) -> str:
    """The parameter a cursor goes back in: the URL's start marker (``cursorMark=*``), else one named after
    the cursor's key that the URL has (``nextCursorMark`` → ``cursorMark``), else that name, else ``cursor``."""
    params = urls.query_params(url)
    marked = [name for name, value in params if value in START_MARKS]
    if marked:
        return marked[0]
    if path is None:
        return DEFAULT_CURSOR_PARAM
    key = path.rpartition(".")[2]
    squashed = squash(key)
    if squashed in ("next", "after"):
        return DEFAULT_CURSOR_PARAM
    stem = squash(key[4:]) if squashed.startswith("next") else squashed
    named = [name for name, _ in params if squash(name) == stem]
    if named:
        return named[0]
    return _stem_name(key) or DEFAULT_CURSOR_PARAM


def _stem_name(key: str) -> str:
    """``nextCursorMark`` → ``cursorMark``, ``next_cursor`` → ``cursor``, ``next_page_token`` → ``page_token``."""
    if key.lower().startswith("next"):
        key = key[4:].lstrip("_-")
        return key[:1].lower() + key[1:]
    return key


def _onward(current: str, target: str) -> str | None:
    """The next URL, unless it is the page just fetched (a loop, not a next page)."""
    return None if target == urls.normalise(current) else target
