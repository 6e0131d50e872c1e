"""``scrapy passes``: the last passes' summaries as a table, with drops against the pass before.

Reads ``crawl_passes`` (``passes/summary.py``) in the database DATABASE_URL
names; safe to run while crawls run. A count that fell by at least
``COUNT_DROP`` against the previous summarized pass, or a column's coverage
that fell by at least ``COVERAGE_DROP``, is marked in its cell
(``17657 (-9 %)``, ``98 % -> 40 %``).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.addons import AddonManager
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from productcrawler.commands.preflight import connect_database
from productcrawler.config import ConfigError, CrawlConfig
from productcrawler.passes.summary import COVERAGE_COLUMNS, PassSummary, passes_summary

if TYPE_CHECKING:
    import argparse
    from datetime import datetime

#: A fall of stored products by this share of the previous pass's is marked.
COUNT_DROP = 0.01
#: A fall of a column's coverage by this much (a share, 0..1) is marked.
COVERAGE_DROP = 0.01
_COUNTS = ("stored", "missing", "failed", "changed", "removed")


class Command(ScrapyCommand):
    requires_project = True
    # It reads the ledger or Redis and prints: no crawler process, so no reactor and no event loop left
    # unclosed at exit (asyncio's "Exception ignored in BaseEventLoop.__del__" on stderr after the answer).
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[-n N]"

    def short_desc(self) -> str:
        return "Show the last passes' counts and coverage, marking drops"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-n", dest="count", default="10", metavar="N", help="passes to show (default: 10)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        AddonManager.load_pre_crawler_settings(self.settings)  # the contract, as a crawler process fills it
        try:
            count = int(opts.count)
        except ValueError:
            raise UsageError(f"-n {opts.count!r}: expected a number of passes") from None
        if count < 1:
            raise UsageError(f"-n {count}: expected at least 1")
        try:
            summaries = _read(CrawlConfig.from_settings(self.settings), count)
        except (ConfigError, OSError) as error:
            print(f"productcrawler: {error}", file=sys.stderr)
            self.exitcode = 2
            return
        print("\n".join(passes_table(summaries, count)))


def _read(config: CrawlConfig, count: int) -> list[PassSummary]:
    target, connection = connect_database(config.storage.database_url)
    try:
        try:
            # One more than shown: the oldest shown pass is compared with the one before it.
            return passes_summary(connection.cursor(), target.dialect, count + 1)
        except Exception:  # noqa: BLE001 - no tables yet, or tables from before summaries
            return []
    finally:
        connection.close()


def passes_table(summaries: list[PassSummary], shown: int | None = None) -> list[str]:
    """Lines of the table, newest pass first; ``summaries`` may hold one more, older, pass to compare with."""
    if not summaries:
        return ["No pass has started yet."]
    rows = summaries if shown is None else summaries[:shown]
    # The article's columns first, then the declared ones (PRODUCT_COLUMNS) in the order the passes recorded them.
    recorded = dict.fromkeys(c for s in reversed(summaries) for c in s.coverage)
    columns = [c for c in COVERAGE_COLUMNS if c in recorded] + [c for c in recorded if c not in COVERAGE_COLUMNS]
    header = ["pass", "started", "finished", "duration", *_COUNTS, *columns]
    table = [header]
    for index, summary in enumerate(rows):
        before = next((s for s in summaries[index + 1:] if s.summarized), None)
        table.append([str(summary.pass_id), _time(summary.started_at), _finished(summary),
                      _duration(summary), *_counts(summary, before),
                      *(_coverage(summary, before, c) for c in columns)])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in table]


def _time(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _finished(summary: PassSummary) -> str:
    if summary.finished_at is None:
        return "running or interrupted"
    return _time(summary.finished_at) if summary.summarized else f"{_time(summary.finished_at)} (incomplete)"


def _duration(summary: PassSummary) -> str:
    if summary.finished_at is None:
        return "-"
    seconds = int((summary.finished_at - summary.started_at).total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _counts(summary: PassSummary, before: PassSummary | None) -> list[str]:
    cells = []
    for name in _COUNTS:
        value = getattr(summary, name)
        cell = "-" if value is None else str(value)
        if name == "stored" and value is not None and before is not None and before.stored:
            change = (value - before.stored) / before.stored
            if change <= -COUNT_DROP:
                cell += f" ({change * 100:.0f} %)"
        cells.append(cell)
    return cells


def _coverage(summary: PassSummary, before: PassSummary | None, column: str) -> str:
    share = summary.coverage.get(column)
    if share is None:
        return "-"
    cell = _percent(share)
    previous = None if before is None else before.coverage.get(column)
    if previous is not None and previous - share >= COVERAGE_DROP:
        cell = f"{_percent(previous)} -> {cell}"
    return cell


def _percent(share: float) -> str:
    percent = share * 100
    text = f"{percent:.0f}"
    if text == "100" and share < 1:
        text = f"{math.floor(percent * 10) / 10:.1f}"  # not quite all: never shown as 100
    return f"{text} %"
