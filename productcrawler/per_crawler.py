"""``PerCrawler``: one object per crawler, built on first use and kept on the crawler.

Each package that owns a per-crawler object (the configuration, the database,
the pass, the histograms, the stops) declares one of these beside it, so that
every component of a crawler asks for the same object, and a second crawler in
the same process gets its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

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


def downloader_middleware(crawler: Crawler, cls: type[T]) -> T | None:
    """The crawler's downloader middleware of ``cls`` (None if it has none), found once and kept.

    It is found once the engine exists (at a crawl's first request or answer: components may be
    handed requests before every ``spider_opened`` has run). Before that, as for a component used
    on its own (Scrapy's own way to tell is its ``_engine``), there is none to find, and nothing is kept.
    """
    found: dict[type, Any] = crawler.__dict__.setdefault("_productcrawler_middlewares", {})
    if cls not in found:
        if crawler._engine is None:
            return None
        found[cls] = crawler.get_downloader_middleware(cls)
    middleware: T | None = found[cls]
    return middleware
