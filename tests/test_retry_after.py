from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from productcrawler.retry import retry_after
from productcrawler.retry.retry_after import parse_retry_after

NOW_DT = datetime(2025, 1, 1, tzinfo=UTC)  # a Wednesday
NOW = NOW_DT.timestamp()


def http_date(seconds_from_now: float) -> str:
    return format_datetime(NOW_DT + timedelta(seconds=seconds_from_now), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (b"120", 120.0),
        ("0", 0.0),
        ("000", 0.0),
        ("  30\t", 30.0),
        ("86400000", 86400000.0),  # huge but a number: capping is the policy's job
    ],
)
def test_delay_seconds(value: str | bytes, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_delay_seconds_too_large_for_a_float_is_infinite() -> None:
    assert parse_retry_after("9" * 400, now=NOW) == math.inf


@pytest.mark.parametrize(
    "value",
    ["-5", "+5", "1.", ".5", "1e3", "0x10", "5 s", "٣", "1.٣"],  # not digits (٣ is an Arabic 3)
)
def test_delay_seconds_must_be_plain_ascii_digits(value: str) -> None:
    assert parse_retry_after(value, now=NOW) is None


@pytest.mark.parametrize(("value", "expected"), [("2.0", 2.0), ("1.5", 1.5), (b"0.25", 0.25), ("10.000", 10.0)])
def test_delay_seconds_with_a_fraction_as_shopify_sends_it(value: str | bytes, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_imf_fixdate_in_the_future() -> None:
    assert http_date(90) == "Wed, 01 Jan 2025 00:01:30 GMT"
    assert parse_retry_after(http_date(90), now=NOW) == 90.0
    assert parse_retry_after(http_date(90).encode(), now=NOW) == 90.0


def test_date_now_is_zero() -> None:
    assert parse_retry_after(http_date(0), now=NOW) == 0.0


def test_date_in_the_past_is_zero() -> None:
    assert parse_retry_after(http_date(-3600), now=NOW) == 0.0


def test_date_is_relative_to_the_clock() -> None:
    value = http_date(90)
    assert parse_retry_after(value, now=NOW + 30) == 60.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Wednesday, 01-Jan-25 00:01:00 GMT", 60.0),  # RFC 850 (obsolete)
        ("Wed Jan  1 00:02:00 2025", 120.0),  # asctime (obsolete), no zone: GMT
        ("Wed, 01 Jan 2025 01:00:30 +0100", 30.0),  # a zone other than GMT, tolerated
        ("  Wed, 01 Jan 2025 00:00:10 GMT  ", 10.0),
    ],
)
def test_other_date_forms(value: str, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "soon",
        "Wed, 32 Jan 2025 00:00:00 GMT",
        "Wed, 01 Jan 2025 25:00:00 GMT",
        "Wed, 01 Jan 99999 00:00:00 GMT",
        "2025-01-01T00:01:00Z",  # ISO 8601 is not an HTTP-date
        b"\xff\xfe",
    ],
)
def test_garbage_is_none(value: str | bytes | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_default_clock_is_time_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry_after.time, "time", lambda: NOW + 10)
    assert parse_retry_after(http_date(90)) == 80.0
