"""Passes: which ids a run still has to fetch, and when a pass is complete.

A pass is one sweep over the id range. Without Redis the database is the
ledger (``database.py``): an id is done in a pass when its product or failure
row was written after the pass started, so nothing counts as done before its
row is committed, and a run killed at any moment resumes from the rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.passes.database import DatabaseLedger
from productcrawler.storage import database_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.config import CrawlConfig


def ledger_for(crawler: Crawler, config: CrawlConfig) -> DatabaseLedger:
    return DatabaseLedger(database_for(crawler), config)
