"""The configuration reference: every setting's topic, kind, meaning and default, as users read it.

``docs/configuration.md`` is this module's output (``python -m
productcrawler.config.reference > docs/configuration.md``); a test keeps the
two equal, and another that every name of :data:`~.defaults.DEFAULTS` is
described here, so a setting cannot be added without its documentation.
The defaults themselves live in :mod:`.defaults`; the checks in :mod:`.crawl`.
"""

from __future__ import annotations

from dataclasses import dataclass

from productcrawler.listing.options import SETTINGS as LISTING_SETTINGS

#: Topics in the order the page shows them, with their headings.
TOPICS = {
    "api": "The API: where, how and what",
    "ids": "Ids",
    "listing": "Listing: a pass over the API's product listing",
    "rate": "Rate limit",
    "retries": "Retries",
    "storage": "Storage",
    "redis": "Redis: several instances, one pass",
    "guard": "The guard: stopping on answers that say the configuration is wrong",
    "proxies": "Proxies",
    "ops": "Progress, metrics and logs",
}


@dataclass(frozen=True)
class Setting:
    names: tuple[str, ...]
    topic: str
    kind: str
    meaning: str
    default: str


REFERENCE: tuple[Setting, ...] = (
    Setting(('API_BASE_URL',), 'api', 'URL',
            'base of the product API; the spider fetches `{API_BASE_URL}/product/{id}`',
            default='`http://127.0.0.1:8931/v1` (the bundled simulator)'),
    Setting(('PRODUCT_URL',), 'api', 'URL template',
            "a product's URL with exactly one `{id}`, the id percent-encoded into it "
            '(`https://shop.example/admin/api/2024-10/products/{id}.json`); see [the '
            'cookbook](cookbook.md)',
            default='`{API_BASE_URL}/product/{id}`'),
    Setting(('PRODUCT_LIST_URL',), 'listing', 'URL',
            "the first page of the API's product listing; set, a pass walks the listing page by page "
            '(100–250 products a request) instead of fetching products by id; `{since}` or '
            '`{since:FORMAT}` in it makes passes incremental; see [Listing](listing.md)',
            default='unset: products by id'),
    Setting(('LIST_REMOVALS',), 'listing', 'boolean',
            'whether a complete listing pass (every page stored) marks the stored products it did not '
            'list removed (`removed_at`, a `removed` change row); turn it off for a filtered listing',
            default='`true`'),
    Setting(('PRODUCT_LIST_QUERY',), 'listing', 'GraphQL query or @file',
            'makes `PRODUCT_LIST_URL` a GraphQL endpoint (Shopify\'s Admin API): the query, POSTed with its '
            'variables, pages a connection (`edges { node }` or `nodes`, `pageInfo { hasNextPage endCursor }`) '
            'through a `$cursor` variable (`LIST_CURSOR_PARAM` names another); see '
            '[Listing](listing.md#graphql)',
            default='unset: a REST listing'),
    Setting(('PRODUCT_LIST_VARIABLES',), 'listing', 'JSON object',
            "the GraphQL query's other variables; `{since}` in a value makes passes incremental "
            '(`{"query": "updated_at:>=\'{since}\'"}`)',
            default='unset: `{}`'),
    Setting(('INCREMENTAL_LAG',), 'listing', 'duration',
            '`{since}` in `PRODUCT_LIST_URL` is the start of the last complete pass over the listing minus '
            'this (`90s`, `5m`, `1h`), so that late writes are listed again; see '
            '[Listing](listing.md#incremental-passes)',
            default='`5m`'),
    Setting(('FULL_PASS_EVERY',), 'listing', 'passes or duration',
            'how often an incremental listing lists everything instead (`{since}` the epoch), the only pass '
            'that marks unlisted products removed: every Nth pass (`24`) or once the last full pass began '
            'this long ago (`24h`, `7d`)',
            default='`24h`'),
    Setting(('API_KEY',), 'api', 'text (secret)',
            "the API's credential, sent as `API_AUTH` says (added by the download handler to the "
            "API's own URLs only; never in a queue, Redis, the database, a log line, the stats or the"
            ' metrics); with `API_AUTH=basic`, `user:password`. Give it in the environment or by '
            '`API_KEY_FILE`, never with `-s` (a command line is readable by every user of the machine)',
            default='none'),
    Setting(('API_KEY_FILE',), 'api', 'path',
            'a file holding `API_KEY` (one trailing newline dropped): a Docker or Kubernetes secret '
            '(`/run/secrets/api_key`); an unreadable or empty file, or both `API_KEY` and `API_KEY_FILE`, '
            'stops the crawl at start (exit 2). See [Security](security.md)',
            default='none'),
    Setting(('API_AUTH',), 'api', 'mode',
            'how `API_KEY` is sent: `bearer` (`Authorization: Bearer KEY`), `header:NAME`, '
            '`query:NAME` (`NAME=KEY` in the query), `basic` (RFC 7617)',
            default='`bearer`'),
    Setting(('API_HEADERS',), 'api', 'JSON object',
            'extra fixed request headers for the API, a JSON object of strings '
            '(`{"X-EBAY-C-MARKETPLACE-ID": "EBAY_US"}`)',
            default='none'),
    Setting(('API_TIMEOUT',), 'api', 'seconds',
            "seconds per request (Scrapy's `DOWNLOAD_TIMEOUT` works too, by the same rule as "
            '`RETRY_TIMES`: see [Retries](retries.md#scrapys-retry-settings))',
            default='30'),
    Setting(('API_TLS_VERIFY',), 'api', 'boolean',
            "verify the API's TLS certificate (chain and host name), directly and inside a proxy's "
            'tunnel, against the system\'s CAs (or `SSL_CERT_FILE`) and `API_CA_FILE`; a certificate '
            'that fails stops the crawl, exit 3 (`tls_certificate`). `false` accepts any certificate, '
            'with a WARNING: a lab only (Scrapy\'s `DOWNLOAD_VERIFY_CERTIFICATES`, given, counts by the '
            'same rule as `RETRY_TIMES`); see [Security](security.md#tls)',
            default='`true`'),
    Setting(('API_CA_FILE',), 'api', 'path',
            'a PEM file of CA certificates trusted for the API besides the system\'s (a private CA); '
            'a file that is not there or holds no certificate exits 2',
            default='unset: the system\'s CAs only'),
    Setting(('PRODUCT_ID_START', 'PRODUCT_ID_END'), 'ids', 'id',
            'inclusive id range; spider args `-a start_id= -a end_id=` override',
            default='1, 50000'),
    Setting(('PRODUCT_IDS',), 'ids', '`@path` or `failed`',
            'ids that are not a dense range, instead of it: `@path` (a file, one id a line, streamed) or '
            '`failed` (the ids recorded failed in the latest pass); spider arg `-a ids=` overrides; see '
            '[Ids](ids.md)',
            default='unset: the range'),
    Setting(('PRODUCT_ID_TYPE',), 'ids', '`int` or `string`',
            '`int` (64-bit, `BIGINT` columns) or `string` (SKUs of up to 64 characters, `VARCHAR(64)`); '
            'tables of earlier versions are migrated on the first run (see [Ids](ids.md))',
            default='`int`'),
    Setting(('MAX_REQUESTS_PER_SECOND',), 'rate', 'number > 0',
            'global cap on requests sent, retries included, across all instances sharing a Redis',
            default='500'),
    Setting(('RATE_LIMIT_BURST',), 'rate', 'number ≥ 1',
            'token-bucket capacity',
            default='2 % of the rate (at least 1)'),
    Setting(('RATE_LIMIT_HEADERS',), 'rate', '`auto`, `off` or a format',
            'read the budget the API announces in its answers\' headers and pace below it (shared through '
            'Redis): `auto` (every format), `off`, or one of `ietf`, `x-ratelimit`, `bigcommerce`, `shopify`; '
            'see [Rate-limit headers](rate-limit-headers.md)',
            default='`auto`'),
    Setting(('RATE_LIMIT_HEADERS_MAX_WAIT',), 'rate', 'seconds > 0',
            'the longest an announced reset or window may make the crawl wait: one beyond it is clamped, '
            'with one warning per header; see [Rate-limit headers](rate-limit-headers.md#bounds)',
            default='300'),
    Setting(('MAX_RETRIES',), 'retries', 'whole number ≥ 0',
            "retries per id before it is recorded as failed (Scrapy's `RETRY_TIMES` works too: see "
            '[Retries](retries.md#scrapys-retry-settings))',
            default='3'),
    Setting(('RETRY_BACKOFF_BASE', 'RETRY_BACKOFF_MAX'), 'retries', 'seconds',
            'exponential backoff (seconds) for 5xx, timeouts, connection errors and bad bodies',
            default='1, 60'),
    Setting(('RETRY_AFTER_MAX',), 'retries', 'seconds',
            'a `Retry-After` above this many seconds is capped',
            default='300'),
    Setting(('DATABASE_URL',), 'storage', 'URL',
            '`mysql://user:password@host:port/db` (PyMySQL; MariaDB too), '
            '`postgresql://user:password@host:port/db` (psycopg 3) or `sqlite:///relative/path.db` / '
            '`sqlite:////absolute/path.db`; MySQL and PostgreSQL take the query options `ssl_ca`, `ssl_cert`, '
            '`ssl_key`, `ssl_key_password`, `ssl_verify_cert`, `ssl_verify_identity`, `unix_socket` '
            "(for PostgreSQL: libpq's `sslrootcert`, `sslmode=verify-ca`/`verify-full`, `sslcert`, `sslkey`, "
            '`sslpassword`, the socket directory) '
            '(see [TLS and Redis '
            'Cluster](operations.md#managed-mysql-and-redis-tls-acl-users-redis-cluster)); any other '
            'option stops the crawl at start. A password with `?`, `#`, `/` or `@` in it must be '
            'percent-encoded (`?` as `%3F`, `#` as `%23`, `/` as `%2F`, `@` as `%40`; the same in '
            '`REDIS_URL`): unencoded, the URL reads differently, and the error says so without '
            "quoting the driver's message (the host or database it names would be pieces of the "
            "password). An `@` in an option's value (`ssl_ca=/etc/ssl/ca@2026.pem`) needs no encoding. "
            'The user and the database name are percent-decoded too (`/caf%C3%A9` is the database `café`)',
            default='`sqlite:///data/products.db`'),
    Setting(('DATABASE_BATCH_SIZE', 'DATABASE_FLUSH_INTERVAL'), 'storage', 'whole number, seconds',
            'rows per write, seconds between flushes (a batch is written when it is full or when the '
            'timer fires)',
            default='200, 0.5'),
    Setting(('DATABASE_OUTAGE_MAX',), 'storage', 'seconds',
            'seconds the database may stay unreachable before the crawl stops (nothing is lost: the '
            'next run resumes)',
            default='300'),
    Setting(('REDIS_URL',), 'redis', 'URL',
            'unset: one process, local scheduler. Set (`redis://host:6379/0`, '
            '`rediss://user:password@host:6380/0?ssl_ca_certs=...` over TLS, '
            '`redis+cluster://host:6379` for a Redis Cluster): the shared scheduler, rate limit and '
            'pass. The database after the host (or `?db=`) must be a whole number, 0 or more: '
            'anything else stops the crawl at start (redis-py would quietly use database 0)',
            default='unset'),
    Setting(('REDIS_KEY_PREFIX',), 'redis', 'text',
            'prefix of every Redis key (one per independent crawl); no `{` or `}` (the crawl puts it '
            'in braces as the cluster hash tag)',
            default='`productcrawler`'),
    Setting(('REDIS_HEARTBEAT_TTL',), 'redis', 'seconds',
            'seconds without a heartbeat (each instance sends one every 2 s) after which an instance '
            'sharing the pass counts as dead and another takes its leases back; must be more than 2 '
            "and at most 86400. A shorter TTL recovers a killed instance's ids sooner; one close to 2"
            ' s lets a busy but live instance count as dead (its leased ids are then fetched twice; '
            'none is lost)',
            default='10'),
    Setting(('PROGRESS_INTERVAL',), 'ops', 'seconds',
            'seconds between progress lines',
            default='10'),
    Setting(('METRICS_PORT',), 'ops', 'port',
            'serve Prometheus metrics on this port (0: any free port, logged)',
            default='off'),
    Setting(('METRICS_ADDRESS',), 'ops', 'address',
            'address the metrics endpoint listens on (`0.0.0.0` in the Docker image)',
            default='127.0.0.1'),
    Setting(('METRICS_LINGER',), 'ops', 'seconds',
            'seconds the metrics endpoint stays up after the crawl ends, for a last scrape (15 in '
            'docker compose)',
            default='0'),
    Setting(('LOG_FORMAT',), 'ops', '`json` or `human`',
            "`json`: one JSON object per log line (see Reading the log); `human` or unset: Scrapy's "
            'text lines',
            default='human'),
    Setting(('PRODUCT_FIELDS',), 'api', 'column=path list',
            "where our columns are in the API's answer: `column=path,...` (see [The API's "
            'answer](payload.md#the-apis-answer-shapes-and-product_fields)); columns not named keep '
            'the default rules',
            default='unset: `id` or `product_id`, `name` or `title`, other columns by name, one '
                    'envelope level unwrapped'),
    Setting(('PRODUCT_COLUMNS',), 'api', 'name:type=path list',
            'columns of your own in `products`: `name:type=path,...`, e.g. '
            '`sku:text(64)=product.variants.0.sku,compare_at:decimal(10,2)=product.variants.0.compare_at_price,'
            'updated_at:datetime=product.updated_at,tags:json=product.tags`; types `text(N)`, `integer`, '
            '`decimal(P,S)`, `boolean`, `datetime` (ISO 8601 with an offset, stored UTC), `json`; paths from '
            "the answer's root, a list's item by its position. Cleaned like the article's columns (an "
            'unusable value is NULL, counted `cleaning/invalid/<column>`; a missing one '
            '`cleaning/absent/<column>`); added to an existing table at start with every row kept; a column '
            "whose type differs from the table's exits 2 (see [The API's answer]"
            '(payload.md#columns-of-your-own-product_columns))',
            default='unset: the article\'s eight columns'),
    Setting(('VARIANTS',), 'api', 'path',
            "where a product's list of variants is in the answer (`product.variants`, `variants`, "
            "`data.variants`; GraphQL's `variants.edges`, read node by node): one row per variant in "
            '`product_variants`, written with its product; a variant missing from a later answer is marked '
            'removed, not deleted (see [What changed](what-changed.md#variants-as-rows))',
            default='unset: variants are not kept'),
    Setting(('VARIANT_FIELDS',), 'api', 'column=path list',
            "each variant's columns by paths relative to the variant: `variant_id` (required), `sku`, "
            '`price`, `stock`, and columns of your own as in PRODUCT_COLUMNS (`name:type=path`), e.g. '
            '`variant_id=id,sku=sku,price=price,stock=inventory_quantity,'
            'compare_at:decimal(10,2)=compare_at_price`; TRACK_CHANGES may name the declared ones',
            default='unset'),
    Setting(('PRODUCT_PRICE_FROM_VARIANTS', 'PRODUCT_STOCK_FROM_VARIANTS'), 'api', '`min`/`max`, `sum`',
            "the product's price as the lowest (`min`) or highest (`max`) of its variants' prices, its "
            "stock as the sum of its variants' stocks (a product without variants keeps its own)",
            default='unset, unset'),
    Setting(('KEEP_ANSWER', 'KEEP_ANSWER_MAX_BYTES'), 'storage', 'boolean, bytes',
            "keep each product's JSON as the API sent it in `products.answer` (MySQL/MariaDB `JSON`, SQLite "
            'text, PostgreSQL `jsonb`) with its SHA-256 in `answer_digest`; written only when the digest '
            'changed. A larger answer keeps its digest alone and is counted `answers/too_large` (see '
            '[What changed](what-changed.md#the-answer-as-received-keep_answer))',
            default='false, 262144'),
    Setting(('TRACK_CHANGES',), 'storage', 'column list',
            'the `products` columns whose changes `product_changes` records, comma-separated (`name`,'
            ' `price`, `stock`, `category`, `brand`, `rating`, `sales_count`, and the PRODUCT_COLUMNS '
            'names), `all` or `none` (see '
            '[docs/what-changed.md](what-changed.md)); an unknown column exits 2',
            default='price,stock'),
    Setting(('GUARD_AUTH_FAILURES',), 'guard', 'whole number ≥ 0',
            '401/403 answers with no 2xx or 404 between them that stop the crawl, exit 3; 0 turns the'
            ' check off',
            default='20'),
    Setting(('GUARD_NOT_PRODUCTS',), 'guard', 'whole number ≥ 0',
            '200 answers in a row that are not products (no product between them) that stop the '
            'crawl, exit 3; 0: off',
            default='20'),
    Setting(('GUARD_404_STREAK',), 'guard', 'whole number ≥ 0',
            '404 answers with no product between them that stop the crawl, exit 3; 0: off',
            default='500'),
    Setting(('GUARD_NO_ANSWERS',), 'guard', 'whole number ≥ 0',
            'ids given up with no HTTP answer (a download error after the retries, or one never '
            'retried; through proxies also a 502/504) with no answer between them that stop the '
            'crawl, exit 3; 0: off (and off for the proxies-down stop: see Proxies)',
            default='20'),
    Setting(('GUARD_NO_ANSWERS_SECONDS',), 'guard', 'seconds',
            'once the API answered in this run, how long it must also have stayed silent before those'
            ' ids stop the crawl (a blip in a long crawl is ridden out: its ids wait, then are '
            'recorded when the API answers again); also how long every proxy may fail on its own '
            'account before the crawl stops',
            default='60'),
    Setting(('GUARD_FIELD_DRIFT',), 'guard', 'whole number (0, or ≥ 20)',
            "how many of a run's first product answers are held (nothing written) and compared with "
            "the last complete pass: a column non-NULL in at least 90 % of that pass's products and "
            'NULL in at least 90 % of these answers stops the crawl, exit 3 (see '
            '[docs/monitoring-passes.md](monitoring-passes.md)); 0: off, else at least 20',
            default='100'),
    Setting(('PUSHGATEWAY_URL',), 'ops', 'URL',
            "push each run's pass summary (counts, coverage, duration, exit status, end of the last "
            'complete pass) to this Prometheus Pushgateway at its end, `http://host:9091`; a gateway '
            'that is away costs one WARNING (see [docs/monitoring-passes.md](monitoring-passes.md))',
            default='unset: no push (`http://pushgateway:9091` in docker compose)'),
    Setting(('PROXY_URLS',), 'proxies', 'URL list or @file',
            'send every request through a pool of HTTP proxies: `http://user:pass@host:port,...` or '
            '`@/path/to/file` (one URL a line); see Proxies',
            default='unset: no proxy'),
    Setting(('PROXY_SCORE_SUCCESS', 'PROXY_SCORE_FAILURE'), 'proxies', 'points',
            'health points a proxy gains per success, loses per failure blamed on it (score 0..100, '
            'starts at 100)',
            default='5, 20'),
    Setting(('PROXY_SCORE_MIN',), 'proxies', 'points',
            'a failure that takes a proxy below this score rests it',
            default='50'),
    Setting(('PROXY_REST_BASE', 'PROXY_REST_MAX'), 'proxies', 'seconds',
            'a rest lasts `min(MAX, BASE × 2^(n−1))` seconds (half fixed, half random), n = rests in '
            'a row',
            default='10, 300'),
    Setting(('PROXY_MAX_REQUESTS_PER_SECOND',), 'proxies', 'number > 0',
            'cap per proxy, on top of `MAX_REQUESTS_PER_SECOND` (shared through Redis like it)',
            default='none'),
)
# The LIST_* settings are described beside the code that reads them (productcrawler/listing/options.py).
REFERENCE += tuple(Setting((name,), "listing", "text", meaning, default)
                   for name, (meaning, default) in LISTING_SETTINGS.items())

#: Read by Scrapy's logging set-up rather than the contract (DEFAULTS), but a user's setting all the same.
OUTSIDE_DEFAULTS = ("LOG_FORMAT",)

_INTRO = """# Configuration

Every value comes from the environment or, under the same name, from a Scrapy
setting (`-s NAME=value`, scrapyd's `setting=NAME=value`); a setting given
explicitly wins over the environment. All are read and validated in one place,
`productcrawler/config/`: a bad value stops the crawl before it starts (exit 2)
with one line naming the setting and its value, passwords masked.

This page is generated from `productcrawler/config/reference.py`
(`python -m productcrawler.config.reference > docs/configuration.md`).
"""


def markdown() -> str:
    """The reference page: one table per topic."""
    lines = [_INTRO]
    for topic, heading in TOPICS.items():
        lines += [f"## {heading}", "", "| name | kind | meaning | default |", "|---|---|---|---|"]
        for setting in REFERENCE:
            if setting.topic == topic:
                names = ", ".join(f"`{name}`" for name in setting.names)
                lines.append(f"| {names} | {setting.kind} | {setting.meaning} | {setting.default} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
