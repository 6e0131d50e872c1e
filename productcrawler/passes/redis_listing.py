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

from productcrawler.passes import redis_scripts
from productcrawler.passes.base import FINISHED, RUNNING, Lease
from productcrawler.passes.listing import ListingPages
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.redis_connection import reply_text

if TYPE_CHECKING:
    from productcrawler.passes.record import SharedPassRecord
    from productcrawler.redis_connection import AsyncClient


class RedisListingPass(RedisPass):
    grows = True
    extra_keys = ("pages",)

    def __init__(self, client: AsyncClient, prefix: str, first_url: str, *, heartbeat_ttl: float,
                 record: SharedPassRecord | None, list_removals: bool) -> None:
        self.pages = ListingPages(first_url)
        super().__init__(client, prefix, self.pages, heartbeat_ttl=heartbeat_ttl, record=record)
        self.listing_removals = list_removals
        self._reveal = client.register_script(redis_scripts.LISTING_REVEAL)

    async def open(self, *, fresh: bool) -> str:
        line = await super().open(fresh=fresh)
        await self.client.hsetnx(self.key("pages"), "1", self.pages.first_url)
        state = await self.state()
        if state is not None and state.pass_id == self.pass_id:
            self.total = state.end_id
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
