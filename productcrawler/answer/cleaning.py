"""Turn one API response body into a clean ``ProductItem``, or say why it is not one.

A product has an id and a name; real product APIs (Shopify's products, Amazon
SP-API's catalog items, ...) return at least an id and a title or name, so a
200 without both is treated as a bad response. Where they are in the JSON
(``id`` or ``product_id``, an envelope, ``PRODUCT_FIELDS``) is ``payload.py``'s
business. The other fields are optional. An optional field that is ``null`` or a blank
string is stored as NULL and not reported; one that is absent from the answer
is stored as NULL and its name is put in the caller's ``absent`` list (the
spider counts it, ``cleaning/absent/<column>``: a renamed field shows there);
one that is present but unusable (wrong type, unparseable, out of range,
empty once its markup is removed) is stored as NULL and its name is returned
so the caller counts it (``cleaning/invalid/<column>``).

Every field cleaner takes the decoded JSON value (``None`` included) and
returns the cleaned value or ``None``; ``clean_name`` raises ``BadResponse``
instead, because a product without a name is not stored at all.
"""

from __future__ import annotations

import codecs
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, TypeVar

from price_parser import Price

from productcrawler.answer.declared import DeclaredColumn, clean_declared
from productcrawler.answer.payload import ABSENT, DEFAULT_SHAPE, BadResponse, PayloadShape
from productcrawler.answer.values import PLAIN_NUMBER, plain_text, read_number
from productcrawler.ids.idfile import string_id_fault
from productcrawler.items import ProductItem

__all__ = ["BadResponse", "clean_count", "clean_label", "clean_name", "clean_price", "clean_product",
           "clean_rating", "decode_answer", "parse_product", "product_keys"]

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from productcrawler.answer.variants import VariantShape

_T = TypeVar("_T")

NAME_MAX_LENGTH = 255  # VARCHAR(255): characters, not bytes (utf8mb4)
LABEL_MAX_LENGTH = 100  # category, brand: VARCHAR(100)
INT_MAX = 2_147_483_647  # MySQL INT
MAX_ID = 2**63 - 1  # product_id is a signed BIGINT
PRICE_MAX = Decimal("99999999.99")  # DECIMAL(10,2)
RATING_MAX = Decimal("5.00")
RATING_MIN = Decimal("0.00")
PRICE_TEXT_MAX_LENGTH = 64  # price-parser is quadratic on long digit runs

_CENT = Decimal("0.01")
# Values at or above this round (half up) past PRICE_MAX.
_PRICE_LIMIT = PRICE_MAX + Decimal("0.005")

# JSON must be UTF-8 (RFC 8259 §8.1), which also lets a parser ignore a BOM.
_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=Decimal)
# A minus sign before the first digit: price-parser drops it ("-5.00" -> 5.00).
_NEGATIVE_PRICE = re.compile("\\D*[-\u2212]")
_DIGIT = re.compile(r"\d")


def parse_product(
    body: bytes, requested_id: int | str, fetched_at: datetime, shape: PayloadShape = DEFAULT_SHAPE,
    absent: list[str] | None = None, *, declared: tuple[DeclaredColumn, ...] = (),
    variants: VariantShape | None = None,
) -> tuple[ProductItem, list[str]]:
    """Decode, validate and clean one API response body.

    ``shape`` says where the fields are (``PRODUCT_FIELDS``; default: the
    rules of ``payload.py``). Returns the item and the names of the fields
    whose value had to be dropped (stored NULL); the optional fields the
    answer does not have at all are appended to ``absent`` if given. Raises
    ``BadResponse`` when the body is not a product.
    """
    return clean_product(_decode(body), requested_id, fetched_at, shape, absent, declared=declared,
                         variants=variants)


def clean_product(
    answer: object, requested_id: int | str | None, fetched_at: datetime, shape: PayloadShape = DEFAULT_SHAPE,
    absent: list[str] | None = None, *, id_type: str = "int", declared: tuple[DeclaredColumn, ...] = (),
    variants: VariantShape | None = None,
) -> tuple[ProductItem, list[str]]:
    """Validate and clean one decoded product (a whole answer, or one product of a listing page).

    ``requested_id``: the id asked for, which the answer's must equal; None for a listed product,
    whose id is its own (of ``id_type``, PRODUCT_ID_TYPE). ``declared``: the PRODUCT_COLUMNS, whose
    paths start at ``answer``; ``variants``: where its variants are (VARIANTS). Otherwise as
    :func:`parse_product`.
    """
    if absent is None:
        absent = []
    data = shape.extract(answer)
    if requested_id is None:
        product_id = _listed_id(data["product_id"], id_type)
    else:
        payload_id: object = (_string_id(data["product_id"]) if isinstance(requested_id, str)
                              else read_number(data["product_id"]))
        if payload_id is None:
            raise BadResponse("not_a_product", f"product id {data['product_id']!r}")
        if payload_id != requested_id:
            raise BadResponse("id_mismatch", f"asked for {requested_id!r}, got {data['product_id']!r}")
        product_id = requested_id

    dropped: list[str] = []
    item = ProductItem(
        product_id=product_id,
        name=clean_name(data["name"]),
        price=_optional(data, "price", clean_price, dropped, absent),
        stock=_optional(data, "stock", clean_count, dropped, absent),
        category=_optional(data, "category", clean_label, dropped, absent),
        brand=_optional(data, "brand", clean_label, dropped, absent),
        rating=_optional(data, "rating", clean_rating, dropped, absent),
        sales_count=_optional(data, "sales_count", clean_count, dropped, absent),
        update_time=fetched_at,  # the payload's own timestamp is not trusted
    )
    if declared:
        item.extra = clean_declared(answer, declared, dropped, absent)
    if variants is not None:
        item.variants = variants.variants(answer, dropped, absent)
        if item.variants:
            item.price, item.stock = variants.derive(item.price, item.stock, item.variants)
    return item, dropped


def decode_answer(body: bytes) -> object:
    """An answer's JSON, numbers as Decimals, as products are cleaned from it; ``BadResponse`` if it is none."""
    return _decode(body)


def _listed_id(value: object, id_type: str) -> int | str:
    """A listed product's own id: a string id as given, an integer id whole and within BIGINT."""
    if id_type == "string":
        text = _string_id(value)
        if text is None or not text.strip():
            raise BadResponse("not_a_product", f"product id {value!r}")
        fault = string_id_fault(text)
        if fault is not None:  # an id file's rule: a NUL or a 65th character would reach the table
            raise BadResponse("not_a_product", f"the product id {fault}: {text[:40]!r}")
        return text
    number = read_number(value)
    if number is None or not number.is_finite() or number != number.to_integral_value() or not 0 < number <= MAX_ID:
        raise BadResponse("not_a_product", f"product id {value!r}")
    return int(number)


def _string_id(value: object) -> str | None:
    """A string id as the answer gives it: a string as is, a whole number as its decimal text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def product_keys(body: bytes, shape: PayloadShape = DEFAULT_SHAPE) -> tuple[str, ...]:
    """The keys of the product object of an answer that parsed as a product (for messages).

    Nested objects show their keys one level down (``pricing.current``).
    Decodes the body again: only for the few answers a message quotes.
    """
    return shape.keys_of(_decode(body))


def clean_name(value: object) -> str:
    """The name as plain text, at most 255 characters; raises ``BadResponse`` if there is none."""
    if value is None:
        raise BadResponse("empty_name", "name is null")
    if type(value) is not str:  # a number or a list is a different schema, not a name
        raise BadResponse("not_a_product", f"name {value!r}")
    name = plain_text(value, NAME_MAX_LENGTH)
    if not name:
        raise BadResponse("empty_name", f"name {value!r}")
    return name


def clean_label(value: object) -> str | None:
    """A category or brand as plain text, at most 100 characters."""
    if type(value) is not str:
        return None
    return plain_text(value, LABEL_MAX_LENGTH) or None


def clean_price(value: object) -> Decimal | None:
    """A price of 0.00 to 99999999.99, rounded half up to cents.

    Takes a JSON number or a string, with currency symbols and thousands
    separators read by price-parser ("7 999,00 €"). Negative, unreadable and
    out-of-range prices are None, never 0.00: an unknown price is not free.
    """
    if type(value) is str:
        text = value.strip()
        amount = Decimal(text) if PLAIN_NUMBER.fullmatch(text) else _price_from_text(text)
    else:
        amount = read_number(value)
    if amount is None or amount.is_signed() or amount >= _PRICE_LIMIT:
        return None
    return amount.quantize(_CENT, rounding=ROUND_HALF_UP)


def clean_count(value: object) -> int | None:
    """A stock or sales count: a whole number from 0 to 2147483647."""
    number = read_number(value)
    if number is None or not 0 <= number <= INT_MAX or number != number.to_integral_value():
        return None
    return int(number)


def clean_rating(value: object) -> Decimal | None:
    """A rating clamped to 0.00–5.00, rounded half up to two places."""
    number = read_number(value)
    if number is None:
        return None
    if number.is_signed():  # negative, or -0
        return RATING_MIN
    if number >= RATING_MAX:
        return RATING_MAX
    return number.quantize(_CENT, rounding=ROUND_HALF_UP)


def _decode(body: bytes) -> object:
    if body.startswith(codecs.BOM_UTF8):
        body = body[len(codecs.BOM_UTF8) :]
    start = body.lstrip()[:1]
    if not start:
        raise BadResponse("empty_body")
    if start == b"<":
        raise BadResponse("html", _excerpt(body))
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadResponse("invalid_utf8", f"{exc.reason} at byte {exc.start}") from None
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise BadResponse("too_deep", "JSON nested past the recursion limit") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4300 digits
        raise BadResponse("not_json", f"{exc} in {_excerpt(body)}") from None


def _excerpt(body: bytes) -> str:
    return repr(body.lstrip()[:40].decode("utf-8", "replace"))


def _price_from_text(text: str) -> Decimal | None:
    # No digit: price-parser reads "Free" as 0, which would make an unknown price free.
    if len(text) > PRICE_TEXT_MAX_LENGTH or not _DIGIT.search(text) or _NEGATIVE_PRICE.match(text):
        return None
    return Price.fromstring(text).amount


def _optional(
    data: dict[str, object],
    field: str,
    cleaner: Callable[[object], _T | None],
    dropped: list[str],
    absent: list[str],
) -> _T | None:
    raw = data[field]
    if raw is ABSENT:
        absent.append(field)
        return None
    value = cleaner(raw)
    if value is None and not _is_blank(raw):
        dropped.append(field)
    return value


def _is_blank(raw: object) -> bool:
    return raw is None or (type(raw) is str and not raw.strip())
