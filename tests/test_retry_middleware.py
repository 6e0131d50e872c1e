from __future__ import annotations

import logging
import warnings
from datetime import UTC, datetime
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

from productcrawler import settings as project_settings
from productcrawler import stat_keys
from productcrawler.config import ConfigError
from productcrawler.retry.middleware import ApiRetryMiddleware
from productcrawler.retry.policy import RetryPolicy
from tests.support.doubles import PRODUCT_URL as URL
from tests.support.doubles import FakeRandom, product_request

NOW = datetime(2025, 1, 1, tzinfo=UTC).timestamp()


class ProductSpider(Spider):
    name = "products"


#: The project's values of Scrapy's retry settings (get_crawler does not read settings.py).
PROJECT = {"RETRY_HTTP_CODES": project_settings.RETRY_HTTP_CODES,
           "RETRY_GIVE_UP_LOG_LEVEL": project_settings.RETRY_GIVE_UP_LOG_LEVEL}


def make_mw(settings: dict[str, Any] | None = None) -> ApiRetryMiddleware:
    crawler = get_crawler(ProductSpider, settings_dict={"MAX_RETRIES": 2, **PROJECT, **(settings or {})})
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    policy = RetryPolicy.from_crawler(crawler, rng=FakeRandom(1.0), clock=lambda: NOW)
    return ApiRetryMiddleware(crawler, policy)


def stat(mw: ApiRetryMiddleware, key: str) -> Any:
    return mw.crawler.stats.get_value(key)


def response(status: int, **headers: str) -> Response:
    return Response(URL, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


# -- statuses ------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 404])
def test_200_and_404_pass_through_unretried(status: int) -> None:
    mw, rsp = make_mw(), response(status)
    assert mw.process_response(product_request(), rsp) is rsp
    assert stat(mw, "retry/count") is None


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
    # The scheduler counts the delay when it holds the request: once.
    assert stat(mw, stat_keys.RETRY_DELAYED) is None


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_exhausted_retries_return_the_last_response_as_scrapy_does(status: int) -> None:
    mw, request = make_mw({"MAX_RETRIES": 2}), product_request()
    for _ in range(2):
        request = mw.process_response(request, response(status))
        assert isinstance(request, Request)
    last = response(status)
    assert mw.process_response(request, last) is last
    assert stat(mw, "retry/max_reached") == 1
    assert stat(mw, "retry/count") == 2


@pytest.mark.parametrize("status", [400, 401, 403, 410, 422, 204, 301, 302, 304])
def test_status_not_in_retry_http_codes_passes_through(status: int) -> None:
    mw, rsp = make_mw(), response(status)
    assert mw.process_response(product_request(), rsp) is rsp
    assert stat(mw, "retry/count") is None


@pytest.mark.parametrize(
    ("value", "retried"),
    [
        ("[]", set()),
        ("", set()),
        ([], set()),
        ("[503]", {503}),
        ("503,429", {503, 429}),
        ([500], {500}),
    ],
)
def test_retry_http_codes_decides_what_is_retried(value: Any, retried: set[int]) -> None:
    mw = make_mw({"RETRY_HTTP_CODES": value})
    for status in (429, 500, 503):
        result = mw.process_response(product_request(), response(status))
        assert isinstance(result, Request) == (status in retried), status


@pytest.mark.parametrize("value", ["[abc]", "five", ["x"], "[700]", "[true]"])
def test_invalid_retry_http_codes_is_refused_with_its_name(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^RETRY_HTTP_CODES=.* is not a list of HTTP statuses"):
        make_mw({"RETRY_HTTP_CODES": value})


@pytest.mark.parametrize("status", [429, 503, 500, 502, 408])
def test_retry_after_seconds_is_honoured(status: int) -> None:
    mw = make_mw({"RETRY_BACKOFF_MAX": 5})
    new_request = mw.process_response(product_request(), response(status, Retry_After="30"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 30.0
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) == 1


def test_retry_after_with_a_fraction_is_honoured() -> None:
    mw = make_mw()
    new_request = mw.process_response(product_request(), response(429, Retry_After="2.0"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 2.0


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


def test_a_malformed_retry_after_on_any_status_falls_back_to_backoff() -> None:
    mw = make_mw({"RETRY_BACKOFF_BASE": 3})
    new_request = mw.process_response(product_request(), response(500, Retry_After="garbage"))
    assert isinstance(new_request, Request)
    assert new_request.meta["retry_delay"] == 3.0
    assert stat(mw, stat_keys.RETRY_AFTER_MALFORMED) == 1
    assert stat(mw, stat_keys.RETRY_AFTER_HONOURED) is None


def test_exhausted_retry_after_is_not_honoured() -> None:
    mw, rsp = make_mw({"MAX_RETRIES": 0}), response(429, Retry_After="10")
    assert mw.process_response(product_request(), rsp) is rsp
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
def test_download_error_is_retried_under_a_short_reason_then_passed_on(exception: Exception,
                                                                       reason: str) -> None:
    mw, request = make_mw({"MAX_RETRIES": 2, "RETRY_BACKOFF_BASE": 1}), product_request()
    for expected_retry_times in (1, 2):
        request = mw.process_exception(request, exception)
        assert isinstance(request, Request)
        assert request.meta["retry_times"] == expected_retry_times
        assert request.meta["retry_delay"] == 2.0 ** (expected_retry_times - 1)
        assert request.dont_filter is True
    assert mw.process_exception(request, exception) is None  # to the errback, as with Scrapy's
    assert stat(mw, f"retry/reason_count/{reason}") == 2
    assert stat(mw, "retry/max_reached") == 1


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


@pytest.mark.parametrize("exception", [ResponseFailed([Failure(ConnectionLost())]), defer.TimeoutError(),
                                       DownloadTimeoutError(), DownloadFailedError()])
def test_an_empty_retry_exceptions_retries_no_download_error(exception: Exception) -> None:
    """``-s 'RETRY_EXCEPTIONS=[]'``: the raw Twisted forms of Scrapy's errors are not retried either."""
    mw = make_mw({"RETRY_EXCEPTIONS": []})
    assert mw.process_exception(product_request(), exception) is None
    assert stat(mw, "retry/count") is None


# -- a request the spider did not build ------------------------------------------


def test_a_request_without_product_id_is_retried_like_any_other() -> None:
    mw = make_mw({"MAX_RETRIES": 1})
    request = Request("http://elsewhere.test/page")  # scrapy fetch, scrapy shell, another spider
    retry = mw.process_response(request, response(503))
    assert isinstance(retry, Request)
    assert "product_id" not in retry.meta
    last = response(503)
    assert mw.process_response(retry, last) is last
    assert mw.process_exception(request, DownloadTimeoutError()).meta["retry_times"] == 1
    ok = response(200)
    assert mw.process_response(request, ok) is ok


# -- logging, wiring, settings ---------------------------------------------------


def test_project_give_up_log_level_is_debug(caplog: pytest.LogCaptureFixture) -> None:
    mw = make_mw({"MAX_RETRIES": 1})
    caplog.set_level(logging.DEBUG)
    request = mw.process_exception(product_request(), DownloadTimeoutError())
    assert mw.process_exception(request, DownloadTimeoutError()) is None
    assert mw.process_response(product_request(max_retry_times=0), response(503)).status == 503
    assert any(r.getMessage().startswith("Gave up retrying") for r in caplog.records)
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize("level", ["WARNING", logging.WARNING])
def test_give_up_log_level_setting_is_honoured(caplog: pytest.LogCaptureFixture, level: Any) -> None:
    mw = make_mw({"MAX_RETRIES": 0, "RETRY_GIVE_UP_LOG_LEVEL": level})
    caplog.set_level(logging.DEBUG)
    mw.process_response(product_request(), response(503))
    assert ("scrapy.downloadermiddlewares.retry", logging.WARNING,
            f"Gave up retrying {product_request()} (failed 1 times): http_503") in caplog.record_tuples


def test_from_crawler_and_manager_wiring() -> None:
    settings = {
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
            "productcrawler.retry.middleware.ApiRetryMiddleware": 550,
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
        ("RETRY_TIMES", "lots"),
        ("RETRY_BACKOFF_BASE", "-0.5"),
        ("RETRY_BACKOFF_MAX", "soon"),
        ("RETRY_AFTER_MAX", "-1"),
        ("RETRY_PRIORITY_ADJUST", "low"),
        ("RETRY_GIVE_UP_LOG_LEVEL", "LOUD"),
    ],
)
def test_invalid_settings_raise_value_error(name: str, value: str) -> None:
    crawler = get_crawler(ProductSpider, settings_dict={name: value})
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        ApiRetryMiddleware.from_crawler(crawler)


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, 3),
    ({"MAX_RETRIES": "0"}, 0),
    ({"MAX_RETRIES": "5"}, 5),
    ({"RETRY_TIMES": "1"}, 1),
])
def test_valid_retry_counts(settings: dict[str, Any], expected: int) -> None:
    crawler = get_crawler(ProductSpider, settings_dict=settings)
    mw = ApiRetryMiddleware.from_crawler(crawler)
    assert mw.max_retry_times == mw.policy.max_retries == expected
