"""Retries that respect the product API: classify each answer, delay each retry.

Registered at 550 in place of Scrapy's ``RetryMiddleware``, whose settings it
keeps where they still mean something (``RETRY_ENABLED``, ``RETRY_EXCEPTIONS``,
``RETRY_PRIORITY_ADJUST``, the ``dont_retry``/``max_retry_times``/
``priority_adjust`` meta keys). The number of retries is ``MAX_RETRIES``
(``RETRY_TIMES`` is not used) and the statuses are fixed by the API contract
(``RETRY_HTTP_CODES`` is not used):

=====================  ==========================================================
200                    passed through; the spider validates the body
404                    ``GiveUp``: MISSING, reason ``not_found``, never retried
408, 429, 5xx          retried after a delay (``Retry-After`` honoured on 429 and
                       503); once retries are used up, FAILED ``http_<status>``
anything else          FAILED ``http_<status>`` at once (400, 401, 403, 410, a 3xx
                       the redirect middleware did not follow, a 2xx other than 200)
=====================  ==========================================================

Download errors listed in ``RETRY_EXCEPTIONS`` are retried with backoff under
a short reason (``timeout``, ``connection_refused``, ...) and become FAILED with
that reason when retries are used up; any other exception propagates to the
spider's errback untouched.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from twisted.internet import defer
from twisted.internet.error import (
    ConnectError,
    ConnectionDone,
    ConnectionLost,
    DNSLookupError,
    TCPTimedOutError,
)
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefusedError
from twisted.internet.error import TimeoutError as TxTimeoutError
from twisted.web.client import ResponseFailed

from productcrawler.config import ConfigError
from productcrawler.items import MISSING, FailureItem
from productcrawler.retry_policy import GiveUp, RetryPolicy

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

__all__ = ["ApiRetryMiddleware", "GiveUp", "exception_reason"]

logger = logging.getLogger(__name__)

RETRY_AFTER_STATUSES = frozenset({429, 503})
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))

# Most specific first: Scrapy 2.19's handlers wrap the Twisted errors in their
# own exceptions, other handlers (or code paths) may let the raw ones through.
_EXCEPTION_REASONS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((DownloadTimeoutError, TxTimeoutError, TCPTimedOutError, defer.TimeoutError, TimeoutError),
     "timeout"),
    ((DownloadConnectionRefusedError, TxConnectionRefusedError, ConnectionRefusedError),
     "connection_refused"),
    ((CannotResolveHostError, DNSLookupError), "dns_lookup_failed"),
    ((ResponseDataLossError,), "response_data_loss"),
    ((ConnectionLost, ConnectionResetError, ConnectionAbortedError, BrokenPipeError),
     "connection_lost"),
    ((ConnectionDone,), "connection_closed"),
    ((TunnelError,), "tunnel_error"),
    ((ConnectError, ConnectionError), "connect_error"),
    ((DownloadFailedError, ResponseFailed), "response_failed"),
    ((OSError,), "os_error"),
)


def exception_reason(exception: BaseException) -> str:
    """A short, stable name for a download error, used in stats and stored failures.

    ``ResponseFailed`` (raw, or wrapped in ``DownloadFailedError``) is named
    after the first of its underlying reasons we know, typically
    ``connection_lost`` when the server closed the connection mid-response.
    """
    failed = exception if isinstance(exception, ResponseFailed) else exception.__cause__
    if isinstance(failed, ResponseFailed):
        for cause in failed.reasons:
            value = getattr(cause, "value", cause)
            if isinstance(value, BaseException) and not isinstance(value, ResponseFailed):
                reason = _known_reason(value)
                if reason is not None and reason != "response_failed":
                    return reason
    reason = _known_reason(exception)
    if reason is not None:
        return reason
    # An exception added to RETRY_EXCEPTIONS: ValueError -> value_error
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(exception).__name__).lower()


def _known_reason(exception: BaseException) -> str | None:
    for types, reason in _EXCEPTION_REASONS:
        if isinstance(exception, types):
            return reason
    return None


class ApiRetryMiddleware(RetryMiddleware):
    """Classify API answers and download errors into delayed retries or ``GiveUp``."""

    def __init__(self, crawler: Crawler, policy: RetryPolicy):
        _check_int_setting(crawler, "RETRY_PRIORITY_ADJUST")
        super().__init__(crawler.settings)  # bare NotConfigured if RETRY_ENABLED is off
        self.crawler = crawler
        self.stats = crawler.stats
        self.policy = policy
        self.max_retry_times = policy.max_retries
        # The raw Twisted forms of errors that Scrapy 2.19's handlers wrap,
        # in case a download handler lets one through.
        self.exceptions_to_retry = (*self.exceptions_to_retry, ResponseFailed, defer.TimeoutError)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, RetryPolicy.from_crawler(crawler))

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if request.meta.get("dont_retry", False):
            return response
        status = response.status
        if status == 200:
            return response
        if status == 404:
            raise GiveUp(self.policy.give_up(request, outcome=MISSING, reason="not_found",
                                             http_status=404))
        reason = f"http_{status}"
        if status not in RETRY_STATUSES:
            raise GiveUp(self.policy.give_up(request, reason=reason, http_status=status))
        retry_after = self.policy.retry_after(response) if status in RETRY_AFTER_STATUSES else None
        return self._step(self.policy.next_step(request, reason=reason, http_status=status,
                                                retry_after=retry_after))

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if request.meta.get("dont_retry", False):
            return None
        if not isinstance(exception, self.exceptions_to_retry):
            return None  # unexpected: the spider's errback records it
        reason = exception_reason(exception)
        return self._step(self.policy.next_step(request, reason=reason, http_status=None))

    @staticmethod
    def _step(step: Request | FailureItem) -> Request:
        if isinstance(step, FailureItem):
            raise GiveUp(step)
        return step


def _check_int_setting(crawler: Crawler, name: str) -> None:
    raw = crawler.settings.get(name)
    try:
        if isinstance(raw, bool):
            raise ValueError
        int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
