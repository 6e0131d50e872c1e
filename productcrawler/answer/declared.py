"""Columns of the user's own (``PRODUCT_COLUMNS``): each a name, a type and a path in the answer.

``sku:text(64)=product.variants.0.sku,updated_at:datetime=product.updated_at``
declares two columns of ``products``. A value is cleaned by its column's type
with the rules the article's columns follow (``cleaning.py``): a JSON number or
a numeric string is a number; a value that is present but unusable (wrong type,
unparseable, out of range) is NULL and counted ``cleaning/invalid/<column>``;
one the answer lacks is NULL and counted ``cleaning/absent/<column>``; ``null``
or a blank string is NULL and not counted.

Types: ``text(N)`` (a string or a number's text, as plain text cut to N
characters as labels are), ``integer`` (64-bit, signed), ``decimal(P,S)``
(rounded half up to S places; past P digits NULL), ``boolean`` (true/false,
1/0, and "true"/"false", "1"/"0", "yes"/"no" in any case), ``datetime`` (ISO
8601 with an offset, stored as naive UTC to the second; without an offset it
names no point in time, so it is unusable), ``json`` (any value, kept as JSON,
numbers by value).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from productcrawler.answer.payload import ABSENT, resolve
from productcrawler.answer.payload import COLUMNS as ARTICLE_COLUMNS
from productcrawler.answer.values import plain_text, read_number

#: Columns of ``products`` a declared column may not take (the article's and the crawl's own).
RESERVED = frozenset({*ARTICLE_COLUMNS, "id", "update_time", "created_at", "pass_id", "first_seen", "removed_at",
                      "answer", "answer_digest"})
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_TYPE = re.compile(r"(text|decimal)\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)|integer|boolean|datetime|json")
_ENTRY = re.compile(r"\s*([^:=,]+?)\s*:\s*([a-z]+(?:\([^)]*\))?)\s*=\s*([^,]*?)\s*(?:,|$)", re.IGNORECASE)
_INT64 = 2**63 - 1
_TRUE, _FALSE = frozenset({"true", "1", "yes"}), frozenset({"false", "0", "no"})


@dataclass(frozen=True)
class DeclaredColumn:
    name: str
    spec: str  # the type as read_type reads it: text(64), decimal(10,2), ...
    path: tuple[str, ...]  # keys from the answer's root (a list's item by its position)

    @property
    def kind(self) -> str:
        return self.spec.split("(", 1)[0]

    def value(self, answer: object) -> object:
        return resolve(answer, self.path)

    def clean(self, raw: object) -> Any:
        """The stored value of ``raw`` (None: NULL); ``raw`` is neither ABSENT nor blank."""
        return _CLEANERS[self.kind](self, raw)

    def text(self) -> str:
        return f"{self.name}:{self.spec}={'.'.join(self.path)}"


def parse_columns(raw: object, reserved: frozenset[str] = RESERVED) -> tuple[DeclaredColumn, ...]:
    """``name:type=path,...``; ValueError says which entry is wrong and why."""
    text = "" if raw is None else str(raw).strip()
    if not text:
        return ()
    columns: dict[str, DeclaredColumn] = {}
    position = 0
    while position < len(text):
        match = _ENTRY.match(text, position)
        if match is None or match.end() == position:
            rest = text[position:].split(",", 1)[0].strip()
            raise ValueError(f"entry {rest!r} is not name:type=path (e.g. sku:text(64)=product.variants.0.sku)")
        position = match.end()
        name, spec, path = match.group(1).strip(), re.sub(r"\s+", "", match.group(2).lower()), match.group(3)
        if not _NAME.fullmatch(name):
            raise ValueError(f"column name {name!r} must be lower-case letters, digits and _ (at most 64)")
        if name in reserved:
            raise ValueError(f"column {name!r} is one of the crawl's own; PRODUCT_FIELDS maps those")
        if name in columns:
            raise ValueError(f"column {name!r} is declared twice")
        read_type(spec)  # ValueError: which types there are
        segments = tuple(path.split("."))
        if not path or any(not s.strip() or s != s.strip() for s in segments):
            raise ValueError(f"{name}: path {path!r} must be keys separated by dots, e.g. product.status")
        columns[name] = DeclaredColumn(name, spec, segments)
    return tuple(columns.values())


def clean_declared(answer: object, columns: tuple[DeclaredColumn, ...], dropped: list[str],
                   absent: list[str]) -> dict[str, Any]:
    """The declared columns' values in ``answer``; names of unusable and absent ones appended."""
    values: dict[str, Any] = {}
    for column in columns:
        values[column.name] = clean_value(column, column.value(answer), dropped, absent)
    return values


def clean_value(column: DeclaredColumn, raw: object, dropped: list[str], absent: list[str]) -> Any:
    if raw is ABSENT:
        absent.append(column.name)
        return None
    if raw is None or (type(raw) is str and not raw.strip()):
        return None
    value = column.clean(raw)
    if value is None:
        dropped.append(column.name)
    return value


def _sizes(spec: str) -> tuple[int, ...]:
    match = _TYPE.fullmatch(spec)
    assert match is not None  # parse_columns checked it
    return tuple(int(n) for n in match.groups()[1:] if n is not None)


def _text(column: DeclaredColumn, raw: object) -> str | None:
    if type(raw) in (int, Decimal):
        raw = str(raw)
    if type(raw) is not str:
        return None
    return plain_text(raw, _sizes(column.spec)[0]) or None


def _integer(column: DeclaredColumn, raw: object) -> int | None:
    number = read_number(raw)
    if number is None or number != number.to_integral_value() or not -_INT64 - 1 <= number <= _INT64:
        return None
    return int(number)


def _decimal(column: DeclaredColumn, raw: object) -> Decimal | None:
    number = read_number(raw)
    precision, scale = _sizes(column.spec)
    limit = Decimal(10) ** (precision - scale)
    if number is None or abs(number) >= limit:
        return None
    # Enough digits for the rounded value (one more if it rounds up to the limit), past the default 28.
    rounded = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=Context(prec=precision + 1))
    return rounded if abs(rounded) < limit else None


def _boolean(column: DeclaredColumn, raw: object) -> bool | None:
    if type(raw) is bool:
        return raw
    if type(raw) in (int, Decimal) and raw in (0, 1):
        return bool(raw)
    if type(raw) is str and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    return None


def _datetime(column: DeclaredColumn, raw: object) -> datetime | None:
    if type(raw) is not str:
        return None
    try:
        value = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    if value.tzinfo is None:
        return None  # a time without an offset is no point in time
    return value.astimezone(UTC).replace(tzinfo=None, microsecond=0)


def _json(column: DeclaredColumn, raw: object) -> str:
    return json_text(raw)


def json_text(value: object) -> str:
    """A decoded JSON value (numbers as Decimals) as compact JSON text; a number with a fraction or an
    exponent is written as a double writes it (2.50 as 2.5, 1e3 as 1000.0)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_plain_number)


def _plain_number(value: object) -> object:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and "E" not in str(value) \
            and "." not in str(value) else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_CLEANERS = {"text": _text, "integer": _integer, "decimal": _decimal, "boolean": _boolean,
             "datetime": _datetime, "json": _json}


#: The declared types without sizes.
PLAIN_TYPES = frozenset({"integer", "boolean", "datetime", "json"})


def read_type(spec: str) -> tuple[str, tuple[int, ...]]:
    """A declared column's type, read: its name and sizes (``text(64)``: ``("text", (64,))``).

    The types are ``text(N)``, ``integer``, ``decimal(P,S)``, ``boolean``,
    ``datetime`` (stored UTC) and ``json``; ValueError says what is allowed.
    """
    name, _, arguments = spec.strip().lower().partition("(")
    numbers = [part.strip() for part in arguments.rstrip(")").split(",")] if arguments else []
    if (arguments and not arguments.endswith(")")) or not all(n.isdigit() for n in numbers):
        raise ValueError(f"type {spec!r} cannot be read")
    sizes = tuple(int(n) for n in numbers)
    if name == "text" and len(sizes) == 1 and 0 < sizes[0] <= 16383:
        return name, sizes
    if name == "decimal" and len(sizes) == 2 and 0 < sizes[0] <= 65 and sizes[1] <= min(sizes[0], 30):
        return name, sizes
    if not sizes and name in PLAIN_TYPES:
        return name, sizes
    raise ValueError(f"type {spec!r} is not one of text(N), integer, decimal(P,S), boolean, datetime, json")
