"""PRODUCT_URL: one ``{id}``, the id percent-encoded into it, the default unchanged, and the way back."""

from __future__ import annotations

import pytest
from scrapy import Request

from productcrawler.config import ConfigError, CrawlConfig
from tests.support.crawls import run_crawl

SECRET = "s3cr3t-pw"


def config(**settings: str) -> CrawlConfig:
    return CrawlConfig.from_settings({"API_BASE_URL": "http://api.test/v1", **settings})


def test_unset_it_is_the_base_url_and_product_as_before():
    assert config().api.product_url(7) == "http://api.test/v1/product/7"
    assert config(PRODUCT_URL="  ").api.product_url(7) == "http://api.test/v1/product/7"
    assert config().api.prefix == "http://api.test/v1/"


@pytest.mark.parametrize(("template", "product_id", "url"), [
    ("https://shop.test/admin/api/2024-10/products/{id}.json", 6_543_210_987_654,
     "https://shop.test/admin/api/2024-10/products/6543210987654.json"),
    ("https://m.test/rest/default/V1/products/{id}", "WS12 M/Blue", "https://m.test/rest/default/V1/products/WS12%20M%2FBlue"),
    # Nothing is safe: not a ?, &, #, %, + or unicode either.
    ("https://m.test/p/{id}", "a?b&c#d%e+f~g", "https://m.test/p/a%3Fb%26c%23d%25e%2Bf~g"),
    ("https://m.test/p/{id}", "Größe", "https://m.test/p/Gr%C3%B6%C3%9Fe"),
    ("https://api.test/v1/products/{id}.json?show=sku,name", 1234567,
     "https://api.test/v1/products/1234567.json?show=sku,name"),
    ("https://api.test/item?id={id}", "7 8", "https://api.test/item?id=7%208"),
    ("https://m.test/p/{id}", "42", "https://m.test/p/42"),
])
def test_the_id_is_percent_encoded_into_the_template(template, product_id, url):
    assert config(PRODUCT_URL=template).api.product_url(product_id) == url


@pytest.mark.parametrize(("template", "product_id"), [
    ("https://shop.test/admin/api/2024-10/products/{id}.json", "6543210987654"),
    ("https://m.test/rest/default/V1/products/{id}", "WS12 M/Blue"),
    ("https://m.test/p/{id}", "a?b&c#d%e+f"),
    ("https://api.test/v1/products/{id}.json?show=sku,name", "1234567"),
    ("http://API.test:80/v1/products/{id}", "9"),
    ("http://api.test/v1/product/{id}", "7"),
])
def test_the_id_comes_back_out_of_its_url_as_given_or_as_scrapy_writes_it(template, product_id):
    made = config(PRODUCT_URL=template)
    url = made.api.product_url(product_id)
    assert made.api.product_id_in(url) == product_id
    assert made.api.product_id_in(Request(url).url) == product_id


@pytest.mark.parametrize("url", [
    "https://m.test/p/", "https://m.test/p/7/reviews", "https://elsewhere.test/p/7", "https://m.test/p/7.xml",
    "https://m.test/p/7.json?x=1",
])
def test_a_url_the_template_does_not_make_has_no_id(url):
    assert config(PRODUCT_URL="https://m.test/p/{id}.json").api.product_id_in(url) is None


@pytest.mark.parametrize(("template", "says"), [
    ("ftp://shop.test/products/{id}", "is not an http:// or https:// URL"),
    ("shop.test/products/{id}", "is not an http:// or https:// URL"),
    ("https://shop.test/products/", "has 0 {id} placeholders; expected exactly one"),
    ("https://shop.test/products/{id}/{id}", "has 2 {id} placeholders; expected exactly one"),
    ("https://shop.test/products/{sku}", "has 0 {id} placeholders"),
    ("https://shop.test/{store}/products/{id}", "has braces other than its {id}"),
    ("https://shop.test/products/{id}}", "has braces other than its {id}"),
    ("https://{id}.shop.test/products", "must be in the path or the query"),
    ("https://shop.test/products#{id}", "must be in the path or the query"),
])
def test_a_bad_template_is_refused_naming_it(template, says):
    with pytest.raises(ConfigError) as error:
        config(PRODUCT_URL=template)
    assert str(error.value).startswith(f"PRODUCT_URL='{template}'") and says in str(error.value), error.value


@pytest.mark.parametrize("name", ["PRODUCT_URL", "API_BASE_URL"])
@pytest.mark.parametrize("userinfo", [f"user:{SECRET}@", f"{SECRET}@", "user:@"])
def test_credentials_in_the_apis_url_are_refused_without_showing_them(name, userinfo):
    url = f"https://{userinfo}shop.test/p/{{id}}" if name == "PRODUCT_URL" else f"https://{userinfo}shop.test/v1"
    with pytest.raises(ConfigError) as error:
        config(**{name: url})
    message = str(error.value)
    assert message.startswith(f"{name}=") and "use API_AUTH=basic" in message, message
    assert SECRET not in message or userinfo == f"{SECRET}@", message  # a user name alone is shown, as in logs


def test_a_template_refused_for_its_shape_shows_no_password():
    with pytest.raises(ConfigError) as error:
        config(PRODUCT_URL=f"https://user:{SECRET}@shop.test/products/")
    assert SECRET not in str(error.value) and "user:***@shop.test" in str(error.value)


@pytest.mark.parametrize(("template", "prefix"), [
    ("https://shop.test/admin/api/2024-10/products/{id}.json", "https://shop.test/admin/api/2024-10/products/"),
    ("https://api.test/v1/products/{id}.json?apiKey=x", "https://api.test/v1/products/"),
    ("https://api.test/item?id={id}", "https://api.test/"),
    ("https://api.test?id={id}", "https://api.test/"),
])
def test_the_apis_own_urls_are_those_under_the_templates_path(template, prefix):
    assert config(PRODUCT_URL=template).api.prefix == prefix


def test_the_spider_parses_a_template_url_by_its_id():
    from scrapy.utils.test import get_crawler

    from productcrawler.spiders.products import ProductsSpider
    crawler = get_crawler(ProductsSpider, settings_dict={"PRODUCT_URL": "https://shop.test/products/{id}.json",
                                                         "DATABASE_URL": "sqlite:////nonexistent/x.db"})
    spider = ProductsSpider.from_crawler(crawler)
    assert spider.verbatim_urls is True
    assert spider.make_request(6_543_210_987_654).url == "https://shop.test/products/6543210987654.json"
    assert spider.product_id_in("https://shop.test/products/6543210987654.json") == 6_543_210_987_654
    assert spider.product_id_in("https://shop.test/products/x.json") is None


def test_the_crawl_stops_at_start_on_a_bad_template(tmp_path):
    result = run_crawl(settings={"PRODUCT_URL": "https://shop.test/products/{id}/{id}",
                                 "DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert lines == ["productcrawler: configuration error: PRODUCT_URL='https://shop.test/products/{id}/{id}' "
                     "has 2 {id} placeholders; expected exactly one, where the product's id goes "
                     "(https://shop.example/products/{id}.json)"], result.stderr
