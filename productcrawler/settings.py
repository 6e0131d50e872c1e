"""Scrapy settings for productcrawler.

The configuration contract (API_BASE_URL, DATABASE_URL, ...) is not set here:
the add-on below fills it in from the environment and its defaults, at a
priority that ``-s NAME=value`` and scrapyd's ``setting=NAME=value`` win over.
Its parsing and validation live in ``productcrawler.config``. Every
non-default Scrapy setting below says why it is set.
"""

BOT_NAME = "productcrawler"
SPIDER_MODULES = ["productcrawler.spiders"]
NEWSPIDER_MODULE = "productcrawler.spiders"
COMMANDS_MODULE = "productcrawler.commands"

# The contract: environment first, then the default; -s wins over both (config/addon.py).
ADDONS = {"productcrawler.config.addon.ContractAddon": 0}

# An API client, not a site crawler: no robots.txt, no cookies, no redirects
# to other hosts worth following, no referer bookkeeping per request.
ROBOTSTXT_OBEY = False
COOKIES_ENABLED = False
REDIRECT_ENABLED = False
METAREFRESH_ENABLED = False
REFERER_ENABLED = False
USER_AGENT = "productcrawler (+https://github.com/productcrawler)"
DEFAULT_REQUEST_HEADERS = {"Accept": "application/json"}

DOWNLOADER_MIDDLEWARES = {
    # Default middlewares with nothing to do for an API client; each costs a
    # call per request or response (docs/design-notes.md#an-api-client-not-a-site-crawler).
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,  # no allowed_domains
    # API_AUTH/API_KEY go in at the download handler (download/handler.py), never on the request.
    "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,
    "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware": None,  # proxies are ProxyMiddleware's
    # Same counts under the same names, without rendering each request and
    # response as raw HTTP text to count bytes (docs/design-notes.md#per-call-costs-items-log-records-stats).
    "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
    "productcrawler.monitoring.traffic_stats.TrafficStats": 850,
    # Ours extends Scrapy's at the same place: each retry waits (Retry-After,
    # or backoff with jitter) in the scheduler. Scrapy's RETRY_* settings apply.
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "productcrawler.retry.middleware.ApiRetryMiddleware": 550,
    # The API's announced budget (RATE_LIMIT_HEADERS), asked before a proxy's slot is taken.
    "productcrawler.budget.middleware.BudgetGateMiddleware": 790,
    # Off unless PROXY_URLS is set: picks a healthy proxy before the rate limit's token.
    "productcrawler.proxies.middleware.ProxyMiddleware": 800,
    # Closest to the downloader: every request actually sent takes a token,
    # retries included.
    "productcrawler.ratelimit.middleware.RateLimitMiddleware": 950,
    # Request latency histogram, measured from when the rate limit lets a
    # request go; off unless METRICS_PORT is set.
    "productcrawler.monitoring.request_timing.RequestTiming": 960,
}

SPIDER_MIDDLEWARES = {
    # The spider follows no links: no URL length to check, no depth, no meta copied.
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
}

ITEM_PIPELINES = {
    # Holds back the outcomes of a suspect streak (401/403s, 404s, non-products)
    # until it is broken; the same object as the extension below.
    "productcrawler.guard.failure_guard.WholesaleFailureGuard": 250,
    "productcrawler.storage.pipeline.StoragePipeline": 300,
}

EXTENSIONS = {
    "productcrawler.monitoring.progress.ProgressLog": 500,
    # Off unless METRICS_PORT is set.
    "productcrawler.monitoring.metrics.PrometheusMetrics": 510,
    # Keeps full garbage collections, which pause the reactor long enough to
    # cost the rate limiter its slots, off the crawl (docs/design-notes.md#garbage-collector-tuning).
    "productcrawler.run.gc_tuning.GcTuning": 520,
    # Stops a crawl whose answers say the configuration is wrong (GUARD_* settings).
    "productcrawler.guard.failure_guard.WholesaleFailureGuard": 530,
    # Off unless PUSHGATEWAY_URL is set: the run's pass summary, pushed at its end.
    "productcrawler.monitoring.pushgateway.PushgatewayPush": 540,
    # Our progress line replaces Scrapy's per-minute "Crawled N pages" line.
    "scrapy.extensions.logstats.LogStats": None,
    # AutoThrottle's rule, applied as the token bucket's pace instead of a
    # download-slot delay (a timer per request); AUTOTHROTTLE_* as documented.
    "scrapy.extensions.throttle.AutoThrottle": None,
    "productcrawler.ratelimit.autothrottle.BucketAutoThrottle": 0,
    # Telnet console and remote control: open ports nobody asked for.
    "scrapy.extensions.telnet.TelnetConsole": None,
    "scrapy.extensions.remote_control.RemoteControl": None,
}

# Scrapy's retry settings, with this API's defaults (docs/retries.md): every
# 5xx is worth another try, not only Scrapy's six; 408 and 429 too. A give-up is
# recorded in crawl_failures and counted, so it is not an ERROR line per id.
# RETRY_TIMES is MAX_RETRIES (config.retry.max_retries says which wins).
RETRY_HTTP_CODES = [408, 429, *range(500, 600)]
RETRY_GIVE_UP_LOG_LEVEL = "DEBUG"

# Local or Redis-backed by REDIS_URL; retries wait there, not in a downloader slot.
SCHEDULER = "productcrawler.passes.scheduler.PassScheduler"
# The pass ledger hands out each id once; a fingerprint set would grow with the range.
DUPEFILTER_CLASS = "scrapy.dupefilters.BaseDupeFilter"

# The wholesale-failure guard (guard/failure_guard.py, GUARD_ENABLED and its GUARD_* thresholds) and the
# token bucket (ratelimit/middleware.py, RATE_LIMIT_ENABLED), the hard cap on requests sent, are on unless
# set off: config/declared.py holds their defaults.

# Concurrency is sized from the rate and the API's latency, the per-domain limit
# the same (docs/design-notes.md#concurrency-from-littles-law).
CONCURRENT_REQUESTS = 64
CONCURRENT_REQUESTS_PER_DOMAIN = 64
# AutoThrottle adapts *below* the bucket's cap: it paces the bucket at about
# TARGET_CONCURRENCY / latency (productcrawler/ratelimit/autothrottle.py, not
# Scrapy's slot delay), so at 500/s it stays out of the way while
# the API answers within 32 / 500 s = 64 ms and slows the crawl when latency
# grows past that. START_DELAY 0: no slow start below the cap
# (docs/design-notes.md#autothrottle-paces-the-bucket).
AUTOTHROTTLE_ENABLED = True
AUTOTHROTTLE_START_DELAY = 0.0
AUTOTHROTTLE_MAX_DELAY = 5.0
AUTOTHROTTLE_TARGET_CONCURRENCY = 32.0
DOWNLOAD_DELAY_JITTER = 0

# One item per response: Scrapy's default of 100 makes it start 100 asyncio
# tasks per response to process one item (docs/design-notes.md#per-call-costs-items-log-records-stats).
CONCURRENT_ITEMS = 1

# Scrapy's aiohttp download handler: less CPU per response than the Twisted
# HTTP/1.1 one on this workload, and the same outcome for every fault mode
# (bench/handler_check.py). Ours subclasses it (productcrawler/download/handler.py):
# the same requests and responses without its per-response signals (unless
# something listens), header copies and parsing; Scrapy's own handler tests
# pass against it (bench/scrapy_handler_tests.py). Scrapy's is in a private
# module in Scrapy 2.19, which is one more reason Scrapy is pinned
# (docs/design-notes.md#the-lean-aiohttp-download-handler). The paced
# subclass waits for the rate-limit slot right before sending, so the cap
# holds on the wire (productcrawler/ratelimit/handler.py).
DOWNLOAD_HANDLERS = {
    "http": "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler",
    "https": "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler",
}

# A product is a few KB; anything above 1 MB is not a product.
DOWNLOAD_MAXSIZE = 1024 * 1024
DOWNLOAD_WARNSIZE = 256 * 1024

# Scrapy's in-memory collector without a per-attribute-access hook that runs
# on every stats call (docs/design-notes.md#per-call-costs-items-log-records-stats).
STATS_CLASS = "productcrawler.monitoring.stats.FastStatsCollector"

LOG_LEVEL = "INFO"
# No per-response/per-item DEBUG record is built unless LOG_LEVEL is DEBUG.
LOG_FORMATTER = "productcrawler.monitoring.logformatter.QuietLogFormatter"
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
# libuv's event loop under that reactor: much of the crawl's CPU is
# Twisted/asyncio glue (callbacks, tasks, socket writes), and uvloop does the
# asyncio part in C (docs/design-notes.md#uvloop). tests/conftest.py installs
# the same loop.
ASYNCIO_EVENT_LOOP = "uvloop.Loop"
FEED_EXPORT_ENCODING = "utf-8"
