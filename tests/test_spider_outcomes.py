"""What the spider records for each final answer, now that the retry middleware only retries."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError, IgnoreRequest
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from productcrawler import signals as signals_
from productcrawler import stat_keys
from productcrawler.items import FAILED, MISSING, FailureItem, ProductItem
from productcrawler.meta import ABANDONED as META_ABANDONED
from productcrawler.retry.policy import RetryPolicy
from productcrawler.spiders.products import ProductsSpider
from simulator import catalog

URL = "http://api.test/v1/product/7"


def make_spider(settings: dict[str, Any] | None = None) -> ProductsSpider:
    crawler = get_crawler(ProductsSpider, settings_dict={"MAX_RETRIES": 2, "DATABASE_URL": "sqlite:////nonexistent/x.db",
                                                         "API_BASE_URL": "http://api.test/v1",
                                                         **(settings or {})})
    crawler.spider = spider = ProductsSpider.from_crawler(crawler)
    crawler.stats.open_spider()
    spider.retry_policy = RetryPolicy.from_crawler(crawler, rng=random.Random(0))
    return spider


def answer(status: int, body: bytes = b"", **meta: Any) -> Response:
    request = Request(URL, meta={"product_id": 7, **meta})
    return Response(URL, status=status, body=body, request=request)


def failure_of(error: Exception, **meta: Any) -> Failure:
    failure = Failure(error)
    failure.request = Request(URL, meta={"product_id": 7, **meta})  # type: ignore[attr-defined]
    return failure


def test_the_spiders_requests_ask_for_every_status() -> None:
    request = make_spider().make_request(7)
    assert request.meta["handle_httpstatus_all"] is True
    assert request.meta["product_id"] == 7


@pytest.mark.parametrize("retry_times", [0, 2])
def test_404_is_missing(retry_times: int) -> None:
    spider = make_spider()
    assert spider.parse(answer(404, retry_times=retry_times)) == [
        FailureItem(7, MISSING, 404, "not_found", retry_times + 1)]
    assert spider.crawler.stats.get_value(stat_keys.failed_reason("not_found")) is None


@pytest.mark.parametrize(("status", "retry_times"), [(503, 2), (429, 2), (503, 0), (403, 0), (400, 0),
                                                     (204, 0), (302, 0)])
def test_any_other_final_status_is_failed_with_it(status: int, retry_times: int) -> None:
    spider = make_spider()
    assert spider.parse(answer(status, retry_times=retry_times)) == [
        FailureItem(7, FAILED, status, f"http_{status}", retry_times + 1)]


def test_a_product_is_parsed() -> None:
    product = catalog.product(7, 1)  # the simulator's answer for id 7
    (item,) = make_spider().parse(answer(200, json.dumps(product).encode()))
    assert isinstance(item, ProductItem)
    assert (item.product_id, item.name) == (7, product["name"])


def test_an_answer_the_parser_chokes_on_is_failed_not_left_without_outcome(monkeypatch) -> None:
    # With a shared pass an id without an outcome is leased again and again; it must end recorded.
    def choke(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("surprise")

    monkeypatch.setattr("productcrawler.spiders.products.parse_product", choke)
    (item,) = make_spider().parse(answer(200, b"{}", retry_times=1))
    assert item == FailureItem(7, FAILED, 200, "parse_error: KeyError: 'surprise'", 2)


def test_a_bad_body_is_retried_then_failed() -> None:
    spider = make_spider({"MAX_RETRIES": 1})
    (retry,) = spider.parse(answer(200, b"<html>"))
    assert isinstance(retry, Request)
    assert retry.meta["retry_times"] == 1
    (item,) = spider.parse(Response(URL, status=200, body=b"<html>", request=retry))
    assert isinstance(item, FailureItem)
    assert (item.outcome, item.http_status, item.attempts) == (FAILED, 200, 2)
    assert item.reason.startswith("bad_response/")


def test_a_download_error_after_its_retries_is_failed_with_a_short_reason() -> None:
    spider = make_spider()
    assert spider.on_error(failure_of(DownloadTimeoutError("slow"), retry_times=2)) == [
        FailureItem(7, FAILED, None, "timeout", 3)]


def test_an_unexpected_error_is_failed_with_its_type_and_message() -> None:
    assert make_spider().on_error(failure_of(IgnoreRequest("no token"))) == [
        FailureItem(7, FAILED, None, "IgnoreRequest: no token", 1)]


@pytest.mark.parametrize("error", [DownloadTimeoutError("slow"), TypeError("a broken download handler")])
def test_an_id_given_up_without_an_answer_is_signalled_to_the_guard(error: Exception) -> None:
    spider = make_spider()
    signalled: list[tuple[str, Exception]] = []
    spider.crawler.signals.connect(lambda request, error: signalled.append((request.url, error)),
                                   signal=signals_.no_answer, weak=False)
    spider.on_error(failure_of(error, retry_times=2))
    spider.on_error(failure_of(IgnoreRequest("no proxy"), **{META_ABANDONED: True}))  # stays pending
    spider.parse(answer(503, retry_times=2))
    assert signalled == [(URL, error)]


def test_a_request_without_product_id_is_parsed_by_its_url() -> None:
    spider = make_spider()
    product = catalog.product(7, 1)
    response = Response(URL, status=200, body=json.dumps(product).encode(), request=Request(URL))
    (item,) = spider.parse(response)
    assert isinstance(item, ProductItem) and item.product_id == 7


@pytest.mark.parametrize("url", ["http://api.test/v1/product/", "http://api.test/v1/product/7/x",
                                 "http://elsewhere.test/v1/product/7", "http://api.test/v1/product/-7"])
def test_a_url_that_is_not_a_product_is_not_parsed(url: str) -> None:
    spider = make_spider()
    assert spider.parse(Response(url, status=200, body=b"{}", request=Request(url))) == []
