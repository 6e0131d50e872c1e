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
import queue
import signal
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from productcrawler.stat_keys import RATELIMIT_429
from tests.support.crawls import finish, read_lines, run_crawl, start_crawl, wait_for
from tests.support.imitations import bestbuy, github, shopify
from tests.support.imitations.served import Served
from tests.support.imitations.shopify_graphql import ShopifyGraphql
from tests.support.logs import dumped_stat, log_lines
from tests.support.recipes import recipe
from tests.support.services import REDIS_URL, mysql_query
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


def paged(settings: dict[str, Any], size: int) -> dict[str, Any]:
    """The recipe's query with pages of ``size`` products (2 + 3 points each)."""
    return {**settings, "PRODUCT_LIST_QUERY": settings["PRODUCT_LIST_QUERY"].replace("first: 250", f"first: {size}")}


def refused_throttled(arrivals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in arrivals if (a.get("cost") or {}).get("actualQueryCost") is None]


def test_the_graphql_recipe_stores_every_product_within_the_cost_budget(graphql_api, tmp_path):
    database = tmp_path / "products.db"
    settings = pointed("shopify-graphql", graphql_api.url, database, API_KEY=shopify.TOKEN)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert query(database, "SELECT COUNT(*), COUNT(price), COUNT(stock) FROM products") == [(GRAPHQL_SIZE,) * 3]
    arrivals = graphql_arrivals(graphql_api)
    refused = refused_throttled(arrivals)
    # No allowance of one: the bucket is full when the crawl starts, and from then on it is read exactly.
    assert len(refused) <= 0.01 * len(arrivals), (len(refused), len(arrivals))
    assert all((a.get("cost") or {}).get("requestedQueryCost", 0) <= 1000 for a in arrivals)
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
    assert "check PRODUCT_LIST_QUERY" in done.stderr  # the query is wrong, not PRODUCT_FIELDS
    assert query(database, "SELECT COUNT(*) FROM products") == [(0,)]


@pytest.fixture
def small_bucket_api():
    """5 pages of 50 (152 points each) against a bucket of 300 restoring 100 a second: each query after the
    first spends what the bucket restored since the one before."""
    with Served(ShopifyGraphql(size=250, maximum=300, restore=100.0)) as api:
        yield api


@pytest.mark.parametrize("formats", ["auto", "shopify"])
def test_the_graphql_cost_paces_the_queries_whatever_format_rate_limit_headers_names(
        small_bucket_api, formats, tmp_path):
    database = tmp_path / "products.db"
    settings = paged(pointed("shopify-graphql", small_bucket_api.url, database, API_KEY=shopify.TOKEN,
                             RATE_LIMIT_HEADERS=formats), 50)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert query(database, "SELECT COUNT(*) FROM products") == [(250,)]
    arrivals = graphql_arrivals(small_bucket_api)
    assert refused_throttled(arrivals) == [], len(arrivals)
    assert dumped_stat(done.stderr, "productcrawler/ratelimit/budget/format") == "graphql-cost"


def test_a_throttled_answer_is_retried_once_its_points_are_back_and_nothing_fails(small_bucket_api, tmp_path):
    """RATE_LIMIT_HEADERS=off: the queries go at the cap, and the bucket refuses them THROTTLED."""
    database = tmp_path / "products.db"
    settings = paged(pointed("shopify-graphql", small_bucket_api.url, database, API_KEY=shopify.TOKEN,
                             RATE_LIMIT_HEADERS="off"), 50)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert query(database, "SELECT COUNT(*), COUNT(DISTINCT product_id) FROM products") == [(250, 250)]
    arrivals = graphql_arrivals(small_bucket_api)
    throttled = refused_throttled(arrivals)
    assert throttled, len(arrivals)
    assert len(arrivals) - len(throttled) == 5  # each page answered once
    # Counted with the 429s, and each retry waited for its points: one THROTTLED per page at most.
    assert dumped_stat(done.stderr, "productcrawler/ratelimit/responses_429") == len(throttled)
    assert len(throttled) <= 4, len(throttled)
    assert query(database, "SELECT COUNT(*), COUNT(done_at), COUNT(failure) FROM listing_pages") == [(5, 5, 0)]
    assert query(database, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
    assert query(database, "SELECT finished_at IS NOT NULL, failed FROM crawl_passes") == [(1, 0)]


def test_two_instances_share_the_graphql_cost_budget_through_redis(mysql_url, redis_prefix, tmp_path):
    """One instance walks the cursor chain, the other waits beside it; an operator stops the first just
    after a query and the second takes the chain over. Its first query must wait for the points the
    first one spent, which only the budget shared through Redis tells it: on its own it would send it
    at once and be refused THROTTLED.

    10 pages of 50 (152 points each) against a bucket of 300 restoring 100 a second: each page waits
    about 1.4 s for its points, so the bucket is all but empty after every query; the second instance
    joins after two pages, with pages to spare should it be slow to start.
    """
    with Served(ShopifyGraphql(size=500, maximum=300, restore=100.0)) as api:
        settings = paged(pointed("shopify-graphql", api.url, tmp_path / "unused.db", API_KEY=shopify.TOKEN,
                                 DATABASE_URL=mysql_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix), 50)

        def answered() -> int:
            return sum(a.get("status") == 200 for a in graphql_arrivals(api))

        first = start_crawl(settings=settings)
        second = None
        try:
            wait_for(lambda: answered() >= 2, first, "two pages")
            second = start_crawl(settings=settings)
            second_log: list[str] = []
            threading.Thread(target=read_lines, args=(second.stdout, queue.Queue(), second_log), daemon=True).start()
            wait_for(lambda: any("Joined pass 1 " in line for line in second_log), second, "the second instance")
            count = answered()
            wait_for(lambda: answered() > count, first, "another page")
            first.send_signal(signal.SIGINT)
            first_code, first_output = finish(first)
            second_code = second.wait(timeout=120)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
        arrivals = graphql_arrivals(api)
    second_output = "".join(second_log)
    assert first_code == second_code == 0, (first_output[-3000:], second_output[-3000:])
    assert mysql_query(mysql_url, "SELECT COUNT(*), COUNT(DISTINCT product_id) FROM products") == [(500, 500)]
    throttled = refused_throttled(arrivals)
    print(f"{len(throttled)} THROTTLED of {len(arrivals)} queries")
    # No allowance of one: the bucket is full when the crawl starts, and from then on it is read exactly.
    assert len(throttled) <= 0.01 * len(arrivals), (len(throttled), len(arrivals))
    assert all((a.get("cost") or {}).get("requestedQueryCost", 0) <= 1000 for a in arrivals)
    # Each page answered once (the one the first instance had in flight when stopped may be asked again).
    assert len(arrivals) - len(throttled) <= 10 + 1, len(arrivals)
    for output in (first_output, second_output):
        assert (dumped_stat(output, "downloader/request_method_count/POST") or 0) > 0, output[-3000:]


def test_a_query_over_the_single_query_maximum_stops_the_crawl_at_once_saying_what_it_costs(
        fast_graphql_api, tmp_path):
    database = tmp_path / "products.db"
    settings = pointed("shopify-graphql", fast_graphql_api.url, database, API_KEY=shopify.TOKEN)
    # One variant each as well: 250 products cost 2 + 250 * (3 + 3) points, where a query may cost 1,000.
    settings["PRODUCT_LIST_QUERY"] = settings["PRODUCT_LIST_QUERY"].replace(
        "totalInventory", "totalInventory variants(first: 1) { nodes { id } }")
    done = run_crawl(settings=settings)
    assert done.returncode == 3, done.stderr[-3000:]
    [stop] = [line for line in log_lines(done.stderr, "ERROR") if "Stopping the crawl" in line]
    assert "Query cost is 1502, which exceeds the single query max cost limit (1000)" in stop, stop
    assert "check PRODUCT_LIST_QUERY" in stop, stop
    # Not asked again: the same query costs as much the next time.
    assert [a["status"] for a in graphql_arrivals(fast_graphql_api)] == [200]
    assert query(database, "SELECT COUNT(*) FROM products") == [(0,)]


def test_a_query_read_from_a_file_is_the_one_posted(tmp_path):
    with Served(ShopifyGraphql(size=100, restore=1000.0)) as api:
        database = tmp_path / "products.db"
        settings = paged(pointed("shopify-graphql", api.url, database, API_KEY=shopify.TOKEN), 50)
        # As a file is written by hand: over several lines.
        text = settings["PRODUCT_LIST_QUERY"].replace(" { edges", "\n  { edges").replace(" pageInfo", "\n  pageInfo")
        path = tmp_path / "products.graphql"
        path.write_text(text + "\n", encoding="utf-8")
        done = run_crawl(settings={**settings, "PRODUCT_LIST_QUERY": f"@{path}"})
        assert done.returncode == 0, done.stderr[-3000:]
        arrivals = graphql_arrivals(api)
    assert query(database, "SELECT COUNT(*) FROM products") == [(100,)]
    assert len(arrivals) == 2
    assert all(json.loads(a["body"])["query"] == text for a in arrivals), arrivals[0]["body"]


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
