"""Scrapy's log formatter, minus the per-response and per-item records nobody sees.

Scrapy builds the DEBUG record of every response (``crawled``) and item
(``scraped``), reprs included, before its handler drops it at INFO; returning
``None`` skips building it (Scrapy checks ``if logkws is not None``). At DEBUG
the records are built as usual.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure


class QuietLogFormatter(LogFormatter):
    def __init__(self, debug: bool = False) -> None:
        self.debug = debug

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> QuietLogFormatter:
        level = crawler.settings.get("LOG_LEVEL", "DEBUG")
        level = logging.getLevelName(level) if isinstance(level, str) else int(level)
        return cls(debug=level <= logging.DEBUG)

    def crawled(  # type: ignore[override]  # Scrapy types a dict; its docs and callers take None as "skip"
        self, request: Request, response: Response, spider: Spider
    ) -> LogFormatterResult | None:
        return super().crawled(request, response, spider) if self.debug else None

    def scraped(  # type: ignore[override]  # Scrapy types a dict; its docs and callers take None as "skip"
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        return super().scraped(item, response, spider) if self.debug else None
