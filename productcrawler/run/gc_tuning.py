"""Keeps CPython's cyclic garbage collector off the crawl's hot path.

With Python's default thresholds (700, 10, 10) a crawl at 500 responses/second
runs dozens of young collections a second and a full collection every few
seconds; each full collection walks every object Scrapy, Twisted and the
imports have built and stops the reactor for tens of milliseconds. The rate
limiter cannot send a slot it wakes up for that late, so those pauses cost
slots of the cap as well as CPU (figures: docs/design-notes.md#garbage-collector-tuning).

Once the spider is open, this extension:

- moves every object alive at that moment into the permanent generation
  (``gc.freeze()``): start-up objects live as long as the crawl, so scanning
  them again and again finds nothing;
- raises the young-generation threshold to ``GC_GEN0_THRESHOLD`` (default
  50,000 allocations): a response's objects are freed by reference counting
  long before that, so the collector runs a few times per crawl instead of
  tens of times a second. Garbage in reference cycles (a Failure and its
  traceback) waits a little longer to be freed: a few MB at most.

Both are undone when the spider closes. ``GC_GEN0_THRESHOLD=0`` keeps Python's
thresholds and only freezes; remove the extension from EXTENSIONS to do neither.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals

from productcrawler.config.crawler import crawl_config
from productcrawler.config.declared import DECLARED

if TYPE_CHECKING:
    # typing.Self requires Python 3.11
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The young-generation threshold unless GC_GEN0_THRESHOLD says otherwise.
GC_GEN0_THRESHOLD: int = DECLARED["GC_GEN0_THRESHOLD"].default


class GcTuning:
    def __init__(self, gen0_threshold: int) -> None:
        self.gen0_threshold: int = gen0_threshold
        self._saved_thresholds: tuple[int, int, int] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        extension = cls(crawl_config(crawler).monitoring.gc_gen0_threshold)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        gc.collect()
        gc.freeze()
        self._saved_thresholds = gc.get_threshold()
        if self.gen0_threshold:
            gc.set_threshold(self.gen0_threshold, *self._saved_thresholds[1:])
        logger.debug("Garbage collector: %d start-up objects frozen, thresholds %s",
                     gc.get_freeze_count(), gc.get_threshold())

    def spider_closed(self) -> None:
        if self._saved_thresholds is not None:
            gc.set_threshold(*self._saved_thresholds)
            self._saved_thresholds = None
        gc.unfreeze()
