"""Scrapy's retry middleware, with a delay on each retry and short retry reasons.

Registered at 550 in place of Scrapy's ``RetryMiddleware``, which it extends
without changing what it retries or what it returns: the statuses in
``RETRY_HTTP_CODES`` and the download errors in ``RETRY_EXCEPTIONS`` are
retried up to ``RETRY_TIMES``/``MAX_RETRIES`` times (``dont_retry``,
``max_retry_times``, ``priority_adjust`` and ``give_up_log_level`` meta keys
included); once they are used up, the last response is returned, or the last
exception passed on, as with Scrapy's. What an answer means for a product id
(stored, missing, failed) is the spider's business, not this module's.

What it adds:

* each retry carries ``meta["retry_delay"]``: exponential backoff with jitter,
  or the server's ``Retry-After`` on whichever retried status carries one
  (see ``retry/policy.py``); the scheduler holds the request that long, off
  the downloader;
* retry reasons are short and stable (``http_503``, ``timeout``,
  ``connection_refused``: ``download/errors.py`` names the errors), in
  ``retry/reason_count/<reason>`` and in the log, where Scrapy writes
  ``503 Service Unavailable`` or an exception's class path;
* ``RETRY_HTTP_CODES`` may be given as JSON (``-s 'RETRY_HTTP_CODES=[]'``) as
  well as a comma list, and a bad value is refused at start with its name;
* the raw Twisted forms of the errors that Scrapy's handlers wrap are retried
  too (where ``RETRY_EXCEPTIONS`` retries the wrapping error), in case a
  download handler lets one through;
* a TLS certificate that failed verification (``tls_certificate``) is not
  retried, although ``RETRY_EXCEPTIONS`` lists the ``DownloadFailedError`` it
  is: the same certificate comes back, and the guard stops the crawl on it.

Nothing here reads the product id: a request from ``scrapy fetch``, ``scrapy
shell`` or another spider is retried exactly like a product request.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import DownloadFailedError, DownloadTimeoutError
from scrapy.settings import BaseSettings
from twisted.internet import defer
from twisted.web.client import ResponseFailed

from productcrawler.budget.limited import is_rate_limited, reset_after
from productcrawler.config.crawler import crawl_config
from productcrawler.download.errors import TLS_CERTIFICATE, exception_reason
from productcrawler.retry.policy import RetryPolicy

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

__all__ = ["ApiRetryMiddleware"]

logger = logging.getLogger(__name__)

#: Scrapy's download errors and the raw Twisted errors they wrap.
_RAW_FORMS: tuple[tuple[type[Exception], type[Exception]], ...] = (
    (DownloadFailedError, ResponseFailed),
    (DownloadTimeoutError, defer.TimeoutError),
)


class ApiRetryMiddleware(RetryMiddleware):
    """Scrapy's ``RetryMiddleware``; each retry is held ``retry_delay`` seconds first."""

    def __init__(self, crawler: Crawler, policy: RetryPolicy):
        # Scrapy's __init__ reads the settings itself: it gets them resolved
        # and validated, so that it never sees a value it would choke on.
        settings = BaseSettings(crawler.settings.copy_to_dict())
        settings.update({
            "RETRY_TIMES": policy.max_retries,
            "RETRY_PRIORITY_ADJUST": policy.priority_adjust,
            "RETRY_GIVE_UP_LOG_LEVEL": policy.give_up_log_level,
            "RETRY_HTTP_CODES": list(crawl_config(crawler).retry.http_codes),
        })
        super().__init__(settings)  # bare NotConfigured if RETRY_ENABLED is off
        self.crawler = crawler
        self.stats = crawler.stats
        self.policy = policy
        # The raw Twisted forms, where the Scrapy errors that wrap them are retried
        # (RETRY_EXCEPTIONS=[] must mean no download error is retried).
        raw = [twisted for scrapys, twisted in _RAW_FORMS if issubclass(scrapys, self.exceptions_to_retry)]
        self.exceptions_to_retry = (*self.exceptions_to_retry, *raw)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, RetryPolicy.from_crawler(crawler))

    def process_response(  # type: ignore[override]  # without the spider argument Scrapy 2.14 deprecates
        self, request: Request, response: Response
    ) -> Request | Response:
        status = response.status
        if request.meta.get("dont_retry", False):
            return response
        if status not in self.retry_http_codes:
            if status == 403 and 429 in self.retry_http_codes and is_rate_limited(response):
                # An exhausted limit answered 403 (GitHub, Best Buy): retried as a 429 is, after its reset.
                wait = self.policy.retry_after(response) or reset_after(response)
                return self._retry_later(request, "http_403_rate_limited", wait, status) or response
            return response
        retry_after = self.policy.retry_after(response)
        return self._retry_later(request, f"http_{status}", retry_after, status) or response

    def process_exception(  # type: ignore[override]  # without the spider argument Scrapy 2.14 deprecates
        self, request: Request, exception: Exception
    ) -> Request | None:
        if request.meta.get("dont_retry", False) or not isinstance(exception, self.exceptions_to_retry):
            return None
        reason = exception_reason(exception)
        if reason == TLS_CERTIFICATE:
            return None
        return self._retry_later(request, reason, None, None)

    def _retry_later(self, request: Request, reason: str, retry_after: float | None,
                     http_status: int | None) -> Request | None:
        retry = self._retry(request, reason)  # Scrapy's: get_retry_request() with the meta keys
        if retry is None:
            return None
        return self.policy.hold(retry, reason=reason, retry_after=retry_after, http_status=http_status)

