"""``CrawlConfig``: the contract parsed and validated.

A crawler's components share one, built once (``crawl_config(crawler)``,
:mod:`.crawler`); parsing raises ``ConfigError`` naming the
setting and the offending value. The defaults are in :mod:`.defaults`, the
checks of single values in :mod:`.values`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.settings import BaseSettings as _BaseSettings
from w3lib.url import safe_url_string

from productcrawler.answer.declared import DeclaredColumn, parse_columns
from productcrawler.answer.payload import PayloadShape
from productcrawler.answer.variants import VariantShape, parse_variant_shape
from productcrawler.config.addon import ENVIRONMENT_PRIORITY
from productcrawler.config.auth import ApiAuth, api_auth, api_key
from productcrawler.config.defaults import DEFAULTS, HEARTBEAT_INTERVAL, RATE_LIMIT_HEADER_FORMATS
from productcrawler.config.product_url import ProductUrl
from productcrawler.config.values import (
    ConfigError,
    boolean,
    ca_file,
    database_url,
    field_drift,
    flag,
    http_url,
    mask_url,
    number,
    product_fields,
    pushgateway_url,
    redis_url,
    refuse_credentials,
    shown,
    text,
)
from productcrawler.ids.idfile import MAX_INT_ID, IdFile, IdFileError, scanned
from productcrawler.listing import ListingError, ListingOptions
from productcrawler.listing.graphql import GraphqlQuery
from productcrawler.listing.since import FullPassEvery, ListUrl

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.settings import BaseSettings

#: The tables' product_id is a signed BIGINT: a larger id could not be stored.
MAX_PRODUCT_ID = MAX_INT_ID
#: The most ids a range spans: a pass keeps one bit per id, and Redis's bitmaps end at 2**32 bits.
MAX_RANGE_IDS = 2**32
#: PRODUCT_ID_TYPE's values.
ID_TYPES = ("int", "string")
#: PRODUCT_IDS's value that asks for the ids recorded failed in the latest pass.
FAILED_IDS = "failed"
#: PRODUCT_IDS's value that takes the ids from the listing (PRODUCT_LIST_URL), each product fetched by id.
LISTED_IDS = "list"
#: GUARD_FIELD_DRIFT's smallest sample (but 0, off): see guard/field_drift.py for why.
FIELD_DRIFT_MIN_SAMPLE = 20
#: REDIS_HEARTBEAT_TTL's upper bound, seconds (a day).
MAX_HEARTBEAT_TTL = 24 * 3600
#: The products columns TRACK_CHANGES may name (storage/changes.py compares them).
TRACKABLE_COLUMNS = ("name", "price", "stock", "category", "brand", "rating", "sales_count")


def product_columns(raw: Any) -> tuple[DeclaredColumn, ...]:
    """PRODUCT_COLUMNS: ``name:type=path,...`` (answer/declared.py)."""
    try:
        return parse_columns(raw)
    except ValueError as error:
        raise ConfigError(f"PRODUCT_COLUMNS={raw!r}: {error}") from None


def track_changes(raw: Any, declared: tuple[str, ...] = ()) -> tuple[str, ...]:
    """TRACK_CHANGES: comma-separated column names, ``all`` or ``none``; in the table's order.

    ``declared``: the PRODUCT_COLUMNS names, which it may name too (``all`` includes them).
    """
    trackable = (*TRACKABLE_COLUMNS, *declared)
    value = text(raw if isinstance(raw, str) else ",".join(raw) if raw is not None else None)
    if value is None:
        raise ConfigError("TRACK_CHANGES is empty; expected column names (e.g. price,stock), all or none")
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    if names == ["all"]:
        return trackable
    if names == ["none"]:
        return ()
    if not names:
        raise ConfigError(f"TRACK_CHANGES={value!r} names no column; expected column names, all or none")
    unknown = [name for name in names if name not in trackable]
    if unknown:
        raise ConfigError(f"TRACK_CHANGES={value!r}: unknown column {', '.join(map(repr, unknown))}; expected "
                          f"some of {', '.join(trackable)}, or all, or none")
    return tuple(column for column in trackable if column in names)


def common_prefix(list_url: str, product_prefix: str | None) -> str:
    """Where the API's own URLs are with a listing: the listing's directory, and what it shares with
    PRODUCT_URL's (Shopify's ``.../2024-10/products.json`` and ``.../2024-10/products/{id}.json``
    share ``.../2024-10/``), never less than the scheme and host."""
    prefix = list_url.partition("?")[0].partition("#")[0]
    path_start = prefix.find("/", prefix.find("://") + 3)
    if path_start < 0:
        return f"{prefix}/"
    prefix = prefix[:prefix.rfind("/") + 1]
    if product_prefix is not None:
        shared = 0
        while shared < min(len(prefix), len(product_prefix)) and prefix[shared] == product_prefix[shared]:
            shared += 1
        prefix = prefix[:prefix.rfind("/", 0, shared) + 1] if shared < len(prefix) else prefix
    return prefix if len(prefix) > path_start else prefix[:path_start + 1]


def duration(name: str, raw: Any) -> float:
    """Seconds: a number, or a number with a unit (``90s``, ``5m``, ``2h``, ``1d``)."""
    value = text(raw if not isinstance(raw, (int, float)) else str(raw))
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", value or "", re.IGNORECASE)
    if found is None:
        raise ConfigError(f"{name}={raw!r}: expected seconds, or a duration such as 90s, 5m, 2h, 1d")
    return float(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[found[2].lower()]


def list_options(get: Callable[[str], Any]) -> ListingOptions:
    """The LIST_* settings, checked (ConfigError names the setting)."""
    try:
        return ListingOptions.from_settings(get)
    except ListingError as error:
        raise ConfigError(str(error)) from None


def max_retries(settings: BaseSettings) -> int:
    """Retries per id: ``MAX_RETRIES``, or Scrapy's ``RETRY_TIMES`` where a user gave it."""
    return _aliased(settings, "MAX_RETRIES", "RETRY_TIMES", lambda name, raw: number(name, raw, int, minimum=0))


def api_timeout(settings: BaseSettings) -> float:
    """Seconds per request: ``API_TIMEOUT``, or Scrapy's ``DOWNLOAD_TIMEOUT`` where a user gave it."""
    return _aliased(settings, "API_TIMEOUT", "DOWNLOAD_TIMEOUT", lambda name, raw: number(name, raw, float, above=0))


def api_tls_verify(settings: BaseSettings) -> bool:
    """Whether the API's certificate is verified: ``API_TLS_VERIFY``, or Scrapy's
    ``DOWNLOAD_VERIFY_CERTIFICATES`` where a user gave it (its default, off, never counts)."""
    return _aliased(settings, "API_TLS_VERIFY", "DOWNLOAD_VERIFY_CERTIFICATES", boolean)


def _aliased(settings: BaseSettings, ours: str, scrapys: str, parse: Callable[[str, Any], Any]) -> Any:
    """The value of a contract setting that has a Scrapy setting of the same meaning.

    Both follow Scrapy's settings priorities: the one given at the higher
    priority wins (``-s RETRY_TIMES=0`` beats ``MAX_RETRIES`` from the
    environment or ``settings.py``). A default, ours or Scrapy's (priority
    "default"), never counts. Given at the same priority with different
    values they are refused: guessing would silently ignore one of them.
    """
    our_priority, their_priority = _given_priority(settings, ours), settings.getpriority(scrapys)
    given = DEFAULTS[ours] if settings.get(ours) is None else settings.get(ours)
    value = parse(ours, given)
    if not their_priority:  # absent, or Scrapy's default
        return value
    theirs = parse(scrapys, settings.get(scrapys))
    if not our_priority or their_priority > our_priority:
        return theirs
    if their_priority == our_priority and theirs != value:
        raise ConfigError(f"{scrapys}={settings.get(scrapys)!r} and {ours}={given!r} "
                          f"disagree; give only one of them ({ours} is this project's name)")
    return value


def _given_priority(settings: BaseSettings, name: str) -> int:
    """The priority ``name`` was given at; 0 for its default (or when it is absent).

    The environment is the project's own configuration, as ``settings.py`` is:
    its values count at project priority, so that a Scrapy setting in
    ``settings.py`` and ours in the environment that disagree are refused.
    """
    priority = settings.getpriority(name) or 0
    return SETTINGS_PRIORITIES["project"] if priority == ENVIRONMENT_PRIORITY else priority


def rate_limit_headers(raw: Any) -> tuple[str, ...]:
    """``RATE_LIMIT_HEADERS``: the budget-header formats to read (none for ``off``)."""
    value = (text(raw) or "").lower()
    if value == "auto":
        return RATE_LIMIT_HEADER_FORMATS
    if value == "off":
        return ()
    if value in RATE_LIMIT_HEADER_FORMATS:
        return (value,)
    raise ConfigError(f"RATE_LIMIT_HEADERS={raw!r} is not one of auto, off, "
                      f"{', '.join(RATE_LIMIT_HEADER_FORMATS)}")


def burst_for_rate(rate: float) -> float:
    """Default bucket capacity: 2 % of a second's worth of tokens, at least 1.

    A burst of b lets any 1-second window hold at most rate + b requests, so
    2 % keeps the busiest window well inside the API's 5 % tolerance.
    """
    return max(1.0, rate * 0.02)


@dataclass(frozen=True)
class CrawlConfig:
    api_base_url: str
    api_key: str | None
    api_timeout: float
    #: Whether the API's TLS certificate is verified (API_TLS_VERIFY; false only in a lab).
    api_tls_verify: bool
    #: API_CA_FILE: CA certificates trusted for the API besides the system's; None: the system's only.
    api_ca_file: str | None
    start_id: int
    end_id: int
    #: "int" or "string" (PRODUCT_ID_TYPE).
    id_type: str
    #: PRODUCT_IDS=@path (or -a ids=@path), scanned: the pass runs over its ids instead of the range.
    id_file: IdFile | None
    #: PRODUCT_IDS=failed (or -a ids=failed): the ids recorded failed in the latest pass.
    failed_only: bool
    max_requests_per_second: float
    rate_limit_burst: float
    rate_limit_headers: tuple[str, ...]
    rate_limit_headers_max_wait: float
    max_retries: int
    retry_backoff_base: float
    retry_backoff_max: float
    retry_after_max: float
    database_url: str
    database_batch_size: int
    database_flush_interval: float
    database_outage_max: float
    redis_url: str | None
    redis_key_prefix: str
    redis_heartbeat_ttl: float
    progress_interval: float
    metrics_port: int | None
    metrics_address: str
    metrics_linger: float
    product_fields: PayloadShape
    #: PRODUCT_COLUMNS: the user's own columns of products.
    product_columns: tuple[DeclaredColumn, ...]
    #: VARIANTS, VARIANT_FIELDS, PRODUCT_*_FROM_VARIANTS: variants as rows (None: not kept).
    variants: VariantShape | None
    guard_auth_failures: int
    guard_not_products: int
    guard_404_streak: int
    guard_no_answers: int
    guard_no_answers_seconds: float
    #: PRODUCT_URL, or ``{API_BASE_URL}/product/{id}`` when it is unset.
    product_urls: ProductUrl
    #: Whether PRODUCT_URL was given (messages then name it, not API_BASE_URL).
    product_url_given: bool
    #: What every URL of the API starts with (in Scrapy's normal form): where the key may go, and only there.
    api_prefix: str
    #: What the download handler adds to the API's requests; None: nothing.
    api_auth: ApiAuth | None
    guard_field_drift: int
    pushgateway_url: str | None
    track_changes: tuple[str, ...]
    #: PRODUCT_LIST_URL: the first page of the listing a pass walks (perhaps with {since}); None: a pass by id.
    list_url: ListUrl | None = None
    #: LIST_REMOVALS: a complete listing marks the stored products it did not list removed.
    list_removals: bool = True
    #: PRODUCT_IDS=list: the listing supplies the ids, each product is fetched by PRODUCT_URL.
    ids_from_listing: bool = False
    #: KEEP_ANSWER, KEEP_ANSWER_MAX_BYTES: the raw answer in products.answer, up to this size.
    keep_answer: bool = False
    keep_answer_max_bytes: int = 262144
    #: The LIST_* settings: how the listing's pages and products are found.
    list_options: ListingOptions = field(default_factory=ListingOptions)
    #: INCREMENTAL_LAG: seconds before the last complete pass's start that {since} goes back.
    incremental_lag: float = DEFAULTS["INCREMENTAL_LAG"]
    #: FULL_PASS_EVERY: when an incremental listing lists everything instead.
    full_pass_every: FullPassEvery = field(default_factory=lambda: FullPassEvery.parse(DEFAULTS["FULL_PASS_EVERY"]))

    @classmethod
    def from_settings(cls, settings: BaseSettings | Mapping[str, Any], *, start_id: Any = None,
                      end_id: Any = None, ids: Any = None) -> CrawlConfig:
        """Parse and validate the contract; spider args ``start_id``/``end_id``/``ids`` win.

        A plain mapping (a benchmark's or a test's few names) counts as
        project settings.
        """
        if not isinstance(settings, _BaseSettings):
            settings = _BaseSettings(dict(settings), priority="project")

        def get(name: str) -> Any:
            value = settings.get(name)
            return DEFAULTS[name] if value is None else value

        start_name = "start_id (spider argument)" if start_id is not None else "PRODUCT_ID_START"
        end_name = "end_id (spider argument)" if end_id is not None else "PRODUCT_ID_END"
        start = number(start_name, get("PRODUCT_ID_START") if start_id is None else start_id,
                        int, minimum=1, maximum=MAX_PRODUCT_ID)
        end = number(end_name, get("PRODUCT_ID_END") if end_id is None else end_id, int, minimum=1,
                     maximum=MAX_PRODUCT_ID)
        if start > end:
            raise ConfigError(f"{start_name}={start} is greater than {end_name}={end}")
        if end - start + 1 > MAX_RANGE_IDS:
            raise ConfigError(f"{start_name}={start} to {end_name}={end} spans {end - start + 1} ids; a pass "
                              f"spans at most {MAX_RANGE_IDS} (list sparse ids in a file: PRODUCT_IDS=@path)")
        id_type = str(get("PRODUCT_ID_TYPE")).strip().lower()
        if id_type not in ID_TYPES:
            raise ConfigError(f"PRODUCT_ID_TYPE={get('PRODUCT_ID_TYPE')!r}: expected int or string")
        ids_from_listing = ids is None and (text(get("PRODUCT_IDS")) or "").lower() == LISTED_IDS
        id_file, failed_only = (None, False) if ids_from_listing else _id_list(
            get, ids, given_range=start_id is not None or end_id is not None, id_type=id_type)

        rate = number("MAX_REQUESTS_PER_SECOND", get("MAX_REQUESTS_PER_SECOND"), float, above=0)
        burst_raw = get("RATE_LIMIT_BURST")
        burst = (burst_for_rate(rate) if text(burst_raw) is None
                 else number("RATE_LIMIT_BURST", burst_raw, float, minimum=1))
        backoff_base = number("RETRY_BACKOFF_BASE", get("RETRY_BACKOFF_BASE"), float, minimum=0)
        backoff_max = number("RETRY_BACKOFF_MAX", get("RETRY_BACKOFF_MAX"), float, minimum=0)
        if backoff_max < backoff_base:
            raise ConfigError(f"RETRY_BACKOFF_MAX={backoff_max:g} is below RETRY_BACKOFF_BASE={backoff_base:g}")
        metrics_raw = get("METRICS_PORT")
        metrics_port = (None if text(metrics_raw) is None
                        else number("METRICS_PORT", metrics_raw, int, minimum=0, maximum=65535))
        metrics_address = text(get("METRICS_ADDRESS"))
        if metrics_address is None:
            raise ConfigError("METRICS_ADDRESS is empty; expected an address to listen on, e.g. 127.0.0.1")
        prefix = text(get("REDIS_KEY_PREFIX"))
        if prefix is None:
            raise ConfigError("REDIS_KEY_PREFIX is empty")
        if "{" in prefix or "}" in prefix:
            # The pass's keys are "{prefix}:...": braces of its own would change the hash tag.
            raise ConfigError(f"REDIS_KEY_PREFIX={prefix!r} must not contain {{ or }}: the crawl wraps it "
                              "in braces itself (the Redis Cluster hash tag of its keys)")
        ttl_raw = get("REDIS_HEARTBEAT_TTL")
        heartbeat_ttl = number("REDIS_HEARTBEAT_TTL", ttl_raw, float, maximum=MAX_HEARTBEAT_TTL)
        if not heartbeat_ttl > HEARTBEAT_INTERVAL:
            raise ConfigError(f"REDIS_HEARTBEAT_TTL={shown('REDIS_HEARTBEAT_TTL', ttl_raw)} must be greater than "
                              f"{HEARTBEAT_INTERVAL:g}, the seconds between an instance's heartbeats (a live "
                              "instance would count as dead between two of them)")
        api_base_url = http_url("API_BASE_URL", get("API_BASE_URL"))
        refuse_credentials("API_BASE_URL", api_base_url)
        product_urls = ProductUrl.parse(get("PRODUCT_URL"), api_base_url)
        given = text(get("PRODUCT_URL")) is not None
        declared = product_columns(get("PRODUCT_COLUMNS"))
        try:
            variants = parse_variant_shape(get("VARIANTS"), get("VARIANT_FIELDS"),
                                           get("PRODUCT_PRICE_FROM_VARIANTS"), get("PRODUCT_STOCK_FROM_VARIANTS"))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        trackable = (*(c.name for c in declared), *(c.name for c in (variants.declared if variants else ())))
        list_url = None
        if text(get("PRODUCT_LIST_URL")) is not None:
            query = None if text(get("PRODUCT_LIST_QUERY")) is None else GraphqlQuery.parse(
                get("PRODUCT_LIST_QUERY"), get("PRODUCT_LIST_VARIABLES"), text(get("LIST_CURSOR_PARAM")))
            list_url = ListUrl.parse(http_url("PRODUCT_LIST_URL", get("PRODUCT_LIST_URL")), query)
            refuse_credentials("PRODUCT_LIST_URL", list_url.template)
        # As Scrapy writes request URLs (host lowercased, path percent-encoded), so that it
        # matches the spider's requests: the base itself, or a URL below it; with a listing,
        # what its URL and the products' have in common (the listing's next pages are beside it).
        api_prefix = safe_url_string(product_urls.prefix if given else f"{api_base_url}/")
        if list_url is not None:
            api_prefix = common_prefix(safe_url_string(list_url.resolve(None)), api_prefix if given else None)
        elif ids_from_listing or text(get("PRODUCT_LIST_QUERY")) is not None:
            raise ConfigError(f"{'PRODUCT_IDS=list' if ids_from_listing else 'PRODUCT_LIST_QUERY'} needs the "
                              "listing's URL: set PRODUCT_LIST_URL too")
        key = api_key(get("API_KEY"), get("API_KEY_FILE"))
        return cls(
            api_base_url=api_base_url,
            api_key=key,
            api_timeout=api_timeout(settings),
            api_tls_verify=api_tls_verify(settings),
            api_ca_file=ca_file("API_CA_FILE", get("API_CA_FILE")),
            start_id=start,
            end_id=end,
            id_type=id_type,
            id_file=id_file,
            failed_only=failed_only,
            max_requests_per_second=rate,
            rate_limit_burst=burst,
            rate_limit_headers=rate_limit_headers(get("RATE_LIMIT_HEADERS")),
            rate_limit_headers_max_wait=number("RATE_LIMIT_HEADERS_MAX_WAIT", get("RATE_LIMIT_HEADERS_MAX_WAIT"),
                                               float, above=0),
            max_retries=max_retries(settings),
            retry_backoff_base=backoff_base,
            retry_backoff_max=backoff_max,
            retry_after_max=number("RETRY_AFTER_MAX", get("RETRY_AFTER_MAX"), float, minimum=0),
            database_url=database_url(get("DATABASE_URL")),
            database_batch_size=number("DATABASE_BATCH_SIZE", get("DATABASE_BATCH_SIZE"), int, minimum=1),
            database_flush_interval=number("DATABASE_FLUSH_INTERVAL", get("DATABASE_FLUSH_INTERVAL"),
                                            float, above=0),
            database_outage_max=number("DATABASE_OUTAGE_MAX", get("DATABASE_OUTAGE_MAX"), float, above=0),
            redis_url=redis_url(get("REDIS_URL")),
            redis_key_prefix=prefix,
            redis_heartbeat_ttl=heartbeat_ttl,
            progress_interval=number("PROGRESS_INTERVAL", get("PROGRESS_INTERVAL"), float, above=0),
            metrics_port=metrics_port,
            metrics_address=metrics_address,
            metrics_linger=number("METRICS_LINGER", get("METRICS_LINGER"), float, minimum=0),
            product_fields=product_fields(get("PRODUCT_FIELDS")),
            product_columns=declared,
            variants=variants,
            guard_auth_failures=number("GUARD_AUTH_FAILURES", get("GUARD_AUTH_FAILURES"), int, minimum=0),
            guard_not_products=number("GUARD_NOT_PRODUCTS", get("GUARD_NOT_PRODUCTS"), int, minimum=0),
            guard_404_streak=number("GUARD_404_STREAK", get("GUARD_404_STREAK"), int, minimum=0),
            guard_no_answers=number("GUARD_NO_ANSWERS", get("GUARD_NO_ANSWERS"), int, minimum=0),
            guard_no_answers_seconds=number("GUARD_NO_ANSWERS_SECONDS", get("GUARD_NO_ANSWERS_SECONDS"), float,
                                            minimum=0),
            product_urls=product_urls,
            product_url_given=given,
            api_prefix=api_prefix,
            api_auth=api_auth(get("API_AUTH"), key, get("API_HEADERS"), api_prefix),
            guard_field_drift=field_drift(get("GUARD_FIELD_DRIFT"), FIELD_DRIFT_MIN_SAMPLE),
            pushgateway_url=pushgateway_url(get("PUSHGATEWAY_URL")),
            track_changes=track_changes(get("TRACK_CHANGES"), tuple(dict.fromkeys(trackable))),
            list_url=list_url,
            list_removals=flag("LIST_REMOVALS", get("LIST_REMOVALS")),
            keep_answer=flag("KEEP_ANSWER", get("KEEP_ANSWER")),
            keep_answer_max_bytes=number("KEEP_ANSWER_MAX_BYTES", get("KEEP_ANSWER_MAX_BYTES"), int, minimum=1),
            list_options=list_options(get),
            ids_from_listing=ids_from_listing,
            incremental_lag=duration("INCREMENTAL_LAG", get("INCREMENTAL_LAG")),
            full_pass_every=FullPassEvery.parse(get("FULL_PASS_EVERY")),
        )

    def __repr__(self) -> str:
        # The dataclass's own repr would show API_KEY and the URLs' passwords
        # wherever a config is printed: a log line, a traceback, a test failure.
        shown = {field.name: getattr(self, field.name) for field in fields(self)}
        shown["api_key"] = None if self.api_key is None else "***"
        for name in ("api_base_url", "api_prefix", "database_url", "redis_url", "pushgateway_url"):
            shown[name] = mask_url(shown[name])
        shown["list_url"] = None if self.list_url is None else mask_url(self.list_url.template)
        shown["product_urls"] = mask_url(str(self.product_urls))
        return f"CrawlConfig({', '.join(f'{name}={value!r}' for name, value in shown.items())})"

    @property
    def total_ids(self) -> int:
        return self.end_id - self.start_id + 1

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
        return f"API_BASE_URL ({mask_url(self.api_base_url)})"


def _id_list(get: Callable[[str], Any], ids: Any, *, given_range: bool,
             id_type: str) -> tuple[IdFile | None, bool]:
    """PRODUCT_IDS (or the spider argument ``ids``): (the scanned id file, or None; failed ids only)."""
    if ids is not None and given_range:
        raise ConfigError("the spider arguments ids and start_id/end_id are both given; give one of them")
    name = "ids (spider argument)" if ids is not None else "PRODUCT_IDS"
    raw = text(ids if ids is not None else (None if given_range else get("PRODUCT_IDS")))
    if raw is None:
        return None, False
    if raw.lower() == FAILED_IDS:
        return None, True
    if not raw.startswith("@") or not raw[1:].strip():
        raise ConfigError(f"{name}={raw!r}: expected @path (a file, one id a line), list (the ids of "
                          "PRODUCT_LIST_URL's listing) or failed")
    path = raw[1:].strip()
    try:
        return scanned(path, id_type), False
    except IdFileError as error:
        raise ConfigError(f"{name}={raw!r}: {path}: {error}") from None

