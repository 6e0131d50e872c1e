from __future__ import annotations

import logging
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.config import ConfigError
from productcrawler.items import FAILED, MISSING, FailureItem
from productcrawler.retry.policy import RetryPolicy
from tests.support.doubles import PRODUCT_URL as URL
from tests.support.doubles import FakeRandom, product_request

NOW = datetime(2025, 1, 1, tzinfo=UTC).timestamp()


class ProductSpider(Spider):
    name = "products"


def make_policy(
    settings: dict[str, Any] | None = None,
    *,
    rng: random.Random | None = None,
    now: float = NOW,
) -> RetryPolicy:
    crawler = get_crawler(ProductSpider, settings_dict=settings or {})
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    return RetryPolicy.from_crawler(crawler, rng=rng or FakeRandom(), clock=lambda: now)


def stat(policy: RetryPolicy, key: str) -> Any:
    return policy.stats.get_value(key)


# -- Retry-After ---------------------------------------------------------------


def test_retry_after_wins_over_backoff() -> None:
    rng = FakeRandom()
    policy = make_policy({"RETRY_BACKOFF_BASE": 1, "RETRY_BACKOFF_MAX": 60}, rng=rng)
    step = policy.next_step(product_request(), reason="http_429", http_status=429, retry_after=7.0)
    assert isinstance(step, Request)
    assert step.meta["retry_delay"] == 7.0
    assert rng.calls == []
    assert stat(policy, stat_keys.RETRY_AFTER_HONOURED) == 1
    # Counted by the scheduler when it holds the request, not here (once per retry).
    assert stat(policy, stat_keys.RETRY_DELAYED) is None
    assert stat(policy, stat_keys.RETRY_AFTER_CAPPED) is None


def test_retry_after_longer_than_backoff_max_is_still_honoured() -> None:
    policy = make_policy({"RETRY_BACKOFF_MAX": 5, "RETRY_AFTER_MAX": 300})
    step = policy.next_step(product_request(), reason="http_503", http_status=503, retry_after=120.0)
    assert isinstance(step, Request)
    assert step.meta["retry_delay"] == 120.0


def test_retry_after_zero_means_no_delay() -> None:
    policy = make_policy()
    step = policy.next_step(product_request(), reason="http_429", http_status=429, retry_after=0.0)
    assert isinstance(step, Request)
    assert step.meta["retry_delay"] == 0.0
    assert stat(policy, stat_keys.RETRY_AFTER_HONOURED) == 1
    assert stat(policy, stat_keys.RETRY_DELAYED) is None


def test_retry_after_above_max_is_capped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    policy = make_policy({"RETRY_AFTER_MAX": 300})
    caplog.set_level(logging.DEBUG)
    delays = []
    for _ in range(2):
        step = policy.next_step(product_request(), reason="http_429", http_status=429,
                                retry_after=3600.0)
        assert isinstance(step, Request)
        delays.append(step.meta["retry_delay"])
    assert delays == [300.0, 300.0]
    assert stat(policy, stat_keys.RETRY_AFTER_CAPPED) == 2
    assert stat(policy, stat_keys.RETRY_AFTER_HONOURED) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "RETRY_AFTER_MAX=300s" in warnings[0].getMessage()


def test_retry_after_header_seconds_and_date() -> None:
    policy = make_policy(now=NOW)
    assert policy.retry_after(Response(URL, status=429, headers={"Retry-After": "12"})) == 12.0
    date = "Wed, 01 Jan 2025 00:00:45 GMT"
    assert policy.retry_after(Response(URL, status=503, headers={"Retry-After": date})) == 45.0
    assert policy.retry_after(Response(URL, status=503)) is None
    assert stat(policy, stat_keys.RETRY_AFTER_MALFORMED) is None


def test_malformed_retry_after_falls_back_to_backoff(caplog: pytest.LogCaptureFixture) -> None:
    rng = FakeRandom(fraction=1.0)
    policy = make_policy({"RETRY_BACKOFF_BASE": 2, "RETRY_BACKOFF_MAX": 60}, rng=rng)
    caplog.set_level(logging.DEBUG)
    for value in ("soon", "-1"):
        response = Response(URL, status=429, headers={"Retry-After": value})
        retry_after = policy.retry_after(response)
        assert retry_after is None
        step = policy.next_step(product_request(), reason="http_429", http_status=429,
                                retry_after=retry_after)
        assert isinstance(step, Request)
        assert step.meta["retry_delay"] == 2.0  # backoff ceiling for the first retry
    assert stat(policy, stat_keys.RETRY_AFTER_MALFORMED) == 2
    assert stat(policy, stat_keys.RETRY_AFTER_HONOURED) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "malformed Retry-After" in warnings[0].getMessage()


# -- backoff -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_times", "ceiling"),
    [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (5, 10.0), (50, 10.0), (5000, 10.0)],
)
def test_backoff_grows_and_is_bounded(retry_times: int, ceiling: float) -> None:
    settings = {"RETRY_BACKOFF_BASE": 1, "RETRY_BACKOFF_MAX": 10}
    assert make_policy(settings, rng=FakeRandom(1.0)).backoff(retry_times) == ceiling
    # equal jitter: never below half the ceiling
    assert make_policy(settings, rng=FakeRandom(0.0)).backoff(retry_times) == ceiling / 2


def test_backoff_jitter_stays_in_range() -> None:
    policy = make_policy({"RETRY_BACKOFF_BASE": 0.5, "RETRY_BACKOFF_MAX": 30},
                         rng=random.Random(1234))
    for retry_times in range(10):
        ceiling = min(30.0, 0.5 * 2**retry_times)
        delays = [policy.backoff(retry_times) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # actually jittered


def test_backoff_with_zero_base_is_immediate() -> None:
    policy = make_policy({"RETRY_BACKOFF_BASE": 0, "RETRY_BACKOFF_MAX": 0})
    step = policy.next_step(product_request(), reason="timeout", http_status=None)
    assert isinstance(step, Request)
    assert step.meta["retry_delay"] == 0.0


def test_delays_follow_the_retry_count() -> None:
    policy = make_policy({"MAX_RETRIES": 4, "RETRY_BACKOFF_BASE": 1, "RETRY_BACKOFF_MAX": 60},
                         rng=FakeRandom(1.0))
    request, delays = product_request(), []
    for _ in range(4):
        request = policy.next_step(request, reason="http_500", http_status=500)
        assert isinstance(request, Request)
        delays.append(request.meta["retry_delay"])
    assert delays == [1.0, 2.0, 4.0, 8.0]


# -- retries and giving up -----------------------------------------------------


def test_retries_then_gives_up_as_failed() -> None:
    policy = make_policy({"MAX_RETRIES": 3})
    request = product_request()
    for expected_retry_times in (1, 2, 3):
        new_request = policy.next_step(request, reason="http_503", http_status=503)
        assert isinstance(new_request, Request)
        assert new_request is not request
        assert new_request.meta["retry_times"] == expected_retry_times
        assert new_request.meta["product_id"] == 7
        assert new_request.dont_filter is True
        assert new_request.priority == -expected_retry_times
        # Equal jitter with the draw at its middle: 3/4 of the ceiling 1 s x 2^(retries so far).
        assert new_request.meta["retry_delay"] == 0.75 * 2 ** (expected_retry_times - 1)
        request = new_request
    item = policy.next_step(request, reason="http_503", http_status=503)
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=503, reason="http_503",
                               attempts=4)
    assert stat(policy, "retry/count") == 3
    assert stat(policy, "retry/reason_count/http_503") == 3
    assert stat(policy, "retry/max_reached") == 1
    # Counted by the storage pipeline once recorded (the guard may drop it): test_storage_pipeline.py, test_guard.py.
    assert stat(policy, stat_keys.failed_reason("http_503")) is None


def test_give_up_keeps_the_last_reason_and_status() -> None:
    policy = make_policy({"MAX_RETRIES": 1})
    request = policy.next_step(product_request(), reason="http_503", http_status=503)
    assert isinstance(request, Request)
    item = policy.next_step(request, reason="timeout", http_status=None)
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=None, reason="timeout",
                               attempts=2)


def test_max_retries_zero_gives_up_on_first_failure() -> None:
    policy = make_policy({"MAX_RETRIES": 0})
    item = policy.next_step(product_request(), reason="http_500", http_status=500)
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=500, reason="http_500",
                               attempts=1)
    assert stat(policy, "retry/count") is None


def test_max_retry_times_meta_overrides_setting() -> None:
    policy = make_policy({"MAX_RETRIES": 5})
    item = policy.next_step(product_request(max_retry_times=0), reason="http_500", http_status=500)
    assert isinstance(item, FailureItem)
    assert item.attempts == 1


def test_spider_reason_for_a_bad_body() -> None:
    policy = make_policy()
    step = policy.next_step(product_request(), reason="bad_response/html", http_status=200)
    assert isinstance(step, Request)
    assert stat(policy, "retry/reason_count/bad_response/html") == 1


def test_give_up_missing_is_not_a_failure() -> None:
    policy = make_policy()
    item = policy.give_up(product_request(retry_times=2), outcome=MISSING, reason="not_found",
                          http_status=404)
    assert item == FailureItem(product_id=7, outcome=MISSING, http_status=404, reason="not_found",
                               attempts=3)
    assert stat(policy, stat_keys.failed_reason("not_found")) is None


def test_give_up_rejects_an_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="outcome='gone'"):
        make_policy().give_up(product_request(), outcome="gone", reason="x", http_status=None)


def test_logging_is_debug_only_with_the_project_give_up_level(caplog: pytest.LogCaptureFixture) -> None:
    policy = make_policy({"MAX_RETRIES": 1, "RETRY_GIVE_UP_LOG_LEVEL": "DEBUG"})
    caplog.set_level(logging.DEBUG)
    request = policy.next_step(product_request(), reason="http_502", http_status=502)
    assert isinstance(request, Request)
    assert isinstance(policy.next_step(request, reason="http_502", http_status=502), FailureItem)
    assert caplog.records
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}
    assert any("Gave up on product 7" in r.getMessage() for r in caplog.records)


# -- settings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_RETRIES", "-1"),
        ("MAX_RETRIES", "three"),
        ("RETRY_BACKOFF_BASE", "-1"),
        ("RETRY_BACKOFF_BASE", "fast"),
        ("RETRY_BACKOFF_MAX", "nan"),
        ("RETRY_AFTER_MAX", "-5"),
    ],
)
def test_invalid_settings_raise(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        make_policy({name: value})


def test_backoff_max_below_base_raises() -> None:
    with pytest.raises(ValueError, match="RETRY_BACKOFF_MAX"):
        make_policy({"RETRY_BACKOFF_BASE": 10, "RETRY_BACKOFF_MAX": 5})


def test_settings_are_read() -> None:
    policy = make_policy({"MAX_RETRIES": "5", "RETRY_BACKOFF_BASE": "0.25",
                          "RETRY_BACKOFF_MAX": "9", "RETRY_AFTER_MAX": "120"})
    assert (policy.max_retries, policy.backoff_base, policy.backoff_max, policy.retry_after_max) == (
        5, 0.25, 9.0, 120.0)


@pytest.mark.parametrize("level", ["WARNING", "warning", logging.WARNING, "30"])  # "30": -s RETRY_GIVE_UP_LOG_LEVEL=30
def test_give_up_log_level_setting_is_honoured(caplog: pytest.LogCaptureFixture, level: Any) -> None:
    policy = make_policy({"MAX_RETRIES": 0, "RETRY_GIVE_UP_LOG_LEVEL": level})
    caplog.set_level(logging.DEBUG)
    assert isinstance(policy.next_step(product_request(), reason="bad_response/html", http_status=200),
                      FailureItem)
    assert [r.levelno for r in caplog.records if r.getMessage().startswith("Gave up retrying")] == [
        logging.WARNING]


@pytest.mark.parametrize(("name", "value"), [("RETRY_GIVE_UP_LOG_LEVEL", "LOUD"),
                                             ("RETRY_ENABLED", "maybe"),
                                             ("RETRY_PRIORITY_ADJUST", "up")])
def test_invalid_scrapy_retry_settings_name_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{name}={value!r} is not"):
        make_policy({name: value})


def test_retry_enabled_false_gives_a_bad_body_up_at_once() -> None:
    policy = make_policy({"MAX_RETRIES": 3, "RETRY_ENABLED": False})
    item = policy.next_step(product_request(), reason="bad_response/html", http_status=200)
    assert item == FailureItem(product_id=7, outcome=FAILED, http_status=200, reason="bad_response/html",
                               attempts=1)
    assert stat(policy, "retry/count") is None


# -- RETRY_TIMES and MAX_RETRIES -------------------------------------------------


def policy_with(**priorities: tuple[Any, str]) -> RetryPolicy:
    """A policy from settings given at the named priorities ("project", "cmdline", ...)."""
    crawler = get_crawler(ProductSpider)
    crawler.settings.frozen = False
    for name, (value, priority) in priorities.items():
        crawler.settings.set(name, value, priority=priority)
    crawler.spider = crawler._create_spider()
    crawler.stats.open_spider()
    return RetryPolicy.from_crawler(crawler, rng=FakeRandom(), clock=lambda: NOW)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"MAX_RETRIES": (3, "project")}, 3),  # Scrapy's default RETRY_TIMES=2 does not count
        ({"MAX_RETRIES": (3, "project"), "RETRY_TIMES": (0, "cmdline")}, 0),  # -s RETRY_TIMES=0
        ({"MAX_RETRIES": (5, "cmdline"), "RETRY_TIMES": (1, "project")}, 5),
        ({"MAX_RETRIES": (4, "project"), "RETRY_TIMES": (1, "spider")}, 1),  # custom_settings
        ({"MAX_RETRIES": (2, "cmdline"), "RETRY_TIMES": (2, "cmdline")}, 2),  # agree
        ({"RETRY_TIMES": (6, "project")}, 6),  # no MAX_RETRIES at all (not this project's settings)
    ],
)
def test_the_retry_count_given_at_the_higher_priority_wins(given: dict[str, Any], expected: int) -> None:
    assert policy_with(**given).max_retries == expected


def test_retry_times_and_max_retries_disagreeing_at_one_priority_are_refused() -> None:
    with pytest.raises(ConfigError, match="^RETRY_TIMES='0' and MAX_RETRIES='3' disagree"):
        policy_with(MAX_RETRIES=("3", "cmdline"), RETRY_TIMES=("0", "cmdline"))


def test_invalid_retry_times_names_it() -> None:
    with pytest.raises(ConfigError, match="^RETRY_TIMES='-1' must be at least 0"):
        policy_with(RETRY_TIMES=("-1", "cmdline"))
