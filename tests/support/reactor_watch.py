"""A test-only extension: how long did the reactor go without turning?

Enabled by ``tests/test_pass_crawl.py`` through EXTENSIONS in a real crawl. A tick
every 10 ms records the longest gap between two ticks, from the moment the
engine starts until it stops, and one line is printed at the end::

    REACTOR-GAP {"max_ms": 23.4, "ticks": 812}

A call that blocked the reactor (a synchronous Redis command, say) shows as
a gap at least as long as the call.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from scrapy import signals
from twisted.internet.task import LoopingCall

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class ReactorWatch:
    def __init__(self, crawler: Crawler) -> None:
        self.max_gap = 0.0
        self.ticks = 0
        self._last: float | None = None
        self._loop = LoopingCall(self._tick)
        crawler.signals.connect(self.start, signal=signals.engine_started)
        crawler.signals.connect(self.report, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorWatch:
        return cls(crawler)

    def start(self) -> None:
        self._loop.start(0.01)

    def _tick(self) -> None:
        now = time.monotonic()
        if self._last is not None:
            self.max_gap = max(self.max_gap, now - self._last)
        self._last = now
        self.ticks += 1

    def report(self) -> None:
        if self._loop.running:
            self._loop.stop()
        print("REACTOR-GAP " + json.dumps({"max_ms": round(self.max_gap * 1000, 1), "ticks": self.ticks}),
              file=sys.stderr, flush=True)
