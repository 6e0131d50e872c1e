"""A floor for Scrapy: about the least work a Scrapy crawl of this API can do per response.

What Scrapy lets a project remove through settings is removed: no downloader or spider middlewares, no
extensions but this project's garbage-collector tuning, no stats, no duplicate
filter, no item pipeline (an item goes nowhere: no storage, no Redis), the
lean download handler of this project without pacing. What is
left is Scrapy's engine, scheduler, downloader and scraper moving a request
and its response, and a callback that decodes the JSON into a dict.

It is not a crawler anyone should run: it stores nothing. It answers one
question: how close can a Scrapy crawl built from public
extension points come to the CPU per product of the aiohttp crawler (which
also writes MySQL and Redis)? It is a low floor, not a proven minimum: it
keeps Scrapy's default scheduler, the standard library's JSON decoder and the
project's concurrency. Run by ``bench/peers.py --crawlers floor,...``;
alone, from outside the project so that no project setting applies (``$REPO`` is
the repository root)::

    cd /tmp && PYTHONPATH=$REPO $REPO/.venv/bin/scrapy runspider \
        $REPO/bench/floor_spider.py -a base_url=http://127.0.0.1:8931/v1 -a end_id=20000 \
        -s ASYNCIO_EVENT_LOOP=uvloop.Loop

(The event loop is a command-line setting: ``runspider`` installs the reactor
before it reads the spider's own settings.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from bench.stock_spider import StockSpider

if TYPE_CHECKING:
    from scrapy.http import Response


class FloorSpider(StockSpider):
    """The stock spider's requests, with the least Scrapy around them."""

    name = "floor"
    custom_settings: ClassVar[dict[str, Any]] = {
        "DOWNLOADER_MIDDLEWARES_BASE": {},
        "SPIDER_MIDDLEWARES_BASE": {},
        "EXTENSIONS_BASE": {},
        "EXTENSIONS": {"productcrawler.run.gc_tuning.GcTuning": 0},
        "ITEM_PIPELINES": {},
        "STATS_CLASS": "scrapy.statscollectors.DummyStatsCollector",
        "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
        "DOWNLOAD_HANDLERS": {"http": "productcrawler.download.handler.LeanAiohttpDownloadHandler"},
        # The project's concurrency, so that the engine moves as many requests at once as ours does.
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
        "CONCURRENT_ITEMS": 1,
        "LOG_LEVEL": "WARNING",
        "LOG_FORMATTER": "productcrawler.monitoring.logformatter.QuietLogFormatter",
    }

    def parse(self, response: Response) -> list[dict[str, Any]]:
        # A list, not a generator: Scrapy inspects a generator callback's source on every call.
        return [json.loads(response.body)] if response.status == 200 else []
