"""A test-only extension: on which thread does the shared pass's Redis client run its commands?

Enabled by ``tests/test_passes.py`` through EXTENSIONS in a real crawl. It
watches the real client (``redis_pass_for``), from the moment the crawler is
built until the engine has stopped, and prints one line at the end::

    REDIS-THREADS {"reactor": [...commands run on the reactor thread...], "other": N}
"""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Any

from scrapy import signals

from productcrawler.passes import redis_pass_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class RedisThreadWatch:
    def __init__(self, crawler: Crawler) -> None:
        client = redis_pass_for(crawler).client
        self.on_reactor: list[str] = []
        self.elsewhere = 0
        self._watching = True
        run = client.execute_command

        def watched(*args: Any, **options: Any) -> Any:
            if self._watching:
                if threading.current_thread() is threading.main_thread():
                    self.on_reactor.append(str(args[0]))
                else:
                    self.elsewhere += 1
            return run(*args, **options)

        client.execute_command = watched  # type: ignore[method-assign]
        crawler.signals.connect(self.report, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisThreadWatch:
        return cls(crawler)

    def report(self) -> None:
        self._watching = False
        print("REDIS-THREADS " + json.dumps({"reactor": self.on_reactor, "other": self.elsewhere}),
              file=sys.stderr, flush=True)
