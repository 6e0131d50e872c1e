"""Microbenchmarks: the per-response cost of the small items, too small for end-to-end runs to resolve.

Usage (from the repository root; ~20 s)::

    .venv/bin/python bench/micro.py

Each line is CPU microseconds per call (time.process_time, best of 5), for:
the two DEBUG log records Scrapy builds per response and per item (and drops,
at LOG_LEVEL=INFO), with the stock LogFormatter and with
``productcrawler/monitoring/logformatter.py``; DownloaderStats' request+response hooks; one
``stats.inc_value`` with Scrapy 2.19's collector and ``productcrawler.monitoring.stats.FastStatsCollector``;
Scrapy's generator-return-value check of a callback when its weakly-cached
entry is gone (a generator one, and our spider's list-returning ``parse``); and ``_parallel_asyncio`` for one item with
CONCURRENT_ITEMS=100 and 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy import Request, Spider  # noqa: E402
from scrapy.downloadermiddlewares.stats import DownloaderStats  # noqa: E402
from scrapy.http import TextResponse  # noqa: E402
from scrapy.settings import Settings  # noqa: E402
from scrapy.utils import misc  # noqa: E402
from scrapy.utils.asyncio import _parallel_asyncio  # noqa: E402
from scrapy.utils.log import configure_logging, logformatter_adapter  # noqa: E402
from scrapy.utils.test import get_crawler as _get_crawler  # noqa: E402


def get_crawler(*args: Any, **kwargs: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return _get_crawler(*args, **kwargs)


def per_call(function: Callable[[], Any], number: int = 5000) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(number):
            function()
        best = min(best, (time.process_time() - started) / number)
    return best * 1e6


def _generator_callback(self: Any, response: Any) -> Any:
    """Stands in for a spider callback that yields (ProductsSpider.parse did until e564f6c)."""
    product_id = response.meta["product_id"]
    if product_id < 0:
        return
    yield {"product_id": product_id}


def main() -> int:
    warnings.simplefilter("ignore")
    configure_logging(Settings({"LOG_LEVEL": "INFO", "LOG_FILE": "/dev/null"}))
    spider = Spider("micro")
    request = Request("http://127.0.0.1:8931/v1/product/12345", meta={"product_id": 12345})
    response = TextResponse(request.url, body=b'{"product_id": 12345, "name": "x"}' * 20, request=request,
                            headers={"Content-Type": "application/json"})
    item = {"product_id": 12345}
    engine_logger = logging.getLogger("scrapy.core.engine")
    scraper_logger = logging.getLogger("scrapy.core.scraper")
    rows = []
    for label, formatter in (("stock LogFormatter", "scrapy.logformatter.LogFormatter"),
                             ("QuietLogFormatter", "productcrawler.monitoring.logformatter.QuietLogFormatter")):
        lf = get_crawler(Spider, settings_dict={"LOG_LEVEL": "INFO", "LOG_FORMATTER": formatter}).logformatter

        def records(lf: Any = lf) -> None:
            for logger, kws in ((engine_logger, lf.crawled(request, response, spider)),
                                (scraper_logger, lf.scraped(item, response, spider))):
                if kws is not None:
                    logger.log(*logformatter_adapter(kws), extra={"spider": spider})

        rows.append((f"crawled+scraped DEBUG records, {label}", per_call(records)))
    for label, stats_class in (("Scrapy's collector", "scrapy.statscollectors.MemoryStatsCollector"),
                               ("FastStatsCollector", "productcrawler.monitoring.stats.FastStatsCollector")):
        crawler = get_crawler(Spider, settings_dict={"STATS_CLASS": stats_class})
        stats = crawler.stats
        middleware = DownloaderStats.from_crawler(crawler)
        rows.append((f"stats.inc_value, {label}", per_call(lambda s=stats: s.inc_value("x"), 50_000)))

        def downloader_stats(m: Any = middleware) -> None:
            m.process_request(request)
            m.process_response(request, response)

        rows.append((f"DownloaderStats request+response, {label}", per_call(downloader_stats)))
    from productcrawler.spiders.products import ProductsSpider

    for label, callback in (("a generator callback", _generator_callback),
                            ("ProductsSpider.parse (returns a list)", ProductsSpider.parse)):
        def generator_check(callback: Any = callback) -> None:
            misc._generator_callbacks_cache.data.clear()
            misc.is_generator_with_return_value(callback)

        rows.append((f"generator-return check of {label}, uncached", per_call(generator_check, 200)))

    async def one_item(item: Any, response: Any) -> None:
        return None

    async def parallel(count: int, number: int = 2000) -> float:
        started = time.process_time()
        for _ in range(number):
            await _parallel_asyncio(iter([1]), count, one_item, None)
        return (time.process_time() - started) / number * 1e6

    for count in (100, 1):
        rows.append((f"_parallel_asyncio, one item, CONCURRENT_ITEMS={count}", asyncio.run(parallel(count))))
    width = max(len(label) for label, _ in rows)
    for label, micros in rows:
        print(f"{label:{width}s}  {micros:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
