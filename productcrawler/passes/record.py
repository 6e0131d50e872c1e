"""A Redis-shared pass's row in ``crawl_passes``: the pass id its rows carry, and its summary.

The pass's ledger is in Redis; its history is in the database like a
database pass's. The first instance to open the pass makes the row, keyed
by the Redis pass's token (unique to that pass, even if Redis loses
everything and numbers its passes from 1 again); the others find it by the
token. Every product and failure row the pass writes carries the row's id,
so change history, counts and coverage are per pass as for a database pass.
Whichever instance closes the complete pass first writes its summary
(``finish_with_summary`` does it once).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.ids import RangeIds
from productcrawler.passes.database_sql import shared_pass_row
from productcrawler.passes.summary import finish_with_summary
from productcrawler.storage.database import utcnow
from productcrawler.storage.errors import is_connection_error, is_deadlock

if TYPE_CHECKING:
    from productcrawler.ids import IdSource
    from productcrawler.storage.database import Database

logger = logging.getLogger(__name__)

#: How often an instance asks for the pass's row when the database chose it as a deadlock's victim.
OPEN_ATTEMPTS = 5


class SharedPassRecord:
    def __init__(self, database: Database, *, tracking: bool) -> None:
        self.database = database
        self.tracking = tracking

    async def open(self, token: str, ids: IdSource, started_at: float | None, *,
                   source_pass_id: int | None = None) -> int:
        """The crawl_passes id of the Redis pass ``token`` over ``ids`` (made if this instance is the first).

        ``source_pass_id``: the pass whose failed ids it fetches (``ids=failed``).
        """
        await self.database.ensure_schema()
        began = (utcnow() if started_at is None
                 else datetime.fromtimestamp(int(started_at), UTC).replace(tzinfo=None))
        if isinstance(ids, RangeIds):
            row: tuple[Any, ...] = (token, ids.start, ids.end, began)
        else:  # a file's pass is recorded as its positions 1..N and its digest, as a database pass's is
            row = (token, 1, ids.total, began, getattr(ids, "digest", None), source_pass_id)
        # Instances started together look the row up FOR UPDATE at once; MySQL may pick one of
        # them as a deadlock's victim and roll its transaction back: that one asks again.
        for attempt in range(1, OPEN_ATTEMPTS):
            try:
                return int(await self._run(shared_pass_row, *row))
            except Exception as error:
                if not is_deadlock(error):
                    raise
                logger.debug("Opening the shared pass's row: deadlock, asking again (%d)", attempt)
        return int(await self._run(shared_pass_row, *row))  # the last attempt: its error is the crawl's

    async def finish(self, pass_id: int, ids: IdSource, *, listing_removals: bool | None = None) -> bool:
        """Mark the complete pass finished with its summary; True if this instance wrote it.

        ``listing_removals``: for a listing pass, LIST_REMOVALS (see ``finish_with_summary``)."""
        first, last = (ids.start, ids.end) if isinstance(ids, RangeIds) else (None, None)
        try:
            return await self._run(finish_with_summary, pass_id, first, last, utcnow(),
                                   tracking=self.tracking, listing_removals=listing_removals,
                                   declared=self.database.declared_names)
        except Exception as error:
            if not is_connection_error(error):
                raise
            logger.error("Pass %d is complete, but its summary could not be written: the database is "
                         "unavailable (%s)", pass_id, error)
            return False

    async def _run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return await maybe_deferred_to_future(self.database.run(function, *args, **kwargs))
