"""The four budget-header formats read into one observation; malformed ones ignored and logged once."""

from __future__ import annotations

import logging

import pytest

from productcrawler.budget.headers import BudgetHeaders, LeakyBudget, WindowBudget
from productcrawler.config import ConfigError, CrawlConfig

WALL = 1_796_161_600.0
ALL = ("ietf", "x-ratelimit", "bigcommerce", "shopify")


def parse(headers: dict[str, str], formats: tuple[str, ...] = ALL) -> object:
    return BudgetHeaders(formats).parse(_Headers(headers), WALL)


class _Headers:
    """Case-insensitive like Scrapy's Headers; values as bytes."""

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = {name.lower(): value.encode("latin-1") for name, value in headers.items()}

    def get(self, key: str) -> bytes | None:
        return self._headers.get(key.lower())


def test_express_rate_limit_with_an_epoch_reset() -> None:
    budget = parse({"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "1796161614"})
    assert budget == WindowBudget("x-ratelimit", 42, 14.0, 1.0, quota=100, epoch=True)


def test_express_rate_limit_with_a_delta_reset() -> None:
    budget = parse({"x-ratelimit-limit": "100", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"})
    assert budget == WindowBudget("x-ratelimit", 0, 30.0, 1.0, quota=100)


def test_an_epoch_reset_in_the_past_is_now() -> None:
    budget = parse({"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1796161000"})
    assert isinstance(budget, WindowBudget) and budget.reset_after == 0.0 and budget.quota is None


def test_ietf_structured_fields() -> None:
    budget = parse({"RateLimit-Policy": '"default";q=100;w=60', "RateLimit": '"default";r=50;t=30'})
    assert budget == WindowBudget("ietf", 50, 30.0, 1.0, quota=100, window=60.0)


def test_ietf_the_binding_policy_of_several() -> None:
    budget = parse({"RateLimit-Policy": '"hour";q=1000;w=3600, "second";q=10;w=1',
                    "RateLimit": '"hour";r=900;t=60, "second";r=2;t=1'})
    assert budget == WindowBudget("ietf", 2, 1.0, 1.0, quota=10, window=1.0)


def test_ietf_without_its_policy() -> None:
    assert parse({"RateLimit": '"default";r=7;t=2'}) == WindowBudget("ietf", 7, 2.0, 1.0)


def test_ietf_older_split_form() -> None:
    budget = parse({"RateLimit-Limit": "100", "RateLimit-Remaining": "9", "RateLimit-Reset": "4"})
    assert budget == WindowBudget("ietf", 9, 4.0, 1.0, quota=100)
    budget = parse({"RateLimit-Limit": "10, 10;w=1", "RateLimit-Remaining": "9", "RateLimit-Reset": "1"})
    assert budget == WindowBudget("ietf", 9, 1.0, 1.0, quota=10, window=1.0)


def test_bigcommerce_in_milliseconds() -> None:
    budget = parse({"X-Rate-Limit-Requests-Quota": "150", "X-Rate-Limit-Requests-Left": "35",
                    "X-Rate-Limit-Time-Window-Ms": "30000", "X-Rate-Limit-Time-Reset-Ms": "15000"})
    assert budget == WindowBudget("bigcommerce", 35, 15.0, 0.001, quota=150, window=30.0)


def test_shopify_leaky_bucket() -> None:
    assert parse({"X-Shopify-Shop-Api-Call-Limit": "32/40"}) == LeakyBudget("shopify", 32, 40)


def test_no_budget_headers() -> None:
    assert parse({"Content-Type": "application/json", "X-RateLimit-Limit": "100"}) is None


def test_only_the_chosen_format_is_read() -> None:
    headers = {"X-Shopify-Shop-Api-Call-Limit": "32/40", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "2"}
    assert parse(headers, ("shopify",)) == LeakyBudget("shopify", 32, 40)
    assert parse(headers, ("ietf", "bigcommerce")) is None


@pytest.mark.parametrize("headers", [
    {"X-RateLimit-Remaining": "-1", "X-RateLimit-Reset": "5"},
    {"X-RateLimit-Remaining": "ten", "X-RateLimit-Reset": "5"},
    {"X-RateLimit-Remaining": "10"},
    {"X-RateLimit-Remaining": "10", "X-RateLimit-Reset": "soon"},
    {"RateLimit": '"default";r=-1;t=3'},
    {"RateLimit": '"default";r=5'},
    {"RateLimit": '"default";r=5;;t=3'},
    {"RateLimit": '"default";r=5.5;t=3'},
    {"RateLimit-Policy": "q=", "RateLimit": '"default";r=5;t=3'},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "-3"},
    {"X-Rate-Limit-Requests-Left": "35", "X-Rate-Limit-Requests-Quota": "150"},
    {"X-Shopify-Shop-Api-Call-Limit": "32"},
    {"X-Shopify-Shop-Api-Call-Limit": "32/0"},
])
def test_malformed_headers_are_ignored(headers: dict[str, str]) -> None:
    reader = BudgetHeaders(ALL)
    assert reader.parse(_Headers(headers), WALL) is None
    assert reader.malformed == 1


def test_malformed_headers_are_logged_once_per_format(caplog: pytest.LogCaptureFixture) -> None:
    reader = BudgetHeaders(ALL)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            reader.parse(_Headers({"X-RateLimit-Remaining": "x", "X-RateLimit-Reset": "1"}), WALL)
        reader.parse(_Headers({"X-Shopify-Shop-Api-Call-Limit": "a/b"}), WALL)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and reader.malformed == 4
    assert "x-ratelimit" in messages[0] and "shopify" in messages[1]


def test_a_malformed_format_does_not_hide_a_good_one() -> None:
    headers = {"RateLimit": "!!", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "1"}
    assert parse(headers) == WindowBudget("x-ratelimit", 3, 1.0, 1.0)


@pytest.mark.parametrize(("value", "formats"), [
    ("auto", ALL), ("AUTO", ALL), ("off", ()), ("shopify", ("shopify",)), (" ietf ", ("ietf",)),
    ("x-ratelimit", ("x-ratelimit",)), ("bigcommerce", ("bigcommerce",)),
])
def test_rate_limit_headers_setting(value: str, formats: tuple[str, ...]) -> None:
    assert CrawlConfig.from_settings({"RATE_LIMIT_HEADERS": value}).budget.headers == formats


@pytest.mark.parametrize("value", ["on", "x-rate-limit", "ietf,shopify", "1"])
def test_rate_limit_headers_refuses_other_values(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^RATE_LIMIT_HEADERS=.* is not one of auto, off, ietf, x-ratelimit"):
        CrawlConfig.from_settings({"RATE_LIMIT_HEADERS": value})


# --- resets told apart by magnitude, and bounded by RATE_LIMIT_HEADERS_MAX_WAIT ----------


@pytest.mark.parametrize(("reset", "after", "resolution"), [
    ("1796161614000", 14.0, 0.001),  # epoch milliseconds (what many APIs send)
    ("1796161614", 14.0, 1.0),  # epoch seconds
    ("14", 14.0, 1.0),  # delta seconds
    ("1796161614.5", 14.5, 0.001),
])
def test_a_reset_is_told_apart_by_its_magnitude(reset: str, after: float, resolution: float) -> None:
    budget = BudgetHeaders(ALL, max_wait=300).parse(
        _Headers({"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": reset}), WALL)
    assert isinstance(budget, WindowBudget)
    assert (budget.reset_after, budget.resolution, budget.clamped) == (after, resolution, False)


@pytest.mark.parametrize("headers", [
    {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "900000000"},  # 28.5 years, as delta seconds
    {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(WALL) + 10**6)},  # epoch seconds, 11 days on
    {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(WALL + 10**6) * 1000)},  # the same in ms
    {"RateLimit": '"default";r=0;t=900000000'},
    {"RateLimit-Remaining": "0", "RateLimit-Reset": "86400"},
    {"X-Rate-Limit-Requests-Left": "0", "X-Rate-Limit-Requests-Quota": "100",
     "X-Rate-Limit-Time-Window-Ms": "500", "X-Rate-Limit-Time-Reset-Ms": "900000000000"},
])
def test_a_reset_beyond_the_longest_wait_is_clamped_to_it(headers: dict[str, str]) -> None:
    reader = BudgetHeaders(ALL, max_wait=60)
    budget = reader.parse(_Headers(headers), WALL)
    assert isinstance(budget, WindowBudget) and budget.clamped and not budget.epoch
    assert budget.reset_after == 60 and reader.clamped == 1


def test_a_window_beyond_the_longest_wait_is_clamped_to_it() -> None:
    budget = BudgetHeaders(ALL, max_wait=60).parse(
        _Headers({"RateLimit-Policy": '"day";q=1000;w=86400', "RateLimit": '"day";r=10;t=30'}), WALL)
    assert budget == WindowBudget("ietf", 10, 30.0, 1.0, quota=1000, window=60.0)


def test_each_clamped_header_is_logged_once_with_its_value(caplog: pytest.LogCaptureFixture) -> None:
    reader = BudgetHeaders(ALL, max_wait=300)
    with caplog.at_level(logging.WARNING):
        for value in ("900000000", "900000001", "14"):
            reader.parse(_Headers({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": value}), WALL)
        reader.parse(_Headers({"RateLimit": '"default";r=0;t=86400'}), WALL)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and reader.clamped == 3, messages
    assert "X-RateLimit-Reset: 900000000 " in messages[0] and "RATE_LIMIT_HEADERS_MAX_WAIT=300" in messages[0]
    assert 'RateLimit: "default";r=0;t=86400' in messages[1]


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_rate_limit_headers_max_wait_refuses_what_is_not_a_positive_number(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^RATE_LIMIT_HEADERS_MAX_WAIT="):
        CrawlConfig.from_settings({"RATE_LIMIT_HEADERS_MAX_WAIT": value})
