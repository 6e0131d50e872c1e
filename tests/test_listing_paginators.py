"""Listing pagination (productcrawler/listing/): each vendor's documented answers, recognised and walked to the end.

The answers are recorded as the vendors document them (Shopify REST, BigCommerce v3,
WooCommerce v3, Magento 2, Best Buy, DummyJSON), two or three pages each with a
small page size, keyed by the URL Scrapy would send. A walk that asks for a URL
nobody recorded fails with a KeyError: the paginator built a page the API does
not have.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from scrapy.http.headers import Headers
from w3lib.url import safe_url_string

from productcrawler.config.reader import Reader
from productcrawler.config.sections import LISTING_OPTIONS as SETTINGS
from productcrawler.config.sections import ListingConfig
from productcrawler.listing import (
    AnswerHeaders,
    CursorPaginator,
    ListAnswer,
    ListingError,
    ListingOptions,
    NextUrlPaginator,
    PageNumberPaginator,
    detect,
    find_products,
    paginator_for,
)
from productcrawler.listing.clues import Total
from productcrawler.listing.urls import link_targets, query_value, resolve, with_param

Recorded = dict[str, ListAnswer]


def record(*pages: tuple[str, Any] | tuple[str, Any, dict[str, str]]) -> Recorded:
    """Answers keyed by the URL as Scrapy sends it (brackets percent-encoded)."""
    recorded = {}
    for url, body, *headers in pages:
        recorded[safe_url_string(url)] = ListAnswer(url=safe_url_string(url), status=200,
                                                     headers=headers[0] if headers else {}, body=body)
    return recorded


def walk(paginator: Any, recorded: Recorded, first_url: str, id_key: str = "id",
         path: str | None = None) -> tuple[list[str], list[Any]]:
    """Follow next_url from the first page to the end: the URLs asked for and the product ids seen."""
    url: str | None = safe_url_string(first_url)
    page, asked, seen = 1, [], []
    while url is not None:
        assert page <= 10, f"no end after {asked}"
        answer = recorded[url]
        asked.append(url)
        products, _ = find_products(answer.body, path)
        ids = [product[id_key] for product in products]
        seen += ids
        url = paginator.next_url(answer, len(products), page, ids=ids)
        page += 1
    return asked, seen


def addressed(paginator: Any, recorded: Recorded, first_url: str, id_key: str = "id") -> tuple[list[str], list[Any]]:
    """Every page's URL built from page 1's total (what lets the pages be asked for at once), and their ids."""
    first = recorded[safe_url_string(first_url)]
    pages = paginator.total_pages(first, len(find_products(first.body)[0]))
    assert pages is not None
    asked = [paginator.page_url(first_url, n) for n in range(1, pages + 1)]
    return asked, [p[id_key] for url in asked for p in find_products(recorded[url].body)[0]]


def first_of(recorded: Recorded) -> tuple[ListAnswer, int]:
    first = next(iter(recorded.values()))
    return first, len(find_products(first.body)[0])


# --- Shopify REST Admin: ?limit=N, then page_info cursors in the Link header only ----------------------------------

SHOP = "https://demo.myshopify.com/admin/api/2024-10/products.json"
SHOPIFY = record(
    (f"{SHOP}?limit=2", {"products": [{"id": 632910392, "title": "IPod Nano - 8GB"},
                                      {"id": 921728736, "title": "IPod Touch 8GB"}]},
     {"link": f'<{SHOP}?limit=2&page_info=eyJsYXN0X2lkIjo5MjE3Mjg3MzZ9>; rel="next"'}),
    (f"{SHOP}?limit=2&page_info=eyJsYXN0X2lkIjo5MjE3Mjg3MzZ9",
     {"products": [{"id": 1071559574, "title": "Burton Custom Freestyle 151"},
                   {"id": 1071559575, "title": "Draft"}]},
     {"Link": f'<{SHOP}?limit=2&page_info=eyJkaXJlY3Rpb24iOiJwcmV2In0>; rel="previous", '
              f'<{SHOP}?limit=2&page_info=eyJsYXN0X2lkIjoxMDcxNTU5NTc1fQ>; rel="next"'}),
    (f"{SHOP}?limit=2&page_info=eyJsYXN0X2lkIjoxMDcxNTU5NTc1fQ", {"products": [{"id": 1071559576, "title": "Last"}]},
     {"Link": f'<{SHOP}?limit=2&page_info=eyJkaXJlY3Rpb24iOiJwcmV2IiwibGFzdCI6MX0>; rel="previous"'}),
)


def test_shopify_follows_rel_next_past_rel_previous_and_ends_without_it() -> None:
    paginator = detect(*first_of(SHOPIFY))
    assert paginator.style == "link_header" and not paginator.numbered
    assert "Link header" in paginator.describe()
    asked, ids = walk(paginator, SHOPIFY, f"{SHOP}?limit=2")
    assert asked == list(SHOPIFY)
    assert ids == [632910392, 921728736, 1071559574, 1071559575, 1071559576]


# --- BigCommerce v3: meta.pagination with total_pages and relative ?query links --------------------------------------

BIG = "https://api.bigcommerce.com/stores/abc123/v3/catalog/products"


def big_page(page: int, ids: list[int], total_pages: int = 3, total: int = 5) -> dict[str, Any]:
    links = {"current": f"?limit=2&page={page}"}
    if page > 1:
        links["previous"] = f"?limit=2&page={page - 1}"
    if page < total_pages:
        links["next"] = f"?limit=2&page={page + 1}"
    return {"data": [{"id": i, "name": f"Product {i}", "sku": f"SKU-{i}", "price": 10.5} for i in ids],
            "meta": {"pagination": {"total": total, "count": len(ids), "per_page": 2, "current_page": page,
                                    "total_pages": total_pages, "links": links}}}


BIGCOMMERCE = record((f"{BIG}?limit=2", big_page(1, [111, 112])), (f"{BIG}?limit=2&page=2", big_page(2, [113, 114])),
                     (f"{BIG}?limit=2&page=3", big_page(3, [115])))


def test_bigcommerce_is_page_numbers_with_total_pages_and_every_page_addressable() -> None:
    paginator = detect(*first_of(BIGCOMMERCE))
    assert paginator.style == "page_number" and paginator.numbered
    assert paginator.describe() == ("page numbers in ?page=, page size in ?limit=; 3 pages from "
                                    "body:meta.pagination.total_pages (counts pages)")
    asked, ids = addressed(paginator, BIGCOMMERCE, f"{BIG}?limit=2")
    assert asked == list(BIGCOMMERCE) and ids == [111, 112, 113, 114, 115]
    assert walk(paginator, BIGCOMMERCE, f"{BIG}?limit=2") == (asked, ids)


def test_bigcommerce_relative_next_links_resolve_against_the_requested_path() -> None:
    # The links are bare query strings: "?limit=2&page=2" replaces the query and keeps /stores/abc123/v3/...
    paginator = paginator_for(ListingOptions(pagination="next_url", next="meta.pagination.links.next"))
    assert isinstance(paginator, NextUrlPaginator)
    asked, ids = walk(paginator, BIGCOMMERCE, f"{BIG}?limit=2")
    assert asked == list(BIGCOMMERCE) and ids == [111, 112, 113, 114, 115]
    # next_url found without LIST_NEXT too
    assert walk(paginator_for(ListingOptions(pagination="next_url")), BIGCOMMERCE, f"{BIG}?limit=2")[0] == asked


# --- WooCommerce v3: a top-level array, X-WP-Total / X-WP-TotalPages, Link rel=next; past the end: [] ---------------

WOO = "https://shop.example/wp-json/wc/v3/products"


def woo_headers(page: int, pages: int, total: int) -> dict[str, str]:
    links = []
    if page > 1:
        links.append(f'<{WOO}?per_page=2&page={page - 1}>; rel="prev"')
    if page < pages:
        links.append(f'<{WOO}?per_page=2&page={page + 1}>; rel="next"')
    headers = {"X-WP-Total": str(total), "X-WP-TotalPages": str(pages)}
    return {**headers, "Link": ", ".join(links)} if links else headers


def woo(ids: list[int]) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"Woo {i}", "sku": f"woo-{i}", "price": "18.00", "stock_quantity": 3} for i in ids]


WOOCOMMERCE = record((f"{WOO}?per_page=2", woo([794, 795]), woo_headers(1, 2, 4)),
                     (f"{WOO}?per_page=2&page=2", woo([796, 797]), woo_headers(2, 2, 4)),
                     (f"{WOO}?per_page=2&page=3", [], woo_headers(3, 2, 4)))


def test_woocommerce_is_page_numbers_from_x_wp_totalpages_and_never_asks_the_empty_page_past_the_end() -> None:
    paginator = detect(*first_of(WOOCOMMERCE))
    assert paginator.style == "page_number"
    assert "2 pages from header:X-WP-TotalPages" in paginator.describe()
    asked, ids = walk(paginator, WOOCOMMERCE, f"{WOO}?per_page=2")
    assert asked == list(WOOCOMMERCE)[:2] and ids == [794, 795, 796, 797]
    assert addressed(paginator, WOOCOMMERCE, f"{WOO}?per_page=2") == (asked, ids)


def test_with_a_total_an_empty_page_before_the_end_does_not_end_the_listing() -> None:
    # Products deleted while the pass runs can leave page 2 empty; X-WP-TotalPages still says 3.
    recorded = record((f"{WOO}?per_page=2", woo([794, 795]), woo_headers(1, 3, 5)),
                      (f"{WOO}?per_page=2&page=2", [], woo_headers(2, 3, 5)),
                      (f"{WOO}?per_page=2&page=3", woo([798]), woo_headers(3, 3, 5)))
    paginator = detect(*first_of(recorded))
    assert walk(paginator, recorded, f"{WOO}?per_page=2") == (list(recorded), [794, 795, 798])


def test_woocommerce_without_totals_ends_at_the_empty_page() -> None:
    bare = {url: ListAnswer(a.url, 200, {}, a.body) for url, a in WOOCOMMERCE.items()}
    paginator = paginator_for(ListingOptions(pagination="page_number"))
    assert walk(paginator, bare, f"{WOO}?per_page=2") == (list(WOOCOMMERCE), [794, 795, 796, 797])


# --- Magento 2: searchCriteria[...] parameters, total_count counts ITEMS, past the end: the last page again ---------

MAGENTO = "https://shop.example/rest/default/V1/products"
MAGENTO_FIRST = f"{MAGENTO}?searchCriteria[pageSize]=2&searchCriteria[currentPage]=1"


def magento_page(asked: int, ids: list[int], total: int | None = 5) -> dict[str, Any]:
    body: dict[str, Any] = {
        "items": [{"id": i, "sku": f"WS{i} M/Blue", "name": f"Tee {i}", "price": 22, "status": 1} for i in ids],
        "search_criteria": {"filter_groups": [], "page_size": 2, "current_page": asked}}
    if total is not None:
        body["total_count"] = total
    return body


def magento_pages(total: int | None = 5) -> Recorded:
    pages = [(1, [1546, 1547]), (2, [1548, 1549]), (3, [1550]), (4, [1550])]  # page 4: page 3 again
    return record(*((f"{MAGENTO}?searchCriteria[pageSize]=2&searchCriteria[currentPage]={n}",
                     magento_page(n, ids, total)) for n, ids in pages))


def test_magento_total_count_counts_items_so_the_walk_ends_at_the_last_page_not_at_total_count() -> None:
    recorded = magento_pages()
    paginator = detect(*first_of(recorded))
    assert paginator.style == "page_number"
    assert paginator.describe() == ("page numbers in ?searchCriteria[currentPage]=, page size in "
                                    "?searchCriteria[pageSize]=; 3 pages from body:total_count (counts items)")
    asked, ids = walk(paginator, recorded, MAGENTO_FIRST)
    assert asked == list(recorded)[:3] and ids == [1546, 1547, 1548, 1549, 1550]
    assert addressed(paginator, recorded, MAGENTO_FIRST) == (asked, ids)


def test_magento_total_count_read_as_pages_is_the_trap() -> None:
    # What a walker that takes total_count for pages does: five pages, two of them echoes of page 3.
    recorded = magento_pages()
    wrong = PageNumberPaginator(param="searchCriteria[currentPage]", total=Total("body", "total_count", "pages"))
    first = recorded[safe_url_string(MAGENTO_FIRST)]
    assert wrong.total_pages(first, 2) == 5
    right = paginator_for(ListingOptions(pagination="page_number", page_param="searchCriteria[currentPage]",
                                         total="body:total_count"))
    assert right is not None and right.total_pages(first, 2) == 3


def test_magento_without_a_total_ends_at_the_echo_of_the_last_page() -> None:
    # Four products, two a page: page 2 is full, page 3 repeats it. An empty page never comes.
    pages = [(1, [1546, 1547]), (2, [1548, 1549]), (3, [1548, 1549]), (4, [1548, 1549])]
    recorded = record(*((f"{MAGENTO}?searchCriteria[pageSize]=2&searchCriteria[currentPage]={n}",
                         magento_page(n, ids, None)) for n, ids in pages))
    paginator = detect(*first_of(recorded))
    assert paginator.style == "page_number" and "no total" in paginator.describe()
    asked, ids = walk(paginator, recorded, MAGENTO_FIRST)
    assert asked == list(recorded)[:3] and ids == [1546, 1547, 1548, 1549, 1548, 1549]
    # Page 3 is the echo: the end, with no products of its own (the reader stores none of them).
    assert paginator.echoed(3) and not paginator.echoed(2)


@pytest.mark.parametrize("first", [MAGENTO_FIRST, MAGENTO_FIRST.replace("[", "%5B").replace("]", "%5D"),
                                   MAGENTO_FIRST.replace("[", "%5b").replace("]", "%5d")])
def test_bracketed_parameters_round_trip_encoded_or_not(first: str) -> None:
    paginator = PageNumberPaginator(param="searchCriteria[currentPage]")
    assert paginator.page_url(first, 1) == safe_url_string(first)
    second = paginator.page_url(first, 2)
    assert query_value(second, "searchCriteria[currentPage]") == "2"
    assert query_value(second, "searchCriteria[pageSize]") == "2"
    assert second.lower() == (f"{MAGENTO}?searchCriteria%5BpageSize%5D=2&searchCriteria%5BcurrentPage%5D=2").lower()
    if "%5b" not in first:  # the recorded URLs are Scrapy's spelling, %5B
        assert walk(detect(*first_of(magento_pages())), magento_pages(), first)[1] == [1546, 1547, 1548, 1549, 1550]


# --- Best Buy: ?pageSize=N&page=P with totalPages, or cursorMark=* with nextCursorMark (the same mark at the end) ---

BBY = "https://api.bestbuy.com/v1/products(onSale=true)"


def bby_page(page: int, skus: list[int], mark: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"from": (page - 1) * 2 + 1, "to": (page - 1) * 2 + len(skus), "currentPage": page,
                            "total": 5, "totalPages": 3, "queryTime": "0.005", "totalTime": "0.022",
                            "partial": False, "canonicalUrl": "/v1/products(onSale=true)?format=json&apiKey=KEY",
                            "products": [{"sku": s, "name": f"TV {s}", "salePrice": 99.99} for s in skus]}
    if mark is not None:
        body["nextCursorMark"] = mark
    return body


BESTBUY_PAGES = record(
    *((f"{BBY}?format=json&show=sku,name,salePrice&pageSize=2&page={n}&apiKey=KEY", bby_page(n, skus))
      for n, skus in [(1, [6401728, 6401729]), (2, [6401730, 6401731]), (3, [6401732])]))
MARKS = ["AoJ+P4AAAC/xMjM=", "AoJ+P4AAAC/xNDU="]  # base64: '+', '/' and '=' must survive the query
BESTBUY_CURSOR = record(
    (f"{BBY}?format=json&pageSize=2&cursorMark=*&apiKey=KEY", bby_page(1, [6401728, 6401729], MARKS[0])),
    (f"{BBY}?format=json&pageSize=2&cursorMark=AoJ%2BP4AAAC%2FxMjM%3D&apiKey=KEY",
     bby_page(2, [6401730, 6401731], MARKS[1])),
    (f"{BBY}?format=json&pageSize=2&cursorMark=AoJ%2BP4AAAC%2FxNDU%3D&apiKey=KEY", bby_page(3, [6401732], MARKS[1])))


def test_best_buy_pages_use_total_pages_not_the_item_total() -> None:
    paginator = detect(*first_of(BESTBUY_PAGES))
    assert paginator.style == "page_number" and "3 pages from body:totalPages" in paginator.describe()
    first = f"{BBY}?format=json&show=sku,name,salePrice&pageSize=2&page=1&apiKey=KEY"
    asked, ids = addressed(paginator, BESTBUY_PAGES, first, "sku")
    assert asked == list(BESTBUY_PAGES) and ids == [6401728, 6401729, 6401730, 6401731, 6401732]


def test_best_buy_cursor_mark_ends_when_the_same_mark_comes_back() -> None:
    paginator = detect(*first_of(BESTBUY_CURSOR))
    assert paginator.style == "cursor"
    assert paginator.describe() == "cursor in the body at nextCursorMark, sent back as ?cursorMark="
    asked, ids = walk(paginator, BESTBUY_CURSOR, f"{BBY}?format=json&pageSize=2&cursorMark=*&apiKey=KEY", "sku")
    assert asked == list(BESTBUY_CURSOR) and ids == [6401728, 6401729, 6401730, 6401731, 6401732]


def test_a_cursor_walk_ends_at_an_empty_page() -> None:
    recorded = dict(BESTBUY_CURSOR)
    last = list(recorded)[-1]
    recorded[last] = ListAnswer(last, 200, {}, bby_page(3, [], "AoJ+P4AAAC/xNjc="))
    paginator = CursorPaginator(path="nextCursorMark", param="cursorMark")
    first = f"{BBY}?format=json&pageSize=2&cursorMark=*&apiKey=KEY"
    assert walk(paginator, recorded, first, "sku")[0] == list(recorded)


# --- DummyJSON: ?limit=N&skip=S, body {products, total, skip, limit} --------------------------------------------------

DUMMY = "https://dummyjson.com/products"


def dummy_page(skip: int, ids: list[int]) -> dict[str, Any]:
    return {"products": [{"id": i, "title": f"Essence Mascara {i}", "price": 9.99} for i in ids],
            "total": 5, "skip": skip, "limit": len(ids)}


DUMMYJSON = record((f"{DUMMY}?limit=2&skip=0&select=title,price", dummy_page(0, [1, 2])),
                   (f"{DUMMY}?limit=2&skip=2&select=title,price", dummy_page(2, [3, 4])),
                   (f"{DUMMY}?limit=2&skip=4&select=title,price", dummy_page(4, [5])))


def test_dummyjson_is_offsets_in_skip_up_to_the_item_total() -> None:
    paginator = detect(*first_of(DUMMYJSON))
    assert paginator.style == "offset" and paginator.numbered
    assert paginator.describe() == "offsets in ?skip=, page size in ?limit=; 3 pages from body:total (counts items)"
    first = f"{DUMMY}?limit=2&skip=0&select=title,price"
    asked, ids = addressed(paginator, DUMMYJSON, first)
    assert asked == list(DUMMYJSON) and ids == [1, 2, 3, 4, 5]
    assert walk(paginator, DUMMYJSON, first) == (asked, ids)


def test_offsets_step_by_what_page_one_held_when_the_server_caps_the_size() -> None:
    # limit=100 asked, 2 given: the next offset is 2, not 100 (which would skip products).
    recorded = record(*((f"{DUMMY}?limit=100&skip={skip}", dummy_page(skip, ids))
                        for skip, ids in [(0, [1, 2]), (2, [3, 4]), (4, [5])]))
    paginator = detect(*first_of(recorded))
    assert walk(paginator, recorded, f"{DUMMY}?limit=100&skip=0")[1] == [1, 2, 3, 4, 5]
    assert addressed(paginator, recorded, f"{DUMMY}?limit=100&skip=0")[1] == [1, 2, 3, 4, 5]


# --- Generic APIs: a next URL or a cursor in the body --------------------------------------------------------------

API = "https://api.example.com/v2/products"


@pytest.mark.parametrize(("next_key", "path", "link"), [
    ("next", "next", f"{API}?page=2"),  # Django REST framework
    ("links.next", "links.next", "/v2/products?page%5Bnumber%5D=2"),  # JSON:API, a path
    ("paging.next", "paging.next", f"{API}?after=QVFIUmx1"),  # Graph API
    ("meta.next", "meta.next", "?cursor=c2"),  # a bare query
    ("_links.next", "_links.next", {"href": f"{API}?page=2"}),  # HAL: an object with href
])
def test_a_next_url_in_the_body(next_key: str, path: str, link: Any) -> None:
    def body(ids: list[int], link: Any) -> dict[str, Any]:
        page: dict[str, Any] = {"results": [{"id": i} for i in ids]}
        head, _, tail = next_key.partition(".")
        page[head] = {tail: link} if tail else link
        return page

    second = resolve(f"{API}?sort=id", link["href"] if isinstance(link, dict) else link)
    recorded = record((f"{API}?sort=id", body([1, 2], link)), (second, body([3], None)))
    paginator = detect(*first_of(recorded))
    assert paginator.style == "next_url" and path in paginator.describe()
    assert walk(paginator, recorded, f"{API}?sort=id") == (list(recorded), [1, 2, 3])


def test_laravel_next_page_url_with_last_page_is_page_numbers() -> None:
    def body(page: int, ids: list[int]) -> dict[str, Any]:
        return {"current_page": page, "data": [{"id": i} for i in ids], "per_page": 2, "total": 3, "last_page": 2,
                "next_page_url": f"{API}?page={page + 1}" if page < 2 else None}

    recorded = record((API, body(1, [1, 2])), (f"{API}?page=2", body(2, [3])))
    paginator = detect(*first_of(recorded))
    assert paginator.style == "page_number" and "2 pages from body:last_page" in paginator.describe()
    assert addressed(paginator, recorded, API) == (list(recorded), [1, 2, 3])


@pytest.mark.parametrize(("shape", "param"), [
    ({"next_cursor": "c2"}, "cursor"), ({"nextCursor": "c2"}, "cursor"), ({"cursor": {"next": "c2"}}, "cursor"),
    ({"page_info": "c2"}, "page_info"), ({"nextPageToken": "c2"}, "pageToken"),
    ({"meta": {"next_cursor": "c2"}}, "cursor"),
])
def test_a_cursor_in_the_body_goes_back_in_a_parameter(shape: dict[str, Any], param: str) -> None:
    recorded = record((f"{API}?limit=2", {"items": [{"id": 1}, {"id": 2}], **shape}),
                      (f"{API}?limit=2&{param}=c2", {"items": [{"id": 3}]}))
    paginator = detect(*first_of(recorded))
    assert paginator.style == "cursor" and paginator.describe().endswith(f"sent back as ?{param}=")
    assert walk(paginator, recorded, f"{API}?limit=2") == (list(recorded), [1, 2, 3])


def test_the_cursor_parameter_is_the_setting_when_given() -> None:
    recorded = record((API, {"items": [{"id": 1}], "next_cursor": "c2"}), (f"{API}?after=c2", {"items": [{"id": 2}]}))
    paginator = detect(*first_of(recorded), ListingOptions(cursor_param="after"))
    assert walk(paginator, recorded, API)[1] == [1, 2]


def test_page_numbers_without_a_total_end_at_a_short_page() -> None:
    recorded = record((f"{API}?page=1&limit=2", [{"id": 1}, {"id": 2}]), (f"{API}?page=2&limit=2", [{"id": 3}]))
    paginator = detect(*first_of(recorded))
    assert paginator.style == "page_number" and paginator.total_pages(*first_of(recorded)) is None
    assert walk(paginator, recorded, f"{API}?page=1&limit=2") == (list(recorded), [1, 2, 3])


@pytest.mark.parametrize(("first", "second", "header", "total"), [
    ("page=1", "page=2", "X-Total-Pages", "2"), ("offset=0", "offset=2", "X-Total-Count", "4")])
def test_a_total_given_on_page_one_only_still_ends_the_walk(first: str, second: str, header: str, total: str) -> None:
    recorded = record((f"{API}?{first}&limit=2", [{"id": 1}, {"id": 2}], {header: total}),
                      (f"{API}?{second}&limit=2", [{"id": 3}, {"id": 4}]))
    paginator = detect(*first_of(recorded))
    assert paginator.style == ("page_number" if first.startswith("page") else "offset")
    assert walk(paginator, recorded, f"{API}?{first}&limit=2") == (list(recorded), [1, 2, 3, 4])


def test_zero_based_page_numbers_count_from_the_listing_url() -> None:
    paginator = PageNumberPaginator(param="page", total=Total("body", "totalPages", "pages"))
    first = ListAnswer(f"{API}?page=0&size=2", 200, {}, {"content": [{"id": 1}, {"id": 2}], "totalPages": 2})
    assert paginator.total_pages(first, 2) == 2
    assert paginator.page_url(first.url, 2) == f"{API}?page=1&size=2"
    assert paginator.next_url(first, 2, 1) == f"{API}?page=1&size=2"


def test_a_short_first_page_that_names_no_next_page_is_the_whole_listing() -> None:
    recorded = record((f"{SHOP}?limit=250", {"products": [{"id": 1}, {"id": 2}]}))
    paginator = detect(*first_of(recorded))
    assert "whole listing" in paginator.describe()
    assert walk(paginator, recorded, f"{SHOP}?limit=250")[1] == [1, 2]


def test_an_unrecognised_listing_names_the_setting_and_what_it_has() -> None:
    first = ListAnswer(API, 200, {"Content-Type": "application/json"}, {"products": [{"id": 1}], "status": "ok"})
    with pytest.raises(ListingError) as raised:
        detect(first, 1)
    message = str(raised.value)
    assert "set LIST_PAGINATION" in message
    assert "keys products, status" in message and "Content-Type" in message


def test_an_explicit_style_is_used_as_set() -> None:
    # Best Buy's cursor answer also carries totalPages: told page_number, the walk numbers pages.
    options = ListingOptions(pagination="page_number", page_param="page", limit_param="pageSize",
                             total="body:totalPages")
    paginator = detect(*first_of(BESTBUY_PAGES), options)
    assert paginator.style == "page_number" and paginator.describe().startswith("page numbers in ?page=, page size "
                                                                                "in ?pageSize=")
    assert paginator_for(ListingOptions()) is None


def test_a_page_that_repeats_the_one_before_ends_a_link_walk_too() -> None:
    looping = record((f"{API}?p=a", {"data": [{"id": 1}], "next": f"{API}?p=b"}),
                     (f"{API}?p=b", {"data": [{"id": 1}], "next": f"{API}?p=c"}))
    assert walk(detect(*first_of(looping)), looping, f"{API}?p=a")[0] == list(looping)
    self_link = record((f"{API}?p=a", {"data": [{"id": 1}], "next": f"{API}?p=a"}))
    assert walk(detect(*first_of(self_link)), self_link, f"{API}?p=a")[0] == list(self_link)


# --- find_products ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "where"), [
    ([{"id": 1}], ""), ({"products": [{"id": 1}], "total": 1}, "products"),
    ({"meta": {"total": 1}, "data": [{"id": 1}]}, "data"), ({"items": [{"id": 1}], "total_count": 1}, "items"),
    ({"status": 0, "result": {"products": [{"id": 1}], "page": 1}}, "result.products"),
    ({"errors": [{"code": 1}], "catalog": [{"id": 1}]}, "catalog"),  # any key, but never errors
    ({"products": [], "total": 0}, "products"),  # the last page of some APIs
    ([], ""),
])
def test_find_products_finds_the_list(body: Any, where: str) -> None:
    products, found = find_products(body)
    assert found == where and products == (body if where == "" else eval_path(body, where))


def eval_path(body: Any, path: str) -> Any:
    for key in path.split("."):
        body = body[key]
    return body


def test_find_products_at_an_explicit_path() -> None:
    body = {"data": [{"x": 1}], "result": {"products": [{"id": 7}]}}
    assert find_products(body, "result.products") == ([{"id": 7}], "result.products")
    with pytest.raises(ListingError, match=r"LIST_PRODUCTS='result.items': the answer has no such path"):
        find_products(body, "result.items")
    with pytest.raises(ListingError, match=r"LIST_PRODUCTS='result': holds JSON dict, not a list"):
        find_products(body, "result")


@pytest.mark.parametrize("body", [{"status": "ok", "count": 3}, ["a", "b"], "text", {"meta": {"links": []}}])
def test_find_products_says_when_there_are_none(body: Any) -> None:
    with pytest.raises(ListingError, match="LIST_PRODUCTS"):
        find_products(body)


# --- URLs, headers -------------------------------------------------------------------------------------------------

def test_setting_a_parameter_keeps_the_others_and_their_order() -> None:
    url = "https://a.example/p?z=1&fields=id%2Cname&page=1&a=x+y"
    assert with_param(url, "page", 3) == "https://a.example/p?z=1&fields=id%2Cname&page=3&a=x+y"
    assert with_param("https://a.example/p?z=1", "cursor", "a+b/c=") == "https://a.example/p?z=1&cursor=a%2Bb%2Fc%3D"
    assert query_value(with_param(url, "cursor", "a+b/c="), "cursor") == "a+b/c="


def test_link_headers_with_several_rels_and_quoted_commas() -> None:
    header = ('<https://a.example/p?page=1>; rel="prev first", <https://a.example/p?page=3>; title="a, b"; '
              'rel="next", <https://a.example/p?page=9>; rel=last')
    assert link_targets(header, "next") == ["https://a.example/p?page=3"]
    assert link_targets(header, "first") == ["https://a.example/p?page=1"]
    assert link_targets(header, "last") == ["https://a.example/p?page=9"]
    assert link_targets('<https://a.example/p?page=1>; rel="previous"', "next") == []


def test_headers_from_scrapy_are_case_insensitive_strings() -> None:
    headers = AnswerHeaders(Headers({"X-WP-TotalPages": "3", "Link": ['<a>; rel="next"', '<b>; rel="prev"']}))
    assert headers["x-wp-totalpages"] == "3" and headers.get("LINK") == '<a>; rel="next", <b>; rel="prev"'
    assert ListAnswer("https://a.example/", 200, {"x-wp-total": "5"}, []).headers["X-WP-Total"] == "5"


# --- Settings --------------------------------------------------------------------------------------------------------

def settings(**values: str) -> ListingOptions:
    return ListingConfig.read_options(Reader(values))


def test_settings_are_read_by_their_names() -> None:
    options = settings(LIST_PAGINATION=" Cursor ", LIST_NEXT="nextCursorMark", LIST_CURSOR_PARAM="cursorMark",
                       LIST_PRODUCTS="products", LIST_LIMIT_PARAM="pageSize", LIST_TOTAL_COUNTS="",
                       LIST_PAGE_PARAM="searchCriteria[currentPage]", LIST_OFFSET_PARAM="skip")
    assert options == ListingOptions(pagination="cursor", next="nextCursorMark", cursor_param="cursorMark",
                                     products="products", limit_param="pageSize",
                                     page_param="searchCriteria[currentPage]", offset_param="skip")
    assert set(SETTINGS) == {f"LIST_{name.upper()}" for name in ListingOptions.__dataclass_fields__}
    total = settings(LIST_TOTAL="header:X-WP-TotalPages").total_spec()
    assert total == Total("header", "X-WP-TotalPages", "pages")
    assert settings(LIST_TOTAL="body:total_count").total_spec() == Total("body", "total_count", "items")
    assert settings(LIST_TOTAL="body:total", LIST_TOTAL_COUNTS="pages").total_spec() == Total("body", "total", "pages")


@pytest.mark.parametrize(("values", "message"), [
    ({"LIST_PAGINATION": "pages"}, "LIST_PAGINATION='pages' is not a pagination style; allowed: auto, link_header"),
    ({"LIST_PRODUCTS": "data..items"}, "LIST_PRODUCTS='data..items' must be keys separated by dots"),
    ({"LIST_NEXT": "links. next"}, "LIST_NEXT='links. next' must be keys separated by dots"),
    ({"LIST_CURSOR_PARAM": "cursor mark"}, "LIST_CURSOR_PARAM='cursor mark' is not a query parameter name"),
    ({"LIST_PAGE_PARAM": "page=1"}, "LIST_PAGE_PARAM='page=1' is not a query parameter name"),
    ({"LIST_OFFSET_PARAM": "a&b"}, "LIST_OFFSET_PARAM='a&b' is not a query parameter name"),
    ({"LIST_LIMIT_PARAM": "?limit"}, "LIST_LIMIT_PARAM='?limit' is not a query parameter name"),
    ({"LIST_TOTAL": "X-WP-TotalPages"}, "LIST_TOTAL='X-WP-TotalPages': expected header:NAME"),
    ({"LIST_TOTAL": "query:total"}, "LIST_TOTAL='query:total': expected header:NAME"),
    ({"LIST_TOTAL": "header:X Total"}, "LIST_TOTAL='header:X Total': 'X Total' is not a header name"),
    ({"LIST_TOTAL": "body:meta..total"}, "LIST_TOTAL='body:meta..total' must be keys separated by dots"),
    ({"LIST_TOTAL_COUNTS": "rows"}, "LIST_TOTAL_COUNTS='rows'; allowed: auto, pages, items"),
    ({"LIST_PAGINATION": "offset", "LIST_NEXT": "next"}, "LIST_NEXT='next' is for LIST_PAGINATION=next_url or cursor"),
    ({"LIST_PAGINATION": "cursor", "LIST_TOTAL": "body:total"}, "LIST_TOTAL='body:total' is for LIST_PAGINATION="
                                                                 "page_number or offset"),
])
def test_every_invalid_setting_is_refused_by_name(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{_escaped(message)}"):
        ListingConfig.read_options(Reader(values))


def _escaped(text: str) -> str:
    return re.escape(text)


@pytest.mark.parametrize(("total", "size", "pages"), [(5, 2, 3), (4, 2, 2), (0, 2, 0), (1, 250, 1), (5, None, None)])
def test_an_item_total_becomes_pages_rounded_up(total: int, size: int | None, pages: int | None) -> None:
    answer = ListAnswer("https://a.example/", 200, {}, {"total_count": total})
    assert Total("body", "total_count", "items").pages(answer, size) == pages
    assert Total("body", "total_count", "pages").pages(answer, size) == total
