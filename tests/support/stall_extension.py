"""A test-only extension that stalls the crawler: it blocks the reactor at intervals.

Enabled in a test crawl by the settings ``STALLS``
(``EXTENSIONS={"tests.support.stall_extension.ReactorStall": 0}``);
``STALL_EVERY`` (seconds between stalls, default 0.7) and ``STALL_MIN`` /
``STALL_MAX`` (length of each, default 0.1-0.2 s). Each stall is a
``time.sleep`` on the reactor thread, like a long GC pause or a synchronous
call would be: on purpose, this is the fault under test. The stall count is
logged as the stat ``test/stalls``.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


#: The settings of a crawl whose reactor stalls: the extension on, with its default stalls.
STALLS = {"EXTENSIONS": '{"tests.support.stall_extension.ReactorStall": 0}', "STALL_EVERY": 0.7,
          "STALL_MIN": 0.1, "STALL_MAX": 0.2}


class ReactorStall:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.every = settings.getfloat("STALL_EVERY", 0.7)
        self.shortest = settings.getfloat("STALL_MIN", 0.1)
        self.longest = settings.getfloat("STALL_MAX", 0.2)
        self.random = random.Random(15)
        self.handle: asyncio.TimerHandle | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorStall:
        return cls(crawler)

    def spider_opened(self) -> None:
        self.handle = asyncio.get_running_loop().call_later(self.every, self.stall)

    def stall(self) -> None:
        time.sleep(self.random.uniform(self.shortest, self.longest))
        self.crawler.stats.inc_value("test/stalls")
        self.handle = asyncio.get_running_loop().call_later(self.every, self.stall)

    def spider_closed(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
