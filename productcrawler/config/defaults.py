"""The configuration contract's names and defaults.

:mod:`.addon` fills them into Scrapy's settings (the environment, else the
default); :mod:`.crawl` parses and checks the values.
"""

from __future__ import annotations

from typing import Any

SIMULATOR_PORT = 8931
SIMULATOR_BASE_URL = f"http://127.0.0.1:{SIMULATOR_PORT}/v1"
#: Seconds between an instance's heartbeats in a shared pass (not a setting:
#: REDIS_HEARTBEAT_TTL must be longer, or a live instance would count as dead between two beats).
HEARTBEAT_INTERVAL = 2.0
#: The budget-header formats RATE_LIMIT_HEADERS names (productcrawler/ratelimit/budget_headers.py),
#: in the order ``auto`` tries them.
RATE_LIMIT_HEADER_FORMATS = ("ietf", "x-ratelimit", "bigcommerce", "shopify")


# name -> default; the one place where defaults live.
DEFAULTS: dict[str, Any] = {
    "API_BASE_URL": SIMULATOR_BASE_URL,
    # A product's URL, one {id} in it; None: {API_BASE_URL}/product/{id}.
    "PRODUCT_URL": None,
    # The first page of the product listing; set, a pass walks the listing instead of ids (docs/listing.md).
    "PRODUCT_LIST_URL": None,
    # Whether a complete, unfiltered listing marks the stored products it did not list removed.
    "LIST_REMOVALS": "true",
    # A GraphQL listing (listing/graphql.py): the query (or @file) POSTed to PRODUCT_LIST_URL, its variables.
    "PRODUCT_LIST_QUERY": None,
    "PRODUCT_LIST_VARIABLES": None,
    # How the listing's pages and products are found (productcrawler/listing/options.py); unset: recognised.
    "LIST_PAGINATION": "auto",
    **dict.fromkeys(("LIST_PRODUCTS", "LIST_NEXT", "LIST_CURSOR_PARAM", "LIST_PAGE_PARAM", "LIST_OFFSET_PARAM",
                     "LIST_LIMIT_PARAM", "LIST_TOTAL"), None),
    "LIST_TOTAL_COUNTS": "auto",
    # Incremental listings ({since} in PRODUCT_LIST_URL): how far before the last complete pass's
    # start {since} goes back, and how often a pass lists everything instead (passes, or a duration).
    "INCREMENTAL_LAG": "5m",
    "FULL_PASS_EVERY": "24h",
    "API_KEY": None,
    # A file holding API_KEY (a Docker or Kubernetes secret); not both.
    "API_KEY_FILE": None,
    # How API_KEY is sent: bearer, basic, header:NAME or query:NAME (config/auth.py).
    "API_AUTH": "bearer",
    # Fixed headers for the API's requests, a JSON object.
    "API_HEADERS": None,
    "API_TIMEOUT": 30.0,
    # The API's TLS certificate is verified (the system's CAs, SSL_CERT_FILE, API_CA_FILE); false: a lab only.
    "API_TLS_VERIFY": True,
    # A PEM file of CA certificates trusted for the API (and its proxies' tunnels) besides the system's.
    "API_CA_FILE": None,
    "PRODUCT_ID_START": 1,
    "PRODUCT_ID_END": 50_000,
    # Ids other than the range: "@path" (a file, one id a line) or "failed" (docs/ids.md).
    "PRODUCT_IDS": None,
    # "int" (64-bit) or "string" (SKUs of up to 64 characters).
    "PRODUCT_ID_TYPE": "int",
    "MAX_REQUESTS_PER_SECOND": 500.0,
    "RATE_LIMIT_BURST": None,  # None: derived from the rate, see burst_for_rate()
    # The budget the API announces in its answers' headers (ratelimit/budget_headers.py):
    # auto (every format), off, or one format's name.
    "RATE_LIMIT_HEADERS": "auto",
    # Seconds an announced reset or window may make the crawl wait; beyond, it is clamped.
    "RATE_LIMIT_HEADERS_MAX_WAIT": 300.0,
    "MAX_RETRIES": 3,
    "RETRY_BACKOFF_BASE": 1.0,
    "RETRY_BACKOFF_MAX": 60.0,
    "RETRY_AFTER_MAX": 300.0,
    "DATABASE_URL": "sqlite:///data/products.db",
    "DATABASE_BATCH_SIZE": 200,
    "DATABASE_FLUSH_INTERVAL": 0.5,
    "DATABASE_OUTAGE_MAX": 300.0,
    "REDIS_URL": None,
    "REDIS_KEY_PREFIX": "productcrawler",
    # Seconds without a heartbeat after which an instance of a shared pass counts
    # as dead and another takes its leases back (more than HEARTBEAT_INTERVAL).
    "REDIS_HEARTBEAT_TTL": 10.0,
    "PROGRESS_INTERVAL": 10.0,
    "METRICS_PORT": None,
    "METRICS_ADDRESS": "127.0.0.1",
    "METRICS_LINGER": 0.0,
    # Where the product is in the API's answer (answer/payload.py); None: the default rules.
    "PRODUCT_FIELDS": None,
    # Keep each product's JSON as the API sent it (products.answer), written when its digest changed.
    "KEEP_ANSWER": False,
    "KEEP_ANSWER_MAX_BYTES": 262144,
    # Variants as rows (answer/variants.py): the list's path, each variant's columns, and
    # whether the product's price (min, max) and stock (sum) come from its variants.
    "VARIANTS": None,
    "VARIANT_FIELDS": None,
    "PRODUCT_PRICE_FROM_VARIANTS": None,
    "PRODUCT_STOCK_FROM_VARIANTS": None,
    # Columns of the user's own (answer/declared.py): name:type=path,...; None: none.
    "PRODUCT_COLUMNS": None,
    # The products columns whose changes product_changes records: names, "all" or "none".
    "TRACK_CHANGES": "price,stock",
    # The wholesale-failure guard (guard/failure_guard.py): answers in a row (or
    # ids without any answer) that stop the crawl; 0 turns that check off.
    "GUARD_AUTH_FAILURES": 20,
    "GUARD_NOT_PRODUCTS": 20,
    "GUARD_404_STREAK": 500,
    "GUARD_NO_ANSWERS": 20,
    # Once products came in this run, the API must also have stayed silent this
    # long: a blip in a long crawl is ridden out, not a reason to stop it.
    "GUARD_NO_ANSWERS_SECONDS": 60.0,
    # Field drift (guard/field_drift.py): how many of a pass's first
    # product answers are held and compared with the last complete pass's
    # coverage before any is written; 0 turns the check off.
    "GUARD_FIELD_DRIFT": 100,
    # Where the run's pass summary is pushed at its end (monitoring/pushgateway.py); None: nowhere.
    "PUSHGATEWAY_URL": None,
    # The proxy pool (productcrawler/proxies/config.py reads and checks these).
    "PROXY_URLS": None,
    "PROXY_SCORE_SUCCESS": 5.0,
    "PROXY_SCORE_FAILURE": 20.0,
    "PROXY_SCORE_MIN": 50.0,
    "PROXY_REST_BASE": 10.0,
    "PROXY_REST_MAX": 300.0,
    "PROXY_MAX_REQUESTS_PER_SECOND": None,
}

