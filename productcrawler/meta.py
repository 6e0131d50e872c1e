"""Every request-meta key this project sets, and every reason a crawl stops for, in one place.

Meta keys follow Scrapy's own style (``download_latency``, ``retry_times``):
lowercase words joined by ``_``, the feature that owns the value first where
there is one, no prefix. Features tell each other about a request through these
keys alone; no request meta is stored, so a key's value is free to change.
"""

from __future__ import annotations

# -- request meta keys ----------------------------------------------------------

#: The product id a request is for (the spider's; the pass, retries and logs read it).
PRODUCT_ID = "product_id"
#: The listing page a request is for (its position in a listing pass).
LISTING_PAGE = "listing_page"
#: PRODUCT_IDS=list: the listing page whose ids a product request is for.
LISTED_ON = "listed_on"
#: The position in the pass of a request's id.
PASS_POSITION = "pass_position"
#: Leased here and handed to the engine by the pass scheduler itself: it stays in this process.
PASS_LEASED_HERE = "pass_leased_here"
#: Seconds a retry waits, off the downloader, before it is sent.
RETRY_DELAY = "retry_delay"
#: A re-send of the same attempt (through another proxy): sent at once, no retry used up.
RESEND_NOW = "resend_now"
#: The index of the proxy a request goes through.
PROXY_INDEX = "proxy_index"
#: A re-send: not through this proxy (an index) if another is usable.
PROXY_AVOID = "proxy_avoid"
#: [proxy index, reason] of an unclear failure being compared through another proxy.
PROXY_SUSPECT = "proxy_suspect"
#: When the rate limit's bucket granted this request's slot.
RATELIMIT_GRANTED_AT = "ratelimit_granted_at"
#: The announced budget's sequence number of the request (which window it was admitted in).
BUDGET_SEQ = "budget_seq"
#: The budget already admitted this request (the budget gate middleware, ahead of the rate limit).
BUDGET_ADMITTED = "budget_admitted"
#: Set on a request sent while no budget was known yet.
BUDGET_PROBE = "budget_probe"
#: When the request left (monotonic); present while request timing (metrics) is on.
SENT_AT = "sent_at"
#: When a request held back after its download started (a connection that came after its rate-limit
#: slot went stale) was let go; ``download_latency`` counts from there.
WRITE_STARTED = "write_started"
#: Set on a request given up before it was sent because the crawl is stopping: no outcome is
#: recorded for its id, and the next run fetches it.
ABANDONED = "abandoned"

# -- why a crawl stops, and its exit code -------------------------------------------

#: What tripped the guard: its streaks, the proxies' two stops, the field-drift check, a certificate.
AUTH, NOT_PRODUCT, NOT_FOUND, NO_ANSWER = "auth", "not_product", "not_found", "no_answer"
#: Every proxy answered 407 and none anything else (the proxy middleware).
PROXY_AUTH = "proxy_auth"
#: Every proxy failing on its own account for too long (proxies/outage.py).
PROXIES_DOWN = "proxies_down"
#: The field-drift check (guard/field_drift.py).
FIELD_DRIFT = "field_drift"
#: The API's certificate failed verification: the first one trips it.
TLS_CERTIFICATE = "tls_certificate"

#: The finish reason of a crawl stopped because its answers say the configuration is wrong (exit 3), by what
#: tripped it.
STOP_REASONS = {AUTH: "guard_auth_failures", NOT_PRODUCT: "guard_not_products", NOT_FOUND: "guard_404_streak",
                NO_ANSWER: "guard_no_answers", PROXY_AUTH: "guard_proxy_auth_failures",
                PROXIES_DOWN: "guard_proxies_down", FIELD_DRIFT: "guard_field_drift",
                TLS_CERTIFICATE: "guard_tls_certificate"}
#: The database stayed unreachable (storage/pipeline.py).
DATABASE_UNAVAILABLE = "database_unavailable"
#: The shared pass in Redis lost this process's leases (passes/scheduler.py).
REDIS_PASS_LOST = "redis_pass_lost"
#: Finish reasons that are not failures: the pass ended, or an operator stopped it (Ctrl-C, SIGTERM,
#: scrapyd's cancel) and the next run resumes it.
CLEAN_REASONS = ("finished", "shutdown")
#: The exit code of a crawl stopped for one of STOP_REASONS (README, "Exit codes").
STOPPED_EXIT_CODE = 3

#: Why a request is not sent once the crawl stopped for one of STOP_REASONS.
NOT_SENT_STOPPED = "not sent: the guard stopped the crawl ({reason})"
#: Why a request the announced budget held back is not sent once the crawl stops.
NOT_SENT_BUDGET = "not sent: the crawl stopped while the request waited for the API's announced budget"
#: Why a request waiting for a usable proxy is not sent once the crawl stops.
NOT_SENT_NO_PROXY = "the crawl is stopping and no proxy is usable"


def exit_code(reason: str | None) -> int:
    """The exit code of a crawl that stopped for ``reason``: 0 for a clean end, 3 for one of STOP_REASONS,
    1 for any other.

    ``scrapy crawl`` exits with it; the Pushgateway push reports it before the
    process ends. A configuration error (2) and a crawler that failed to start
    (1) never reach a crawl, so they are the command's alone.
    """
    if reason in STOP_REASONS.values():
        return STOPPED_EXIT_CODE  # the answers said the configuration is wrong
    if reason not in CLEAN_REASONS:
        return 1
    return 0
