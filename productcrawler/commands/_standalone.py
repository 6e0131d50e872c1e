"""The project's settings for a command that fetches a URL rather than crawling a pass.

``scrapy fetch``, ``scrapy shell`` and ``scrapy parse`` download one URL with the project's
downloader (its middlewares, the aiohttp handler, the rate limit, retries) and
store nothing: they run without the database (no storage pipeline) and without
Redis (the local scheduler and rate limit), whatever REDIS_URL and DATABASE_URL say.
Nor do they serve metrics: METRICS_PORT is the crawl's (``docker compose exec
crawler scrapy shell ...`` runs beside a crawl that listens on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

STORAGE_PIPELINE = "productcrawler.storage.pipeline.StoragePipeline"
HOLDING_SCHEDULER = "productcrawler.retry.scheduler.DelayingScheduler"


def without_storage(settings: BaseSettings) -> None:
    """Take the database, Redis and the metrics endpoint out of ``settings`` (after ``-s``, so it wins)."""
    settings.set("REDIS_URL", "", priority="cmdline")
    settings.set("METRICS_PORT", "", priority="cmdline")
    settings.set("ITEM_PIPELINES", {STORAGE_PIPELINE: None}, priority="cmdline")
    # No pass either: the URL given is the one request (with retries held as the crawl's are).
    settings.set("SCHEDULER", HOLDING_SCHEDULER, priority="cmdline")
