"""Request, response and exception counts, under Scrapy's own ``downloader/*`` names.

Replaces Scrapy's ``DownloaderStats``, which also renders every request as raw
HTTP text and sizes every response's headers only to count bytes
(docs/design-notes.md#per-call-costs-items-log-records-stats), for numbers
nobody reads here. The counts it keeps
are what the Prometheus metrics and Scrapy's closing stats show; only
``downloader/request_bytes`` and ``downloader/response_bytes`` are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.stats import DownloaderStats

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

REQUEST_COUNT = "downloader/request_count"
RESPONSE_COUNT = "downloader/response_count"
RESPONSE_STATUS_PREFIX = "downloader/response_status_count/"


class TrafficStats(DownloaderStats):
    """``DownloaderStats`` without the byte counts (same switch: ``DOWNLOADER_STATS``)."""

    def process_request(  # type: ignore[override]  # without the spider argument Scrapy 2.14 deprecates
        self, request: Request
    ) -> None:
        self.stats.inc_value(REQUEST_COUNT)
        self.stats.inc_value(f"downloader/request_method_count/{request.method}")

    def process_response(  # type: ignore[override]  # without the spider argument Scrapy 2.14 deprecates
        self, request: Request, response: Response
    ) -> Response:
        self.stats.inc_value(RESPONSE_COUNT)
        self.stats.inc_value(f"{RESPONSE_STATUS_PREFIX}{response.status}")
        return response
