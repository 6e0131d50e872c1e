"""The pass ledger of a single process: the database itself records what is done."""

from __future__ import annotations

import logging
from datetime import UTC
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.storage.database import done_count, done_ids, finish_pass, open_pass, utcnow
from productcrawler.storage.errors import is_connection_error

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from productcrawler.config import CrawlConfig
    from productcrawler.storage.database import Database, PassInfo

logger = logging.getLogger(__name__)

#: Ids looked up and handed out at a time: one small query per chunk keeps
#: memory flat whatever the range.
CHUNK_SIZE = 1000


class DatabaseLedger:
    def __init__(self, database: Database, config: CrawlConfig) -> None:
        self.database = database
        self.start_id = config.start_id
        self.end_id = config.end_id
        self.pass_info: PassInfo | None = None
        self.done_at_start = 0

    async def open(self, *, fresh: bool) -> PassInfo:
        self.pass_info = await maybe_deferred_to_future(
            self.database.run(open_pass, self.start_id, self.end_id, fresh=fresh, now=utcnow()))
        info = self.pass_info
        if info.resumed:
            self.done_at_start = await self._done_count()
            logger.info("Resuming pass %d over ids %d..%d: %d of %d already done", info.pass_id,
                        info.start_id, info.end_id, self.done_at_start, self.total)
        else:
            logger.info("Starting pass %d over ids %d..%d", info.pass_id, info.start_id, info.end_id)
        return info

    @property
    def row_stamp(self) -> int | None:
        """The pass every row written now is stamped with (its ``pass_id`` column)."""
        return self.pass_id

    @property
    def total(self) -> int:
        return self.end_id - self.start_id + 1

    @property
    def pass_id(self) -> int | None:
        return None if self.pass_info is None else self.pass_info.pass_id

    @property
    def started_at(self) -> float | None:
        """When the pass began, in Unix seconds (the column is naive UTC)."""
        if self.pass_info is None:
            return None
        return self.pass_info.started_at.replace(tzinfo=UTC).timestamp()

    def done(self, this_run: int) -> int:
        """Ids of the pass with an outcome, given this run's count (one process: no one else writes)."""
        return self.done_at_start + this_run

    async def pending(self) -> AsyncIterator[list[int]]:
        """Chunks of ids that have no outcome in this pass yet."""
        assert self.pass_info is not None, "open() first"
        for first in range(self.start_id, self.end_id + 1, CHUNK_SIZE):
            last = min(first + CHUNK_SIZE - 1, self.end_id)
            done: set[int] = set()
            if self.pass_info.resumed:
                done = await maybe_deferred_to_future(
                    self.database.run(done_ids, first, last, self.pass_info.pass_id))
            chunk = [i for i in range(first, last + 1) if i not in done]
            if chunk:
                yield chunk

    async def close(self, reason: str) -> bool:
        """Mark the pass finished if every id has an outcome; True if it is."""
        if self.pass_info is None:
            return False
        try:
            done = await self._done_count()
        except Exception as error:
            if not is_connection_error(error):
                raise
            # Stopping because the database is away: whatever it holds, the pass is not over.
            logger.info("Pass %d is not finished: the database is unavailable (%s); the next run "
                        "resumes it", self.pass_info.pass_id, error)
            return False
        if done < self.total:
            logger.info("Pass %d is not complete (%d of %d ids done; stop reason: %s); "
                        "the next run resumes it", self.pass_info.pass_id, done, self.total, reason)
            return False
        await maybe_deferred_to_future(self.database.run(finish_pass, self.pass_info.pass_id, utcnow()))
        return True

    async def _done_count(self) -> int:
        assert self.pass_info is not None
        return await maybe_deferred_to_future(
            self.database.run(done_count, self.start_id, self.end_id, self.pass_info.pass_id))
