"""``CrawlContext``: what one crawler's components share, found through :func:`crawl_context`.

A crawl has one configuration, one database connection pool, one pass, one
set of latency histograms, one wholesale-failure guard and one rate limit,
whichever component asks first. Each is built on first use from the
crawler's settings, except the guard and the rate limit: they are Scrapy
components, and record themselves here as they are built, for the components
that consult them (the download handler waits on the rate limit for every
request; the spider and the proxy middleware ask the guard).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals

from productcrawler.config import CrawlConfig
from productcrawler.monitoring.instruments import Instruments
from productcrawler.passes import new_pass
from productcrawler.storage.database import Database
from productcrawler.storage.target import DatabaseTarget

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.guard.failure_guard import WholesaleFailureGuard
    from productcrawler.passes.base import Pass
    from productcrawler.ratelimit.middleware import RateLimitMiddleware

_ATTRIBUTE = "_productcrawler_context"


def crawl_context(crawler: Crawler) -> CrawlContext:
    """The crawler's context (whoever asks first creates it)."""
    context: CrawlContext | None = getattr(crawler, _ATTRIBUTE, None)
    if context is None:
        context = CrawlContext(crawler)
        setattr(crawler, _ATTRIBUTE, context)
    return context


class CrawlContext:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        #: The wholesale-failure guard, once built; None with GUARD_ENABLED off.
        self.guard: WholesaleFailureGuard | None = None
        #: The rate-limit middleware, once built; None with RATE_LIMIT_ENABLED off.
        self.rate_limit: RateLimitMiddleware | None = None
        self._config: CrawlConfig | None = None
        self._instruments: Instruments | None = None
        self._database: Database | None = None
        self._pass: Pass | None = None

    @property
    def config(self) -> CrawlConfig:
        """The contract, parsed and validated (raises ConfigError)."""
        return self.configure()

    def configure(self, *, start_id: Any = None, end_id: Any = None, ids: Any = None) -> CrawlConfig:
        """The contract with the spider's arguments, which win over the settings.

        The spider is built before the other components and calls this; each
        of them gets the same object from :attr:`config`.
        """
        if self._config is None or start_id is not None or end_id is not None or ids is not None:
            self._config = CrawlConfig.from_settings(self.crawler.settings, start_id=start_id, end_id=end_id,
                                                     ids=ids)
        return self._config

    @property
    def instruments(self) -> Instruments:
        """The latency histograms the metrics extension exports."""
        if self._instruments is None:
            self._instruments = Instruments()
        return self._instruments

    @property
    def database(self) -> Database:
        """The connection pool of the pipeline and the pass ledger."""
        if self._database is None:
            config = self.config
            self._database = Database(DatabaseTarget.from_url(config.storage.database_url), config.ids.type,
                                      tuple((c.name, c.spec) for c in config.answer.columns),
                                      config.answer.variants.declared_spec if config.answer.variants else ())
            # Closed last: the pipeline flushes and the ledger settles the pass on the way out.
            self.crawler.signals.connect(self._database.close, signal=signals.engine_stopped, weak=False)
        return self._database

    @property
    def crawl_pass(self) -> Pass:
        """The pass: the scheduler drives it; the pipeline, progress and metrics read it."""
        if self._pass is None:
            self._pass = new_pass(self.config, self.database)
        return self._pass

    @property
    def built_pass(self) -> Pass | None:
        """The pass if something has built it yet (for extensions that only read it)."""
        return self._pass
