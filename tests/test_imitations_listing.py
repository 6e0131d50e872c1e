"""The imitations' list endpoints, walked with plain urllib the way each vendor documents it.

Every product exactly once; each API's end of the list (Magento's last page
again, WooCommerce's ``[]``, Best Buy's repeated cursor mark); Shopify's
``page_info`` with a filter refused; the budgets refusing when spent (Shopify
429, BigCommerce 429, Best Buy 403, DummyJSON 429); the modification filters
answering exactly what ``mutate()`` changed; the per-id and list endpoints of
one imitation agreeing; the subprocess's control routes.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.support.imitations import bestbuy, bigcommerce, dummyjson, magento, shopify, woocommerce
from tests.support.imitations.served import ImitationsProcess, Served

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SHOPIFY = {"X-Shopify-Access-Token": shopify.TOKEN}
BIGCOMMERCE = {"X-Auth-Token": bigcommerce.TOKEN}
WOO = {"Authorization": "Basic " + base64.b64encode(
    f"{woocommerce.CONSUMER_KEY}:{woocommerce.CONSUMER_SECRET}".encode()).decode()}
MAGENTO = {"Authorization": f"Bearer {magento.TOKEN}"}
SIZE = 630
#: More requests than any walk here needs: a walk that never ends fails instead of hanging.
WALK_LIMIT = 50


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    """(status, headers, body: JSON if it is JSON, else text)."""
    try:
        with _OPENER.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as answer:
            status, found, raw = answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        status, found, raw = error.code, error.headers, error.read()
    try:
        return status, found, json.loads(raw)
    except ValueError:
        return status, found, raw.decode()


def link(headers: Any, rel: str) -> str | None:
    found = re.search(rf'<([^>]+)>; rel="{rel}"', headers.get("Link") or "")
    return found[1] if found else None


def shopify_walk(api: Served, url: str) -> tuple[list[int], int]:
    ids, requests = [], 0
    next_url: str | None = url
    while next_url:
        assert requests < WALK_LIMIT, "the Link header never stops"
        status, headers, body = get(next_url, SHOPIFY)
        requests += 1
        assert status == 200, body
        assert re.fullmatch(r"\d+/40", headers["X-Shopify-Shop-Api-Call-Limit"])
        ids += [product["id"] for product in body["products"]]
        next_url = link(headers, "next")
    return ids, requests


def test_shopify_follows_link_next_to_every_product_once():
    with Served(shopify.Shopify(size=SIZE, leak=200.0)) as api:
        ids, requests = shopify_walk(api, f"{api.url}{shopify.LIST_PATH}?limit=250")
        assert ids == sorted(api.imitation.products) and requests == 3
        # Default 50, and a page back by rel="previous" is the page before.
        _, headers, first = get(f"{api.url}{shopify.LIST_PATH}", SHOPIFY)
        assert len(first["products"]) == 50 and link(headers, "previous") is None
        _, headers, second = get(link(headers, "next") or "", SHOPIFY)
        _, _, back = get(link(headers, "previous") or "", SHOPIFY)
        assert back == first and second["products"][0]["id"] > first["products"][-1]["id"]
        assert get(f"{api.url}{shopify.LIST_PATH}?limit=251", SHOPIFY)[0] == 400
        assert get(f"{api.url}{shopify.LIST_PATH}?limit=250", {})[0] == 401


def test_shopify_page_info_with_any_other_filter_is_a_400():
    with Served(shopify.Shopify(size=SIZE, leak=200.0)) as api:
        _, headers, _ = get(f"{api.url}{shopify.LIST_PATH}?limit=100", SHOPIFY)
        next_url = link(headers, "next") or ""
        for extra in ("updated_at_min=2024-01-01T00:00:00Z", "since_id=1", "status=active"):
            status, _, body = get(f"{next_url}&{extra}", SHOPIFY)
            name = extra.split("=")[0]
            assert status == 400 and body == {"errors": {name: f"{name} cannot be passed when page_info is "
                                                                f"present."}}
        assert get(f"{next_url}&fields=id,title", SHOPIFY)[0] == 200
        assert get(f"{api.url}{shopify.LIST_PATH}?page_info=notacursor", SHOPIFY)[0] == 400


def test_shopify_bucket_of_40_refuses_the_41st_call_at_once():
    with Served(shopify.Shopify(size=50)) as api:
        answers = [get(f"{api.url}{shopify.LIST_PATH}?limit=1", SHOPIFY) for _ in range(46)]
        statuses = [status for status, _, _ in answers]
        # 2 a second leak out while the 46 calls are made (a few ms each): 40, at most 41, get through.
        assert statuses[:40] == [200] * 40 and statuses.count(429) >= 4
        refused = next(headers for status, headers, _ in answers if status == 429)
        assert refused["Retry-After"] == "2.0" and refused["X-Shopify-Shop-Api-Call-Limit"] == "40/40"
        assert answers[0][1]["X-Shopify-Shop-Api-Call-Limit"] == "1/40"
        assert [a["status"] for a in api.arrivals()] == statuses


def test_shopify_updated_at_min_answers_the_changed_products_page_after_page():
    with Served(shopify.Shopify(size=SIZE, leak=200.0)) as api:
        changed = api.call(api.imitation.mutate, changed=0.05, removed=2, added=3)
        since = quote(changed["at"], safe="")
        ids, _ = shopify_walk(api, f"{api.url}{shopify.LIST_PATH}?limit=7&updated_at_min={since}")
        assert ids == sorted(changed["changed"] + changed["added"]) and len(ids) > 7
        assert not set(changed["removed"]) & set(ids)
        everything, _ = shopify_walk(api, f"{api.url}{shopify.LIST_PATH}?limit=250")
        assert len(everything) == SIZE + 1 and not set(changed["removed"]) & set(everything)
        # The per-id endpoint answers the same product as the listing.
        key = changed["changed"][0]
        _, _, one = get(f"{api.url}/admin/api/2024-10/products/{key}.json", SHOPIFY)
        _, _, listed = get(f"{api.url}{shopify.LIST_PATH}?since_id={key - 1}&limit=1", SHOPIFY)
        assert one["product"] == listed["products"][0] and one["product"]["updated_at"] == changed["at"]


def bigcommerce_walk(url: str, query: str | None = "?limit=250") -> tuple[list[int], list[dict[str, Any]]]:
    """From ``url + query``, each next page at ``url + links.next`` (a relative query string)."""
    ids, metas = [], []
    while query:
        assert len(metas) < WALK_LIMIT, "links.next never stops"
        status, _, body = get(url + query, BIGCOMMERCE)
        assert status == 200, body
        ids += [product["id"] for product in body["data"]]
        metas.append(body["meta"]["pagination"])
        query = body["meta"]["pagination"]["links"].get("next")
    return ids, metas


def test_bigcommerce_follows_links_next_and_counts_its_window():
    with Served(bigcommerce.BigCommerce(size=SIZE)) as api:
        url = api.url + bigcommerce.LIST_PATH
        ids, metas = bigcommerce_walk(url)
        assert ids == sorted(api.imitation.products) and len(metas) == 3
        assert metas[-1] == {"total": SIZE, "count": SIZE - 500, "per_page": 250, "current_page": 3,
                             "total_pages": 3, "too_many": False,
                             "links": {"previous": "?limit=250&page=2", "current": "?limit=250&page=3"}}
        assert "previous" not in metas[0]["links"] and metas[0]["links"]["next"] == "?limit=250&page=2"
        status, headers, past = get(url + "?limit=250&page=4", BIGCOMMERCE)
        assert status == 200 and past["data"] == []
        assert headers["X-Rate-Limit-Requests-Quota"] == "150" and headers["X-Rate-Limit-Time-Window-Ms"] == "30000"
        assert headers["X-Rate-Limit-Requests-Left"] == str(150 - 4)
        assert 0 < int(headers["X-Rate-Limit-Time-Reset-Ms"]) <= 30000


def test_bigcommerce_over_its_window_is_a_429_with_its_headers():
    with Served(bigcommerce.BigCommerce(size=20, quota=5, window=30.0)) as api:
        answers = [get(api.url + bigcommerce.LIST_PATH, BIGCOMMERCE) for _ in range(7)]
        assert [status for status, _, _ in answers] == [200] * 5 + [429] * 2
        assert answers[5][1]["X-Rate-Limit-Requests-Left"] == "0"


def test_bigcommerce_date_modified_min_answers_the_changed_products():
    with Served(bigcommerce.BigCommerce(size=SIZE)) as api:
        changed = api.call(api.imitation.mutate, changed=0.04)
        ids, metas = bigcommerce_walk(f"{api.url}{bigcommerce.LIST_PATH}",
                                      f"?date_modified%3Amin={quote(changed['at'], safe='')}&limit=10")
        # The links keep the filter, so following them stays within it.
        assert ids == sorted(changed["changed"] + changed["added"]) and len(metas) > 1
        unencoded = f"{api.url}{bigcommerce.LIST_PATH}?date_modified:min={changed['at']}"
        assert get(unencoded, BIGCOMMERCE)[0] == 422  # "+00:00" read as " 00:00"


def test_woocommerce_follows_link_next_and_past_the_end_is_empty():
    with Served(woocommerce.WooCommerce(size=SIZE)) as api:
        ids: list[int] = []
        url: str | None = f"{api.url}{woocommerce.LIST_PATH}?per_page=100&page=1"
        requests = 0
        while url:
            assert requests < WALK_LIMIT, "the Link header never stops"
            status, headers, body = get(url, WOO)
            requests += 1
            assert status == 200 and headers["X-WP-Total"] == str(SIZE) and headers["X-WP-TotalPages"] == "7"
            ids += [product["id"] for product in body]
            url = link(headers, "next")
        assert ids == sorted(api.imitation.products, reverse=True) and requests == 7  # newest first
        status, headers, body = get(f"{api.url}{woocommerce.LIST_PATH}?per_page=100&page=8", WOO)
        assert status == 200 and body == [] and "page=7" in (link(headers, "prev") or "")
        assert get(f"{api.url}{woocommerce.LIST_PATH}?per_page=101", WOO)[0] == 400
        assert len(get(f"{api.url}{woocommerce.LIST_PATH}", WOO)[2]) == 10


def test_woocommerce_modified_after_is_strictly_after():
    with Served(woocommerce.WooCommerce(size=SIZE)) as api:
        before = api.imitation.clock.replace(tzinfo=None).isoformat()
        changed = api.call(api.imitation.mutate, changed=0.03, added=2)
        _, headers, body = get(f"{api.url}{woocommerce.LIST_PATH}?per_page=100&orderby=id&order=asc&"
                               f"modified_after={before}", WOO)
        assert [product["id"] for product in body] == sorted(changed["changed"] + changed["added"])
        assert headers["X-WP-Total"] == str(len(body))
        assert get(f"{api.url}{woocommerce.LIST_PATH}?modified_after={changed['at']}", WOO)[2] == []


def magento_page(api: Served, size: int, page: int, *filters: str) -> dict[str, Any]:
    query = "&".join([f"searchCriteria[pageSize]={size}", f"searchCriteria[currentPage]={page}", *filters])
    status, _, body = get(f"{api.url}/rest/V1/products?{query}", MAGENTO)
    assert status == 200, body
    return body


def test_magento_pages_by_total_count_and_past_the_end_answers_the_last_page_again():
    with Served(magento.Magento(size=SIZE)) as api:
        first = magento_page(api, 200, 1)
        pages = -(-first["total_count"] // 200)
        skus = [item["sku"] for page in range(1, pages + 1) for item in magento_page(api, 200, page)["items"]]
        assert first["total_count"] == SIZE and pages == 4
        assert sorted(skus) == sorted(api.imitation.products) and len(set(skus)) == SIZE
        last, past = magento_page(api, 200, 4), magento_page(api, 200, 5)
        assert past["items"] == last["items"] and len(past["items"]) == SIZE - 600
        assert past["search_criteria"]["current_page"] == 5  # the page asked for, echoed
        assert get(f"{api.url}/rest/default/V1/products", MAGENTO)[0] == 400  # searchCriteria is required


def test_magento_fields_keep_what_they_name_and_total_count_only_when_named():
    with Served(magento.Magento(size=SIZE)) as api:
        wanted = "fields=items[sku,extension_attributes[stock_item[qty]]]"
        body = magento_page(api, 100, 1, wanted)
        assert list(body) == ["items"]  # no total_count, no search_criteria
        assert body["items"][0] == {"sku": "WS12 M/Blue", "extension_attributes": {"stock_item": {"qty": 100}}}
        assert magento_page(api, 100, 1, "fields=items[sku],total_count")["total_count"] == SIZE
        status, _, one = get(f"{api.url}{magento.PREFIX}WS12%20M%2FBlue?fields=sku,price", MAGENTO)
        assert (status, one) == (200, {"sku": "WS12 M/Blue", "price": 22})
        assert get(f"{api.url}/rest/V1/products?searchCriteria[pageSize]=1&fields=items[sku", MAGENTO)[0] == 400


def test_magento_updated_at_gt_answers_the_changed_products():
    with Served(magento.Magento(size=SIZE)) as api:
        before = magento.spell(api.imitation.clock)
        changed = api.call(api.imitation.mutate, changed=0.03, removed=1, added=1)
        group = "searchCriteria[filter_groups][0][filters][0]"
        body = magento_page(api, 100, 1, f"{group}[field]=updated_at", f"{group}[value]={quote(before)}",
                            f"{group}[condition_type]=gt")
        assert sorted(item["sku"] for item in body["items"]) == sorted(changed["changed"] + changed["added"])
        assert body["total_count"] == len(body["items"])
        _, _, one = get(f"{api.url}{magento.PREFIX}{quote(changed['added'][0], safe='')}", MAGENTO)
        assert one in body["items"]


def test_bestbuy_pages_and_the_cursor_mark_that_comes_back_at_the_end():
    with Served(bestbuy.BestBuy(size=SIZE, per_second=1000)) as api:
        key = f"apiKey={bestbuy.API_KEY}&format=json&pageSize=100"
        first = get(f"{api.url}/v1/products?{key}&page=1")[2]
        assert (first["total"], first["totalPages"], first["from"], first["to"]) == (SIZE, 7, 1, 100)
        paged = [p["sku"] for n in range(1, 8) for p in get(f"{api.url}/v1/products?{key}&page={n}")[2]["products"]]
        assert paged == sorted(api.imitation.products)
        marks, skus, mark = [], [], "*"
        while len(marks) < WALK_LIMIT:
            body = get(f"{api.url}/v1/products?{key}&cursorMark={quote(mark, safe='')}")[2]
            skus += [product["sku"] for product in body["products"]]
            marks.append(body["nextCursorMark"])
            if body["nextCursorMark"] == mark:
                break
            mark = body["nextCursorMark"]
        assert skus == paged and len(marks) == 7 + 1 and body["products"] == []
        assert get(f"{api.url}/v1/products?{key}&cursorMark=*&page=2")[0] == 400
        assert get(f"{api.url}/v1/products?apiKey={bestbuy.API_KEY}&format=json&pageSize=101")[0] == 400


def test_bestbuy_over_five_a_second_is_a_403_over_quota():
    with Served(bestbuy.BestBuy(size=20)) as api:
        answers = [get(f"{api.url}/v1/products?apiKey={bestbuy.API_KEY}&format=json") for _ in range(12)]
        refused = [body for status, _, body in answers if status != 200]
        # 12 calls in well under a second: at most two windows' worth (10) get through.
        assert 2 <= len(refused) <= 7 and all(body == "<h1>Over Quota</h1>" for body in refused)
        assert [status for status, _, _ in answers].count(403) == len(refused)
        bad_key = get(f"{api.url}/v1/products?apiKey=wrong&format=json")
        assert bad_key[0] == 403 and bad_key[2]["errorMessage"] == "The provided API Key is invalid."
    with Served(bestbuy.BestBuy(size=20, per_second=100, per_day=3)) as api:
        statuses = [get(f"{api.url}/v1/products?apiKey={bestbuy.API_KEY}&format=json") for _ in range(4)]
        assert [s for s, _, _ in statuses] == [200, 200, 200, 403]
        assert statuses[-1][2] == {"errorCode": "403", "errorMessage": "Over Quota"}


def test_bestbuy_item_update_date_search_in_the_path():
    with Served(bestbuy.BestBuy(size=SIZE, per_second=1000)) as api:
        before = bestbuy.spell(api.imitation.clock)
        changed = api.call(api.imitation.mutate, changed=0.03)
        url = f"{api.url}/v1/products(itemUpdateDate>{before})?apiKey={bestbuy.API_KEY}&format=json&pageSize=100"
        body = get(url)[2]
        assert [product["sku"] for product in body["products"]] == sorted(changed["changed"] + changed["added"])
        encoded = get(url.replace("(", "%28").replace(">", "%3E").replace(")", "%29"))[2]
        assert encoded["products"] == body["products"]
        assert get(f"{api.url}/v1/products(colour=red)?apiKey={bestbuy.API_KEY}&format=json")[0] == 400


def test_dummyjson_limit_and_skip_and_its_rate_limit_headers():
    with Served(dummyjson.DummyJson(size=SIZE)) as api:
        ids, skip = [], 0
        while skip <= SIZE + 100:
            status, headers, body = get(f"{api.url}/products?limit=100&skip={skip}")
            assert status == 200 and headers["X-RateLimit-Limit"] == "200" and "RateLimit-Reset" in headers
            if not body["products"]:
                break
            ids += [product["id"] for product in body["products"]]
            skip += body["limit"]
        assert ids == list(range(1, SIZE + 1)) and body["total"] == SIZE and body["skip"] == SIZE
        assert len(get(f"{api.url}/products?limit=0")[2]["products"]) == SIZE
    with Served(dummyjson.DummyJson(size=20, quota=3, window=60.0)) as api:
        answers = [get(f"{api.url}/products") for _ in range(4)]
        assert [status for status, _, _ in answers] == [200, 200, 200, 429]
        assert answers[-1][1]["X-RateLimit-Remaining"] == "0" and int(answers[-1][1]["Retry-After"]) >= 1


def test_a_fault_on_the_nth_list_request_and_the_arrival_log():
    with Served(shopify.Shopify(size=SIZE, leak=200.0)) as api:
        api.imitation.faults["list#2"] = "once"
        _, headers, _ = get(f"{api.url}{shopify.LIST_PATH}?limit=250", SHOPIFY)
        again = link(headers, "next") or ""
        assert get(again, SHOPIFY)[0] == 503 and get(again, SHOPIFY)[0] == 200
        arrivals = api.arrivals()
        assert [(a["path"], a["status"]) for a in arrivals] == [(shopify.LIST_PATH, 200), (shopify.LIST_PATH, 503),
                                                                (shopify.LIST_PATH, 200)]
        assert arrivals[1]["query"] == again.split("?", 1)[1]


@pytest.mark.parametrize("size", [None, 2000])
def test_the_catalogue_size_is_the_asked_one(size):
    for module in (shopify, bigcommerce, woocommerce, magento, bestbuy, dummyjson):
        products = module.catalogue(size)
        if size is not None:
            assert len(products) == size
        assert module.catalogue(size) == products  # the same every time


def test_the_subprocess_serves_the_listing_and_mutates_through_its_control_routes():
    with ImitationsProcess(size=300, budgets=["shopify:leak=100", "bestbuy:per_second=50"]) as apis:
        base = apis.url("woocommerce") + woocommerce.LIST_PATH
        assert get(f"{base}?per_page=100", WOO)[1]["X-WP-Total"] == "300"
        changed = apis.mutate("woocommerce", changed=0.1, removed=2, added=1, seed=7)
        assert len(changed["changed"]) == 30 and len(changed["removed"]) == 2
        assert get(f"{base}?per_page=100", WOO)[1]["X-WP-Total"] == "299"
        since = datetime.fromisoformat(changed["at_utc"]).replace(tzinfo=None)
        body = get(f"{base}?per_page=100&{urlencode({'modified_after': since.isoformat()})}", WOO)[2]
        assert body == []  # strictly after the change
        assert len(apis.catalogue("woocommerce")["keys"]) == 299
        apis.rebuild("woocommerce", 50)
        assert get(f"{base}?per_page=100", WOO)[1]["X-WP-Total"] == "50"
        assert [a["status"] for a in apis.arrivals("woocommerce")] == [200] * 4
        apis.reset()
        assert apis.arrivals("woocommerce") == []
