"""The guard's streak rules, on the component itself: what grows, breaks and trips each streak."""

from __future__ import annotations

import logging
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from scrapy import Request, Spider
from scrapy.exceptions import DownloadConnectionRefusedError, DownloadFailedError, DropItem, NotConfigured
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred, succeed

from productcrawler import stat_keys
from productcrawler.answer.payload import BadResponse
from productcrawler.config import ConfigError
from productcrawler.guard.failure_guard import RETRY_DUE_SLACK, WholesaleFailureGuard
from productcrawler.items import FAILED, MISSING, FailureItem, ProductItem

URL = "http://api.test/v1/product/{}"


class ProductSpider(Spider):
    name = "products"


class StubEngine:
    """Records the reason the guard closes the spider with (no crawl runs here)."""

    def __init__(self) -> None:
        self.closed: list[str] = []
        self.downloader = SimpleNamespace(active=set())  # nothing in flight

    def close_spider_async(self, *, reason: str) -> Deferred[None]:
        # Recorded at the call: the guard hands the result to deferred_from_coro,
        # which returns a Deferred as it is (a coroutine would wait for the loop).
        self.closed.append(reason)
        return succeed(None)


def make_guard(**settings: Any) -> WholesaleFailureGuard:
    # The field-drift check holds products while it reads the last pass from the database
    # (tests/test_field_drift.py): off here, where products must pass at once.
    settings.setdefault("GUARD_FIELD_DRIFT", 0)
    crawler = get_crawler(ProductSpider, settings_dict=settings)
    crawler.stats.open_spider()
    crawler.engine = StubEngine()
    crawler.crawling = True  # a running crawl: an operator's stop sets it False
    return WholesaleFailureGuard.from_crawler(crawler)


def answer(guard: WholesaleFailureGuard, status: int, product_id: int = 1) -> None:
    request = Request(URL.format(product_id))
    guard.response_downloaded(Response(request.url, status=status, request=request), request)


def product(guard: WholesaleFailureGuard, product_id: int = 1) -> None:
    """A product reaches the guard's pipeline stage (never held: returns at once)."""
    item = ProductItem(product_id, "x", None, None, None, None, None, None, datetime(2024, 1, 1))
    coroutine = guard.process_item(item)
    with pytest.raises(StopIteration):
        coroutine.send(None)


class Outcome:
    """A failure at the guard's pipeline stage: written at once, held, or dropped."""

    def __init__(self, guard: WholesaleFailureGuard, item: FailureItem) -> None:
        self.coroutine = guard.process_item(item)
        self.state = self._step()

    def _step(self) -> str:
        try:
            self.waiting = self.coroutine.send(None)  # the held outcome's future
        except StopIteration:
            return "written"
        except DropItem:
            return "dropped"
        return "held"

    def settled(self) -> str:
        """``held`` while the guard holds it, then what became of it."""
        if self.state == "held" and self.waiting.done():
            self.state = self._step()
        return self.state


def no_answer(guard: WholesaleFailureGuard, product_id: int = 1,
              error: BaseException | None = None) -> Outcome:
    """An id given up without an answer: the spider's signal, then its failure at the pipeline stage."""
    error = error if error is not None else DownloadConnectionRefusedError("Connection refused")
    guard.no_answer(Request(URL.format(product_id)), error)
    return Outcome(guard, FailureItem(product_id, FAILED, None, "connection_refused", 3))


def test_one_guard_serves_as_extension_and_pipeline_stage() -> None:
    crawler = get_crawler(ProductSpider)
    assert WholesaleFailureGuard.from_crawler(crawler) is WholesaleFailureGuard.from_crawler(crawler)


def test_auth_failures_trip_at_the_threshold_and_any_other_answer_breaks_them(caplog) -> None:
    guard = make_guard(GUARD_AUTH_FAILURES=5)
    for status in (401, 403, 401, 401):
        answer(guard, status)
    answer(guard, 404)  # the key worked for that one
    for _ in range(4):
        answer(guard, 401)
    assert guard.tripped is None
    with caplog.at_level(logging.ERROR):
        answer(guard, 403, product_id=77)
    assert guard.tripped == "auth"
    assert guard.stats.get_value(stat_keys.EXIT_REASON) == "guard_auth_failures"
    assert guard.crawler.engine.closed == ["guard_auth_failures"]
    [record] = caplog.records
    assert "5 answers in a row were HTTP 401/403 (last: 403 for http://api.test/v1/product/77)" in record.message
    assert "check API_KEY (not set)" in record.message and "\n" not in record.message


def test_a_404_streak_is_broken_by_a_product_not_by_any_200() -> None:
    guard = make_guard(GUARD_404_STREAK=3)
    answer(guard, 404)
    answer(guard, 404)
    answer(guard, 200)  # a 200 that turns out not to be a product proves nothing
    product(guard)
    answer(guard, 404)
    answer(guard, 404)
    assert guard.tripped is None
    answer(guard, 404)
    assert guard.tripped == "not_found"


def test_non_products_count_only_shape_reasons() -> None:
    guard = make_guard(GUARD_NOT_PRODUCTS=2)
    request = Request(URL.format(1))
    guard.bad_response(request, BadResponse("html"))
    guard.bad_response(request, BadResponse("truncated"))
    assert guard.tripped is None  # a maintenance page is the API's trouble, not our configuration
    guard.bad_response(request, BadResponse("not_a_product", "no product id", ("data",)))
    guard.bad_response(request, BadResponse("error_envelope", "error code=1", ("code", "data")))
    assert guard.tripped == "not_product"


def test_a_threshold_of_zero_turns_that_check_off() -> None:
    guard = make_guard(GUARD_404_STREAK=0)
    for product_id in range(1, 2000):
        answer(guard, 404, product_id)
    assert guard.tripped is None


def test_ids_without_an_answer_are_held_trip_at_the_threshold_and_any_answer_breaks_them(caplog) -> None:
    guard = make_guard(GUARD_NO_ANSWERS=4, API_BASE_URL="http://api.test/v1")
    first = [no_answer(guard, product_id) for product_id in (1, 2, 3)]
    assert [outcome.settled() for outcome in first] == ["held"] * 3
    answer(guard, 503)  # an error, but an answer: the API is reachable
    assert [outcome.settled() for outcome in first] == ["written"] * 3
    second = [no_answer(guard, product_id) for product_id in (4, 5, 6)]
    assert guard.tripped is None
    with caplog.at_level(logging.ERROR):
        second.append(no_answer(guard, 77, TypeError("a broken download handler")))
    assert guard.tripped == "no_answer"
    assert [outcome.settled() for outcome in second] == ["dropped"] * 4  # the ids stay pending
    assert guard.stats.get_value(stat_keys.EXIT_REASON) == "guard_no_answers"
    assert guard.crawler.engine.closed == ["guard_no_answers"]
    [record] = caplog.records
    assert ("the API did not answer: 4 ids in a row ended with no answer (last: TypeError: a broken download "
            "handler for http://api.test/v1/product/77); check DOWNLOAD_HANDLERS and DOWNLOADER_MIDDLEWARES: "
            "the last error is not a download error") in record.message
    assert "\n" not in record.message


def test_an_api_that_stops_answering_mid_crawl_and_proxies_are_named(caplog) -> None:
    guard = make_guard(GUARD_NO_ANSWERS=2, GUARD_NO_ANSWERS_SECONDS=0, PROXY_URLS="http://proxy.test:3128",
                       API_BASE_URL="http://api.test/v1")
    product(guard)
    no_answer(guard, 1)
    # The proxy's own answer (re-sent through another proxy) says nothing of the API.
    request = Request(URL.format(2), meta={"proxy_index": 0})
    guard.response_downloaded(Response(request.url, status=407, request=request), request)
    assert guard.tripped is None
    with caplog.at_level(logging.ERROR):
        no_answer(guard, 3)
    assert guard.tripped == "no_answer"
    [record] = caplog.records
    assert "the API stopped answering after 1 products in this run, 0 s ago: 2 ids in a row" in record.message
    assert ("(last: DownloadConnectionRefusedError: Connection refused for http://api.test/v1/product/3); "
            "check API_BASE_URL (http://api.test/v1), PROXY_URLS and that the API is reachable") in record.message


def test_with_nothing_in_flight_held_no_answers_wait_for_the_retries_that_decide_them(monkeypatch) -> None:
    # While the API is down every id waits for a retry between attempts, off the
    # downloader: writing what is held then would record the ids the guard must not.
    now = [1000.0]
    monkeypatch.setattr("productcrawler.guard.failure_guard.monotonic", lambda: now[0])
    guard = make_guard()
    guard.crawler.crawling = True
    answer(guard, 404, 3)
    missing = Outcome(guard, FailureItem(3, MISSING, 404, "not_found", 1))
    held = [no_answer(guard, product_id) for product_id in (1, 2)]
    guard.request_scheduled(Request(URL.format(4), meta={"retry_times": 1, "retry_delay": 4.0}))
    guard._release_if_idle()
    assert missing.settled() == "written"  # the other streaks' rule: nothing in flight, written
    assert [outcome.settled() for outcome in held] == ["held"] * 2  # id 4's retry will decide them
    now[0] += 4.0 + RETRY_DUE_SLACK
    guard._release_if_idle()
    assert [outcome.settled() for outcome in held] == ["written"] * 2  # the range ended on them


def test_no_answer_neither_grows_nor_breaks_the_other_streaks() -> None:
    guard = make_guard(GUARD_AUTH_FAILURES=3, GUARD_NO_ANSWERS=3)
    for _ in range(2):
        no_answer(guard)
        no_answer(guard)
        answer(guard, 401)  # an answer: breaks the no-answer streak, grows the auth one
    assert guard.tripped is None
    no_answer(guard)
    answer(guard, 401)
    assert guard.tripped == "auth"


def test_guard_no_answers_0_turns_that_check_off() -> None:
    guard = make_guard(GUARD_NO_ANSWERS=0)
    outcomes = [no_answer(guard, product_id) for product_id in range(1, 2000)]
    assert guard.tripped is None
    assert {outcome.settled() for outcome in outcomes} == {"written"}


@pytest.mark.parametrize(("item", "streak"), [
    (FailureItem(1, MISSING, 404, "not_found", 1), "not_found"),
    (FailureItem(1, FAILED, 401, "http_401", 1), "auth"),
    (FailureItem(1, FAILED, 403, "http_403", 1), "auth"),
    (FailureItem(1, FAILED, 200, "bad_response/not_a_product", 4), "not_product"),
    (FailureItem(1, FAILED, 200, "bad_response/error_envelope", 4), "not_product"),
    (FailureItem(1, FAILED, 200, "bad_response/id_mismatch", 4), "not_product"),
    (FailureItem(1, FAILED, 200, "bad_response/html", 4), None),
    (FailureItem(1, FAILED, 503, "http_503", 4), None),
    (FailureItem(1, FAILED, 400, "http_400", 1), None),
    (FailureItem(1, FAILED, None, "connection_refused", 4), "no_answer"),
    (FailureItem(1, FAILED, None, "timeout", 4), "no_answer"),
    (FailureItem(1, FAILED, None, "TypeError: a broken handler", 1), "no_answer"),
    (FailureItem(1, FAILED, 200, "parse_error: KeyError: 'x'", 1), None),
])
def test_which_outcomes_a_streak_holds_back(item: FailureItem, streak: str | None) -> None:
    held = make_guard()._streak_of(item)
    assert (held.kind if held is not None else None) == streak


def test_guard_enabled_switch() -> None:
    with pytest.raises(NotConfigured):
        make_guard(GUARD_ENABLED=False)
    with pytest.raises(ConfigError, match="GUARD_ENABLED='maybe' is not a boolean"):
        make_guard(GUARD_ENABLED="maybe")


def test_a_403_through_a_proxy_counts_only_once_another_proxy_got_it_too() -> None:
    # The proxy middleware re-sends a first 403 through another proxy (a blocked
    # exit IP answers 403 to everything): only the compared answer is the API's.
    guard = make_guard(GUARD_AUTH_FAILURES=3)
    for product_id in range(1, 10):
        request = Request(URL.format(product_id), meta={"proxy_index": 0})
        guard.response_downloaded(Response(request.url, status=403, request=request), request)
    assert guard.tripped is None
    for product_id in range(1, 4):
        request = Request(URL.format(product_id), meta={"proxy_index": 1, "proxy_suspect": [0, "http_403"]})
        guard.response_downloaded(Response(request.url, status=403, request=request), request)
    assert guard.tripped == "auth"


def test_an_api_that_answered_must_also_stay_silent_for_guard_no_answers_seconds(monkeypatch) -> None:
    # A blip in a long crawl (an API restart) is ridden out: its outcomes wait, the crawl goes on.
    now = [1000.0]
    monkeypatch.setattr("productcrawler.guard.failure_guard.monotonic", lambda: now[0])
    guard = make_guard(GUARD_NO_ANSWERS=3, GUARD_NO_ANSWERS_SECONDS=60)
    product(guard)
    for product_id in range(1, 6):
        no_answer(guard, product_id)
        now[0] += 10
    assert guard.tripped is None  # 5 ids in a row, but over 40 s
    now[0] = 1000.0 + 60
    no_answer(guard, 6)
    assert guard.tripped == "no_answer"


def test_before_any_product_the_count_alone_trips(monkeypatch) -> None:
    monkeypatch.setattr("productcrawler.guard.failure_guard.monotonic", lambda: 1000.0)
    guard = make_guard(GUARD_NO_ANSWERS=3, GUARD_NO_ANSWERS_SECONDS=60)
    for product_id in range(1, 4):
        no_answer(guard, product_id)
    assert guard.tripped == "no_answer"


def test_after_an_operators_stop_failing_ids_do_not_trip_the_guard() -> None:
    guard = make_guard(GUARD_NO_ANSWERS=3)
    guard.crawler.crawling = False  # Ctrl-C: the last attempts in flight still fail
    for product_id in range(1, 10):
        no_answer(guard, product_id)
    assert guard.tripped is None and guard.crawler.engine.closed == []


def test_the_error_line_never_shows_a_url_password(caplog) -> None:
    guard = make_guard(GUARD_NO_ANSWERS=1, API_BASE_URL="https://api.test/v1")
    error = DownloadFailedError("407, message='Proxy Authentication Required', url='http://u:proxy-s3cret@p.test:3128'")
    with caplog.at_level(logging.ERROR):
        guard.no_answer(Request("https://user:api-s3cret@api.test/v1/product/1"), error)
    [record] = caplog.records
    assert "s3cret" not in record.message and "u:***@p.test" in record.message and "user:***@api.test" in record.message


def test_a_redis_outage_is_named_as_such(caplog) -> None:
    guard = make_guard(GUARD_NO_ANSWERS=1)
    with caplog.at_level(logging.ERROR):
        guard.no_answer(Request(URL.format(1)), RedisConnectionError("Error 111 connecting to 127.0.0.1:6379."))
    [record] = caplog.records
    assert "check REDIS_URL: Redis stayed unreachable" in record.message
    assert "DOWNLOAD_HANDLERS" not in record.message


@pytest.mark.parametrize(("proxies", "status", "breaks"), [
    (True, 502, False), (True, 504, False),  # a proxy's word that it could not reach the API
    (True, 503, True), (True, 200, True),
    (False, 502, True), (False, 504, True),  # without proxies: the API side's own answer
])
def test_a_gateway_error_through_a_proxy_is_no_answer(proxies: bool, status: int, breaks: bool) -> None:
    guard = make_guard(GUARD_NO_ANSWERS=3, **({"PROXY_URLS": "http://10.0.0.1:3128"} if proxies else {}))
    held = no_answer(guard, 1)
    # The compared answer (META_SUSPECT): the proxy middleware passes it on.
    request = Request(URL.format(2), meta={"proxy_index": 1, "proxy_suspect": [0, f"http_{status}"]}
                      if proxies else {})
    guard.response_downloaded(Response(request.url, status=status, request=request), request)
    assert held.settled() == ("written" if breaks else "held")
    gateway = FailureItem(2, FAILED, status, f"http_{status}", 4)
    assert (guard._streak_of(gateway) is guard._no_answer) is (proxies and status in (502, 504))
