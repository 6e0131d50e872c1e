"""``CrawlConfig``: the configuration, parsed and validated, in sections.

A crawler's components share one, built once (``crawl_config(crawler)``,
:mod:`.crawler`); each component takes its section
(``config.rate``, ``config.retry``...). Every setting is declared in
:mod:`.declared`; the sections are in :mod:`.sections`; the rules between
settings of different sections are here. Parsing raises ``ConfigError``
naming the setting and the offending value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from w3lib.url import safe_url_string

from productcrawler.answer.variants import parse_variant_shape
from productcrawler.config.auth import api_auth, api_key
from productcrawler.config.declared import DECLARED
from productcrawler.config.product_url import ProductUrl
from productcrawler.config.reader import Reader
from productcrawler.config.sections import (
    AnswerConfig,
    ApiConfig,
    BudgetConfig,
    GuardConfig,
    IdsConfig,
    ListingConfig,
    MonitoringConfig,
    ProxyConfig,
    RateConfig,
    RedisConfig,
    RetryConfig,
    StorageConfig,
)
from productcrawler.config.values import ConfigError, http_url, listing_rules, mask_url, refuse_credentials, text
from productcrawler.ids.idfile import IdFile, IdFileError, scanned
from productcrawler.listing.graphql import GraphqlQuery
from productcrawler.listing.since import ListUrl

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.settings import BaseSettings

#: The most ids a range spans: a pass keeps one bit per id, and Redis's bitmaps end at 2**32 bits.
MAX_RANGE_IDS = 2**32
#: PRODUCT_IDS's value that asks for the ids recorded failed in the latest pass.
FAILED_IDS = "failed"
#: PRODUCT_IDS's value that takes the ids from the listing (PRODUCT_LIST_URL), each product fetched by id.
LISTED_IDS = "list"
#: The products columns TRACK_CHANGES may name (storage/changes.py compares them).
TRACKABLE_COLUMNS = ("name", "price", "stock", "category", "brand", "rating", "sales_count")


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


@dataclass(frozen=True)
class CrawlConfig:
    api: ApiConfig
    ids: IdsConfig
    listing: ListingConfig
    answer: AnswerConfig
    rate: RateConfig
    budget: BudgetConfig
    retry: RetryConfig
    storage: StorageConfig
    redis: RedisConfig
    guard: GuardConfig
    #: The proxy pool; None without PROXY_URLS.
    proxies: ProxyConfig | None
    monitoring: MonitoringConfig

    @classmethod
    def from_settings(cls, settings: BaseSettings | Mapping[str, Any], *, start_id: Any = None,
                      end_id: Any = None, ids: Any = None) -> CrawlConfig:
        """Parse and validate the configuration; spider args ``start_id``/``end_id``/``ids`` win.

        A plain mapping (a benchmark's or a test's few names) counts as
        project settings.
        """
        read = Reader(settings)
        id_section = _ids(read, start_id, end_id, ids)
        rate, retry, monitoring, redis = (RateConfig.read(read), RetryConfig.read(read), MonitoringConfig.read(read),
                                          RedisConfig.read(read))
        answer = _answer(read)
        listing = ListingConfig(url=_list_url(read), removals=read("LIST_REMOVALS"),
                                options=ListingConfig.read_options(read), incremental_lag=read("INCREMENTAL_LAG"),
                                full_pass_every=read("FULL_PASS_EVERY"))
        api = _api(read, listing.url, id_section.from_listing)
        trackable = (*(c.name for c in answer.columns),
                     *(c.name for c in (answer.variants.declared if answer.variants else ())))
        storage = StorageConfig(database_url=read("DATABASE_URL"), batch_size=read("DATABASE_BATCH_SIZE"),
                                flush_interval=read("DATABASE_FLUSH_INTERVAL"), outage_max=read("DATABASE_OUTAGE_MAX"),
                                track_changes=track_changes(read.raw("TRACK_CHANGES"), tuple(dict.fromkeys(trackable))))
        return cls(api=api, ids=id_section, listing=listing, answer=answer, rate=rate, budget=BudgetConfig.read(read),
                   retry=retry, storage=storage, redis=redis, guard=GuardConfig.read(read),
                   proxies=ProxyConfig.read(read), monitoring=monitoring)

    def __repr__(self) -> str:
        # The dataclass's own repr would show API_KEY and the URLs' passwords
        # wherever a config is printed: a log line, a traceback, a test failure.
        shown: dict[str, Any] = {}
        for section in fields(self):
            value = getattr(self, section.name)
            if value is None or section.name == "proxies":  # a Proxy's repr masks its password
                shown[section.name] = value
                continue
            for item in fields(value):
                shown[f"{section.name}_{item.name}"] = getattr(value, item.name)
        shown["api_key"] = None if self.api.key is None else "***"
        for name in ("api_base_url", "api_prefix", "storage_database_url", "redis_url", "monitoring_pushgateway_url"):
            shown[name] = mask_url(shown[name])
        shown["listing_url"] = None if self.listing.url is None else mask_url(self.listing.url.template)
        shown["api_product_urls"] = mask_url(str(self.api.product_urls))
        return f"CrawlConfig({', '.join(f'{name}={value!r}' for name, value in shown.items())})"


def _answer(read: Reader) -> AnswerConfig:
    """PRODUCT_FIELDS, PRODUCT_COLUMNS, the variants' settings, KEEP_ANSWER*."""
    columns = read("PRODUCT_COLUMNS")
    try:
        variants = parse_variant_shape(read("VARIANTS"), read("VARIANT_FIELDS"),
                                       read("PRODUCT_PRICE_FROM_VARIANTS"), read("PRODUCT_STOCK_FROM_VARIANTS"))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return AnswerConfig(fields=read("PRODUCT_FIELDS"), columns=columns, variants=variants, keep=read("KEEP_ANSWER"),
                        keep_max_bytes=read("KEEP_ANSWER_MAX_BYTES"))


def _list_url(read: Reader) -> ListUrl | None:
    """PRODUCT_LIST_URL, with PRODUCT_LIST_QUERY's GraphQL query; None: a pass by id."""
    if text(read("PRODUCT_LIST_URL")) is None:
        return None
    url = http_url("PRODUCT_LIST_URL", read("PRODUCT_LIST_URL"))
    with listing_rules():
        query = None if text(read("PRODUCT_LIST_QUERY")) is None else GraphqlQuery.parse(
            read("PRODUCT_LIST_QUERY"), read("PRODUCT_LIST_VARIABLES"), read("LIST_CURSOR_PARAM"))
        list_url = ListUrl.parse(url, query, shown=mask_url(url))
    refuse_credentials("PRODUCT_LIST_URL", list_url.template)
    return list_url


def _api(read: Reader, list_url: ListUrl | None, ids_from_listing: bool) -> ApiConfig:
    """API_*, PRODUCT_URL, and where the API's own URLs are (with a listing, beside it)."""
    api_base_url = read("API_BASE_URL")
    product_urls = ProductUrl.parse(read("PRODUCT_URL"), api_base_url)
    given = text(read("PRODUCT_URL")) is not None
    # As Scrapy writes request URLs (host lowercased, path percent-encoded), so that it
    # matches the spider's requests: the base itself, or a URL below it; with a listing,
    # what its URL and the products' have in common (the listing's next pages are beside it).
    prefix = safe_url_string(product_urls.prefix if given else f"{api_base_url}/")
    if list_url is not None:
        prefix = common_prefix(safe_url_string(list_url.resolve(None)), prefix if given else None)
    elif ids_from_listing or text(read("PRODUCT_LIST_QUERY")) is not None:
        raise ConfigError(f"{'PRODUCT_IDS=list' if ids_from_listing else 'PRODUCT_LIST_QUERY'} needs "
                          "the listing's URL: set PRODUCT_LIST_URL too")
    key = api_key(read("API_KEY"), read("API_KEY_FILE"))
    return ApiConfig(base_url=api_base_url, key=key, timeout=read("API_TIMEOUT"), tls_verify=read("API_TLS_VERIFY"),
                     ca_file=read("API_CA_FILE"), product_urls=product_urls, product_url_given=given, prefix=prefix,
                     auth=api_auth(read("API_AUTH"), key, read("API_HEADERS"), prefix))


def _ids(read: Reader, start_id: Any, end_id: Any, ids: Any) -> IdsConfig:
    """PRODUCT_ID_START, PRODUCT_ID_END, PRODUCT_ID_TYPE and PRODUCT_IDS; the spider's arguments win."""
    start_name = "start_id (spider argument)" if start_id is not None else "PRODUCT_ID_START"
    end_name = "end_id (spider argument)" if end_id is not None else "PRODUCT_ID_END"
    start = DECLARED["PRODUCT_ID_START"].parse(start_name, read.raw("PRODUCT_ID_START") if start_id is None
                                               else start_id)
    end = DECLARED["PRODUCT_ID_END"].parse(end_name, read.raw("PRODUCT_ID_END") if end_id is None else end_id)
    if start > end:
        raise ConfigError(f"{start_name}={start} is greater than {end_name}={end}")
    if end - start + 1 > MAX_RANGE_IDS:
        raise ConfigError(f"{start_name}={start} to {end_name}={end} spans {end - start + 1} ids; a pass "
                          f"spans at most {MAX_RANGE_IDS} (list sparse ids in a file: PRODUCT_IDS=@path)")
    id_type = read("PRODUCT_ID_TYPE")
    given_range = start_id is not None or end_id is not None
    # -a ids=list beside a range goes on to _id_list, which refuses the two together.
    from_listing = (text(ids if ids is not None else read("PRODUCT_IDS")) or "").lower() == LISTED_IDS and not (
        ids is not None and given_range)
    id_file, failed_only = (None, False) if from_listing else _id_list(
        read, ids, given_range=given_range, id_type=id_type)
    return IdsConfig(start_id=start, end_id=end, type=id_type, file=id_file, failed_only=failed_only,
                     from_listing=from_listing)


def _id_list(read: Reader, ids: Any, *, given_range: bool,
             id_type: str) -> tuple[IdFile | None, bool]:
    """PRODUCT_IDS (or the spider argument ``ids``): (the scanned id file, or None; failed ids only)."""
    if ids is not None and given_range:
        raise ConfigError("the spider arguments ids and start_id/end_id are both given; give one of them")
    name = "ids (spider argument)" if ids is not None else "PRODUCT_IDS"
    raw = text(ids if ids is not None else (None if given_range else read("PRODUCT_IDS")))
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

