"""Records the crawl's own CPU: process user+sys from spider_opened to spider_closed.

Enabled by the bench with ``-s 'EXTENSIONS={"bench.cpuprobe.CpuProbe": 0}'``
and ``BENCH_CPU_PROBE=<file>`` in the environment; writes one JSON object
there. Start-up (imports, settings, connections) and the final shutdown are
left out, so a short run measures the per-response cost without its fixed
start-up cost. ``os.times()`` counts every thread of the process (the
database writer threads included).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class CpuProbe:
    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: tuple[float, float] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CpuProbe:
        path = os.environ.get("BENCH_CPU_PROBE")
        if not path:
            raise NotConfigured
        probe = cls(path)
        crawler.signals.connect(probe.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(probe.spider_closed, signal=signals.spider_closed)
        return probe

    @staticmethod
    def _now() -> tuple[float, float]:
        times = os.times()
        return times.user + times.system, time.monotonic()

    def spider_opened(self) -> None:
        self.opened = self._now()

    def spider_closed(self) -> None:
        if self.opened is None:
            return
        cpu, wall = self._now()
        with open(self.path, "w") as out:
            json.dump({"cpu": cpu - self.opened[0], "wall": wall - self.opened[1]}, out)
