"""Request latency into the ``productcrawler_request_duration_seconds`` histogram.

Placed last on the way out (order 960): its ``process_request`` stamps the
request as it goes to the download slot, and the paced download handler
(``ratelimit/handler.py``) stamps it again once the request has its rate-limit
slot and is sent; ``process_response`` / ``process_exception`` run first on the
way back, so the time measured is the API's, not the wait for a token.
The outcome is a class (``2xx``, ``404``, ``429``, ``4xx``, ``5xx``,
``timeout``, ``error``), never an id. Off unless METRICS_PORT is set: it is
the one thing the metrics add per request (two ``monotonic()`` calls, a meta
key and one histogram observation).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from scrapy.exceptions import DownloadTimeoutError, NotConfigured
from twisted.internet import defer
from twisted.internet.error import TimeoutError as TxTimeoutError

from productcrawler.config.crawler import crawl_config
from productcrawler.instruments import crawl_instruments
from productcrawler.meta import ABANDONED, SENT_AT

if TYPE_CHECKING:
    from prometheus_client import Histogram
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: Statuses kept apart from their class: a missing id, and the API's "slow down".
_OWN_CLASS = {404: "404", 429: "429"}
_TIMEOUTS = (DownloadTimeoutError, TimeoutError, TxTimeoutError, defer.TimeoutError)


def outcome_class(status: int) -> str:
    return _OWN_CLASS.get(status) or f"{status // 100}xx"


class RequestTiming:
    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self._by_status: dict[int, Histogram] = {}  # one labelled child per status seen
        self._timeout = histogram.labels("timeout")
        self._error = histogram.labels("error")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RequestTiming:
        if crawl_config(crawler).monitoring.metrics_port is None:
            raise NotConfigured
        return cls(crawl_instruments(crawler).request_duration)

    def process_request(self, request: Request) -> None:
        request.meta[SENT_AT] = time.monotonic()

    def process_response(self, request: Request, response: Response) -> Response:
        sent_at = request.meta.pop(SENT_AT, None)
        if sent_at is not None:
            child = self._by_status.get(response.status)
            if child is None:
                child = self._by_status[response.status] = self.histogram.labels(outcome_class(response.status))
            child.observe(time.monotonic() - sent_at)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        sent_at = request.meta.pop(SENT_AT, None)
        if sent_at is not None and not request.meta.get(ABANDONED):  # abandoned: never sent
            child = self._timeout if isinstance(exception, _TIMEOUTS) else self._error
            child.observe(time.monotonic() - sent_at)
