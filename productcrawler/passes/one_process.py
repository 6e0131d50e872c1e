"""What the two passes of a single process share: their row in ``crawl_passes``, and retries held in memory.

``DatabasePass`` (over ids) and ``ListingPass`` (over a listing's pages) keep
their ledger in the database and everything else in this process: a retry that
must wait is held in a heap by due time, so that leasing never waits on the
database.
"""

from __future__ import annotations

import heapq
import itertools
import time
from datetime import UTC
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.passes.base import RUNNING, Entry
from productcrawler.storage.errors import is_connection_error

if TYPE_CHECKING:
    from productcrawler.passes.database_sql import PassInfo
    from productcrawler.storage.database import Database


class OneProcessPass:
    #: A look at this pass costs no I/O, so a retry that comes due is sent promptly.
    poll_interval = 0.05
    instance = None

    def __init__(self, database: Database) -> None:
        self.database = database
        self.info: PassInfo | None = None
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

    def due_retries(self, count: int) -> list[Entry]:
        """Up to ``count`` held retries whose time has come."""
        entries: list[Entry] = []
        now = time.monotonic()
        while self._retries and self._retries[0][0] <= now and len(entries) < count:
            entries.append(heapq.heappop(self._retries)[2])
        return entries

    async def push(self, retries: list[tuple[Entry, float]]) -> None:
        now = time.monotonic()
        for entry, delay in retries:
            heapq.heappush(self._retries, (now + delay, next(self._order), entry))

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        return RUNNING, 0

    async def give_back_lost(self) -> int:
        return 0

    async def _run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return await maybe_deferred_to_future(self.database.run(function, *args, **kwargs))
