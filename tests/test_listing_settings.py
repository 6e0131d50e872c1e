"""The listing's settings refused with one line naming the setting (ConfigError: exit 2 at start), the URL masked."""

from __future__ import annotations

import pytest

from productcrawler.config import ConfigError
from productcrawler.config.crawl import CrawlConfig

SHOP = "https://shop.example/admin/api/products.json"


@pytest.mark.parametrize(("settings", "message"), [
    ({"PRODUCT_LIST_URL": "https://crawler:hunter2@shop.example/p?x={page}"},
     "PRODUCT_LIST_URL='https://crawler:***@shop.example/p?x=***': the only placeholder it may have is one {since}"),
    ({"PRODUCT_LIST_URL": f"{SHOP}?a={{since}}&b={{since}}"}, "the only placeholder it may have is one {since}"),
    ({"PRODUCT_LIST_URL": SHOP, "PRODUCT_LIST_QUERY": "nope"},
     "PRODUCT_LIST_QUERY='nope' is not a GraphQL query (or @file with one)"),
    ({"PRODUCT_LIST_URL": SHOP, "PRODUCT_LIST_QUERY": "query($cursor: String) { products { id } }",
      "PRODUCT_LIST_VARIABLES": "[1]"}, "PRODUCT_LIST_VARIABLES='[1]' is not a JSON object"),
    ({"PRODUCT_LIST_URL": SHOP, "PRODUCT_LIST_QUERY": "@/nonexistent/products.graphql"},
     "PRODUCT_LIST_QUERY='@/nonexistent/products.graphql': cannot read the file"),
    ({"FULL_PASS_EVERY": "0"}, "FULL_PASS_EVERY='0': expected a number of passes (24) or a duration"),
    ({"FULL_PASS_EVERY": "weekly"}, "FULL_PASS_EVERY='weekly': expected a number of passes (24) or a duration"),
])
def test_a_listing_setting_the_crawl_cannot_run_with_is_refused_naming_it(settings, message):
    with pytest.raises(ConfigError) as refused:
        CrawlConfig.from_settings(settings)
    assert message in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_the_listing_settings_a_shop_needs_are_read():
    config = CrawlConfig.from_settings({"PRODUCT_LIST_URL": f"{SHOP}?updated_at_min={{since}}",
                                        "FULL_PASS_EVERY": "7d"})
    assert config.listing.url is not None and config.listing.url.since_format is not None
    assert config.listing.full_pass_every.seconds == 7 * 86400
