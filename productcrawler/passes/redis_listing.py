"""A listing pass shared by every instance through Redis: the pages' URLs beside the positions.

The pass is a ``RedisPass`` over pages whose last position grows: page 1 is
the listing's first URL, and the pages an answer makes known are recorded
(``pages`` hash: position -> URL) and the pass extended before the page that
revealed them is acknowledged. So an instance killed between the two loses
nothing: the page comes back and reveals the same pages again. Pages of a
numbered listing are leased like ids, each once, by any instance; a chain
has one page known at a time, so one instance walks it, and when that
instance dies its lease, like any other, goes to another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.passes import redis_scripts
from productcrawler.passes.base import FINISHED, RUNNING, Lease
from productcrawler.passes.listing import ListingPages
from productcrawler.passes.listing_sql import listing_since, set_since
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.redis_connection import reply_text
from productcrawler.storage.database import utcnow

if TYPE_CHECKING:
    from productcrawler.config import CrawlConfig
    from productcrawler.passes.record import SharedPassRecord
    from productcrawler.redis_connection import AsyncClient


class RedisListingPass(RedisPass):
    grows = True
    extra_keys = ("pages",)

    def __init__(self, client: AsyncClient, prefix: str, config: CrawlConfig, record: SharedPassRecord) -> None:
        assert config.listing.url is not None
        self.url = config.listing.url
        self.config = config
        self.pages = ListingPages(config.listing.url)
        super().__init__(client, prefix, self.pages, heartbeat_ttl=config.redis.heartbeat_ttl, record=record)
        self.shared_record = record
        self.listing_removals = config.listing.removals
        self._reveal = client.register_script(redis_scripts.LISTING_REVEAL)

    async def open(self, *, fresh: bool) -> str:
        database = self.shared_record.database
        await database.ensure_schema()
        since = await maybe_deferred_to_future(database.run(
            listing_since, self.url, utcnow(), self.config.listing.incremental_lag,
            self.config.listing.full_pass_every))
        self.pages.urls[1] = self.url.first_locator(since)  # for the opening line; the pass's own is read below
        line = await super().open(fresh=fresh)
        if await self.client.hsetnx(self.key("pages"), "1", self.pages.urls[1]):
            # This instance started the pass: its {since} is the pass's.
            assert self.row_stamp is not None
            await maybe_deferred_to_future(database.run(set_since, self.row_stamp, since))
        self.pages.urls[1] = reply_text(await self.client.hget(self.key("pages"), "1") or self.pages.urls[1])
        return line

    async def lease(self, count: int) -> Lease:
        lease = await super().lease(count)
        unknown = [entry.position for entry in lease.entries if entry.position not in self.pages.urls]
        if unknown:
            urls = await self.client.hmget(self.key("pages"), [str(page) for page in unknown])
            self.pages.learn({page: reply_text(url) for page, url in zip(unknown, urls, strict=True)
                              if url is not None})
        return lease

    async def acknowledge(self, positions: list[int], revealed: dict[int, str] | None = None) -> str:
        if revealed:
            args: list[Any] = [self.pass_id, self.token]
            for page, url in sorted(revealed.items()):
                args += [page, url]
            last = int(await self._reveal(keys=[self.pass_key, self.key("pages")], args=args))
            if last < 0:
                return await super().acknowledge(positions)  # another pass now: says RUNNING, the beat tells
            self.pages.learn(revealed)
            self.total = max(self.total, last)
        status = await super().acknowledge(positions)
        # Done as far as this instance knows; Redis, which knows every page revealed, says whether it is.
        return FINISHED if status == FINISHED and await self.status() == FINISHED else RUNNING

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        result = await super().beat(status)
        raw = await self.client.hget(self.pass_key, "end")
        if raw is not None:
            self.total = max(self.total, int(raw))
        return result
