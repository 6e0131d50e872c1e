from __future__ import annotations

import logging
import warnings
from datetime import datetime, timezone
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
    ResponseDataLossError,
)
from scrapy.http import Response
from scrapy.settings.default_settings import RETRY_EXCEPTIONS
from scrapy.utils.test import get_crawler
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
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed

from productcrawler import stat_keys
from productcrawler.items import FAILED, MISSING, FailureItem
from productcrawler.middlewares.retry import ApiRetryMiddleware, GiveUp
from productcrawler.retry_policy import RetryPolicy
from tests.helpers import PRODUCT_URL as URL
from tests.helpers import FakeRandom, product_request

NOW = datetime(2025, 1, 1, tzinfo=timezone.utc).timestamp()
UNSET = object()


class ProductSpider(Spider):
    name = "products"


def make_mw(settings: dict[str, Any] | None = None) -> ApiRetryMiddleware:
    crawler = get_crawler(ProductSpider, settings_dict={"MAX_RETRIES": 2, **(settings or {})})
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    policy = RetryPolicy.from_crawler(crawler, rng=FakeRandom(1.0), clock=lambda: NOW)
    return ApiRetryMiddleware(crawler, policy)


def stat(mw: ApiRetryMiddleware, key: str) -> Any:
    return mw.crawler.stats.get_value(key)


def response(status: int, **headers: str) -> Response:
    return Response(URL, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def give_up_of(call: Any, *args: Any) -> FailureItem:
    with pytest.raises(GiveUp) as info:
        call(*args)
    return info.value.item


# -- statuses ------------------------------------------------------------------


def test_200_passes_through() -> None:
    mw, rsp = make_mw(), response(200)
    assert mw.process_response(product_request(), rsp) is rsp
    assert stat(mw, "retry/count") is None


def test_404_is_missing_and_not_retried() -> None:
    mw = make_mw()
    item = give_up_of(mw.process_response, product_request(), response(404))
    assert item == FailureItem(product_id=7, outcome=MISSING, http_status=404, reason="not_found",
                               attempts=1)
    assert stat(mw, "retry/count") is None
    assert stat(mw, stat_keys.failed_reason("not_found")) is None


def test_404_after_retries_counts_attempts() -> None:
    item = give_up_of(make_mw().process_response, product_request(retry_times=2), response(404))
    assert (item.outcome, item.attempts) == (MISSING, 3)


def test_give_up_is_an_ignore_request() -> None:
    with pytest.raises(IgnoreRequest):
        make_mw().process_response(product_request(), response(404))


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 520, 599])
def test_retryable_status_is_retried_with_a_delay(status: int) -> None:
    mw, request = make_mw({"RETRY_BACKOFF_BASE": 1}), product_request()
    new_request = mw.process_response(request, response(status))
    assert isinstance(new_request, Request)
    assert new_request.url == request.url
    assert new_request.meta["product_id"] == 7
    assert new_request.meta["retry_times"] == 1
    assert new_request.meta["retry_delay"] == 1.0
    assert new_request.dont_filter is True
    assert new_request.priority == -1
    assert stat(mw, f"retry/reason_count/http_{status}") == 1
    assert stat(mw, stat_keys.RETRY_DELAYED) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_retryable_status_gives_up_when_exhausted(status: int) -> None:
    mw, request = make_mw({"MAX_RETRIES": 2}), product_request()
    for _ in range(2):
        request = mw.process_response(request, response(status))
        assert isinstance(request, Request)
    item = give_up_of(mw.process_response, request, response(status))
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=status,
                               reason=f"http_{status}", attempts=3)
    assert stat(mw, stat_keys.failed_reason(f"http_{status}")) == 1
    assert stat(mw, "retry/max_reached") == 1


def test_max_retries_zero_gives_up_at_once() -> None:
    item = give_up_of(make_mw({"MAX_RETRIES": 0}).process_response, product_request(), response(503))
    assert (item.outcome, item.reason, item.attempts) == (FAILED, "http_503", 1)


@pytest.mark.parametrize("status", [400, 401, 403, 410, 422, 204, 301, 302, 304])
def test_permanent_status_fails_at_once(status: int) -> None:
    mw = make_mw()
    item = give_up_of(mw.process_response, product_request(), response(status))
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=status,
                               reason=f"http_{status}", attempts=1)
    assert stat(mw, "retry/count") is None
    assert stat(mw, stat_keys.failed_reason(f"http_{status}")) == 1


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_seconds_is_honoured(status: int) -> None:
    mw = make_mw({"RETRY_BACKOFF_MAX": 5})
    new_request = mw.process_response(product_request(), response(status, Retry_After="30"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 30.0
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) == 1
    assert stat(mw, stat_keys.RETRY_DELAY_SECONDS) == 30.0


def test_retry_after_date_is_honoured() -> None:
    mw = make_mw()
    rsp = response(503, Retry_After="Wed, 01 Jan 2025 00:00:45 GMT")
    new_request = mw.process_response(product_request(), rsp)
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 45.0


def test_retry_after_is_capped() -> None:
    mw = make_mw({"RETRY_AFTER_MAX": 120})
    new_request = mw.process_response(product_request(), response(429, Retry_After="86400"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 120.0
    assert stat(mw, stat_keys.RETRY_AFTER_CAPPED) == 1


def test_malformed_retry_after_falls_back_to_backoff() -> None:
    mw = make_mw({"RETRY_BACKOFF_BASE": 3})
    new_request = mw.process_response(product_request(), response(429, Retry_After="in a minute"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 3.0
    assert stat(mw, stat_keys.RETRY_AFTER_MALFORMED) == 1
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) is None


def test_retry_after_is_ignored_on_other_statuses() -> None:
    mw = make_mw({"RETRY_BACKOFF_BASE": 3})
    new_request = mw.process_response(product_request(), response(500, Retry_After="garbage"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 3.0
    assert stat(mw, stat_keys.RETRY_AFTER_MALFORMED) is None
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) is None


def test_exhausted_retry_after_is_not_honoured() -> None:
    mw = make_mw({"MAX_RETRIES": 0})
    item = give_up_of(mw.process_response, product_request(), response(429, Retry_After="10"))
    assert (item.http_status, item.reason) == (429, "http_429")
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) is None


@pytest.mark.parametrize("status", [404, 503, 400])
def test_dont_retry_passes_responses_through(status: int) -> None:
    rsp = response(status)
    assert make_mw().process_response(product_request(dont_retry=True), rsp) is rsp


# -- exceptions ----------------------------------------------------------------


def response_failed_because_connection_lost() -> DownloadFailedError:
    cause = ResponseFailed([Failure(ConnectionLost("gone"))])
    error = DownloadFailedError(str(cause))
    error.__cause__ = cause
    return error


EXCEPTIONS = [
    (DownloadTimeoutError("took too long"), "timeout"),
    (TxTimeoutError(), "timeout"),
    (TCPTimedOutError(), "timeout"),
    (defer.TimeoutError(), "timeout"),
    (TimeoutError(), "timeout"),
    (DownloadConnectionRefusedError("refused"), "connection_refused"),
    (TxConnectionRefusedError(), "connection_refused"),
    (ConnectionRefusedError(), "connection_refused"),
    (CannotResolveHostError("api.test"), "dns_lookup_failed"),
    (DNSLookupError(), "dns_lookup_failed"),
    (ConnectionLost(), "connection_lost"),
    (ConnectionResetError(), "connection_lost"),
    (ConnectionDone(), "connection_closed"),
    (ResponseDataLossError(), "response_data_loss"),
    (DownloadFailedError("failed"), "response_failed"),
    (response_failed_because_connection_lost(), "connection_lost"),
    (ResponseFailed([Failure(ConnectionLost())]), "connection_lost"),
    (ResponseFailed([]), "response_failed"),
    (TunnelError("proxy said no"), "tunnel_error"),
    (ConnectError(), "connect_error"),
    (OSError("empty gzip body"), "os_error"),
]


@pytest.mark.parametrize(("exception", "reason"), EXCEPTIONS,
                         ids=[f"{type(e).__name__}-{r}" for e, r in EXCEPTIONS])
def test_download_error_is_retried_then_fails(exception: Exception, reason: str) -> None:
    mw, request = make_mw({"MAX_RETRIES": 2, "RETRY_BACKOFF_BASE": 1}), product_request()
    for expected_retry_times in (1, 2):
        request = mw.process_exception(request, exception)
        assert isinstance(request, Request)
        assert request.meta["retry_times"] == expected_retry_times
        assert request.meta["retry_delay"] == 2.0 ** (expected_retry_times - 1)
        assert request.dont_filter is True
    item = give_up_of(mw.process_exception, request, exception)
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=None, reason=reason,
                               attempts=3)
    assert stat(mw, f"retry/reason_count/{reason}") == 2
    assert stat(mw, stat_keys.failed_reason(reason)) == 1


@pytest.mark.parametrize("exception", [ValueError("bug"), KeyError("price"), IgnoreRequest()])
def test_unexpected_exception_propagates(exception: Exception) -> None:
    mw = make_mw()
    assert mw.process_exception(product_request(), exception) is None
    assert stat(mw, "retry/count") is None


def test_dont_retry_lets_exceptions_propagate() -> None:
    mw = make_mw()
    assert mw.process_exception(product_request(dont_retry=True), DownloadTimeoutError()) is None


def test_retry_exceptions_setting_is_used() -> None:
    mw = make_mw({"RETRY_EXCEPTIONS": [*RETRY_EXCEPTIONS, ValueError]})
    new_request = mw.process_exception(product_request(), ValueError("flaky"))
    assert isinstance(new_request, Request)
    assert stat(mw, "retry/reason_count/value_error") == 1


# -- logging, wiring, settings ---------------------------------------------------


def test_no_log_above_debug_for_retries_and_give_ups(caplog: pytest.LogCaptureFixture) -> None:
    mw = make_mw({"MAX_RETRIES": 1})
    caplog.set_level(logging.DEBUG)
    request = mw.process_exception(product_request(), DownloadTimeoutError())
    with pytest.raises(GiveUp):
        mw.process_exception(request, DownloadTimeoutError())
    with pytest.raises(GiveUp):
        mw.process_response(product_request(), response(404))
    with pytest.raises(GiveUp):
        mw.process_response(product_request(), response(403))
    assert caplog.records
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


def test_from_crawler_and_manager_wiring() -> None:
    settings = {
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
            "productcrawler.middlewares.retry.ApiRetryMiddleware": 550,
        },
    }
    crawler = get_crawler(ProductSpider, settings_dict=settings)
    crawler.spider = crawler._create_spider()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a deprecated spider argument
        manager = DownloaderMiddlewareManager.from_crawler(crawler)
    ours = [mw for mw in manager.middlewares if isinstance(mw, ApiRetryMiddleware)]
    assert len(ours) == 1
    assert not any(type(mw).__name__ == "RetryMiddleware" for mw in manager.middlewares)
    assert ours[0].policy.max_retries == 3  # MAX_RETRIES default
    assert not manager._mw_methods_requiring_spider


def test_retry_enabled_false_disables() -> None:
    crawler = get_crawler(ProductSpider, settings_dict={"RETRY_ENABLED": False})
    with pytest.raises(NotConfigured):
        ApiRetryMiddleware.from_crawler(crawler)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_RETRIES", "-1"),
        ("MAX_RETRIES", "lots"),
        ("RETRY_BACKOFF_BASE", "-0.5"),
        ("RETRY_BACKOFF_MAX", "soon"),
        ("RETRY_AFTER_MAX", "-1"),
        ("RETRY_PRIORITY_ADJUST", "low"),
    ],
)
def test_invalid_settings_raise_value_error(name: str, value: str) -> None:
    crawler = get_crawler(ProductSpider, settings_dict={name: value})
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        ApiRetryMiddleware.from_crawler(crawler)


@pytest.mark.parametrize("value", [UNSET, "0", "5"])
def test_valid_max_retries(value: Any) -> None:
    settings = {} if value is UNSET else {"MAX_RETRIES": value}
    crawler = get_crawler(ProductSpider, settings_dict=settings)
    mw = ApiRetryMiddleware.from_crawler(crawler)
    assert mw.max_retry_times == mw.policy.max_retries == (3 if value is UNSET else int(value))
