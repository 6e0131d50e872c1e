"""``Stops``: the crawl's stop once a feature decided it must stop, and the requests it no longer sends.

The guard (its streaks, the field-drift check, a certificate) and the proxy
middleware (wrong proxy credentials, every proxy down) stop a crawl whose
answers say the configuration is wrong: :meth:`Stops.stop` records the reason
(the first one wins), sets the exit reason and closes the spider. Scrapy lets
the requests already under way finish first, and some still wait for their
turn (the budget's probes, a retry's backoff, a 429's wait): sent now, they
would only repeat what stopped the crawl, so the download handler asks
:meth:`Stops.refuse_unsent` before sending, without knowing who stopped. The
budget's waits end at the stop too (the rate limit reads
:attr:`Stops.refusing`).

A watcher (the guard, when it is on) is told of the stop first: it writes the
ERROR line and drops the outcomes it holds. Only a watched stop refuses
requests; with ``GUARD_ENABLED`` off the stop is logged by whoever decided it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro

from productcrawler import stat_keys
from productcrawler.meta import ABANDONED, NOT_SENT_STOPPED, STOP_REASONS
from productcrawler.per_crawler import PerCrawler

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler

class Stops:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        #: What stopped the crawl (a key of :data:`~productcrawler.meta.STOP_REASONS`), once something did.
        self.kind: str | None = None
        self.reason: str | None = None  #: its finish reason
        self._watcher: Callable[[str, str], None] | None = None

    def watch(self, watcher: Callable[[str, str], None]) -> None:
        """``watcher(kind, diagnosis)`` logs the stop and settles what it holds; unsent requests are refused."""
        self._watcher = watcher

    @property
    def watched(self) -> bool:
        """Whether a watcher (the guard) is on: only then do the proxies' outage and unsent requests stop."""
        return self._watcher is not None

    @property
    def refusing(self) -> bool:
        """Whether requests not yet sent are refused: a watched stop happened."""
        return self.kind is not None and self._watcher is not None

    def stop(self, kind: str, diagnosis: str, log: logging.Logger) -> None:
        """Stop the crawl for ``kind`` (exit 3); ``log`` says so when nothing watches. A second stop is a no-op."""
        if self.kind is not None:
            return
        self.kind, self.reason = kind, STOP_REASONS[kind]
        self.crawler.stats.set_value(stat_keys.EXIT_REASON, self.reason)
        if self._watcher is not None:
            self._watcher(kind, diagnosis)
        else:
            log.error("Stopping the crawl: %s", diagnosis)
        deferred_from_coro(self.crawler.engine.close_spider_async(reason=self.reason))

    def refuse_unsent(self, request: Request) -> None:
        """Once a watched stop happened, ``request`` is not sent: IgnoreRequest, its id left pending."""
        if not self.refusing:
            return
        request.meta[ABANDONED] = True
        self.crawler.stats.inc_value(stat_keys.GUARD_UNSENT)
        raise IgnoreRequest(NOT_SENT_STOPPED.format(reason=self.reason))


#: The crawler's stops (whoever asks first creates them).
crawl_stops: PerCrawler[Stops] = PerCrawler("stops", Stops)
