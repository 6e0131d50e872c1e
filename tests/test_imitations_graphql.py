"""The Shopify GraphQL Admin API and GitHub-style imitations, driven with plain urllib as their vendors document them.

Shopify: the calculated query cost (the documented rules and their worked
figures), the bucket of points refusing with THROTTLED and restoring at its
rate, MAX_COST_EXCEEDED, a cursor walk over every product once, the
``updated_at`` search answering exactly what ``mutate()`` changed, REST and
GraphQL of one imitation agreeing. GitHub: the ``Link`` walk, the 403 with
``x-ratelimit-remaining: 0`` until ``x-ratelimit-reset``, the plain 403 and the
401. Both in the imitations' subprocess too.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any

from tests.support.imitations import github, shopify, shopify_graphql
from tests.support.imitations.served import ImitationsProcess, Served

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
#: More requests than any walk here needs: a walk that never ends fails instead of hanging.
WALK_LIMIT = 50
#: The query a crawler sends, one page of products with their variants.
PRODUCTS = """
query Products($first: Int!, $cursor: String, $query: String) {
  products(first: $first, after: $cursor, query: $query) {
    edges { cursor node { id title vendor productType status updatedAt
      variants(first: 2) { edges { node { id sku price compareAtPrice inventoryQuantity } } } } }
    pageInfo { hasNextPage endCursor }
  }
}"""


def send(url: str, method: str = "GET", body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    """(status, headers, body: JSON if it is JSON, else text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with _OPENER.open(request, timeout=30) as answer:
            status, found, raw = answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        status, found, raw = error.code, error.headers, error.read()
    try:
        return status, found, json.loads(raw)
    except ValueError:
        return status, found, raw.decode()


def graphql(url: str, query: str, variables: dict[str, Any] | None = None,
            token: str = shopify.TOKEN) -> tuple[int, Any]:
    status, _, body = send(url + shopify_graphql.PATH, "POST", {"query": query, "variables": variables or {}},
                           {"X-Shopify-Access-Token": token})
    return status, body


def requested(url: str, query: str, variables: dict[str, Any] | None = None) -> int:
    status, body = graphql(url, query, variables)
    assert status == 200 and "errors" not in body, body
    return body["extensions"]["cost"]["requestedQueryCost"]


def gids(keys: list[int]) -> list[str]:
    return [f"gid://shopify/Product/{key}" for key in keys]


# Shopify: the cost.
def test_requested_cost_follows_shopifys_documented_rules():
    """shopify.dev, "GraphQL Admin API rate limits", Cost calculation: "Scalar 0, Enum 0, Object 1";
    Shopify Engineering, "Rate limiting GraphQL APIs by calculating query complexity": "Objects: one point",
    "Scalars and enums: zero", "Connections: two points plus the number of returned objects" (requested: the
    number asked with first/last, each object 1 plus what it holds, so nested connections multiply)."""
    with Served(shopify_graphql.ShopifyGraphql(size=30)) as api:
        # The post's example: shop is an object (1); id, name, timezoneOffsetMinutes and customerAccounts
        # are scalars and an enum (0). "The total query cost is 1."
        assert requested(api.url, "{ shop { id name timezoneOffsetMinutes customerAccounts } }") == 1
        # A connection: 2, plus first (10) objects of 1 each: 12, whatever scalars each holds.
        assert requested(api.url, "{ products(first: 10) { edges { node { title } } } }") == 12
        assert requested(api.url, "{ products(first: 10) { edges { cursor node { id title vendor status "
                                  "updatedAt } } pageInfo { hasNextPage endCursor } } }") == 12
        # The nodes form costs what edges { node } costs.
        assert requested(api.url, "{ products(first: 10) { nodes { id title } } }") == 12
        # Nested: products(first: 10) { ... variants(first: 5) { ... price } }: 2 + 10 * (1 + (2 + 5 * 1)) = 82.
        assert requested(api.url, "{ products(first: 10) { edges { node { title variants(first: 5) "
                                  "{ edges { node { price } } } } } } }") == 82
        # An object inside each node (priceRangeV2, and minVariantPrice in it): 2 + 250 * (1 + 1 + 1) = 752.
        assert requested(api.url, "{ products(first: 250) { nodes { id priceRangeV2 { minVariantPrice "
                                  "{ amount currencyCode } } } } }") == 752
        # first from a variable, and a fragment, count the same.
        assert requested(api.url, "query($n: Int!) { products(first: $n) { nodes { ...P } } } "
                                  "fragment P on Product { id variants(first: 3) { nodes { id } } }",
                         {"n": 20}) == 2 + 20 * (1 + 2 + 3)
        # The crawler's page: 2 + first * (1 + 2 + 2).
        assert requested(api.url, PRODUCTS, {"first": 100}) == 502


def test_actual_cost_counts_what_came_back_and_the_bucket_gets_the_rest_back():
    """"The actual cost is based on the results returned ... connection fields can return fewer edges than
    requested"; "the bucket is refunded the difference between the requested cost and the actual cost"."""
    with Served(shopify_graphql.ShopifyGraphql(size=7, restore=0.001)) as api:
        status, body = graphql(api.url, "{ products(first: 10) { edges { node { title variants(first: 5) "
                                        "{ edges { node { price } } } } } } }")
        cost = body["extensions"]["cost"]
        # 7 products, each its variants' connection and its variants: 2 + 7 * (1 + 2) + the variants.
        variants = sum(len(product["variants"]) for product in api.imitation.products.values())
        assert status == 200 and len(body["data"]["products"]["edges"]) == 7
        assert (cost["requestedQueryCost"], cost["actualQueryCost"]) == (82, 2 + 7 * 3 + variants)
        assert cost["throttleStatus"] == {"maximumAvailable": 1000.0, "currentlyAvailable": 1000 - (23 + variants),
                                          "restoreRate": 0.001}
        # A null object costs nothing inside it.
        _, body = graphql(api.url, '{ product(id: "gid://shopify/Product/1") { id variants(first: 5) '
                                   "{ nodes { id } } } }")
        assert body["data"] == {"product": None}
        assert (body["extensions"]["cost"]["requestedQueryCost"], body["extensions"]["cost"]["actualQueryCost"]) \
            == (1 + 2 + 5, 0)


def test_documented_budget_is_the_default():
    with Served(shopify_graphql.ShopifyGraphql(size=3)) as api:
        _, body = graphql(api.url, "{ shop { name } }")
        assert body["extensions"]["cost"]["throttleStatus"] == {
            "maximumAvailable": 1000.0, "currentlyAvailable": 999, "restoreRate": 50.0}


def test_bucket_refuses_with_throttled_and_restores_at_its_rate():
    query = "{ products(first: 40) { nodes { id } } }"  # 42 requested, 42 actual: 50 products
    with Served(shopify_graphql.ShopifyGraphql(size=50, maximum=100, restore=100.0)) as api:
        for _ in range(2):
            status, body = graphql(api.url, query)
            assert status == 200 and len(body["data"]["products"]["nodes"]) == 40
        status, body = graphql(api.url, query)
        assert status == 200 and "data" not in body
        assert body["errors"] == [{"message": "Throttled", "extensions": {
            "code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/rate-limits"}}]
        cost = body["extensions"]["cost"]
        assert cost["requestedQueryCost"] == 42 and cost["actualQueryCost"] is None
        left = cost["throttleStatus"]["currentlyAvailable"]
        assert 16 <= left < 42
        started = time.monotonic()
        time.sleep(0.4)
        status, body = graphql(api.url, query)
        waited = time.monotonic() - started
        assert status == 200 and "errors" not in body
        after = body["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"]
        # Restored 100 points a second while it waited, capped at 100, less the 42 spent.
        assert left + 0.4 * 100 - 42 - 1 <= after <= min(100, left + waited * 100 + 10) - 42
        assert [arrival["status"] for arrival in api.arrivals()] == [200] * 4
        assert [arrival["cost"]["actualQueryCost"] for arrival in api.arrivals()] == [42, 42, None, 42]


def test_a_query_over_1000_points_is_refused_whatever_the_bucket_holds():
    with Served(shopify_graphql.ShopifyGraphql(size=300, maximum=5000)) as api:
        over = "{ products(first: 250) { nodes { id variants(first: 1) { nodes { price } } } } }"
        status, body = graphql(api.url, over)
        assert status == 200 and "data" not in body
        [error] = body["errors"]
        assert error["message"] == "Query cost is 1002, which exceeds the single query max cost limit (1000)."
        assert error["extensions"]["code"] == "MAX_COST_EXCEEDED"
        assert body["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"] == 5000
        # 249 products with one variant each: 2 + 249 * 4 = 998; 250 without variants: 252.
        assert requested(api.url, over.replace("250", "249")) == 998
        assert requested(api.url, "{ products(first: 250) { nodes { id title updatedAt } } }") == 252


def test_wrong_token_bad_queries_and_a_connection_without_first():
    with Served(shopify_graphql.ShopifyGraphql(size=5)) as api:
        status, body = graphql(api.url, "{ shop { name } }", token="shpat_wrong")
        assert status == 401
        assert body == {"errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"}
        for query in ("{ products(first: 2) { nodes { id ", "{ products(first: 2) { nodes { price } } }",
                      "{ products { nodes { id } } }", "mutation { productDelete(id: 1) { id } }"):
            status, body = graphql(api.url, query)
            assert status == 200 and "data" not in body and body["errors"], query
            assert all(error.get("extensions", {}).get("code") != "THROTTLED" for error in body["errors"])
        status, _, body = send(api.url + shopify_graphql.PATH, "POST", ["not", "a", "query"],
                               {"X-Shopify-Access-Token": shopify.TOKEN})
        assert status == 400


# Shopify: pages and changes.
def walk(url: str, query_filter: str | None = None, first: int = 100) -> tuple[list[dict[str, Any]], int]:
    nodes: list[dict[str, Any]] = []
    cursor, requests = None, 0
    while True:
        assert requests < WALK_LIMIT, "hasNextPage never turns false"
        status, body = graphql(url, PRODUCTS, {"first": first, "cursor": cursor, "query": query_filter})
        requests += 1
        assert status == 200 and "errors" not in body, body
        page = body["data"]["products"]
        nodes += [edge["node"] for edge in page["edges"]]
        assert [edge["cursor"] for edge in page["edges"]][-1:] == ([page["pageInfo"]["endCursor"]]
                                                                   if page["edges"] else [])
        if not page["pageInfo"]["hasNextPage"]:
            return nodes, requests
        cursor = page["pageInfo"]["endCursor"]


def test_cursor_walk_answers_every_product_once_as_rest_does():
    """A bucket far larger than the walk spends: this test is of paging, not of the budget (timed elsewhere)."""
    with Served(shopify_graphql.ShopifyGraphql(size=630, maximum=100_000, restore=10_000.0)) as api:
        nodes, requests = walk(api.url)
        assert [node["id"] for node in nodes] == gids(sorted(api.imitation.products)) and requests == 7
        # The nodes form pages alike, 250 at a time.
        ids, cursor = [], None
        for _ in range(3):
            _, body = graphql(api.url, "query($c: String) { products(first: 250, after: $c) { nodes { id } "
                                       "pageInfo { hasNextPage endCursor } } }", {"c": cursor})
            ids += [node["id"] for node in body["data"]["products"]["nodes"]]
            cursor = body["data"]["products"]["pageInfo"]["endCursor"]
        assert ids == gids(sorted(api.imitation.products))
        assert body["data"]["products"]["pageInfo"]["hasNextPage"] is False
        # One product left after the page is a next page; none is not.
        for first, more in ((629, True), (630, False)):
            _, body = graphql(api.url, f"{{ products(first: {first}) {{ pageInfo {{ hasNextPage }} }} }}")
            assert body["data"]["products"]["pageInfo"]["hasNextPage"] is more
        # The same product by REST and by GraphQL.
        key = sorted(api.imitation.products)[123]
        _, _, rest = send(f"{api.url}/admin/api/2024-10/products/{key}.json",
                          headers={"X-Shopify-Access-Token": shopify.TOKEN})
        node = next(node for node in nodes if node["id"] == f"gid://shopify/Product/{key}")
        assert (node["title"], node["vendor"], node["variants"]["edges"][0]["node"]["price"]) == (
            rest["product"]["title"], rest["product"]["vendor"], rest["product"]["variants"][0]["price"])
        status, body = graphql(api.url, '{ products(first: 2, after: "bm90IG91cnM=") { nodes { id } } }')
        assert status == 200 and body["errors"] and body["data"] is None


def test_updated_at_search_answers_exactly_the_mutated_products():
    with Served(shopify_graphql.ShopifyGraphql(size=400, maximum=100_000, restore=10_000.0)) as api:
        changes = api.call(api.imitation.mutate, changed=0.03, removed=2, added=3)
        when = changes["at_utc"].replace("+00:00", "Z")
        expected = gids(sorted(changes["changed"] + changes["added"]))
        assert len(expected) == 12 + 3
        for search in (f"updated_at:>='{when}'", f"updated_at:>={when}", f'updated_at:>="{when}"'):
            nodes, _ = walk(api.url, search, first=5)
            assert [node["id"] for node in nodes] == expected, search
            assert {node["updatedAt"] for node in nodes} == {when}
        assert walk(api.url, f"updated_at:>'{when}'")[0] == []
        removed = set(gids(changes["removed"]))
        assert removed and not removed & {node["id"] for node in walk(api.url)[0]}


# GitHub.
def github_get(url: str, token: str = github.TOKEN) -> tuple[int, Any, Any]:
    return send(url, headers={"Authorization": f"Bearer {token}"})


def next_link(headers: Any) -> str | None:
    found = re.search(r'<([^>]+)>; rel="next"', headers.get("Link") or "")
    return found[1] if found else None


def test_github_walks_link_next_with_the_rate_limit_headers_on_every_answer():
    with Served(github.GitHub(size=95)) as api:
        ids, remaining = [], []
        url: str | None = f"{api.url}/products?per_page=30"
        while url:
            assert len(remaining) < WALK_LIMIT
            status, headers, body = github_get(url)
            assert status == 200
            assert (headers["x-ratelimit-limit"], headers["x-ratelimit-resource"]) == ("5000", "core")
            assert int(headers["x-ratelimit-used"]) + int(headers["x-ratelimit-remaining"]) == 5000
            assert int(headers["x-ratelimit-reset"]) > time.time() + 3000
            remaining.append(int(headers["x-ratelimit-remaining"]))
            ids += [product["id"] for product in body]
            url = next_link(headers)
        assert ids == sorted(api.imitation.products) and remaining == [4999, 4998, 4997, 4996]
        assert 'rel="last"' not in (headers.get("Link") or "") and 'rel="first"' in headers["Link"]


def test_github_answers_403_with_nothing_remaining_until_the_reset():
    with Served(github.GitHub(size=10, limit=4, window=2.0)) as api:
        url = f"{api.url}/products?per_page=5"
        answers = [github_get(url) for _ in range(6)]
        assert [status for status, _, _ in answers] == [200, 200, 200, 200, 403, 403]
        assert [headers["x-ratelimit-remaining"] for _, headers, _ in answers] == ["3", "2", "1", "0", "0", "0"]
        _, headers, body = answers[-1]
        assert body["message"].startswith("API rate limit exceeded for ")
        assert body["documentation_url"].startswith("https://docs.github.com/")
        reset = int(headers["x-ratelimit-reset"])
        assert headers["x-ratelimit-used"] == "4" and time.time() < reset <= time.time() + 3
        time.sleep(max(0.0, reset - time.time()) + 0.05)
        status, headers, _ = github_get(url)
        assert status == 200 and headers["x-ratelimit-remaining"] == "3"
        assert int(headers["x-ratelimit-reset"]) > reset
    with Served(github.GitHub(size=10, limit=1, exceeded_status=429)) as api:
        assert [github_get(f"{api.url}/products")[0] for _ in range(2)] == [200, 429]


def test_github_plain_403_and_401_are_not_rate_limits():
    with Served(github.GitHub(size=10, limit=5)) as api:
        status, headers, body = github_get(f"{api.url}/products", github.FORBIDDEN_TOKEN)
        assert status == 403 and body["message"] == "Resource not accessible by integration"
        assert headers["x-ratelimit-remaining"] == "4"
        status, headers, body = github_get(f"{api.url}/products", "ghp_wrong")
        assert status == 401 and body["message"] == "Bad credentials"
        assert headers["x-ratelimit-remaining"] != "0"
        status, _, body = send(f"{api.url}/products")
        assert status == 401 and body["message"] == "Requires authentication"
        status, _, body = github_get(f"{api.url}/products/3")
        assert status == 200 and body["id"] == 3


def test_both_in_the_subprocess():
    with ImitationsProcess(size=60, budgets=["shopify-graphql:maximum=100", "github:limit=2"]) as apis:
        status, body = graphql(apis.url("shopify-graphql"), "{ products(first: 60) { nodes { id } } }")
        assert status == 200 and len(body["data"]["products"]["nodes"]) == 60
        assert body["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"] == 100 - 62
        changes = apis.mutate("shopify-graphql", changed=0.05, removed=0, added=0)
        when = changes["at_utc"].replace("+00:00", "Z")
        status, body = graphql(apis.url("shopify-graphql"),
                               f"{{ products(first: 10, query: \"updated_at:>='{when}'\") {{ nodes {{ id }} }} }}")
        assert [node["id"] for node in body["data"]["products"]["nodes"]] == gids(changes["changed"])
        arrival = apis.arrivals("shopify-graphql")[-1]
        assert json.loads(arrival["body"])["query"].startswith("{ products(first: 10")
        assert arrival["cost"]["requestedQueryCost"] == 12
        statuses = [github_get(f"{apis.url('github')}/products")[0] for _ in range(3)]
        assert statuses == [200, 200, 403]
