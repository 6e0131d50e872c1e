"""PRODUCT_COLUMNS' cleaning, type by type: what each answer value is stored as, and which are counted unusable.

Each case parses a product whose declared column ``c`` holds the value (as the
spider does): the stored value, and whether ``c`` is among the fields the spider
counts ``cleaning/invalid/c``. ``null`` and a blank string are NULL and not
counted; a value the answer lacks is counted absent instead.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from productcrawler.answer.cleaning import parse_product
from productcrawler.answer.declared import parse_columns

INVALID = object()  # NULL, counted cleaning/invalid/c


def cleaned(spec: str, raw_json: str | None) -> tuple[Any, list[str], bool]:
    """(the stored value, the fields counted invalid, whether c is counted absent) of ``{"c": raw_json}``
    (None: an answer without c)."""
    absent: list[str] = []
    body = ('{"id": 1, "name": "Board"' + ("" if raw_json is None else f', "c": {raw_json}') + "}").encode()
    item, dropped = parse_product(body, 1, datetime(2024, 5, 1), absent=absent, declared=parse_columns(f"c:{spec}=c"))
    return item.extra["c"], dropped, "c" in absent


def check(spec: str, raw_json: str, expected: object) -> None:
    value, dropped, absent = cleaned(spec, raw_json)
    assert not absent
    if expected is INVALID:
        assert (value, dropped) == (None, ["c"])
    else:
        assert (value, dropped) == (expected, [])
        assert type(value) is type(expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ("42", 42), ('"42"', 42), ('" -7 "', -7), ('"12.0"', 12), ("1e3", 1000),
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -2**63),  # BIGINT's ends
    ("9223372036854775808", INVALID), ("-9223372036854775809", INVALID), ("1e400", INVALID),  # out of range
    ("12.5", INVALID), ('"many"', INVALID), ('"1_000"', INVALID), ('"0x10"', INVALID), ("true", INVALID),
    ("[1]", INVALID), ('{"n": 1}', INVALID), ("NaN", INVALID), ('"Infinity"', INVALID),
])
def test_integer(raw: str, expected: object) -> None:
    check("integer", raw, expected)


@pytest.mark.parametrize(("spec", "raw", "expected"), [
    ("decimal(5,2)", "12.5", Decimal("12.50")), ("decimal(5,2)", '"12.5"', Decimal("12.50")),
    # Rounded half up to the scale, from the digits as written (1.005 is not the binary float under 1.005).
    ("decimal(5,2)", "1.005", Decimal("1.01")), ("decimal(5,2)", '"1.015"', Decimal("1.02")),
    ("decimal(5,2)", "1.004", Decimal("1.00")), ("decimal(5,2)", "-1.005", Decimal("-1.01")),
    ("decimal(5,2)", "2.5e-3", Decimal("0.00")), ("decimal(5,0)", "99999.4", Decimal("99999")),
    # P digits at most, after rounding: 999.994 fits DECIMAL(5,2), 999.995 rounds to 1000.00, which does not.
    ("decimal(5,2)", "999.994", Decimal("999.99")), ("decimal(5,2)", "999.995", INVALID),
    ("decimal(5,2)", "-999.995", INVALID), ("decimal(5,2)", "1000", INVALID), ("decimal(5,2)", "1e400", INVALID),
    # Past the 28 digits Python's decimals keep by default.
    ("decimal(65,30)", "12345678901234567890123456789012345.5",
     Decimal("12345678901234567890123456789012345.500000000000000000000000000000")),
    ("decimal(65,30)", "1e35", INVALID),
    ("decimal(5,2)", '"12,50"', INVALID), ('decimal(5,2)', '"$12"', INVALID), ("decimal(5,2)", "true", INVALID),
    ("decimal(5,2)", "NaN", INVALID), ("decimal(5,2)", "[12]", INVALID),
])
def test_decimal(spec: str, raw: str, expected: object) -> None:
    check(spec, raw, expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ("true", True), ("false", False), ("1", True), ("0", False), ("1.0", True),
    ('"true"', True), ('"false"', False), ('"1"', True), ('"0"', False), ('"yes"', True), ('"no"', False),
    ('" TRUE "', True), ('"No"', False),
    ("2", INVALID), ("-1", INVALID), ('"maybe"', INVALID), ('"y"', INVALID), ('"on"', INVALID), ("[]", INVALID),
    ('{"value": true}', INVALID),
])
def test_boolean(raw: str, expected: object) -> None:
    check("boolean", raw, expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ('"BRD-S"', "BRD-S"), ('"  BRD   S "', "BRD S"),
    ('"abcdefghij"', "abcdefgh"),  # cut at its length
    ('"abcdefg hij"', "abcdefg"),  # cut, then no trailing space
    ('"<b>BRD</b> &amp; co"', "BRD & co"),  # plain text, as the article's labels
    ("12", "12"), ("12.50", "12.50"),  # a number as its text, as written
    ("true", INVALID), ('["BRD"]', INVALID), ('{"sku": "BRD"}', INVALID), ('"<br>"', INVALID),
])
def test_text(raw: str, expected: object) -> None:
    check("text(8)", raw, expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ('"2024-05-01T10:00:00+02:00"', datetime(2024, 5, 1, 8, 0)),
    ('"2024-05-01T10:00:00-05:30"', datetime(2024, 5, 1, 15, 30)),
    ('"2024-05-01T23:30:00-01:00"', datetime(2024, 5, 2, 0, 30)),  # the next day in UTC
    ('"2024-05-01T10:00:00Z"', datetime(2024, 5, 1, 10, 0)), ('"2024-05-01 10:00:00+0000"', datetime(2024, 5, 1, 10)),
    ('"2024-05-01T10:00:00.999+00:00"', datetime(2024, 5, 1, 10, 0)),  # to the second
    # No offset: a wall-clock time in an unknown zone, not a point in time. Guessing UTC would store a
    # time hours off without a word, so it is unusable.
    ('"2024-05-01T10:00:00"', INVALID), ('"2024-05-01"', INVALID),
    ("1714557600", INVALID), ('"yesterday"', INVALID), ('"2024-13-01T00:00:00Z"', INVALID), ("[]", INVALID),
])
def test_datetime_is_stored_utc_and_needs_an_offset(raw: str, expected: object) -> None:
    check("datetime", raw, expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"a": [1, "x", true, false, null, {"b": 2}]}', '{"a":[1,"x",true,false,null,{"b":2}]}'),
    ('["new", "sale"]', '["new","sale"]'), ("[]", "[]"), ("{}", "{}"),
    ('"text"', '"text"'), ('"caf\\u00e9"', '"café"'),
    ("12", "12"), ("-0", "0"), ("12345678901234567890", "12345678901234567890"),
    ("12.5", "12.5"), ("2.50", "2.5"), ("1e3", "1000.0"),  # numbers by value
    ("true", "true"), ("false", "false"),
])
def test_json_keeps_every_json_type(raw: str, expected: str) -> None:
    check("json", raw, expected)


@pytest.mark.parametrize("spec", ["text(8)", "integer", "decimal(5,2)", "boolean", "datetime", "json"])
def test_null_and_blank_are_null_uncounted_and_a_missing_value_is_counted_absent(spec: str) -> None:
    for raw in ("null", '""', '"  "'):
        assert cleaned(spec, raw) == (None, [], False)
    assert cleaned(spec, None) == (None, [], True)
