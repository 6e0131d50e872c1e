"""``PerCrawler``: one object per crawler, built on first use and kept on the crawler.

Each package that owns a per-crawler object (the configuration, the database,
the pass, the histograms, the stops) declares one of these beside it, so that
every component of a crawler asks for the same object, and a second crawler in
the same process gets its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

T = TypeVar("T")


class PerCrawler(Generic[T]):
    def __init__(self, name: str, build: Callable[[Crawler], T]) -> None:
        self._attribute = f"_productcrawler_{name}"
        self._build = build

    def __call__(self, crawler: Crawler) -> T:
        """The crawler's object (whoever asks first builds it)."""
        value: T | None = getattr(crawler, self._attribute, None)
        if value is None:
            value = self.keep(crawler, self._build(crawler))
        return value

    def built(self, crawler: Crawler) -> T | None:
        """The crawler's object if something has built it yet (for those that only read it)."""
        return getattr(crawler, self._attribute, None)

    def keep(self, crawler: Crawler, value: T) -> T:
        """Make ``value`` the crawler's object."""
        setattr(crawler, self._attribute, value)
        return value
