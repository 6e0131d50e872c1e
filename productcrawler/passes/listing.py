"""The pass of a single process over a listing's pages (``PRODUCT_LIST_URL``); the database is the ledger.

Positions are pages: page 1 is the listing's first URL, and later pages
become known as answers reveal them (``listing_sql.py``). A page leased and
not yet acknowledged may still reveal more, so the pass is finished only when
every known page is done and none is out. Leasing, retries and what is out
live in memory; opening a resumed pass reads the known pages and which are done.
"""

from __future__ import annotations

import heapq
import logging
from typing import TYPE_CHECKING, Any

from productcrawler.passes.base import FINISHED, RUNNING, Entry, Lease
from productcrawler.passes.listing_sql import known_pages, listing_digest, open_listing_pass
from productcrawler.passes.one_process import OneProcessPass
from productcrawler.passes.summary import finish_with_summary
from productcrawler.storage.database import utcnow

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from productcrawler.config import CrawlConfig
    from productcrawler.listing.since import ListUrl
    from productcrawler.storage.database import Database


class ListingPages:
    """The pages of a listing the pass knows of (its ``IdSource``): a page's "id" is its position."""

    def __init__(self, url: ListUrl) -> None:
        self.template = url.template
        self.graphql = url.graphql is not None
        self.digest = listing_digest(url.identity)
        #: page -> its URL, as far as the pass knows (page 1 once the pass is open: {since} filled in).
        self.urls: dict[int, str] = {}

    @property
    def first_url(self) -> str:
        return self.urls[1]

    @property
    def total(self) -> int:
        return max(self.urls, default=1)

    @property
    def descriptor(self) -> str:
        return f"listing:{self.digest}"

    def describe(self) -> str:
        # A GraphQL page's locator is its variables: the endpoint says more.
        return f"the listing at {self.template if self.graphql else self.urls.get(1, self.template)}"

    def ids_at(self, positions: list[int]) -> list[Any]:
        return list(positions)

    def url(self, page: int) -> str:
        return self.urls[page]

    def learn(self, pages: dict[int, str]) -> None:
        for page, url in pages.items():
            self.urls.setdefault(page, url)

    def close(self) -> None:
        pass


class ListingPass(OneProcessPass):
    def __init__(self, database: Database, config: CrawlConfig) -> None:
        assert config.listing.url is not None
        super().__init__(database)
        self.config = config
        self.ids = ListingPages(config.listing.url)
        self.tracking = bool(config.storage.track_changes)
        self.done_at_start = 0
        self._done: set[int] = set()
        self._waiting: list[int] = []  # known pages never handed out, a heap
        self._out: set[int] = set()  # handed out, not acknowledged: their answers may reveal more

    @property
    def total(self) -> int:
        return self.ids.total

    async def open(self, *, fresh: bool) -> str:
        await self.database.ensure_schema()
        listing = self.config.listing
        self.info = info = await self._run(open_listing_pass, listing.url, fresh=fresh, now=utcnow(),
                                           lag=listing.incremental_lag, full_every=listing.full_pass_every)
        for page, url, done in await self._run(known_pages, info.pass_id):
            self.ids.urls[page] = url
            if done:
                self._done.add(page)
            else:
                heapq.heappush(self._waiting, page)
        self.done_at_start = len(self._done)
        if not info.resumed:
            return f"Starting pass {info.pass_id} over {self.ids.describe()}"
        return (f"Resuming pass {info.pass_id} over {self.ids.describe()}: {self.done_at_start} of the "
                f"{self.total} pages known so far already done")

    async def lease(self, count: int) -> Lease:
        entries = self.due_retries(count)
        while self._waiting and len(entries) < count:
            entries.append(Entry(heapq.heappop(self._waiting)))
        self._out.update(entry.position for entry in entries)
        if entries or self._retries or self._out:
            return Lease(entries, RUNNING)
        return Lease([], FINISHED)

    async def acknowledge(self, positions: list[int], revealed: dict[int, str] | None = None) -> str:
        """Pages whose products are committed (with the pages their answers revealed, committed with them)."""
        for page, url in (revealed or {}).items():
            if page not in self.ids.urls:
                self.ids.urls[page] = url
                heapq.heappush(self._waiting, page)
        for page in positions:
            self._out.discard(page)
            self._done.add(page)
        return RUNNING

    def done(self, this_run: int) -> int:
        return len(self._done)

    async def close(self, reason: str, *, lost: bool) -> bool:
        """Mark the pass finished, with its summary, once every known page is done; True if it is."""
        if self.info is None:
            return False
        pending = self.total - len(self._done)
        if pending:
            logger.info("Pass %d is not complete (%d of the %d pages known so far done; stop reason: %s); "
                        "the next run resumes it", self.info.pass_id, len(self._done), self.total, reason)
            return False
        await self._run(finish_with_summary, self.info.pass_id, None, None, utcnow(), tracking=self.tracking,
                        listing_removals=self.config.listing.removals, declared=self.database.declared_names)
        return True


__all__ = ["ListingPages", "ListingPass"]
