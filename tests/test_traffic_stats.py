"""TrafficStats keeps DownloaderStats' counts under the same names, without the byte counts."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError

from productcrawler.monitoring.stats import FastStatsCollector
from productcrawler.monitoring.traffic_stats import TrafficStats


def test_counts_requests_responses_by_status_and_exceptions():
    crawler = get_crawler(settings_dict={"STATS_CLASS": "productcrawler.monitoring.stats.FastStatsCollector"})
    crawler._apply_settings()  # builds crawler.stats from STATS_CLASS, as a crawl does
    assert isinstance(crawler.stats, FastStatsCollector)
    middleware = TrafficStats.from_crawler(crawler)
    request = Request("http://api.test/product/1")
    for status in (200, 200, 503):
        middleware.process_request(request)
        middleware.process_response(request, Response(request.url, status=status, body=b"{}"))
    middleware.process_exception(request, ConnectionRefusedError())
    stats = crawler.stats.get_stats()
    assert stats["downloader/request_count"] == 3
    assert stats["downloader/request_method_count/GET"] == 3
    assert stats["downloader/response_count"] == 3
    assert stats["downloader/response_status_count/200"] == 2
    assert stats["downloader/response_status_count/503"] == 1
    assert stats["downloader/exception_count"] == 1
    assert not [key for key in stats if key.endswith("_bytes")]
    # Scrapy 2.19's per-access hook would have cached wrapped methods on the instance.
    assert not [name for name in vars(crawler.stats) if name.startswith("_cached_")]


def test_off_with_downloader_stats_off():
    with pytest.raises(NotConfigured):
        TrafficStats.from_crawler(get_crawler(settings_dict={"DOWNLOADER_STATS": False}))
