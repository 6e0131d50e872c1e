"""The configuration's sections: one frozen dataclass per feature, read from the declared settings.

Each section's :meth:`read` takes its settings from a :class:`~.reader.Reader`
and checks the rules between them (``RETRY_BACKOFF_MAX`` not below
``RETRY_BACKOFF_BASE``); a component receives its section, not the whole
configuration. Rules that span sections are in :mod:`.crawl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from productcrawler.config.reader import Reader
from productcrawler.config.values import ConfigError, listing_rules, mask_url
from productcrawler.listing import ListingOptions

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Self

    from scrapy.settings import BaseSettings

    from productcrawler.answer.declared import DeclaredColumn
    from productcrawler.answer.payload import PayloadShape
    from productcrawler.answer.variants import VariantShape
    from productcrawler.config.auth import ApiAuth
    from productcrawler.config.product_url import ProductUrl
    from productcrawler.config.proxy_urls import Proxy
    from productcrawler.ids.idfile import IdFile
    from productcrawler.listing.since import FullPassEvery, ListUrl

#: The LIST_* settings and the ListingOptions field each sets.
LISTING_OPTIONS = {
    "LIST_PAGINATION": "pagination", "LIST_PRODUCTS": "products", "LIST_NEXT": "next",
    "LIST_CURSOR_PARAM": "cursor_param", "LIST_PAGE_PARAM": "page_param", "LIST_OFFSET_PARAM": "offset_param",
    "LIST_LIMIT_PARAM": "limit_param", "LIST_TOTAL": "total", "LIST_TOTAL_COUNTS": "total_counts",
}
#: A proxy's full health score (proxies/health.py); PROXY_SCORE_MIN must be below it.
SCORE_MAX = 100.0


def burst_for_rate(rate: float) -> float:
    """Default bucket capacity: 2 % of a second's worth of tokens, at least 1.

    A burst of b lets any 1-second window hold at most rate + b requests, so
    2 % keeps the busiest window well inside the API's 5 % tolerance.
    """
    return max(1.0, rate * 0.02)


@dataclass(frozen=True)
class ApiConfig:
    """Where the API is and how it is asked (API_*, PRODUCT_URL)."""

    base_url: str
    #: API_KEY (or API_KEY_FILE's content); None: no key.
    key: str | None
    #: What the download handler adds to the API's requests; None: nothing.
    auth: ApiAuth | None
    #: What every URL of the API starts with (in Scrapy's normal form): where the key may go, and only there.
    prefix: str
    timeout: float
    #: Whether the API's TLS certificate is verified (API_TLS_VERIFY; false only in a lab).
    tls_verify: bool
    #: API_CA_FILE: CA certificates trusted for the API besides the system's; None: the system's only.
    ca_file: str | None
    #: PRODUCT_URL, or ``{API_BASE_URL}/product/{id}`` when it is unset.
    product_urls: ProductUrl
    #: Whether PRODUCT_URL was given (messages then name it, not API_BASE_URL).
    product_url_given: bool

    def product_url(self, product_id: int | str) -> str:
        """The URL of one product: the id percent-encoded into PRODUCT_URL's ``{id}``."""
        return self.product_urls.url(product_id)

    def product_id_in(self, url: str) -> str | None:
        """The id (as text) of a URL that :meth:`product_url` makes, else None."""
        return self.product_urls.id_in(url)

    @property
    def product_url_setting(self) -> str:
        """How messages name where the crawl asks: ``PRODUCT_URL (...)`` or ``API_BASE_URL (...)``."""
        if self.product_url_given:
            return f"PRODUCT_URL ({mask_url(str(self.product_urls))})"
        return f"API_BASE_URL ({mask_url(self.base_url)})"


@dataclass(frozen=True)
class IdsConfig:
    """Which ids a pass owes (PRODUCT_ID_*, PRODUCT_IDS)."""

    start_id: int
    end_id: int
    #: "int" or "string" (PRODUCT_ID_TYPE).
    type: str
    #: PRODUCT_IDS=@path (or -a ids=@path), scanned: the pass runs over its ids instead of the range.
    file: IdFile | None
    #: PRODUCT_IDS=failed (or -a ids=failed): the ids recorded failed in the latest pass.
    failed_only: bool
    #: PRODUCT_IDS=list: the listing supplies the ids, each product is fetched by PRODUCT_URL.
    from_listing: bool

    @property
    def total(self) -> int:
        return self.end_id - self.start_id + 1


@dataclass(frozen=True)
class ListingConfig:
    """A pass over the API's listing (PRODUCT_LIST_*, LIST_*, INCREMENTAL_LAG, FULL_PASS_EVERY)."""

    #: PRODUCT_LIST_URL: the first page of the listing a pass walks (perhaps with {since}); None: a pass by id.
    url: ListUrl | None
    #: LIST_REMOVALS: a complete listing marks the stored products it did not list removed.
    removals: bool
    #: The LIST_* settings: how the listing's pages and products are found.
    options: ListingOptions
    #: INCREMENTAL_LAG: seconds before the last complete pass's start that {since} goes back.
    incremental_lag: float
    #: FULL_PASS_EVERY: when an incremental listing lists everything instead.
    full_pass_every: FullPassEvery

    @classmethod
    def read_options(cls, read: Reader) -> ListingOptions:
        """The LIST_* settings, checked (ConfigError names the setting); unset ones keep their defaults."""
        given = {option: read(name) for name, option in LISTING_OPTIONS.items()}
        with listing_rules():
            return ListingOptions(**{option: value for option, value in given.items() if value is not None})


@dataclass(frozen=True)
class AnswerConfig:
    """What the API's answer holds and what is kept of it (PRODUCT_FIELDS, PRODUCT_COLUMNS, VARIANTS...)."""

    fields: PayloadShape
    #: PRODUCT_COLUMNS: the user's own columns of products.
    columns: tuple[DeclaredColumn, ...]
    #: VARIANTS, VARIANT_FIELDS, PRODUCT_*_FROM_VARIANTS: variants as rows (None: not kept).
    variants: VariantShape | None
    #: KEEP_ANSWER, KEEP_ANSWER_MAX_BYTES: the raw answer in products.answer, up to this size.
    keep: bool
    keep_max_bytes: int


@dataclass(frozen=True)
class RateConfig:
    """The cap on requests sent (RATE_LIMIT_ENABLED, MAX_REQUESTS_PER_SECOND, RATE_LIMIT_BURST)."""

    enabled: bool
    max_requests_per_second: float
    burst: float

    @classmethod
    def read(cls, read: Reader) -> Self:
        rate = read("MAX_REQUESTS_PER_SECOND")
        burst = read("RATE_LIMIT_BURST")
        return cls(enabled=read("RATE_LIMIT_ENABLED"), max_requests_per_second=rate,
                   burst=burst_for_rate(rate) if burst is None else burst)


@dataclass(frozen=True)
class BudgetConfig:
    """The budget the API announces in its answers' headers (RATE_LIMIT_HEADERS*)."""

    #: The budget-header formats read (none for ``off``).
    headers: tuple[str, ...]
    max_wait: float

    @classmethod
    def read(cls, read: Reader) -> Self:
        return cls(headers=read("RATE_LIMIT_HEADERS"), max_wait=read("RATE_LIMIT_HEADERS_MAX_WAIT"))


@dataclass(frozen=True)
class RetryConfig:
    """When and how long after a failure an id is asked again (MAX_RETRIES, RETRY_*)."""

    max_retries: int
    backoff_base: float
    backoff_max: float
    after_max: float
    #: Scrapy's RETRY_ENABLED, RETRY_PRIORITY_ADJUST, RETRY_GIVE_UP_LOG_LEVEL, RETRY_HTTP_CODES.
    enabled: bool
    priority_adjust: int
    give_up_log_level: int
    http_codes: tuple[int, ...]

    @classmethod
    def read(cls, read: Reader) -> Self:
        backoff_base, backoff_max = read("RETRY_BACKOFF_BASE"), read("RETRY_BACKOFF_MAX")
        if backoff_max < backoff_base:
            raise ConfigError(f"RETRY_BACKOFF_MAX={backoff_max:g} is below RETRY_BACKOFF_BASE={backoff_base:g}")
        return cls(max_retries=read("MAX_RETRIES"), backoff_base=backoff_base, backoff_max=backoff_max,
                   after_max=read("RETRY_AFTER_MAX"), enabled=read("RETRY_ENABLED"),
                   priority_adjust=read("RETRY_PRIORITY_ADJUST"), give_up_log_level=read("RETRY_GIVE_UP_LOG_LEVEL"),
                   http_codes=tuple(read("RETRY_HTTP_CODES")))


@dataclass(frozen=True)
class StorageConfig:
    """Where and how rows are written (DATABASE_*, TRACK_CHANGES)."""

    database_url: str
    batch_size: int
    flush_interval: float
    outage_max: float
    #: The products columns whose changes product_changes records.
    track_changes: tuple[str, ...]


@dataclass(frozen=True)
class RedisConfig:
    """Several instances, one pass (REDIS_*)."""

    url: str | None
    key_prefix: str
    heartbeat_ttl: float

    @classmethod
    def read(cls, read: Reader) -> Self:
        return cls(key_prefix=read("REDIS_KEY_PREFIX"), heartbeat_ttl=read("REDIS_HEARTBEAT_TTL"),
                   url=read("REDIS_URL"))


@dataclass(frozen=True)
class GuardConfig:
    """The wholesale-failure guard (GUARD_*)."""

    enabled: bool
    auth_failures: int
    not_products: int
    #: GUARD_404_STREAK.
    not_found: int
    no_answers: int
    no_answers_seconds: float
    field_drift: int

    @classmethod
    def read(cls, read: Reader) -> Self:
        return cls(enabled=read("GUARD_ENABLED"), auth_failures=read("GUARD_AUTH_FAILURES"),
                   not_products=read("GUARD_NOT_PRODUCTS"), not_found=read("GUARD_404_STREAK"),
                   no_answers=read("GUARD_NO_ANSWERS"), no_answers_seconds=read("GUARD_NO_ANSWERS_SECONDS"),
                   field_drift=read("GUARD_FIELD_DRIFT"))


@dataclass(frozen=True)
class MonitoringConfig:
    """Progress lines, metrics, the pass summary's push, the garbage collector's tuning."""

    progress_interval: float
    metrics_port: int | None
    metrics_address: str
    metrics_linger: float
    pushgateway_url: str | None
    gc_gen0_threshold: int

    @classmethod
    def read(cls, read: Reader) -> Self:
        return cls(progress_interval=read("PROGRESS_INTERVAL"), metrics_port=read("METRICS_PORT"),
                   metrics_address=read("METRICS_ADDRESS"), metrics_linger=read("METRICS_LINGER"),
                   pushgateway_url=read("PUSHGATEWAY_URL"), gc_gen0_threshold=read("GC_GEN0_THRESHOLD"))


@dataclass(frozen=True)
class HealthPolicy:
    """How a proxy's health score moves and how long it rests (PROXY_SCORE_*, PROXY_REST_*)."""

    success: float
    failure: float
    minimum: float
    rest_base: float
    rest_max: float

    def rest_seconds(self, rests: int, draw: float) -> float:
        """Length of the ``rests``-th rest in a row; ``draw`` is uniform in [0, 1)."""
        try:
            ceiling = min(self.rest_max, self.rest_base * 2.0 ** max(0, rests - 1))
        except OverflowError:
            ceiling = self.rest_max
        return ceiling / 2 + draw * ceiling / 2


@dataclass(frozen=True)
class ProxyConfig:
    """The proxy pool (PROXY_*)."""

    proxies: tuple[Proxy, ...]
    policy: HealthPolicy
    max_requests_per_second: float | None

    @classmethod
    def from_settings(cls, settings: BaseSettings | Mapping[str, Any]) -> ProxyConfig | None:
        """The pool's configuration; ``None`` when ``PROXY_URLS`` is unset or empty."""
        return cls.read(Reader(settings))

    @classmethod
    def read(cls, read: Reader) -> ProxyConfig | None:
        proxies = read("PROXY_URLS")
        if not proxies:
            return None
        minimum = read("PROXY_SCORE_MIN")
        if minimum >= SCORE_MAX:
            raise ConfigError(f"PROXY_SCORE_MIN={minimum:g} must be below the full score, {SCORE_MAX:g}")
        rest_base, rest_max = read("PROXY_REST_BASE"), read("PROXY_REST_MAX")
        if rest_max < rest_base:
            raise ConfigError(f"PROXY_REST_MAX={rest_max:g} is below PROXY_REST_BASE={rest_base:g}")
        policy = HealthPolicy(success=read("PROXY_SCORE_SUCCESS"), failure=read("PROXY_SCORE_FAILURE"),
                              minimum=minimum, rest_base=rest_base, rest_max=rest_max)
        return cls(proxies=proxies, policy=policy, max_requests_per_second=read("PROXY_MAX_REQUESTS_PER_SECOND"))
