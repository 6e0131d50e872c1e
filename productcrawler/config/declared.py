"""Every setting, declared once: its name, default, parser, topic and what it means.

Everything else is derived from :data:`SETTINGS`: the defaults the add-on fills
into Scrapy's settings (:data:`DEFAULTS`), the configuration reference page
(:mod:`.reference`, ``docs/configuration.md``) and the typed configuration
(:mod:`.sections`, read through :class:`~.reader.Reader`). A rule between
settings (``RETRY_BACKOFF_MAX`` not below ``RETRY_BACKOFF_BASE``) is checked
where the section combines them.

:data:`SCRAPYS` declares the settings of Scrapy's own that the crawl reads
with a check of its own: their defaults are Scrapy's, their documentation is
Scrapy's and ``docs/retries.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy.settings import default_settings as scrapy_defaults

from productcrawler.config import parsers as p
from productcrawler.config.proxy_urls import parse_proxy_urls
from productcrawler.config.values import (
    boolean,
    ca_file,
    database_url,
    field_drift,
    flag,
    product_fields,
    pushgateway_url,
    redis_url,
    switch,
)
from productcrawler.ids.idfile import MAX_INT_ID
from productcrawler.listing.options import LIMIT_PARAMS, PAGE_PARAMS

SIMULATOR_PORT = 8931
SIMULATOR_BASE_URL = f"http://127.0.0.1:{SIMULATOR_PORT}/v1"
#: GUARD_FIELD_DRIFT's smallest sample (but 0, off): see guard/field_drift.py for why.
FIELD_DRIFT_MIN_SAMPLE = 20


@dataclass(frozen=True)
class Setting:
    name: str
    #: The value when nothing sets it (None: unset, which the parser reads as "not given").
    default: Any
    #: ``parse(name, raw)``: the typed value, or ConfigError naming the setting.
    parse: p.Parser
    #: The reference page's section (:data:`~.reference.TOPICS`).
    topic: str
    #: What kind of value it takes, as the page says it.
    kind: str
    #: One line: what it does.
    meaning: str
    #: The default as the page says it.
    shown: str
    #: Filled from the environment by the add-on (part of :data:`DEFAULTS`); False for a
    #: component's switch and the process's tuning, which ``settings.py``, a spider or ``-s`` set,
    #: and for LOG_FORMAT, which the logging set-up reads itself.
    environment: bool = True
    #: Scrapy's setting of the same meaning (the one given at the higher priority wins).
    alias: str | None = None


def _listing(name: str, meaning: str, shown: str, parse: p.Parser = p.optional_text,
             default: str | None = None) -> Setting:
    return Setting(name, default, parse, "listing", "text", meaning, shown)


SETTINGS: tuple[Setting, ...] = (
    # -- the API
    Setting("API_BASE_URL", SIMULATOR_BASE_URL, p.api_url, "api", "URL",
            "base of the product API; the spider fetches `{API_BASE_URL}/product/{id}`",
            "`http://127.0.0.1:8931/v1` (the bundled simulator)"),
    Setting("PRODUCT_URL", None, p.raw, "api", "URL template",
            "a product's URL with exactly one `{id}`, the id percent-encoded into it "
            "(`https://shop.example/admin/api/2024-10/products/{id}.json`); see [the cookbook](cookbook.md)",
            "`{API_BASE_URL}/product/{id}`"),
    Setting("PRODUCT_LIST_URL", None, p.raw, "listing", "URL",
            "the first page of the API's product listing; set, a pass walks the listing page by page "
            "(100–250 products a request) instead of fetching products by id; `{since}` or "
            "`{since:FORMAT}` in it makes passes incremental; see [Listing](listing.md)",
            "unset: products by id"),
    Setting("LIST_REMOVALS", "true", flag, "listing", "boolean",
            "whether a complete listing pass (every page stored) marks the stored products it did not "
            "list removed (`removed_at`, a `removed` change row); turn it off for a filtered listing",
            "`true`"),
    Setting("PRODUCT_LIST_QUERY", None, p.raw, "listing", "GraphQL query or @file",
            "makes `PRODUCT_LIST_URL` a GraphQL endpoint (Shopify's Admin API): the query, POSTed with its "
            "variables, pages a connection (`edges { node }` or `nodes`, `pageInfo { hasNextPage endCursor }`) "
            "through a `$cursor` variable (`LIST_CURSOR_PARAM` names another); see "
            "[Listing](listing.md#graphql)",
            "unset: a REST listing"),
    Setting("PRODUCT_LIST_VARIABLES", None, p.raw, "listing", "JSON object",
            "the GraphQL query's other variables; `{since}` in a value makes passes incremental "
            "(`{\"query\": \"updated_at:>='{since}'\"}`)",
            "unset: `{}`"),
    Setting("INCREMENTAL_LAG", "5m", p.duration, "listing", "duration",
            "`{since}` in `PRODUCT_LIST_URL` is the start of the last complete pass over the listing minus "
            "this (`90s`, `5m`, `1h`), so that late writes are listed again; see "
            "[Listing](listing.md#incremental-passes)",
            "`5m`"),
    Setting("FULL_PASS_EVERY", "24h", p.full_pass_every, "listing", "passes or duration",
            "how often an incremental listing lists everything instead (`{since}` the epoch), the only pass "
            "that marks unlisted products removed: every Nth pass (`24`) or once the last full pass began "
            "this long ago (`24h`, `7d`)",
            "`24h`"),
    Setting("API_KEY", None, p.raw, "api", "text (secret)",
            "the API's credential, sent as `API_AUTH` says (added by the download handler to the "
            "API's own URLs only; never in a queue, Redis, the database, a log line, the stats or the"
            " metrics); with `API_AUTH=basic`, `user:password`. Give it in the environment or by "
            "`API_KEY_FILE`, never with `-s` (a command line is readable by every user of the machine)",
            "none"),
    Setting("API_KEY_FILE", None, p.raw, "api", "path",
            "a file holding `API_KEY` (one trailing newline dropped): a Docker or Kubernetes secret "
            "(`/run/secrets/api_key`); an unreadable or empty file, or both `API_KEY` and `API_KEY_FILE`, "
            "stops the crawl at start (exit 2). See [Security](security.md)",
            "none"),
    Setting("API_AUTH", "bearer", p.raw, "api", "mode",
            "how `API_KEY` is sent: `bearer` (`Authorization: Bearer KEY`), `header:NAME`, "
            "`query:NAME` (`NAME=KEY` in the query), `basic` (RFC 7617)",
            "`bearer`"),
    Setting("API_HEADERS", None, p.raw, "api", "JSON object",
            "extra fixed request headers for the API, a JSON object of strings "
            "(`{\"X-EBAY-C-MARKETPLACE-ID\": \"EBAY_US\"}`)",
            "none"),
    Setting("API_TIMEOUT", 30.0, p.real(above=0), "api", "seconds",
            "seconds per request (Scrapy's `DOWNLOAD_TIMEOUT` works too, by the same rule as "
            "`RETRY_TIMES`: see [Retries](retries.md#scrapys-retry-settings))",
            "30", alias="DOWNLOAD_TIMEOUT"),
    Setting("API_TLS_VERIFY", True, boolean, "api", "boolean",
            "verify the API's TLS certificate (chain and host name), directly and inside a proxy's "
            "tunnel, against the system's CAs (or `SSL_CERT_FILE`) and `API_CA_FILE`; a certificate "
            "that fails stops the crawl, exit 3 (`tls_certificate`). `false` accepts any certificate, "
            "with a WARNING: a lab only (Scrapy's `DOWNLOAD_VERIFY_CERTIFICATES`, given, counts by the "
            "same rule as `RETRY_TIMES`); see [Security](security.md#tls)",
            "`true`", alias="DOWNLOAD_VERIFY_CERTIFICATES"),
    Setting("API_CA_FILE", None, ca_file, "api", "path",
            "a PEM file of CA certificates trusted for the API besides the system's (a private CA); "
            "a file that is not there or holds no certificate exits 2",
            "unset: the system's CAs only"),
    # -- ids
    Setting("PRODUCT_ID_START", 1, p.whole(minimum=1, maximum=MAX_INT_ID), "ids", "id",
            "first id of the inclusive range; spider arg `-a start_id=` overrides",
            "1"),
    Setting("PRODUCT_ID_END", 50_000, p.whole(minimum=1, maximum=MAX_INT_ID), "ids", "id",
            "last id of the inclusive range; spider arg `-a end_id=` overrides",
            "50000"),
    Setting("PRODUCT_IDS", None, p.raw, "ids", "`@path`, `failed` or `list`",
            "ids that are not a dense range, instead of it: `@path` (a file, one id a line, streamed), "
            "`failed` (the ids recorded failed in the latest pass) or `list` (the ids `PRODUCT_LIST_URL` "
            "lists, each product then fetched by `PRODUCT_URL`; see "
            "[Listing](listing.md#ids-from-the-listing-product_idslist)); spider arg `-a ids=` overrides "
            "(any of the three); see [Ids](ids.md)",
            "unset: the range"),
    Setting("PRODUCT_ID_TYPE", "int", p.id_type, "ids", "`int` or `string`",
            "`int` (64-bit, `BIGINT` columns) or `string` (SKUs of up to 64 characters, `VARCHAR(64)`); "
            "tables of earlier versions are migrated on the first run (see [Ids](ids.md))",
            "`int`"),
    # -- the rate limit
    Setting("RATE_LIMIT_ENABLED", True, switch, "rate", "boolean",
            "the token bucket that caps the requests sent (`ratelimit/middleware.py`); `false` sends "
            "unthrottled (a test bench only); set in `settings.py` or with `-s`",
            "`true`", environment=False),
    Setting("MAX_REQUESTS_PER_SECOND", 500.0, p.real(above=0), "rate", "number > 0",
            "global cap on requests sent, retries included, across all instances sharing a Redis",
            "500"),
    Setting("RATE_LIMIT_BURST", None, p.optional(p.real(minimum=1)), "rate", "number ≥ 1",
            "token-bucket capacity",
            "2 % of the rate (at least 1)"),
    Setting("RATE_LIMIT_HEADERS", "auto", p.rate_limit_headers, "rate", "`auto`, `off` or a format",
            "read the budget the API announces in its answers' headers and pace below it (shared through "
            "Redis): `auto` (every format), `off`, or one of `ietf`, `x-ratelimit`, `bigcommerce`, `shopify`; "
            "a GraphQL listing's cost (in the body) is read unless `off`; "
            "see [Rate-limit headers](rate-limit-headers.md)",
            "`auto`"),
    Setting("RATE_LIMIT_HEADERS_MAX_WAIT", 300.0, p.real(above=0), "rate", "seconds > 0",
            "the longest an announced reset or window may make the crawl wait: one beyond it is clamped, "
            "with one warning per header; see [Rate-limit headers](rate-limit-headers.md#bounds)",
            "300"),
    # -- retries
    Setting("MAX_RETRIES", 3, p.whole(minimum=0), "retries", "whole number ≥ 0",
            "retries per id before it is recorded as failed (Scrapy's `RETRY_TIMES` works too: see "
            "[Retries](retries.md#scrapys-retry-settings))",
            "3", alias="RETRY_TIMES"),
    Setting("RETRY_BACKOFF_BASE", 1.0, p.real(minimum=0), "retries", "seconds",
            "first delay of the exponential backoff for 5xx, timeouts, connection errors and bad bodies",
            "1"),
    Setting("RETRY_BACKOFF_MAX", 60.0, p.real(minimum=0), "retries", "seconds",
            "longest delay of that backoff (not below `RETRY_BACKOFF_BASE`)",
            "60"),
    Setting("RETRY_AFTER_MAX", 300.0, p.real(minimum=0), "retries", "seconds",
            "a `Retry-After` above this many seconds is capped",
            "300"),
    # -- storage
    Setting("DATABASE_URL", "sqlite:///data/products.db", lambda name, raw: database_url(raw), "storage", "URL",
            "`mysql://user:password@host:port/db` (PyMySQL; MariaDB too), "
            "`postgresql://user:password@host:port/db` (psycopg 3) or `sqlite:///relative/path.db` / "
            "`sqlite:////absolute/path.db`; MySQL and PostgreSQL take the query options `ssl_ca`, `ssl_cert`, "
            "`ssl_key`, `ssl_key_password`, `ssl_verify_cert`, `ssl_verify_identity`, `unix_socket` "
            "(for PostgreSQL: libpq's `sslrootcert`, `sslmode=verify-ca`/`verify-full`, `sslcert`, `sslkey`, "
            "`sslpassword`, the socket directory) "
            "(see [TLS and Redis "
            "Cluster](operations.md#managed-mysql-and-redis-tls-acl-users-redis-cluster)); any other "
            "option stops the crawl at start. A password with `?`, `#`, `/` or `@` in it must be "
            "percent-encoded (`?` as `%3F`, `#` as `%23`, `/` as `%2F`, `@` as `%40`; the same in "
            "`REDIS_URL`): unencoded, the URL reads differently, and the error says so without "
            "quoting the driver's message (the host or database it names would be pieces of the "
            "password). An `@` in an option's value (`ssl_ca=/etc/ssl/ca@2026.pem`) needs no encoding. "
            "The user and the database name are percent-decoded too (`/caf%C3%A9` is the database `café`)",
            "`sqlite:///data/products.db`"),
    Setting("DATABASE_BATCH_SIZE", 200, p.whole(minimum=1), "storage", "whole number",
            "rows per write (a batch is written when it is full or when the flush timer fires)",
            "200"),
    Setting("DATABASE_FLUSH_INTERVAL", 0.5, p.real(above=0), "storage", "seconds",
            "seconds between flushes of a batch that is not full",
            "0.5"),
    Setting("DATABASE_OUTAGE_MAX", 300.0, p.real(above=0), "storage", "seconds",
            "seconds the database may stay unreachable before the crawl stops (nothing is lost: the "
            "next run resumes)",
            "300"),
    # -- Redis
    Setting("REDIS_URL", None, lambda name, raw: redis_url(raw), "redis", "URL",
            "unset: one process, local scheduler. Set (`redis://host:6379/0`, "
            "`rediss://user:password@host:6380/0?ssl_ca_certs=...` over TLS, "
            "`redis+cluster://host:6379` for a Redis Cluster): the shared scheduler, rate limit and "
            "pass. The database after the host (or `?db=`) must be a whole number, 0 or more: "
            "anything else stops the crawl at start (redis-py would quietly use database 0)",
            "unset"),
    Setting("REDIS_KEY_PREFIX", "productcrawler", p.key_prefix, "redis", "text",
            "prefix of every Redis key (one per independent crawl); no `{` or `}` (the crawl puts it "
            "in braces as the cluster hash tag)",
            "`productcrawler`"),
    Setting("REDIS_HEARTBEAT_TTL", 10.0, p.heartbeat_ttl, "redis", "seconds",
            "seconds without a heartbeat (each instance sends one every 2 s) after which an instance "
            "sharing the pass counts as dead and another takes its leases back; must be more than 2 "
            "and at most 86400. A shorter TTL recovers a killed instance's ids sooner; one close to 2"
            " s lets a busy but live instance count as dead (its leased ids are then fetched twice; "
            "none is lost)",
            "10"),
    # -- progress, metrics and logs
    Setting("PROGRESS_INTERVAL", 10.0, p.real(above=0), "ops", "seconds",
            "seconds between progress lines",
            "10"),
    Setting("METRICS_PORT", None, p.optional(p.whole(minimum=0, maximum=65535)), "ops", "port",
            "serve Prometheus metrics on this port (0: any free port, logged)",
            "off"),
    Setting("METRICS_ADDRESS", "127.0.0.1", p.listen_address, "ops", "address",
            "address the metrics endpoint listens on (`0.0.0.0` in the Docker image)",
            "127.0.0.1"),
    Setting("METRICS_LINGER", 0.0, p.real(minimum=0), "ops", "seconds",
            "seconds the metrics endpoint stays up after the crawl ends, for a last scrape (15 in "
            "docker compose)",
            "0"),
    Setting("LOG_FORMAT", None, p.lowered_text, "ops", "`json` or `human`",
            "`json`: one JSON object per log line (see Reading the log); `human` or unset: Scrapy's "
            "text lines",
            "human", environment=False),
    Setting("GC_GEN0_THRESHOLD", 50_000, p.gc_threshold, "ops", "whole number ≥ 0",
            "the garbage collector's young-generation threshold while the crawl runs (fewer pauses of the "
            "reactor, see [Design notes](design-notes.md#garbage-collector-tuning)); 0 keeps Python's",
            "50000", environment=False),
    # -- the API's answer
    Setting("PRODUCT_FIELDS", None, lambda name, raw: product_fields(raw), "api", "column=path list",
            "where our columns are in the API's answer: `column=path,...` (see [The API's "
            "answer](payload.md#the-apis-answer-shapes-and-product_fields)); columns not named keep "
            "the default rules",
            "unset: `id` or `product_id`, `name` or `title`, other columns by name, one "
            "envelope level unwrapped"),
    Setting("PRODUCT_COLUMNS", None, p.product_columns, "api", "name:type=path list",
            "columns of your own in `products`: `name:type=path,...`, e.g. "
            "`sku:text(64)=product.variants.0.sku,compare_at:decimal(10,2)=product.variants.0.compare_at_price,"
            "updated_at:datetime=product.updated_at,tags:json=product.tags`; types `text(N)`, `integer`, "
            "`decimal(P,S)`, `boolean`, `datetime` (ISO 8601 with an offset, stored UTC; one without is unusable), "
            "`json`; paths from "
            "the answer's root, a list's item by its position. Cleaned like the article's columns (an "
            "unusable value is NULL, counted `cleaning/invalid/<column>`; a missing one "
            "`cleaning/absent/<column>`); added to an existing table at start with every row kept; a column "
            "whose type differs from the table's exits 2 (see [The API's answer]"
            "(payload.md#columns-of-your-own-product_columns))",
            "unset: the article's eight columns"),
    Setting("VARIANTS", None, p.raw, "api", "path",
            "where a product's list of variants is in the answer (`product.variants`, `variants`, "
            "`data.variants`; GraphQL's `variants.edges`, read node by node): one row per variant in "
            "`product_variants`, written with its product; a variant missing from a later answer is marked "
            "removed, not deleted (see [What changed](what-changed.md#variants-as-rows))",
            "unset: variants are not kept"),
    Setting("VARIANT_FIELDS", None, p.raw, "api", "column=path list",
            "each variant's columns by paths relative to the variant: `variant_id` (required), `sku`, "
            "`price`, `stock`, and columns of your own as in PRODUCT_COLUMNS (`name:type=path`), e.g. "
            "`variant_id=id,sku=sku,price=price,stock=inventory_quantity,"
            "compare_at:decimal(10,2)=compare_at_price`; TRACK_CHANGES may name the declared ones",
            "unset"),
    Setting("PRODUCT_PRICE_FROM_VARIANTS", None, p.raw, "api", "`min` or `max`",
            "the product's price as the lowest (`min`) or highest (`max`) of its variants' prices (a "
            "product without variants keeps its own); needs VARIANTS",
            "unset"),
    Setting("PRODUCT_STOCK_FROM_VARIANTS", None, p.raw, "api", "`sum`",
            "the product's stock as the sum of its variants' stocks (a product without variants keeps its own); "
            "needs VARIANTS",
            "unset"),
    Setting("KEEP_ANSWER", False, flag, "storage", "boolean",
            "keep each product's JSON as the API sent it in `products.answer` (MySQL/MariaDB `JSON`, SQLite "
            "text, PostgreSQL `jsonb`) with its SHA-256 in `answer_digest`; written only when the digest "
            "changed (see [What changed](what-changed.md#the-answer-as-received-keep_answer))",
            "false"),
    Setting("KEEP_ANSWER_MAX_BYTES", 262144, p.whole(minimum=1), "storage", "bytes",
            "a larger answer than this keeps its digest alone and is counted `answers/too_large`",
            "262144"),
    Setting("TRACK_CHANGES", "price,stock", p.raw, "storage", "column list",
            "the `products` columns whose changes `product_changes` records, comma-separated (`name`,"
            " `price`, `stock`, `category`, `brand`, `rating`, `sales_count`, and the PRODUCT_COLUMNS "
            "names), `all` or `none` (see "
            "[docs/what-changed.md](what-changed.md)); an unknown column exits 2",
            "price,stock"),
    # -- the guard
    Setting("GUARD_ENABLED", True, switch, "guard", "boolean",
            "the wholesale-failure guard (`guard/failure_guard.py`) and its checks below; `false`: no guard "
            "(the proxies still stop the crawl on wrong credentials); set in `settings.py` or with `-s`",
            "`true`", environment=False),
    Setting("GUARD_AUTH_FAILURES", 20, p.whole(minimum=0), "guard", "whole number ≥ 0",
            "401/403 answers with no 2xx or 404 between them that stop the crawl, exit 3; 0 turns the"
            " check off",
            "20"),
    Setting("GUARD_NOT_PRODUCTS", 20, p.whole(minimum=0), "guard", "whole number ≥ 0",
            "200 answers in a row that are not products (no product between them) that stop the "
            "crawl, exit 3; 0: off",
            "20"),
    Setting("GUARD_404_STREAK", 500, p.whole(minimum=0), "guard", "whole number ≥ 0",
            "404 answers with no product between them that stop the crawl, exit 3; 0: off",
            "500"),
    Setting("GUARD_NO_ANSWERS", 20, p.whole(minimum=0), "guard", "whole number ≥ 0",
            "ids given up with no HTTP answer (a download error after the retries, or one never "
            "retried; through proxies also a 502/504) with no answer between them that stop the "
            "crawl, exit 3; 0: off (and off for the proxies-down stop: see Proxies)",
            "20"),
    Setting("GUARD_NO_ANSWERS_SECONDS", 60.0, p.real(minimum=0), "guard", "seconds",
            "once the API answered in this run, how long it must also have stayed silent before those"
            " ids stop the crawl (a blip in a long crawl is ridden out: its ids wait, then are "
            "recorded when the API answers again); also how long every proxy may fail on its own "
            "account before the crawl stops",
            "60"),
    Setting("GUARD_FIELD_DRIFT", 100, lambda name, raw: field_drift(raw, FIELD_DRIFT_MIN_SAMPLE), "guard",
            "whole number (0, or ≥ 20)",
            "how many of a run's first product answers are held (nothing written) and compared with "
            "the last complete pass: a column non-NULL in at least 90 % of that pass's products and "
            "NULL in at least 90 % of these answers stops the crawl, exit 3 (see "
            "[docs/monitoring-passes.md](monitoring-passes.md)); 0: off, else at least 20",
            "100"),
    Setting("PUSHGATEWAY_URL", None, lambda name, raw: pushgateway_url(raw), "ops", "URL",
            "push each run's pass summary (counts, coverage, duration, exit status, end of the last "
            "complete pass) to this Prometheus Pushgateway at its end, `http://host:9091`; a gateway "
            "that is away costs one WARNING (see [docs/monitoring-passes.md](monitoring-passes.md))",
            "unset: no push (`http://pushgateway:9091` in docker compose)"),
    # -- proxies
    Setting("PROXY_URLS", None, lambda name, raw: parse_proxy_urls(raw), "proxies", "URL list or @file",
            "send every request through a pool of HTTP proxies: `http://user:pass@host:port,...` or "
            "`@/path/to/file` (one URL a line); see Proxies",
            "unset: no proxy"),
    Setting("PROXY_SCORE_SUCCESS", 5.0, p.real(above=0), "proxies", "points",
            "health points a proxy gains per success (score 0..100, starts at 100)",
            "5"),
    Setting("PROXY_SCORE_FAILURE", 20.0, p.real(above=0), "proxies", "points",
            "health points a proxy loses per failure blamed on it",
            "20"),
    Setting("PROXY_SCORE_MIN", 50.0, p.real(above=0), "proxies", "points",
            "a failure that takes a proxy below this score rests it",
            "50"),
    Setting("PROXY_REST_BASE", 10.0, p.real(above=0), "proxies", "seconds",
            "a rest lasts `min(PROXY_REST_MAX, PROXY_REST_BASE × 2^(n−1))` seconds (half fixed, half "
            "random), n = rests in a row",
            "10"),
    Setting("PROXY_REST_MAX", 300.0, p.real(above=0), "proxies", "seconds",
            "the longest rest (not below `PROXY_REST_BASE`)",
            "300"),
    Setting("PROXY_MAX_REQUESTS_PER_SECOND", None, p.optional(p.real(above=0)), "proxies", "number > 0",
            "cap per proxy, on top of `MAX_REQUESTS_PER_SECOND` (shared through Redis like it)",
            "none"),
    # -- how the listing's pages and products are found (productcrawler/listing/options.py checks them)
    _listing("LIST_PAGINATION",
             "how the listing pages: `auto` (recognised from the first answer), `link_header`, "
             "`next_url`, `cursor`, `page_number` or `offset`", "`auto`", p.lowered_text, "auto"),
    _listing("LIST_PRODUCTS",
             "dotted path of the list of products in a listing answer (`products`, `data`, `result.products`)",
             "found: the answer itself when it is an array, else the first list of objects under `products`, "
             "`data`, `items`, `results`, `records`, `entries`, then any key"),
    _listing("LIST_NEXT",
             "dotted body path of the next page's URL (`next_url`: `meta.pagination.links.next`) or of the "
             "next cursor (`cursor`: `nextCursorMark`)",
             "found: `next`, `links.next`, `next_page_url`, … or `next_cursor`, `nextCursor`, `nextCursorMark`, …"),
    _listing("LIST_CURSOR_PARAM",
             "the query parameter the cursor is sent back in (`cursorMark`, `page_info`, `cursor`)",
             "the parameter of the listing URL whose value is `*`, else one named after the cursor's key, "
             "else `cursor`"),
    _listing("LIST_PAGE_PARAM",
             "the page number's query parameter (Magento: `searchCriteria[currentPage]`)",
             "`page` (detection also recognises " + ", ".join(f"`{name}`" for name in PAGE_PARAMS[1:]) + ")"),
    _listing("LIST_OFFSET_PARAM",
             "the offset's query parameter (DummyJSON: `skip`)",
             "`offset` (detection also recognises `skip`, `start`)"),
    _listing("LIST_LIMIT_PARAM",
             "the page size's query parameter (`limit`, `per_page`, `pageSize`, `searchCriteria[pageSize]`)",
             "found among " + ", ".join(f"`{name}`" for name in LIMIT_PARAMS)),
    _listing("LIST_TOTAL",
             "where the total is: `header:NAME` (`header:X-WP-TotalPages`) or `body:PATH` "
             "(`body:meta.pagination.total_pages`, `body:total_count`)",
             "found: `X-WP-TotalPages`, `X-Total-Count`, … or `total_pages`, `totalPages`, `total_count`, "
             "`total`, …"),
    _listing("LIST_TOTAL_COUNTS",
             "what `LIST_TOTAL` counts: `pages` or `items` (Magento's `total_count` counts items: "
             "pages = total ÷ page size, rounded up)",
             "`auto`: pages when its name says page, else items", p.lowered_text, "auto"),
)

def _scrapys(name: str, parse: p.Parser) -> Setting:
    return Setting(name, getattr(scrapy_defaults, name), parse, "retries", "", "", "", environment=False)


#: Scrapy's own retry settings, read with a check (``settings.py`` sets some of them).
SCRAPYS: tuple[Setting, ...] = (
    _scrapys("RETRY_ENABLED", p.scrapy_switch),
    _scrapys("RETRY_PRIORITY_ADJUST", p.scrapy_integer),
    _scrapys("RETRY_GIVE_UP_LOG_LEVEL", p.log_level),
    _scrapys("RETRY_HTTP_CODES", p.http_statuses),
)

#: Every declared setting by name.
DECLARED: dict[str, Setting] = {setting.name: setting for setting in (*SETTINGS, *SCRAPYS)}

#: name -> default of the settings the add-on fills in (the environment, else this).
DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in SETTINGS if setting.environment}

#: name -> default of our settings the environment does not give (``settings.py``, a spider or
#: ``-s`` do): the add-on fills in the default alone, so that ``scrapy settings`` shows it.
#: LOG_FORMAT is left out: Scrapy has a default of that name, the logging set-up's.
FIXED_DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in SETTINGS
                                  if not setting.environment and not hasattr(scrapy_defaults, setting.name)}
