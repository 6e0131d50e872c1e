"""Listing passes (PRODUCT_LIST_URL) crawled for real against the imitations of six vendors' list endpoints.

The imitations (tests/support/imitations/) follow each vendor's documented
pagination, end of the list and budget, not our code: every product must end
stored with its values, in at most the listing's pages plus one request, with
no request refused for its credentials and at most 1 % answered 429, and one
INFO line naming its pagination style; a listing without its total ends at
Magento's echo of the last page, storing it once; a listing that no longer
has a PRODUCT_FIELDS path stops at field drift (exit 3) writing nothing; a pass
resumes after kill -9 at the first page not stored whole; two instances share
one numbered listing through Redis (no page twice) and a cursor chain (its
walker killed, the other takes over); a complete listing marks what it lacked
removed, an interrupted or incremental one never does.
"""

from __future__ import annotations

import math
import re
import signal
import sqlite3
from collections import Counter
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import pymysql
import pytest

from tests.support.crawls import ROOT, finish, run_crawl, start_crawl, wait_for
from tests.support.imitations import magento
from tests.support.imitations.served import ImitationsProcess
from tests.support.logs import dumped_stat, log_lines
from tests.support.recipes import APIS, money, recipe
from tests.support.services import REDIS_URL
from tests.support.services import query as database_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

#: What each vendor's listed product must become (the per-id recipes' rows: the same objects), by vendor.
ROWS: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {
    **{name: api.row for name, api in APIS.items()},
    "magento": lambda p: (p["sku"], p["name"], money(p["price"]), p["extension_attributes"]["stock_item"]["qty"],
                          None, None, None, None),
}
KEYS = {**{name: api.key for name, api in APIS.items()}, "magento": magento.TOKEN}
#: The list endpoint's path of each vendor (its arrivals).
LIST_PATHS = {"shopify": "/admin/api/2024-10/products.json", "woocommerce": "/wp-json/wc/v3/products",
              "bigcommerce": "/stores/abc123xyz/v3/catalog/products", "magento": "/rest/default/V1/products",
              "bestbuy": "/v1/products", "dummyjson": "/products"}
PAGE_SIZE_PARAMS = ("limit", "per_page", "pageSize", "searchCriteria[pageSize]")
COLUMNS = "product_id, name, price, stock, category, brand, rating, sales_count"


@pytest.fixture(scope="module")
def apis() -> Iterator[ImitationsProcess]:
    with ImitationsProcess() as process:
        yield process


def listing_settings(apis: ImitationsProcess, name: str, database: Path, *, form: str = "list",
                     **more: Any) -> dict[str, Any]:
    """The vendor's listing recipe (``NAME-list``, or ``NAME-FORM``), pointed at its imitation, with its real key."""
    settings: dict[str, Any] = recipe(f"{name}-{form}")
    parts = urlsplit(settings["PRODUCT_LIST_URL"])
    settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace(f"{parts.scheme}://{parts.netloc}",
                                                                        apis.url(name))
    if KEYS[name] is not None:
        settings["API_KEY"] = KEYS[name]
    settings["DATABASE_URL"] = f"sqlite:///{database}"
    return {**settings, **more}


def rows(database: Path | str, where: str = "") -> list[tuple[Any, ...]]:
    """The stored products: of a SQLite file, or of a database by its URL."""
    url = database if isinstance(database, str) else f"sqlite:///{database}"
    found = database_rows(url, f"SELECT {COLUMNS} FROM products {where} ORDER BY product_id")
    return [(*row[:2], money(row[2]), row[3], *row[4:6], money(row[6]), row[7]) for row in found]


def query(database: Path, sql: str) -> list[tuple[Any, ...]]:
    return database_rows(f"sqlite:///{database}", sql)


def expected(apis: ImitationsProcess, name: str) -> list[tuple[Any, ...]]:
    return sorted(ROWS[name](product) for product in apis.catalogue(name)["products"])


def list_arrivals(apis: ImitationsProcess, name: str) -> list[dict[str, Any]]:
    return [a for a in apis.arrivals(name) if a["path"].startswith(LIST_PATHS[name]) and
            a["path"].rstrip("/").count("/") == LIST_PATHS[name].count("/")]


def page_size(settings: dict[str, Any]) -> int:
    query_ = parse_qs(urlsplit(settings["PRODUCT_LIST_URL"]).query)
    return next(int(query_[name][0]) for name in PAGE_SIZE_PARAMS if name in query_)


def listing_lines(stderr: str) -> list[str]:
    """The INFO lines that say which pagination style a listing has (``Listing URL: style``)."""
    return [line.partition("] INFO: ")[2] for line in log_lines(stderr, "INFO") if "] INFO: Listing " in line]


#: The pagination style each cookbook listing is recognised as (its INFO line), by recipe; {pages}: its pages.
STYLES = {
    "shopify-list": 'next page from the Link header\'s rel="next"',
    "woocommerce-list": "page numbers in ?page=, page size in ?per_page=; {pages} pages from "
                        "header:X-WP-TotalPages (counts pages)",
    "bigcommerce-list": "page numbers in ?page=, page size in ?limit=; {pages} pages from "
                        "body:meta.pagination.total_pages (counts pages)",
    "magento-list": "page numbers in ?searchCriteria[currentPage]=, page size in ?searchCriteria[pageSize]=; "
                    "{pages} pages from body:total_count (counts items)",
    "bestbuy-list": "page numbers in ?page=, page size in ?pageSize=; {pages} pages from body:totalPages "
                    "(counts pages)",
    "bestbuy-cursor-list": "cursor in the body at nextCursorMark, sent back as ?cursorMark=",
    "dummyjson-list": "offsets in ?skip=, page size in ?limit=; {pages} pages from body:total (counts items)",
}
#: Every listing block of docs/cookbook.md: one that STYLES lacks fails here, not uncrawled.
LIST_RECIPES = re.findall(r"<!-- cookbook: ([a-z-]+-list) -->", (ROOT / "docs" / "cookbook.md").read_text())


@pytest.mark.parametrize("recipe_name", LIST_RECIPES)
def test_each_cookbook_listing_stores_every_product_in_pages_plus_one_request(apis, recipe_name, tmp_path):
    apis.reset()
    name, _, form = recipe_name.partition("-")
    database = tmp_path / "products.db"
    settings = listing_settings(apis, name, database, form=form)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(database) == expected(apis, name)
    arrivals = list_arrivals(apis, name)
    statuses = Counter(a["status"] for a in arrivals)
    pages = math.ceil(len(apis.catalogue(name)["products"]) / page_size(settings))
    assert statuses[401] == statuses[403] == 0, statuses
    assert statuses[429] <= 0.01 * len(arrivals), statuses
    assert len(arrivals) - statuses[429] <= pages + 1, (len(arrivals), pages)
    assert KEYS[name] is None or KEYS[name] not in done.stdout + done.stderr
    # The pass is complete: every page stored, its summary written.
    assert query(database, "SELECT stored, failed FROM crawl_passes") == [(len(expected(apis, name)), 0)]
    # One INFO line says which style was recognised, and from what.
    assert listing_lines(done.stderr) == [
        f"Listing {settings['PRODUCT_LIST_URL']}: {STYLES[recipe_name].format(pages=pages)}"]


def test_a_magento_listing_without_its_total_ends_at_the_echo_of_the_last_page(apis, tmp_path):
    """Adobe's filtered answers (``fields=items[...]``) lack total_count unless it is named: 300 products at
    100 a page are 3 pages, and page 4, past the end, answers page 3 again."""
    apis.reset()
    database = tmp_path / "products.db"
    settings = listing_settings(apis, "magento", database)
    settings["PRODUCT_LIST_URL"] = (settings["PRODUCT_LIST_URL"].replace("[pageSize]=200", "[pageSize]=100")
                                    + "&fields=items[sku,name,price,extension_attributes[stock_item[qty]]]")
    assert len(expected(apis, "magento")) == 300  # whole pages: the last one is full, so only the echo ends it
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(database) == expected(apis, "magento")
    [line] = listing_lines(done.stderr)
    assert line.endswith("; no total: the listing ends at an empty page, a page with fewer products than page 1 "
                         "or a page that repeats the one before"), line
    asked = [parse_qs(a["query"])["searchCriteria[currentPage]"] for a in list_arrivals(apis, "magento")]
    assert sorted(asked) == [["1"], ["2"], ["3"], ["4"]]  # the pages, and the echo
    # The echo ends the listing: its products (page 3's) are not written a second time.
    assert query(database, "SELECT page, products FROM listing_pages ORDER BY page") == [
        (1, 100), (2, 100), (3, 100), (4, 0)]
    assert dumped_stat(done.stderr, "productcrawler/stored") == 300
    assert query(database, "SELECT stored, failed FROM crawl_passes") == [(300, 0)]


def test_a_listing_whose_field_paths_are_gone_stops_with_exit_3_and_writes_nothing(apis, tmp_path):
    """Field drift on a listing: after a complete pass, the listing trimmed to ``fields=id,title,vendor,
    product_type`` lacks ``variants``, where PRODUCT_FIELDS reads price and stock (300 products, 3 pages)."""
    apis.rebuild("shopify")
    apis.reset()
    database = tmp_path / "products.db"
    settings = listing_settings(apis, "shopify", database, MAX_REQUESTS_PER_SECOND=20)
    settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace("limit=250", "limit=100")
    first = run_crawl(settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    before = rows(database)
    assert before == expected(apis, "shopify") and len(before) == 300
    trimmed = {**settings, "PRODUCT_LIST_URL": settings["PRODUCT_LIST_URL"] + "&fields=id,title,vendor,product_type"}
    second = run_crawl(settings=trimmed)
    assert second.returncode == 3, second.stderr[-3000:]
    [error] = log_lines(second.stderr, "ERROR")
    assert "Stopping the crawl: field drift" in error
    for column in ("price", "stock"):
        assert f"{column} (non-NULL in 100% of the 300 products pass 1 stored" in error, error
    assert "category (non-NULL" not in error and "brand (non-NULL" not in error  # still listed: not named
    assert "the answers now carry the keys: id, title, vendor, product_type;" in error, error
    assert "price=<its new path>" in error
    # Not one row of the second pass: every stored price and stock is intact, no change recorded, no page done.
    assert rows(database) == before
    assert query(database, "SELECT COUNT(*) FROM product_changes WHERE pass_id = 2") == [(0,)]
    assert query(database, "SELECT COUNT(*) FROM listing_pages WHERE pass_id = 2 AND done_at IS NOT NULL") == [(0,)]
    assert query(database, "SELECT pass_id, finished_at IS NULL FROM crawl_passes ORDER BY pass_id") == [
        (1, 0), (2, 1)]


def test_a_list_page_answering_503_once_is_retried_and_the_pass_completes(apis, tmp_path):
    """Shopify's 2 pages of 250: page 2's first request (the 2nd list request) answers 503."""
    apis.rebuild("shopify")
    apis.reset()
    apis.faults("shopify", {"list#2": "once"})
    database = tmp_path / "products.db"
    # The retry's backoff (1 to 2 s) is well above the pace the budget headers allow (10 a second).
    settings = listing_settings(apis, "shopify", database, MAX_REQUESTS_PER_SECOND=20, RETRY_BACKOFF_BASE=2)
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(database) == expected(apis, "shopify")
    first, refused, again = list_arrivals(apis, "shopify")
    assert (first["status"], refused["status"], again["status"]) == (200, 503, 200)
    assert again["query"] == refused["query"] != first["query"]
    assert again["time"] - refused["time"] >= 1.0
    assert dumped_stat(done.stderr, "retry/reason_count/http_503") == 1
    assert query(database, "SELECT stored, failed FROM crawl_passes") == [(len(expected(apis, "shopify")), 0)]
    assert query(database, "SELECT page, failure FROM listing_pages ORDER BY page") == [(1, None), (2, None)]
    assert query(database, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]


def test_the_shopify_listing_keeps_the_documented_budget_with_no_429(apis, tmp_path):
    """2,500 products at limit=50: 50 pages against a bucket of 40 that leaks 2 a second."""
    apis.rebuild("shopify", 2500)
    apis.reset()
    try:
        database = tmp_path / "products.db"
        settings = listing_settings(apis, "shopify", database)
        settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace("limit=250", "limit=50")
        settings["MAX_REQUESTS_PER_SECOND"] = 50  # the answers' call-limit header is what holds it
        done = run_crawl(settings=settings)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(rows(database)) == 2500
        statuses = Counter(a["status"] for a in list_arrivals(apis, "shopify"))
        assert statuses == {200: 50}, statuses
    finally:
        apis.rebuild("shopify")


def test_a_complete_listing_marks_what_it_lacked_removed_and_an_incremental_one_lists_only_the_changes(
        apis, tmp_path):
    apis.rebuild("shopify")
    apis.reset()
    database = tmp_path / "products.db"
    settings = listing_settings(apis, "shopify", database, MAX_REQUESTS_PER_SECOND=20)
    assert run_crawl(settings=settings).returncode == 0
    changed = apis.mutate("shopify", changed=0.05, removed=2, added=1)
    # An incremental pass: only what changed since the last complete pass (minus the lag) is listed.
    incremental = {**settings, "PRODUCT_LIST_URL": settings["PRODUCT_LIST_URL"] + "&updated_at_min={since}",
                   "INCREMENTAL_LAG": "0s", "FULL_PASS_EVERY": "10"}
    assert run_crawl(settings=incremental).returncode == 0  # its first pass lists everything
    apis.reset()
    changed = apis.mutate("shopify", changed=0.05, removed=2, added=1)
    done = run_crawl(settings=incremental)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = list_arrivals(apis, "shopify")
    assert len(listed) == 1 and "updated_at_min=" in listed[0]["query"]
    changes = query(database, "SELECT product_id, field FROM product_changes WHERE pass_id = "
                              "(SELECT MAX(pass_id) FROM crawl_passes) ORDER BY product_id")
    assert {product_id for product_id, field in changes if field == "price"} == {int(k) for k in changed["changed"]}
    # Incremental: the removed products are not marked, whatever the listing lacked.
    assert query(database, "SELECT COUNT(*) FROM products WHERE removed_at IS NOT NULL") == [(2,)]
    assert {row[0] for row in rows(database)} >= {int(k) for k in changed["added"]}
    # A full pass (FULL_PASS_EVERY=1) finds the removals.
    assert run_crawl(settings={**incremental, "FULL_PASS_EVERY": "1"}).returncode == 0
    removed = {row[0] for row in query(database, "SELECT product_id FROM products WHERE removed_at IS NOT NULL")}
    assert removed >= {int(k) for k in changed["removed"]}
    assert len(removed) == 4


def test_a_failed_or_interrupted_listing_or_list_removals_false_marks_nothing_removed(apis, tmp_path):
    """3 products leave the catalogue after a complete pass. A pass whose page 2 fails, one stopped
    mid-walk, and that one resumed to its end with LIST_REMOVALS=false mark none of them; the next
    complete pass marks the 3."""
    apis.rebuild("shopify")
    apis.reset()
    database = tmp_path / "products.db"
    # 6 pages of 50, asked one at a time (a cursor chain); a failing page is retried once, soon.
    settings = listing_settings(apis, "shopify", database, MAX_REQUESTS_PER_SECOND=20, MAX_RETRIES=1,
                                RETRY_BACKOFF_BASE=0.1)
    settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace("limit=250", "limit=50")
    assert run_crawl(settings=settings).returncode == 0
    gone = sorted(int(key) for key in apis.mutate("shopify", changed=0, removed=3, added=0)["removed"])
    removed = "SELECT product_id FROM products WHERE removed_at IS NOT NULL ORDER BY product_id"
    last_pass = ("SELECT pass_id, finished_at IS NOT NULL, failed, removed FROM crawl_passes "
                 "ORDER BY pass_id DESC LIMIT 1")

    # Page 2 answers its request and its one retry (the 2nd and 3rd list requests) with a 500: the pass
    # ends with that page failed, as a pass by id ends with its failed ids (exit 0).
    apis.reset()
    apis.faults("shopify", {"list#2": "always", "list#3": "always"})
    failed = run_crawl(settings=settings)
    assert failed.returncode == 0, failed.stderr[-3000:]
    assert [a["status"] for a in list_arrivals(apis, "shopify")] == [200, 500, 500]
    assert re.search(r"ERROR: Listing page 2 \(\S+\) failed: http_500; the listing is not complete this pass, "
                     r"and no product is marked removed", failed.stderr), failed.stderr[-3000:]
    assert query(database, last_pass) == [(2, 1, 1, 0)]
    assert query(database, removed) == []

    # Stopped after 2 of its 6 pages are stored: SIGTERM, so the pass is closed by the code that would
    # finish a complete one (kill -9 closes nothing). Then resumed, complete, with LIST_REMOVALS=false.
    apis.reset()
    process = start_crawl(settings={**settings, "MAX_REQUESTS_PER_SECOND": 2})
    pages_done = "SELECT COUNT(*) FROM listing_pages WHERE pass_id = 3 AND done_at IS NOT NULL"
    wait_for(lambda: query(database, pages_done)[0][0] >= 2, process, "2 pages stored")
    process.send_signal(signal.SIGTERM)
    code, output = finish(process)
    assert query(database, removed) == []
    assert code == 0 and "Pass 3 is not complete" in output, output[-3000:]
    resumed = run_crawl(settings={**settings, "LIST_REMOVALS": "false"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resuming pass 3" in resumed.stderr
    assert query(database, last_pass) == [(3, 1, 0, 0)]
    assert query(database, removed) == []

    # A complete pass: the 3 are removed as a 404 removes a product, with a "removed" change row.
    assert run_crawl(settings=settings).returncode == 0
    assert query(database, last_pass) == [(4, 1, 0, 3)]
    assert query(database, removed) == [(key,) for key in gone]
    assert query(database, "SELECT c.product_id, c.pass_id, c.old_value, c.new_value = SUBSTR(p.removed_at, 1, 19) "
                           "FROM product_changes c JOIN products p ON p.product_id = c.product_id "
                           "WHERE c.field = 'removed' ORDER BY c.product_id") == [(key, 4, None, 1) for key in gone]


#: What the run after the kill says as it opens the pass it resumes, by store: the pages done of the 30.
RESUMED = {"sqlite": r"Resuming pass 1 over .*: (\d+) of the 30 pages known so far already done",
           "redis": r"Joined pass 1 over .* through Redis as instance \S+ \((\d+) of 30 done\)"}


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_listing_killed_mid_walk_resumes_at_the_first_page_not_stored(apis, store, request, tmp_path):
    """Its only instance killed: a pass of one process on SQLite, and a pass shared through Redis on MySQL."""
    apis.rebuild("woocommerce", 3000)
    apis.reset()
    try:
        settings = listing_settings(apis, "woocommerce", tmp_path / "products.db", MAX_REQUESTS_PER_SECOND=3)
        if store == "redis":
            # A short heartbeat: the restarted instance takes back the dead one's leases within 3 s.
            settings.update(DATABASE_URL=request.getfixturevalue("mysql_url"), REDIS_URL=REDIS_URL,
                            REDIS_KEY_PREFIX=request.getfixturevalue("redis_prefix"), REDIS_HEARTBEAT_TTL=3)
        url = settings["DATABASE_URL"]
        done_pages = "SELECT page FROM listing_pages WHERE done_at IS NOT NULL"
        process = start_crawl(settings=settings)
        wait_for(lambda: len(query_or_none(url, done_pages) or ()) >= 5, process, "5 pages stored")
        process.send_signal(signal.SIGKILL)
        finish(process)
        done_before = {row[0] for row in database_rows(url, done_pages)}
        asked_before = len(list_arrivals(apis, "woocommerce"))
        apis.reset()
        done = run_crawl(settings={**settings, "MAX_REQUESTS_PER_SECOND": 50})
        assert done.returncode == 0, done.stderr[-3000:]
        resumed = re.search(RESUMED[store], done.stderr)
        assert resumed, done.stderr[-3000:]
        assert rows(url) == expected(apis, "woocommerce")
        asked_after = [int(parse_qs(a["query"])["page"][0]) for a in list_arrivals(apis, "woocommerce")]
        # No page stored before the kill is asked again; only the ones in flight then are. Redis learns
        # that a page is done just after the database commits it: a kill between the two leaves that
        # page leased, in flight, and it is asked again.
        unacknowledged = len(done_before) - int(resumed[1])
        assert unacknowledged in ((0,) if store == "sqlite" else (0, 1)), (done_before, resumed[0])
        assert len(done_before & set(asked_after)) == unacknowledged, (done_before, asked_after)
        assert len(asked_after) + len(done_before) <= 30 + 3 + unacknowledged
        assert asked_before >= len(done_before)
    finally:
        apis.rebuild("woocommerce")


def query_or_none(url: str, sql: str) -> list[tuple[Any, ...]] | None:
    """The rows, or None while the crawl has not yet made its tables."""
    try:
        return database_rows(url, sql)
    except (sqlite3.Error, pymysql.Error):
        return None


@pytest.mark.parametrize("name", ["woocommerce", "shopify"])
def test_two_instances_share_one_listing_through_redis(apis, name, redis_prefix, tmp_path, mysql_url):
    """Numbered pages (WooCommerce): leased, each once; a cursor chain (Shopify): walked by one at a time."""
    apis.rebuild(name, 2000)
    apis.reset()
    try:
        # 40 pages at 4 a second, shared through Redis: long enough that both instances take part.
        settings = listing_settings(apis, name, tmp_path / "unused.db", REDIS_URL=REDIS_URL,
                                    REDIS_KEY_PREFIX=redis_prefix, DATABASE_URL=mysql_url,
                                    MAX_REQUESTS_PER_SECOND=4)
        settings["PRODUCT_LIST_URL"] = (settings["PRODUCT_LIST_URL"].replace("limit=250", "limit=50")
                                        .replace("per_page=100", "per_page=50"))
        first, second = start_crawl(settings=settings), start_crawl(settings=settings)
        (code_1, out_1), (code_2, out_2) = finish(first), finish(second)
        assert code_1 == code_2 == 0, (out_1[-2000:], out_2[-2000:])
        from tests.support.services import mysql_query

        stored = mysql_query(mysql_url, "SELECT COUNT(*), COUNT(DISTINCT product_id) FROM products")
        assert stored == [(2000, 2000)]
        arrivals = list_arrivals(apis, name)
        assert len(arrivals) <= 40 + 1 + 2, len(arrivals)  # the pages, plus one, plus a page in flight twice
        if name == "woocommerce":
            pages = Counter(int(parse_qs(a["query"])["page"][0]) for a in arrivals if a["status"] == 200)
            assert max(pages.values()) == 1, pages
            # Both instances fetched pages: the numbered listing was shared.
            assert re.search(r": [1-9][0-9]* stored", out_1) and re.search(r": [1-9][0-9]* stored", out_2), \
                (out_1[-600:], out_2[-600:])
    finally:
        apis.rebuild(name)


def test_the_walker_of_a_cursor_chain_killed_the_other_instance_takes_over(apis, redis_prefix, tmp_path,
                                                                             mysql_url):
    # 20 pages of 50 at 2 a second: the walker is killed at 400 stored, with 12 pages still to walk.
    apis.rebuild("shopify", 1000)
    apis.reset()
    try:
        settings = listing_settings(apis, "shopify", tmp_path / "unused.db", REDIS_URL=REDIS_URL,
                                    REDIS_KEY_PREFIX=redis_prefix, DATABASE_URL=mysql_url,
                                    MAX_REQUESTS_PER_SECOND=2, REDIS_HEARTBEAT_TTL=3)
        settings["PRODUCT_LIST_URL"] = settings["PRODUCT_LIST_URL"].replace("limit=250", "limit=50")
        from tests.support.services import mysql_query, stored_count

        walker = start_crawl(settings=settings)
        wait_for(lambda: stored_count(mysql_url) >= 200, walker, "200 products stored")
        other = start_crawl(settings=settings)
        wait_for(lambda: stored_count(mysql_url) >= 400, walker, "400 products stored")
        walker.send_signal(signal.SIGKILL)
        finish(walker)
        code, out = finish(other)
        assert code == 0, out[-3000:]
        assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products") == [(1000,)]
        assert mysql_query(mysql_url, "SELECT finished_at IS NOT NULL, failed FROM crawl_passes") == [(1, 0)]
    finally:
        apis.rebuild("shopify")


def test_product_ids_list_fetches_each_listed_product_by_id(apis, tmp_path):
    apis.reset()
    database = tmp_path / "products.db"
    settings = listing_settings(apis, "woocommerce", database, MAX_REQUESTS_PER_SECOND=100, PRODUCT_IDS="list")
    settings["PRODUCT_URL"] = recipe("woocommerce")["PRODUCT_URL"].replace("https://shop.example.com",
                                                                           apis.url("woocommerce"))
    done = run_crawl(settings=settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(database) == expected(apis, "woocommerce")
    by_id = [a for a in apis.arrivals("woocommerce") if a["path"].startswith("/wp-json/wc/v3/products/")]
    assert len(by_id) == len(expected(apis, "woocommerce"))
    pages = math.ceil(len(expected(apis, "woocommerce")) / 100)
    assert query(database, "SELECT COUNT(*), COUNT(done_at) FROM listing_pages") == [(pages, pages)]


def test_a_wrong_key_stops_a_listing_with_exit_3_and_stores_nothing(apis, tmp_path):
    apis.reset()
    database = tmp_path / "products.db"
    settings = listing_settings(apis, "shopify", database, API_KEY="shpat_wrong")
    done = run_crawl(settings=settings)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "Stopping the crawl" in done.stderr
    assert query_or_none(f"sqlite:///{database}", "SELECT COUNT(*) FROM products") in (None, [(0,)])
    assert query(database, "SELECT finished_at FROM crawl_passes") == [(None,)]


def test_a_price_in_a_listed_product_is_cleaned_as_by_id(apis, tmp_path):
    """The listing and the per-id answers of one imitation give the same rows."""
    apis.reset()
    listed, by_id = tmp_path / "listed.db", tmp_path / "by_id.db"
    assert run_crawl(settings=listing_settings(apis, "dummyjson", listed)).returncode == 0
    per_id = {**recipe("dummyjson"), "DATABASE_URL": f"sqlite:///{by_id}"}
    per_id["PRODUCT_URL"] = per_id["PRODUCT_URL"].replace("https://dummyjson.com", apis.url("dummyjson"))
    count = len(expected(apis, "dummyjson"))
    assert run_crawl("-a", "start_id=1", "-a", f"end_id={count}", settings=per_id).returncode == 0
    assert rows(listed) == rows(by_id)
    assert all(isinstance(row[2], Decimal) for row in rows(listed))
