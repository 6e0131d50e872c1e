"""Incremental listings, Shopify's GraphQL Admin API and limits signalled by 403, against imitations.

The imitations are written from the vendors' documentation (tests/support/imitations/):
each API's own modification filter over a catalogue that changes between
passes, Shopify's GraphQL query cost and points bucket (an over-budget query is
an HTTP 200 ``THROTTLED``), a GitHub-style API that answers 403 with
``x-ratelimit-remaining: 0`` once its limit is spent, Best Buy's gateway that
answers 403 "Over Quota" above 5 requests a second.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from productcrawler.stat_keys import RATELIMIT_429
from tests.support.crawls import run_crawl
from tests.support.imitations import bestbuy, github, shopify
from tests.support.imitations.served import Served
from tests.support.imitations.shopify_graphql import ShopifyGraphql
from tests.support.logs import dumped_stat
from tests.support.recipes import recipe
from tests.support.services import query as database_rows

if TYPE_CHECKING:
    from pathlib import Path


def query(database: Path, sql: str) -> list[tuple[Any, ...]]:
    return database_rows(f"sqlite:///{database}", sql)


def pointed(name: str, url: str, database: Path, **more: Any) -> dict[str, Any]:
    """A cookbook recipe pointed at an imitation's origin, writing to ``database``."""
    settings: dict[str, Any] = recipe(name)
    parts = urlsplit(settings["PRODUCT_LIST_URL"])
    settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace(f"{parts.scheme}://{parts.netloc}", url)
    settings["DATABASE_URL"] = f"sqlite:///{database}"
    return {**settings, **more}


@pytest.mark.parametrize("vendor", ["shopify", "woocommerce", "bigcommerce", "magento"])
def test_an_incremental_pass_records_exactly_the_catalogue_s_changes_in_a_page_or_two(vendor, tmp_path):
    from tests.support.imitations import bigcommerce, magento, woocommerce

    kinds = {"shopify": (shopify.Shopify, shopify.TOKEN),
             "woocommerce": (woocommerce.WooCommerce, f"{woocommerce.CONSUMER_KEY}:{woocommerce.CONSUMER_SECRET}"),
             "bigcommerce": (bigcommerce.BigCommerce, bigcommerce.TOKEN), "magento": (magento.Magento, magento.TOKEN)}
    kind, key = kinds[vendor]
    database = tmp_path / "products.db"
    with Served(kind(size=1200)) as api:
        settings = pointed(f"{vendor}-incremental", api.url, database, API_KEY=key, INCREMENTAL_LAG="0s",
                           FULL_PASS_EVERY="10", MAX_REQUESTS_PER_SECOND=20)
        first = run_crawl(settings=settings)
        assert first.returncode == 0, first.stderr[-3000:]
        stored = query(database, "SELECT COUNT(*) FROM products")[0][0]
        assert stored == 1200
        changed = api.call(api.imitation.mutate, changed=0.03, removed=1, added=1)
        api.call(api.imitation.arrivals.clear)
        second = run_crawl(settings=settings)
        assert second.returncode == 0, second.stderr[-3000:]
        arrivals = [a for a in api.arrivals() if a["status"] == 200]
        assert 1 <= len(arrivals) <= 2, [a["query"] for a in arrivals]
        latest = "(SELECT MAX(pass_id) FROM crawl_passes)"
        price_changes = query(database, f"SELECT product_id FROM product_changes WHERE pass_id = {latest} "
                                        "AND field = 'price'")
        ids = {str(row[0]) for row in price_changes}
        assert ids == {str(key) for key in changed["changed"]}
        # The added product is stored; the removed one is not marked: an incremental listing lacks
        # every unchanged product, so it can say nothing of removals.
        assert query(database, "SELECT COUNT(*) FROM products")[0][0] == 1201
        assert query(database, "SELECT COUNT(*) FROM products WHERE removed_at IS NOT NULL") == [(0,)]
        assert query(database, f"SELECT list_since IS NOT NULL FROM crawl_passes WHERE pass_id = {latest}") == [(1,)]


#: Three pages of 250 against the documented bucket of 1,000 points restoring 50 a second: a page
#: costs 752 points, so the second and third wait for theirs (about 25 s in all).
GRAPHQL_SIZE = 750


@pytest.fixture
def graphql_api():
    with Served(ShopifyGraphql(size=GRAPHQL_SIZE)) as api:
        yield api


@pytest.fixture
def fast_graphql_api():
    """Its points restored 20 times faster: the tests of what is listed, not of the budget."""
    with Served(ShopifyGraphql(size=2000, restore=1000.0)) as api:
        yield api


def graphql_arrivals(api: Served) -> list[dict[str, Any]]:
    return [a for a in api.arrivals() if a["path"].endswith("/graphql.json")]


def test_the_graphql_recipe_stores_every_product_within_the_cost_budget(graphql_api, tmp_path):
    database = tmp_path / "products.db"
    settings = pointed("shopify-graphql", graphql_api.url, database, API_KEY=shopify.TOKEN)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert query(database, "SELECT COUNT(*), COUNT(price), COUNT(stock) FROM products") == [(GRAPHQL_SIZE,) * 3]
    arrivals = graphql_arrivals(graphql_api)
    costs = [a.get("cost") or {} for a in arrivals]
    refused = [c for c in costs if c.get("actualQueryCost") is None]
    assert len(refused) <= 0.01 * len(arrivals) + 1, (len(refused), len(arrivals))
    assert all(c.get("requestedQueryCost", 0) <= 1000 for c in costs)
    assert len(arrivals) - len(refused) == GRAPHQL_SIZE // 250 + (GRAPHQL_SIZE % 250 > 0)
    assert shopify.TOKEN not in done.stdout + done.stderr


def test_an_incremental_graphql_pass_lists_only_what_changed(fast_graphql_api, tmp_path):
    graphql_api = fast_graphql_api
    database = tmp_path / "products.db"
    settings = pointed("shopify-graphql-incremental", graphql_api.url, database, API_KEY=shopify.TOKEN,
                       INCREMENTAL_LAG="0s")
    assert run_crawl(settings=settings).returncode == 0
    changed = graphql_api.call(graphql_api.imitation.mutate, changed=0.03, removed=0, added=0)
    graphql_api.call(graphql_api.imitation.arrivals.clear)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    # One page: the changes fit in it (a query the first pass's spending left no points for
    # comes back THROTTLED and is sent again once they are restored).
    arrivals = [a for a in graphql_arrivals(graphql_api) if (a.get("cost") or {}).get("actualQueryCost") is not None]
    assert len(arrivals) == 1
    assert "updated_at:>=" in json.dumps(json.loads(arrivals[0]["body"])["variables"])
    latest = "(SELECT MAX(pass_id) FROM crawl_passes)"
    mutated = {f"gid://shopify/Product/{key}" for key in changed["changed"]}
    # Listed in this pass: exactly the changed products. Their price is the lowest variant's, which a
    # new price on one variant of several may leave as it was: those that moved are among them.
    assert {row[0] for row in query(database, f"SELECT product_id FROM products WHERE pass_id = {latest}")} == mutated
    moved = {row[0] for row in query(database, f"SELECT product_id FROM product_changes WHERE pass_id = {latest} "
                                               "AND field = 'price'")}
    assert moved and moved <= mutated


def test_graphql_errors_that_are_not_throttling_stop_the_crawl_like_a_wrong_mapping(fast_graphql_api, tmp_path):
    graphql_api = fast_graphql_api
    database = tmp_path / "products.db"
    settings = pointed("shopify-graphql", graphql_api.url, database, API_KEY=shopify.TOKEN)
    settings["PRODUCT_LIST_QUERY"] = settings["PRODUCT_LIST_QUERY"].replace("vendor", "vendorName")
    done = run_crawl(settings=settings)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "Stopping the crawl" in done.stderr
    assert query(database, "SELECT COUNT(*) FROM products") == [(0,)]


def test_a_403_that_says_the_limit_is_spent_is_waited_out_and_a_plain_403_stops(tmp_path):
    with Served(github.GitHub(size=200, limit=10, window=3.0)) as api:
        database = tmp_path / "products.db"
        # GUARD_AUTH_FAILURES=1: a single 403 counted as a refused key would stop the crawl.
        settings = {"PRODUCT_LIST_URL": f"{api.url}/products?per_page=10&page=1", "API_KEY": github.TOKEN,
                    "DATABASE_URL": f"sqlite:///{database}", "MAX_REQUESTS_PER_SECOND": 50,
                    "RATE_LIMIT_HEADERS": "off", "RETRY_BACKOFF_BASE": 0.2, "MAX_RETRIES": 20,
                    "GUARD_AUTH_FAILURES": 1}
        done = run_crawl(settings=settings)
        assert done.returncode == 0, done.stderr[-3000:]
        arrivals = api.arrivals()
        statuses = Counter(a["status"] for a in arrivals)
        assert statuses[403] > 0, statuses  # the limit was reached: 20 pages against 10 per 3 s
        # Each 403 is waited out until the reset it announced (backoff alone would ask again at once).
        for refused in (a for a in arrivals if a["status"] == 403):
            early = [a for a in arrivals if refused["time"] < a["time"] < refused["reset"]]
            assert early == [], (refused["reset"], [(a["time"], a["status"]) for a in early])
        assert statuses[403] == 1, statuses  # 20 pages, one after another: one window overrun
        assert query(database, "SELECT COUNT(*) FROM products") == [(200,)]
        assert "Stopping the crawl" not in done.stderr
        assert dumped_stat(done.stderr, RATELIMIT_429) == statuses[403]  # counted with the 429s
        # A plain 403 (a valid token that may not read) is a refused key: exit 3.
        refused = run_crawl(settings={**settings, "API_KEY": github.FORBIDDEN_TOKEN,
                                      "DATABASE_URL": f"sqlite:///{tmp_path / 'refused.db'}"})
        assert refused.returncode == 3, refused.stderr[-3000:]


def test_best_buy_s_over_quota_403s_are_the_budget_not_a_refused_key(tmp_path):
    """Best Buy's listing at 20 requests a second against its 5: the 403s are waited out."""
    with Served(bestbuy.BestBuy(size=1500)) as api:
        database = tmp_path / "products.db"
        # GUARD_AUTH_FAILURES=1: a single 403 counted as a refused key would stop the crawl.
        settings = pointed("bestbuy-list", api.url, database, API_KEY=bestbuy.API_KEY, MAX_REQUESTS_PER_SECOND=20,
                           RETRY_BACKOFF_BASE=0.3, MAX_RETRIES=10, GUARD_AUTH_FAILURES=1)
        done = run_crawl(settings=settings)
        assert done.returncode == 0, done.stderr[-3000:]
        assert query(database, "SELECT COUNT(*) FROM products") == [(1500,)]
        refused = Counter(a["status"] for a in api.arrivals())[403]
        assert refused > 0 and dumped_stat(done.stderr, RATELIMIT_429) == refused
