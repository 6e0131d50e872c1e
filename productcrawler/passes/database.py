"""The pass of a single process: the database is the ledger, the rest is in memory.

An id is done in a pass when a row written by the pass says so (``database_sql``),
so a run killed at any moment (``kill -9`` included) resumes exactly where its
committed rows end. Opening a resumed pass reads which ids are done into a
bitmap (one bit per id: 125 KB for a million ids), so that leasing never
waits on the database; retries that must wait are held in a heap by due time.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from datetime import UTC
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.passes.base import FINISHED, RUNNING, Entry, Lease
from productcrawler.passes.database_sql import done_count, done_ids, open_pass
from productcrawler.passes.summary import finish_with_summary
from productcrawler.storage.database import utcnow
from productcrawler.storage.errors import is_connection_error

if TYPE_CHECKING:
    from productcrawler.config import CrawlConfig
    from productcrawler.passes.database_sql import PassInfo
    from productcrawler.storage.database import Database

logger = logging.getLogger(__name__)

#: Ids whose done rows are read per query when a pass resumes.
RESUME_CHUNK = 50_000


class DatabasePass:
    #: A look at this pass costs no I/O, so a retry that comes due is sent promptly.
    poll_interval = 0.05
    instance = None

    def __init__(self, database: Database, config: CrawlConfig) -> None:
        self.database = database
        self.start_id = config.start_id
        self.end_id = config.end_id
        self.total = self.end_id - self.start_id + 1
        self.tracking = bool(config.track_changes)
        self.info: PassInfo | None = None
        self.done_at_start = 0
        self._done: bytearray | None = None  # resumed passes only: bit i set = id start+i done
        self._cursor = self.start_id  # the next id never handed out
        self._retries: list[tuple[float, int, Entry]] = []  # (due, order, entry)
        self._order = itertools.count()

    @property
    def pass_id(self) -> int | None:
        return None if self.info is None else self.info.pass_id

    @property
    def row_stamp(self) -> int | None:
        return self.pass_id

    @property
    def started_at(self) -> float | None:
        return None if self.info is None else self.info.started_at.replace(tzinfo=UTC).timestamp()

    @staticmethod
    def is_unavailable(error: BaseException) -> bool:
        return is_connection_error(error)

    async def open(self, *, fresh: bool) -> str:
        await self.database.ensure_schema()
        self.info = info = await self._run(open_pass, self.start_id, self.end_id, fresh=fresh, now=utcnow())
        if not info.resumed:
            return f"Starting pass {info.pass_id} over ids {info.start_id}..{info.end_id}"
        self._done = bytearray((self.total + 7) // 8)
        for first in range(self.start_id, self.end_id + 1, RESUME_CHUNK):
            last = min(first + RESUME_CHUNK - 1, self.end_id)
            for product_id in await self._run(done_ids, first, last, info.pass_id):
                offset = product_id - self.start_id
                self._done[offset >> 3] |= 1 << (offset & 7)
                self.done_at_start += 1
        return (f"Resuming pass {info.pass_id} over ids {info.start_id}..{info.end_id}: "
                f"{self.done_at_start} of {self.total} already done")

    async def lease(self, count: int) -> Lease:
        entries: list[Entry] = []
        now = time.monotonic()
        while self._retries and self._retries[0][0] <= now and len(entries) < count:
            entries.append(heapq.heappop(self._retries)[2])
        while self._cursor <= self.end_id and len(entries) < count:
            product_id = self._cursor
            self._cursor += 1
            if not self._is_done(product_id):
                entries.append(Entry(product_id))
        if entries or self._retries:
            return Lease(entries, RUNNING)
        return Lease([], FINISHED)  # every id handed out, none waiting: the engine's idle ends it

    def _is_done(self, product_id: int) -> bool:
        if self._done is None:
            return False
        offset = product_id - self.start_id
        return bool(self._done[offset >> 3] & (1 << (offset & 7)))

    async def push(self, retries: list[tuple[Entry, float]]) -> None:
        now = time.monotonic()
        for entry, delay in retries:
            heapq.heappush(self._retries, (now + delay, next(self._order), entry))

    async def acknowledge(self, product_ids: list[int]) -> str:
        return RUNNING  # the committed rows are the acknowledgement

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        return RUNNING, 0

    async def give_back_lost(self) -> int:
        return 0

    def done(self, this_run: int) -> int:
        return self.done_at_start + this_run  # one process: nobody else writes this pass

    async def close(self, reason: str, *, lost: bool) -> bool:
        """Mark the pass finished, with its summary, if every id has an outcome; True if it is."""
        if self.info is None:
            return False
        if self._retries:
            logger.info("%d delayed retries were waiting at close; the next run fetches their ids again",
                        len(self._retries))
        try:
            done = await self._run(done_count, self.start_id, self.end_id, self.info.pass_id)
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
        await self._run(finish_with_summary, self.info.pass_id, self.start_id, self.end_id, utcnow(),
                        tracking=self.tracking)
        return True

    async def _run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return await maybe_deferred_to_future(self.database.run(function, *args, **kwargs))
