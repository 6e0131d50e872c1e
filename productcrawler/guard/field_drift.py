"""Field drift: stop a pass whose first answers lack a column the last complete pass had.

An API that renames one field (``price`` becomes ``pricing.current``) still
answers products: every answer parses, the absent field is stored NULL, and
without this check every stored price would be overwritten with NULL.

The first ``GUARD_FIELD_DRIFT`` product answers of a run are held (none is
written) and compared with the last complete pass (``crawl_passes``, the
newest pass with a summary; for a resumed pass that is the last complete one
before it). A column *vanished* when

* it was non-NULL in at least 90 % (``DRIFT_SHARE``) of the products that pass
  stored, and
* it is NULL (absent, ``null`` or unparseable) in at least 90 % of the held answers.

Then the guard stops the crawl (exit 3) with one ERROR line naming the
column(s) and the keys the answers carry now, and every held product is
dropped: nothing is written for those ids, which stay pending. Otherwise every
held product is released and the check is over for the run. A column that was
NULL all along has a coverage below 90 % and is never watched; with no
complete pass to compare with (the first pass against an API) there is
nothing to check.

Why 100 answers (the default) are enough: a column present in 90 % of the
last pass is missing from a product with a probability near 10 %. For 90 of
100 answers to lack it by chance, even if the first ids were a cluster where
it is missing half the time, Hoeffding's bound gives at most
exp(-2 x 100 x 0.4^2) = e^-32, about 10^-14; a renamed field is missing from
all of them and trips it every time. Holding 100 answers costs well under a
second at the usual rates. The smallest sample allowed is 20 (e^-6.4, about
2 x 10^-3 in that half-missing worst case, far less at the natural 10 %).
When nothing is in flight before the sample is full (a short range), the
check decides with what it has if that is at least 20 answers, and
otherwise lets them through unchecked.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from productcrawler import stat_keys
from productcrawler.answer.cleaning import product_keys
from productcrawler.config.declared import FIELD_DRIFT_MIN_SAMPLE
from productcrawler.passes.summary import passes_summary
from productcrawler.storage.crawler import crawl_database

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from scrapy.crawler import Crawler

    from productcrawler.config import CrawlConfig
    from productcrawler.items import ProductItem
    from productcrawler.passes.summary import PassSummary
    from productcrawler.storage.target import Dialect

logger = logging.getLogger(__name__)

#: A column is watched when at least this share of the last pass's products had it, and has
#: vanished when at least this share of the first answers lack it.
DRIFT_SHARE = 0.9
#: The columns an answer may lack and still be a product (id and name are the guard's other checks).
OPTIONAL_COLUMNS = ("price", "stock", "category", "brand", "rating", "sales_count")
#: Passes looked through for the newest complete one (an interrupted pass has no summary).
BASELINE_SEARCH = 50
#: Keys quoted in the ERROR line.
KEYS_SHOWN = 30


def last_complete_pass(cursor: Any, dialect: Dialect) -> PassSummary | None:
    """The newest pass with a summary and a coverage (None: no pass was ever complete)."""
    for summary in passes_summary(cursor, dialect, BASELINE_SEARCH):
        if summary.summarized and summary.coverage and summary.stored:
            return summary
    return None


class FieldDrift:
    """The check itself; the guard (guard/failure_guard.py) owns it, holds products through it and stops for it."""

    def __init__(self, crawler: Crawler, config: CrawlConfig, stop: Callable[[str], None]) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.sample_size = config.guard.field_drift
        self.shape = config.answer.fields
        #: The columns a baseline may show: the article's optional ones and the declared (PRODUCT_COLUMNS).
        self.columns = (*OPTIONAL_COLUMNS, *(column.name for column in config.answer.columns))
        self._stop = stop  # the guard's: stop the crawl with this diagnosis
        #: True until the check is decided: the spider reports each product answer's keys meanwhile.
        self.sampling = True
        self.tripped = False
        self._baseline: asyncio.Task[PassSummary | None] | None = None
        self._watched: tuple[str, ...] = ()
        self._last: PassSummary | None = None
        self._sampled = 0
        self._nulls: dict[str, int] = {}
        self._keys: dict[str, None] = {}  # an ordered set: keys in the order they were first seen
        self._held: list[Deferred[None]] = []

    # -- what the spider reports ---------------------------------------------------

    def saw_answer(self, body: bytes) -> None:
        """A product answer of the sample: remember its keys for the ERROR line."""
        if len(self._keys) < KEYS_SHOWN:
            self._keys.update(dict.fromkeys(product_keys(body, self.shape)))

    def saw_product(self, product: object) -> None:
        """A listed product of the sample (decoded): remember its keys for the ERROR line."""
        if len(self._keys) < KEYS_SHOWN:
            self._keys.update(dict.fromkeys(self.shape.keys_of(product)))

    # -- holding products --------------------------------------------------------------

    async def hold(self, *items: ProductItem) -> None:
        """Return once ``items`` (an answer's, or a listing page's) may be written; ``DropItem`` if the
        check trips (or tripped)."""
        if self.tripped:
            raise self._not_recorded()
        if self._baseline is None:
            self._baseline = asyncio.ensure_future(self._load_baseline())
        if not self._baseline.done():
            await self._baseline
        if not self.sampling:
            if self.tripped:
                raise self._not_recorded()
            return
        self._sampled += len(items)
        for item in items:
            for column in self._watched:
                if (item.extra.get(column) if column in item.extra else getattr(item, column, None)) is None:
                    self._nulls[column] += 1
        held: Deferred[None] = Deferred()
        self._held.append(held)
        self.stats.inc_value(stat_keys.GUARD_DRIFT_HELD)
        if self._sampled >= self.sample_size:
            self._decide()
        await maybe_deferred_to_future(held)

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def settle_idle(self) -> None:
        """Nothing in flight can add to the sample: decide with what it holds, if that is enough."""
        if not self.sampling:
            return
        if self._sampled >= FIELD_DRIFT_MIN_SAMPLE:
            self._decide()
        else:
            logger.info("Field drift not checked: only %d product answers before the crawl ran out of "
                        "work (at least %d are needed)", self._sampled, FIELD_DRIFT_MIN_SAMPLE)
            self._release()

    def drop_all(self, reason: str) -> None:
        """An operator's stop or another trip of the guard: nothing held is written."""
        self.sampling = False
        held, self._held = self._held, []
        for deferred in held:
            self.stats.inc_value(stat_keys.GUARD_DROPPED)
            deferred.errback(DropItem(f"not recorded: {reason}", log_level="DEBUG"))

    # -- deciding ----------------------------------------------------------------------

    async def _load_baseline(self) -> PassSummary | None:
        try:
            last = await maybe_deferred_to_future(crawl_database(self.crawler).run(last_complete_pass))
        except Exception as error:  # noqa: BLE001 - the database is away: the pipeline will say so
            logger.warning("Field drift not checked: the last complete pass could not be read (%s)", error)
            last = None
        self._last = last
        if last is not None:
            self._watched = tuple(column for column in self.columns
                                  if last.coverage.get(column, 0.0) >= DRIFT_SHARE)
            self._nulls = dict.fromkeys(self._watched, 0)
        if not self._watched:
            self._release()  # nothing to compare with, or no column that was (nearly) always there
        return last

    def _decide(self) -> None:
        vanished = [column for column in self._watched
                    if self._nulls[column] >= DRIFT_SHARE * self._sampled]
        if not vanished:
            self._release()
            return
        self.sampling = False
        self.tripped = True
        self._stop(self._diagnosis(vanished))

    def _release(self) -> None:
        self.sampling = False
        held, self._held = self._held, []
        for deferred in held:
            deferred.callback(None)

    def _not_recorded(self) -> DropItem:
        self.stats.inc_value(stat_keys.GUARD_DROPPED)
        return DropItem("not recorded: the guard stopped the crawl (guard_field_drift)", log_level="DEBUG")

    def _diagnosis(self, vanished: list[str]) -> str:
        last = self._last
        assert last is not None
        finished = "" if last.finished_at is None else f", finished {last.finished_at:%Y-%m-%d %H:%M:%S} UTC"
        columns = "; ".join(
            f"{column} (non-NULL in {last.coverage[column]:.0%} of the {last.stored} products pass "
            f"{last.pass_id} stored{finished}; absent or unparseable in {self._nulls[column]} of this "
            f"run's first {self._sampled} answers)" for column in vanished)
        keys = ", ".join(self._keys) or "none"
        example = vanished[0]
        return (f"field drift: {'a column' if len(vanished) == 1 else 'columns'} the last complete pass had "
                f"vanished from the API's answers: {columns}; the answers now carry the keys: {keys}; "
                f"check PRODUCT_FIELDS ({self.shape.describe()}) against one answer of the API "
                f"(a moved field is mapped as {example}=<its new path>), or set GUARD_FIELD_DRIFT=0 "
                "if the API really dropped it")
