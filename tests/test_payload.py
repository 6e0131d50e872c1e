"""Where the product is in an answer: the default shapes, error envelopes and PRODUCT_FIELDS."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest

from productcrawler.answer.cleaning import BadResponse, parse_product
from productcrawler.answer.payload import PayloadShape
from productcrawler.storage.schema import ARTICLE_COLUMNS
from simulator import catalog, shapes

FETCHED_AT = datetime(2024, 5, 1, 12, 30, 0)
ARTICLE = {"id": 42, "name": "Phone X", "price": "7999.00", "stock": 523, "category": "数码电器/手机",
           "brand": "Apple", "rating": 4.85, "sales_count": 15820}
EXPECTED = {"product_id": 42, "name": "Phone X", "price": Decimal("7999.00"), "stock": 523,
            "category": "数码电器/手机", "brand": "Apple", "rating": Decimal("4.85"), "sales_count": 15820}


def parse(payload: object, fields: str | None = None, requested_id: int = 42) -> dict[str, object]:
    item, _ = parse_product(json.dumps(payload).encode(), requested_id, FETCHED_AT, PayloadShape.parse(fields))
    # The article's columns: what PRODUCT_COLUMNS, KEEP_ANSWER and VARIANTS add is theirs to test.
    return {k: v for k, v in vars(item).items() if k in ARTICLE_COLUMNS and k != "update_time"}


def reason(payload: object, fields: str | None = None) -> BadResponse:
    with pytest.raises(BadResponse) as info:
        parse(payload, fields)
    return info.value


# --- the default rules -------------------------------------------------------------


@pytest.mark.parametrize("payload", [
    ARTICLE,  # the article's own shape
    {"product_id": 42, **{k: v for k, v in ARTICLE.items() if k != "id"}},
    {"data": ARTICLE},
    {"product": ARTICLE},
    {"result": ARTICLE},
    {"item": ARTICLE},
    {"code": 0, "msg": "ok", "data": ARTICLE},
    {"code": 200, "message": "success", "data": ARTICLE},
    {"status": "ok", "meta": {"page": 1}, "data": ARTICLE},
    {"code": 1, "msg": "partial", "data": ARTICLE},  # an error code, but a product: a product
], ids=["id", "product_id", "data", "product", "result", "item", "code0", "code200", "meta", "code1-with-product"])
def test_default_rules_find_the_product(payload: object) -> None:
    assert parse(payload) == EXPECTED


def test_the_id_may_be_id_or_product_id_and_the_name_name_or_title() -> None:
    assert parse({"id": 42, "title": "Phone X"})["name"] == "Phone X"
    assert parse({"product_id": 42, "id": 7, "name": "x"})["product_id"] == 42  # product_id first
    assert parse({"id": 42, "name": "Phone X", "title": "other"})["name"] == "Phone X"


def test_first_envelope_key_that_holds_an_object_wins() -> None:
    assert parse({"data": None, "product": ARTICLE}) == EXPECTED
    assert parse({"data": [ARTICLE], "item": ARTICLE}) == EXPECTED


@pytest.mark.parametrize(("payload", "expected"), [
    ({"code": 40004, "msg": "product offline", "data": None}, "error_envelope"),
    ({"errcode": 40001, "errmsg": "invalid credential"}, "error_envelope"),
    ({"error_code": "E42"}, "error_envelope"),
    ({"code": "UNAUTHORIZED", "data": {}}, "error_envelope"),
    ({"error": "rate limited"}, "error_envelope"),
    ({"errors": [{"message": "not found"}]}, "error_envelope"),
    ({"code": 0, "msg": "ok", "data": None}, "not_a_product"),
    ({"status": "ok", "data": None}, "not_a_product"),
    ({"data": {"sku": 42, "title": "x"}}, "not_a_product"),
    ({"data": {"data": ARTICLE}}, "not_a_product"),  # one envelope level only
    ({"id": 42}, "not_a_product"),
    ({"error": None, "name": "x"}, "not_a_product"),
])
def test_answers_without_a_product(payload: object, expected: str) -> None:
    assert reason(payload).reason == expected


def test_a_bad_response_names_the_keys_it_found() -> None:
    error = reason({"data": {"sku": 42, "title": "x"}, "meta": {}})
    assert error.keys == ("data", "meta", "data.sku", "data.title")
    assert reason({"status": "ok", "data": None}).keys == ("status", "data")


# --- PRODUCT_FIELDS ----------------------------------------------------------------

RENAMED = {"data": {"sku": "42", "title": "Phone X", "pricing": {"current": "7999.00"},
                    "inventory": {"available": 523}, "category": "数码电器/手机", "brand": "Apple",
                    "rating": 4.85, "sales_count": 15820}}


def test_product_fields_from_the_issue() -> None:
    fields = "product_id=data.sku,name=data.title,price=data.pricing.current,stock=data.inventory.available"
    # Columns not named are read next to the mapped id (in data).
    assert parse(RENAMED, fields) == EXPECTED


def test_a_list_index_in_a_path() -> None:
    payload = {"product": {"id": 42, "title": "Phone X", "variants": [{"price": "7999.00"}, {"price": "1"}]}}
    assert parse(payload, "price=product.variants.0.price")["price"] == Decimal("7999.00")
    assert parse(payload, "price=product.variants.5.price")["price"] is None  # absent: NULL, not an error
    assert parse(payload, "price=product.variants.x")["price"] is None


def test_a_mapped_id_that_is_absent_is_not_a_product() -> None:
    assert reason(RENAMED, "product_id=data.id").reason == "not_a_product"
    assert reason({"data": {"id": 42}}, "name=data.title").reason == "not_a_product"


def test_whitespace_around_entries_is_allowed() -> None:
    assert PayloadShape.parse(" product_id = data.sku , name=data.title ") == PayloadShape.parse(
        "product_id=data.sku,name=data.title")
    assert PayloadShape.parse("") == PayloadShape.parse(None) == PayloadShape()
    assert PayloadShape.parse({"name": "data.title"}) == PayloadShape.parse("name=data.title")


@pytest.mark.parametrize(("raw", "message"), [
    ("sku=data.sku", "unknown column 'sku'"),
    ("update_time=data.updated_at", "unknown column 'update_time'"),
    ("product_id=", "the path must be"),
    ("product_id=data.", "the path must be"),
    ("product_id=.sku", "the path must be"),
    ("product_id=data..sku", "the path must be"),
    ("product_id=data. sku", "the path must be"),
    ("product_id:data.sku", "is not column=path"),
    ("product_id=data.sku,", "is not column=path"),
    ("name=a,name=b", "named twice"),
])
def test_bad_product_fields_are_rejected(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PayloadShape.parse(raw)


# --- every simulator shape reads back to the same product ----------------------------


@pytest.mark.parametrize("shape", shapes.SHAPES)
def test_each_simulator_shape_with_its_product_fields_gives_the_article_shapes_product(shape: str) -> None:
    for product_id in range(1, 40):
        if catalog.is_missing(product_id):
            continue
        item = catalog.product(product_id, 490_000)
        got = parse(shapes.shaped(item, shape), shapes.PRODUCT_FIELDS[shape], requested_id=product_id)
        want = parse(item, requested_id=product_id)
        if shape == "shopify":  # no rating or sales count in a Shopify product
            want.update(rating=None, sales_count=None)
        assert got == want, shape
