"""Scrapy's scheduler, plus a hold for retries that must not be sent yet: for crawls without a pass.

The products crawl's scheduler is ``passes/scheduler.py`` (its pass holds
retries). This one serves what has no pass: ``scrapy fetch``/``shell``/``parse``
(``commands/_standalone.py``) and any other spider of the project.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.core.scheduler import Scheduler

from productcrawler import stat_keys

# Request meta key: seconds to hold the request before it may be sent (set by the retry policy).
from productcrawler.meta import RETRY_DELAY
from productcrawler.stat_keys import add_seconds

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IDelayedCall

logger = logging.getLogger(__name__)


class DelayingScheduler(Scheduler):
    """A request with ``meta["retry_delay"] > 0`` waits here, off the downloader,
    and re-enters the engine (``engine.crawl``) when its time comes; only then
    does it queue for a downloader slot and a rate-limit token. Held requests
    count as pending, so the crawl does not finish while one waits.
    """

    crawler: Crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DelayingScheduler:
        scheduler = super().from_crawler(crawler)
        scheduler.crawler = crawler
        scheduler._held = {}
        return scheduler

    _held: dict[Request, IDelayedCall]

    def enqueue_request(self, request: Request) -> bool:
        delay = float(request.meta.pop(RETRY_DELAY, 0) or 0)
        if delay <= 0:
            return super().enqueue_request(request)
        from twisted.internet import reactor  # the running one: installed by Scrapy before the crawl

        self._held[request] = reactor.callLater(delay, self._release, request)
        assert self.stats is not None
        self.stats.inc_value(stat_keys.RETRY_DELAYED)
        add_seconds(self.stats, stat_keys.RETRY_DELAY_SECONDS, delay)
        return True

    def _release(self, request: Request) -> None:
        del self._held[request]
        if self.crawler.engine is not None and self.crawler.engine.spider is not None:
            self.crawler.engine.crawl(request)

    def has_pending_requests(self) -> bool:
        return bool(self._held) or super().has_pending_requests()

    def __len__(self) -> int:
        return len(self._held) + super().__len__()

    def close(self, reason: str) -> Deferred[None] | None:
        if self._held:
            logger.info("%d delayed retries were waiting at close; the next run fetches their ids again",
                        len(self._held))
        for call in self._held.values():
            if call.active():
                call.cancel()
        self._held.clear()
        return super().close(reason)
