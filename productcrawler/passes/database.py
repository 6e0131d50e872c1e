"""The pass of a single process: the database is the ledger, the rest is in memory.

An id is done in a pass when a row written by the pass says so (``database_sql``),
so a run killed at any moment (``kill -9`` included) resumes exactly where its
committed rows end. Opening a resumed pass reads which positions are done into
a bitmap (one bit per position: 125 KB for a million ids; a file's done ids
are mapped back to positions by reading the file in chunks and asking the
database which are done), so that leasing never waits on the database;
retries that must wait are held in a heap by due time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from productcrawler.ids import RangeIds
from productcrawler.passes.base import FINISHED, RUNNING, Entry, Lease
from productcrawler.passes.database_sql import (
    DONE_AMONG_CHUNK,
    done_among,
    done_count,
    done_ids,
    open_pass,
)
from productcrawler.passes.failed import failed_snapshot
from productcrawler.passes.one_process import OneProcessPass
from productcrawler.passes.summary import finish_with_summary
from productcrawler.storage.database import utcnow
from productcrawler.storage.errors import is_connection_error

if TYPE_CHECKING:
    from productcrawler.config import CrawlConfig
    from productcrawler.ids import IdFile
    from productcrawler.ids.failed import FailedIds
    from productcrawler.storage.database import Database

logger = logging.getLogger(__name__)

#: Ids whose done rows are read per query when a pass resumes.
RESUME_CHUNK = 50_000


class DatabasePass(OneProcessPass):
    def __init__(self, database: Database, config: CrawlConfig) -> None:
        super().__init__(database)
        self.config = config
        self.ids: IdFile | RangeIds = config.ids.file or RangeIds(config.ids.start_id, config.ids.end_id)
        self.total = 0 if config.ids.failed_only else self.ids.total
        self.tracking = bool(config.storage.track_changes)
        self.failed: FailedIds | None = None  # ids=failed: the ids read at open
        self.done_at_start = 0
        # Bit p-1 set: position p done. Resumed passes, and every pass over a file: a file's
        # duplicates make its done rows fewer than its positions, so its acknowledgements are counted here.
        self._done: bytearray | None = None
        self._done_positions = 0
        self._cursor = 1  # the next position never handed out

    async def open(self, *, fresh: bool) -> str:
        await self.database.ensure_schema()
        source_pass = None
        if self.config.ids.failed_only:
            self.failed = failed = await self._run(failed_snapshot, self.config.ids.type)
            if failed.ids is None:
                return failed.nothing_to_fetch()
            self.ids, self.total, source_pass = failed.ids, failed.ids.total, failed.source_pass
        ids = self.ids
        if isinstance(ids, RangeIds):
            self.info = info = await self._run(open_pass, ids.start, ids.end, fresh=fresh, now=utcnow())
        else:
            self._done = bytearray((self.total + 7) // 8)
            self.info = info = await self._run(open_pass, 1, ids.total, fresh=fresh, now=utcnow(),
                                               digest=ids.digest, source_pass_id=source_pass)
        described = ids.describe() if self.failed is None else self.failed.describe()
        if not info.resumed:
            return f"Starting pass {info.pass_id} over {described}"
        if self._done is None:
            self._done = bytearray((self.total + 7) // 8)
        await (self._resume_range(ids) if isinstance(ids, RangeIds) else self._resume_file(ids))
        self.done_at_start = self._done_positions
        return (f"Resuming pass {info.pass_id} over {described}: "
                f"{self.done_at_start} of {self.total} already done")

    async def _resume_range(self, ids: RangeIds) -> None:
        assert self.info is not None
        for first in range(ids.start, ids.end + 1, RESUME_CHUNK):
            last = min(first + RESUME_CHUNK - 1, ids.end)
            for product_id in await self._run(done_ids, first, last, self.info.pass_id):
                self._mark_done(ids.position_of(product_id))

    async def _resume_file(self, ids: IdFile) -> None:
        """Map the pass's done ids back to positions: the file in chunks, the database asked which are done."""
        assert self.info is not None
        for chunk in ids.chunks(DONE_AMONG_CHUNK):
            done = await self._run(done_among, [product_id for _, product_id in chunk], self.info.pass_id)
            for position, product_id in chunk:
                if product_id in done:
                    self._mark_done(position)

    def _mark_done(self, position: int) -> None:
        assert self._done is not None
        offset = position - 1
        if not self._done[offset >> 3] & (1 << (offset & 7)):
            self._done[offset >> 3] |= 1 << (offset & 7)
            self._done_positions += 1

    async def lease(self, count: int) -> Lease:
        entries = self.due_retries(count)
        while self._cursor <= self.total and len(entries) < count:
            position = self._cursor
            self._cursor += 1
            if not self._is_done(position):
                entries.append(Entry(position))
        if entries or self._retries:
            return Lease(entries, RUNNING)
        return Lease([], FINISHED)  # every id handed out, none waiting: the engine's idle ends it

    def _is_done(self, position: int) -> bool:
        if self._done is None:
            return False
        offset = position - 1
        return bool(self._done[offset >> 3] & (1 << (offset & 7)))

    async def acknowledge(self, positions: list[int], revealed: dict[int, str] | None = None) -> str:
        # The committed rows are the acknowledgement; a file's positions are also counted (see _done).
        if self._done is not None and not isinstance(self.ids, RangeIds):
            for position in positions:
                self._mark_done(position)
        return RUNNING

    def done(self, this_run: int) -> int:
        return self.done_at_start + this_run  # one process: nobody else writes this pass

    async def close(self, reason: str, *, lost: bool) -> bool:
        """Mark the pass finished, with its summary, if every id has an outcome; True if it is."""
        try:
            return await self._settle(reason)
        finally:
            self.ids.close()
            if self.failed is not None:
                self.failed.remove()

    async def _settle(self, reason: str) -> bool:
        if self.info is None:
            return False
        if self._retries:
            logger.info("%d delayed retries were waiting at close; the next run fetches their ids again",
                        len(self._retries))
        try:
            if isinstance(self.ids, RangeIds):
                done = await self._run(done_count, self.ids.start, self.ids.end, self.info.pass_id)
            else:
                done = self._done_positions
        except Exception as error:
            if not is_connection_error(error):
                raise
            # Stopping because the database is away: whatever it holds, the pass is not over.
            logger.info("Pass %d is not finished: the database is unavailable (%s); the next run "
                        "resumes it", self.info.pass_id, error)
            return False
        if done < self.total:
            logger.info("Pass %d is not complete (%d of %d ids done; stop reason: %s); "
                        "the next run resumes it", self.info.pass_id, done, self.total, reason)
            return False
        first, last = (self.ids.start, self.ids.end) if isinstance(self.ids, RangeIds) else (None, None)
        await self._run(finish_with_summary, self.info.pass_id, first, last, utcnow(), tracking=self.tracking,
                        declared=self.database.declared_names)
        return True
