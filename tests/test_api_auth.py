"""API_AUTH, API_KEY and API_HEADERS read and checked: what goes on the wire, where, and no key in a message."""

from __future__ import annotations

import base64

import pytest

from productcrawler.config import ConfigError, CrawlConfig

KEY = "k3y-of-this-test-5b8e2c"


def auth(**settings: str):
    return CrawlConfig.from_settings({"API_BASE_URL": "https://api.test/v1", **settings}).api.auth


def test_no_key_and_no_headers_send_nothing():
    assert auth() is None
    assert auth(API_AUTH="query:apiKey") is None


@pytest.mark.parametrize(("mode", "headers", "query"), [
    (None, (("Authorization", f"Bearer {KEY}"),), None),
    ("bearer", (("Authorization", f"Bearer {KEY}"),), None),
    (" Bearer ", (("Authorization", f"Bearer {KEY}"),), None),
    ("header:X-Shopify-Access-Token", (("X-Shopify-Access-Token", KEY),), None),
    ("query:apiKey", (), f"apiKey={KEY}"),
])
def test_each_mode_puts_the_key_where_it_says(mode, headers, query):
    made = auth(API_KEY=KEY, **({} if mode is None else {"API_AUTH": mode}))
    assert made.headers == headers and made.query == query


def test_basic_is_rfc_7617_user_colon_password_in_base64():
    made = auth(API_KEY="ck_1234:cs_5678:with-colon", API_AUTH="basic")
    (name, value), = made.headers
    assert name == "Authorization" and value.startswith("Basic ")
    assert base64.b64decode(value[6:]) == b"ck_1234:cs_5678:with-colon"  # the password may hold colons


def test_a_utf8_password_is_encoded_as_utf8():
    (_, value), = auth(API_KEY="user:pässwörd", API_AUTH="basic").headers
    assert base64.b64decode(value[6:]).decode("utf-8") == "user:pässwörd"


@pytest.mark.parametrize(("url", "sent"), [
    ("https://api.test/v1/products/7.json", "https://api.test/v1/products/7.json?apiKey=k%20y%2F%26"),
    ("https://api.test/v1/products/7.json?show=sku", "https://api.test/v1/products/7.json?show=sku&apiKey=k%20y%2F%26"),
    ("https://api.test/v1/products/7.json?", "https://api.test/v1/products/7.json?apiKey=k%20y%2F%26"),
    ("https://api.test/v1/products/7#top", "https://api.test/v1/products/7?apiKey=k%20y%2F%26#top"),
])
def test_the_query_key_goes_after_any_query_the_url_has(url, sent):
    assert auth(API_KEY="k y/&", API_AUTH="query:apiKey").url_for(url) == sent


def test_api_headers_are_added_after_the_credential():
    made = auth(API_KEY=KEY, API_AUTH="header:X-Auth-Token",
                API_HEADERS='{"X-EBAY-C-MARKETPLACE-ID": "EBAY_US", "Accept-Language": "en"}')
    assert made.headers == (("X-Auth-Token", KEY), ("X-EBAY-C-MARKETPLACE-ID", "EBAY_US"), ("Accept-Language", "en"))
    assert auth(API_HEADERS='{"X-Api-Version": "3"}').headers == (("X-Api-Version", "3"),)  # without a key


SHOP = "https://shop.test/admin/api/2024-10/products/{id}.json"


@pytest.mark.parametrize(("template", "url", "sent"), [
    (SHOP, "https://shop.test/admin/api/2024-10/products/1.json", True),
    (SHOP, "https://shop.test/admin/api/2024-10/orders/1.json", False),
    (SHOP, "https://shop.test.evil.org/admin/api/2024-10/products/1", False),
    (SHOP, "http://shop.test/admin/api/2024-10/products/1.json", False),
    (SHOP, "https://shop.test:8443/admin/api/2024-10/products/1", False),
    ("https://Shop.Test/p/{id}", "https://shop.test/p/1", True),
])
def test_the_credential_goes_to_the_apis_own_urls_only(template, url, sent):
    assert auth(API_KEY=KEY, PRODUCT_URL=template).sends_to(url) is sent


@pytest.mark.parametrize(("settings", "says"), [
    ({"API_AUTH": "basic"}, "API_KEY must be user:password with API_AUTH=basic"),
    ({"API_AUTH": "basic", "API_KEY": f":{KEY}"}, "API_KEY must be user:password with API_AUTH=basic"),
    ({"API_AUTH": "token"}, "API_AUTH='token' is not one of bearer, basic, header:NAME or query:NAME"),
    ({"API_AUTH": "header:"}, "API_AUTH='header:' is not one of"),
    ({"API_AUTH": "header:X Token"}, "API_AUTH='header:X Token' is not one of"),
    ({"API_AUTH": "query:"}, "API_AUTH='query:' is not one of"),
    # A key pasted into API_AUTH is not shown either.
    ({"API_AUTH": f"Bearer {KEY}"}, "API_AUTH='Bearer ***' is not one of"),
    ({"API_AUTH": f"header:{KEY}:x"}, "API_AUTH='header:***:x' is not one of"),
    ({"API_KEY": f"{KEY}\r\nX-Injected: 1"}, "API_KEY holds a control character"),
    ({"API_HEADERS": '{"Authorization": "Bearer other"}'}, "API_HEADERS sets Authorization"),
])
def test_a_bad_auth_setting_is_refused_without_the_key(settings, says):
    with pytest.raises(ConfigError) as error:
        auth(**{"API_KEY": KEY, **settings})
    assert says in str(error.value), error.value
    for piece in (KEY, KEY[:8], KEY[-8:], base64.b64encode(KEY.encode()).decode()):
        assert piece not in str(error.value)


@pytest.mark.parametrize(("raw", "says"), [
    ("X-A: b", "API_HEADERS is not JSON"),
    ('["X-A", "b"]', "API_HEADERS is an array, not a JSON object"),
    ('"X-A"', "API_HEADERS is a string, not a JSON object"),
    ('{"X-A": 3}', "API_HEADERS gives X-A a number, not a string"),
    ('{"X-A": null}', "API_HEADERS gives X-A null, not a string"),
    ('{"X A": "b"}', "API_HEADERS names a header 'X A' that is not a valid header name"),
    ('{"X-A": "b\\r\\nX-B: c"}', "API_HEADERS gives X-A a value with a control character"),
])
def test_bad_api_headers_are_refused_naming_it_and_no_value(raw, says):
    with pytest.raises(ConfigError) as error:
        auth(API_HEADERS=raw)
    assert str(error.value).startswith(says), error.value
    assert "X-B: c" not in str(error.value)


def test_the_secrets_are_masked_in_a_message_in_every_form_they_take_on_the_wire():
    made = auth(API_KEY="user-name:pa ss/w0rd", API_AUTH="basic")
    token = base64.b64encode(b"user-name:pa ss/w0rd").decode()
    message = f"x user-name:pa ss/w0rd y pa%20ss%2Fw0rd z {token} w pa ss/w0rd"
    assert made.scrub(message) == "x *** y *** z *** w ***"
    assert "pa ss" not in repr(made) and token not in repr(made)
    config = CrawlConfig.from_settings({"API_KEY": KEY, "API_HEADERS": '{"X-Secret": "hush-hush"}'})
    assert KEY not in repr(config) and "hush-hush" not in repr(config)
