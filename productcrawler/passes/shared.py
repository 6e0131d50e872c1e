"""The ledger's face of a Redis-shared pass: the scheduler hands out the ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from productcrawler.passes.redis_pass import RedisPass

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from productcrawler.config import CrawlConfig


class SharedLedger:
    def __init__(self, redis_pass: RedisPass, config: CrawlConfig) -> None:
        self.redis_pass = redis_pass
        self.total = config.total_ids
        self.done_at_start = 0
        self.started_at: float | None = None  # Unix seconds, by the Redis server's clock

    @property
    def row_stamp(self) -> None:
        """Rows of a shared pass carry no pass: its ledger is in Redis, not in them
        (and Redis's pass ids are not the ``crawl_passes`` table's)."""
        return None

    async def open(self, *, fresh: bool) -> None:
        # The scheduler opened (or joined) the pass already: it needs it first.
        self.done_at_start = await maybe_deferred_to_future(deferToThread(self.redis_pass.done_count))
        self.started_at = await maybe_deferred_to_future(deferToThread(self.redis_pass.started_at))

    @property
    def pass_id(self) -> int | None:
        return self.redis_pass.pass_id

    def done(self, this_run: int) -> int:
        """Ids of the pass with an outcome, by every instance: Redis's count as of this
        instance's latest acknowledgement or heartbeat (no Redis call here)."""
        # this_run can count an id twice (fetched again after its lease was recovered).
        estimate = min(self.total, self.done_at_start + this_run)
        latest = self.redis_pass.last_done_count
        return estimate if latest is None else max(latest, estimate)

    async def pending(self) -> AsyncIterator[list[int]]:
        return
        yield  # an async generator that yields nothing: ids come from the shared queue

    async def close(self, reason: str) -> bool:
        return await maybe_deferred_to_future(deferToThread(self.redis_pass.is_finished))
