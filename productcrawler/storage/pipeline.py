"""Item pipeline: batched upserts of products and failures, off the reactor thread.

``process_item`` returns once the item's batch is
committed, so an item counts as scraped (and its id as done) only when its row
is durable, and a slow or unreachable database slows the crawl down instead of
piling items up in memory.

Batches are full: a batch is written when ``DATABASE_BATCH_SIZE`` outcomes are
pending or every ``DATABASE_FLUSH_INTERVAL`` seconds, not whenever the writer
is free: a writer that drains whatever came in during its previous write pays
an insert, a delete, a commit and a Redis acknowledgement for a handful of
rows (docs/design-notes.md#full-batches-in-the-storage-pipeline).

Each row carries the pass it was written in: the pass scheduler hands the
pipeline its pass (:meth:`StoragePipeline.stamp_with`); without one (another
scheduler) rows carry no pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from scrapy.exceptions import DropItem
from scrapy.utils.asyncio import sleep
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.task import LoopingCall

from productcrawler import signals, stat_keys
from productcrawler.config.crawler import crawl_config
from productcrawler.config.sections import StorageConfig
from productcrawler.instruments import crawl_instruments
from productcrawler.items import FAILED, MISSING, FailureItem, PageItem, ProductItem
from productcrawler.meta import DATABASE_UNAVAILABLE
from productcrawler.storage.crawler import crawl_database
from productcrawler.storage.database import utcnow, write_batch
from productcrawler.storage.errors import is_connection_error

if TYPE_CHECKING:
    from datetime import datetime

    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

    from productcrawler.storage.changes import Written
    from productcrawler.storage.database import Database

logger = logging.getLogger(__name__)

# A batch that could not be written is tried again after this many seconds,
# doubling up to _RETRY_DELAY_MAX, until DATABASE_OUTAGE_MAX has passed.
_RETRY_DELAY_MIN = 0.5
_RETRY_DELAY_MAX = 8.0


class _Pending:
    __slots__ = ("item", "recorded_at", "rows", "written")

    def __init__(self, item: ProductItem | FailureItem | PageItem) -> None:
        self.item = item
        #: What it weighs in a batch: a listing page is written whole, all its products with it.
        self.rows = max(1, len(item.products)) if isinstance(item, PageItem) else 1
        # A Future, not a Deferred: process_item awaits it, and a Deferred would be made into one.
        self.written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.recorded_at: datetime = utcnow()

    def settle(self, error: BaseException | None = None) -> None:
        if self.written.done():  # its process_item was cancelled
            return
        if error is None:
            self.written.set_result(None)
        else:
            self.written.set_exception(error)


class DatabaseUnavailable(Exception):
    """The database stayed unreachable for longer than DATABASE_OUTAGE_MAX."""


def _not_written() -> DropItem:
    # DEBUG: one line for the lot is _give_up's and close_spider's, not one per item.
    return DropItem("not written: the database is unavailable", log_level="DEBUG")


class Stamps(Protocol):
    """What rows are stamped with: the pass being written (``passes.base.Pass``)."""

    @property
    def row_stamp(self) -> int | None:
        """The ``pass_id`` column of every row written now (None: rows carry no pass)."""


class StoragePipeline:
    def __init__(self, crawler: Crawler, database: Database, config: StorageConfig,
                 crawl_pass: Stamps | None = None) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.database = database
        self.crawl_pass = crawl_pass  # each row is stamped with its row_stamp
        self.tracked = config.track_changes
        self.batch_size = config.batch_size
        self.flush_interval = config.flush_interval
        self.outage_max = config.outage_max
        self._pending: list[_Pending] = []
        self._pending_rows = 0
        self._writer: Deferred[None] | None = None
        self._timer = LoopingCall(self._flush)
        self._batch_duration = crawl_instruments(crawler).database_batch_duration
        #: The database stayed away past DATABASE_OUTAGE_MAX: nothing more is written.
        self._given_up = False
        self._not_written = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        return cls(crawler, crawl_database(crawler), crawl_config(crawler).storage)

    def stamp_with(self, crawl_pass: Stamps) -> None:
        """Stamp every row from now on with ``crawl_pass``'s row stamp (the pass scheduler calls this)."""
        self.crawl_pass = crawl_pass

    async def open_spider(self) -> None:
        await self.database.ensure_schema()
        self._timer.start(self.flush_interval, now=False)

    async def close_spider(self) -> None:
        if self._timer.running:
            self._timer.stop()
        while self._pending or self._writer is not None:
            self._flush()
            if self._writer is None:
                break
            await maybe_deferred_to_future(self._writer)
        if self._not_written:
            logger.error("%d outcomes were not written (the database was unavailable); "
                         "a restart fetches their ids again", self._not_written)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, (ProductItem, FailureItem, PageItem)):
            return item  # not ours (another spider of the project): passed on untouched
        if self._given_up:
            self._not_written += 1
            raise _not_written()
        pending = _Pending(item)
        self._pending.append(pending)
        self._pending_rows += pending.rows
        # A listing page is written at once: the next page of a chain waits for this one's commit.
        if self._pending_rows >= self.batch_size or isinstance(item, PageItem):
            self._flush()
        await pending.written
        return item

    def _flush(self) -> None:
        """Start the writer unless it runs already: it writes what is pending, then full batches."""
        if self._writer is None and self._pending and not self._given_up:
            self._writer = deferred_from_coro(self._drain())
            self._writer.addBoth(self._writer_done)

    def _writer_done(self, result: Any) -> None:
        self._writer = None
        from twisted.python.failure import Failure

        if isinstance(result, Failure):
            assert result.type is not None and result.value is not None  # set by every Failure's constructor
            if result.check(DatabaseUnavailable):
                self._give_up(result.value)
            else:
                logger.error("The database writer failed", exc_info=(result.type, result.value, result.tb))

    async def _drain(self) -> None:
        """The single writer: one batch at a time, in arrival order.

        The first batch is whatever is pending (a full batch, the timer or the
        close asked for it); after that it goes on only while a full batch is
        waiting, or to retry, and leaves a partial one to the timer.
        """
        outage_started: float | None = None
        delay = _RETRY_DELAY_MIN
        go_on = True
        while self._pending and (go_on or self._pending_rows >= self.batch_size):
            go_on = True  # until a batch is committed: retries go on
            batch = self._take_batch()
            started = time.monotonic()
            try:
                written = await self._write(batch)
            except Exception as error:
                if not is_connection_error(error):
                    await self._write_one_by_one(batch)
                    continue
                self._put_back(batch)
                now = time.monotonic()
                if outage_started is None:
                    outage_started = now
                    self.stats.set_value(stat_keys.DB_OUTAGE, 1)
                    logger.warning("Cannot write to the database (%s); holding %d outcomes and "
                                   "retrying for up to %.0f s", error, len(self._pending), self.outage_max)
                self.stats.inc_value(stat_keys.DB_WRITE_ERRORS)
                if now - outage_started >= self.outage_max:
                    raise DatabaseUnavailable(str(error)) from error
                await sleep(delay)
                delay = min(delay * 2, _RETRY_DELAY_MAX)
                continue
            self._batch_duration.observe(time.monotonic() - started)
            if outage_started is not None:
                self.stats.set_value(stat_keys.DB_OUTAGE, 0)
                logger.info("The database is reachable again after %.1f s; writing resumes",
                            time.monotonic() - outage_started)
                outage_started, delay = None, _RETRY_DELAY_MIN
            self._committed(batch, written)
            go_on = False

    def _take_batch(self) -> list[_Pending]:
        """The oldest pending outcomes, up to DATABASE_BATCH_SIZE rows (a listing page whole)."""
        rows = count = 0
        for entry in self._pending:
            if count and rows + entry.rows > self.batch_size:
                break
            rows += entry.rows
            count += 1
        batch, self._pending = self._pending[:count], self._pending[count:]
        self._pending_rows -= rows
        return batch

    def _put_back(self, entries: list[_Pending]) -> None:
        self._pending[:0] = entries
        self._pending_rows += sum(entry.rows for entry in entries)

    async def _write(self, batch: list[_Pending]) -> Written:
        products = [p.item for p in batch if isinstance(p.item, ProductItem)]
        pages = [p.item for p in batch if isinstance(p.item, PageItem)]
        products += [product for page in pages for product in page.products]
        failures = [(p.item, p.recorded_at) for p in batch if isinstance(p.item, FailureItem)]
        return await maybe_deferred_to_future(self.database.run(
            write_batch, products, failures, None if self.crawl_pass is None else self.crawl_pass.row_stamp,
            self.tracked, pages,
            self.database.declared, self.database.variant_declared))

    async def _write_one_by_one(self, batch: list[_Pending]) -> None:
        """One bad row must not sink its batch: find it, and record why it failed."""
        self.stats.inc_value(stat_keys.DB_WRITE_ERRORS)
        logger.warning("The database rejected a batch of %d rows; writing them one by one", len(batch))
        for index, entry in enumerate(batch):
            try:
                written = await self._write([entry])
            except Exception as error:  # noqa: BLE001
                if is_connection_error(error):
                    self._put_back(batch[index:])
                    return
                self.stats.inc_value(stat_keys.DB_ROWS_REJECTED)
                item = entry.item
                if isinstance(item, PageItem):
                    # Its products together: the page ends failed, and the listing is not complete.
                    logger.error("The database rejected the products of listing page %d: %s", item.page, error)
                    if item.failure is not None:
                        entry.settle(DropItem(f"not written: {error}"))
                        self._put_back(batch[index + 1:])
                        return
                    entry.item = PageItem(item.page, item.url, [], {}, _rejected(error))
                    self._put_back([entry, *batch[index + 1:]])
                    return
                logger.error("The database rejected the row of product %s: %s", item.product_id, error)
                if isinstance(entry.item, FailureItem) and entry.item.reason.startswith("db_rejected"):
                    # Not even its failure row can be stored: drop it (not counted done; the
                    # next run fetches the id again) rather than rewrite it forever.
                    entry.settle(DropItem(f"not written: {error}"))
                    self._put_back(batch[index + 1:])
                    return
                entry.item = FailureItem(item.product_id, FAILED, None,
                                         _rejected(error), getattr(item, "attempts", 1))
                self._put_back([entry, *batch[index + 1:]])
                return
            self._committed([entry], written)

    def _committed(self, batch: list[_Pending], written: Written) -> None:
        products = [p.item for p in batch if isinstance(p.item, ProductItem)]
        failures = [p.item for p in batch if isinstance(p.item, FailureItem)]
        pages = [p.item for p in batch if isinstance(p.item, PageItem)]
        products += [product for page in pages for product in page.products]
        for page in pages:
            self.stats.inc_value(stat_keys.LISTING_PAGES_FAILED if page.failure else stat_keys.LISTING_PAGES)
        self.stats.inc_value(stat_keys.DB_BATCHES)
        for key, count in ((stat_keys.PRODUCTS_NEW, written.new), (stat_keys.PRODUCTS_CHANGED, written.changed),
                           (stat_keys.PRODUCTS_UNCHANGED, written.unchanged),
                           (stat_keys.PRODUCTS_REMOVED, written.removed),
                           (stat_keys.PRODUCTS_RETURNED, written.returned),
                           (stat_keys.CHANGE_ROWS, written.change_rows),
                           (stat_keys.ANSWERS_WRITTEN, written.answers)):
            if count:
                self.stats.inc_value(key, count)
        if products:
            self.stats.inc_value(stat_keys.STORED, len(products))
        for failure in failures:
            if failure.outcome == MISSING:
                self.stats.inc_value(stat_keys.MISSING)
            else:
                self.stats.inc_value(stat_keys.FAILED)
                # Recorded only: an outcome the guard or an outage drops is not counted. The reason up
                # to its first ":", so that a message in it ("db_rejected: (1264, ...)") makes no key of its own.
                self.stats.inc_value(stat_keys.failed_reason(failure.reason.split(":", 1)[0]))
        self.crawler.signals.send_catch_log(signals.outcomes_committed, products=products, failures=failures,
                                            pages=pages)
        for entry in batch:
            entry.settle()

    def _give_up(self, error: BaseException) -> None:
        """Stop writing and stop the crawl; every outcome held is dropped, not acknowledged.

        Items waiting for their batch are released (dropped), or the engine
        would wait for them forever and never close; their ids were never
        committed, so the pass still owes them and the next run fetches them.
        """
        self._given_up = True
        if self._timer.running:
            self._timer.stop()
        pending, self._pending = self._pending, []
        self._pending_rows = 0
        self._not_written += len(pending)
        for entry in pending:
            entry.settle(_not_written())
        self._stop_crawl(error)

    def _stop_crawl(self, error: BaseException) -> None:
        logger.error("The database has been unavailable for %.0f s (%s); stopping the crawl. "
                     "Nothing is lost: the next run resumes the pass.", self.outage_max, error)
        self.stats.set_value(stat_keys.EXIT_REASON, DATABASE_UNAVAILABLE)
        if self.crawler.engine is not None:
            deferred_from_coro(self.crawler.engine.close_spider_async(reason=DATABASE_UNAVAILABLE))


def _rejected(error: BaseException) -> str:
    """The failure reason of a row the database rejected: its message on one line (PostgreSQL's has a DETAIL line)."""
    return f"db_rejected: {' '.join(str(error).split())}"[:255]
