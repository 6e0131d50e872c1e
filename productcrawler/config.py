"""The configuration contract: every user-facing setting, its type, default and rule.

Each value can come from the environment or, under the same name, from a Scrapy
setting (``-s NAME=value``, scrapyd's ``setting=NAME=value``); a setting given
explicitly wins over the environment because ``settings.py`` only uses the
environment to fill in the project-level value, which ``-s`` overrides.

Components never read these names with raw ``settings.get``: they call
``crawl_config(crawler)``, the crawler's one ``CrawlConfig``, parsed and
validated once (``CrawlConfig.from_settings``), which raises ``ConfigError`` (a
``ValueError``) naming the setting and the offending value, passwords masked.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy.settings import BaseSettings as _BaseSettings

from productcrawler.payload import PayloadShape
from productcrawler.url_options import MYSQL_OPTIONS, REDIS_OPTIONS, REDIS_TLS_OPTIONS, mask_query, parse_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

SIMULATOR_PORT = 8931
SIMULATOR_BASE_URL = f"http://127.0.0.1:{SIMULATOR_PORT}/v1"


class ConfigError(ValueError):
    """A setting of the contract has a value the crawl cannot run with."""


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


# name -> default; the one place where defaults live.
DEFAULTS: dict[str, Any] = {
    "API_BASE_URL": SIMULATOR_BASE_URL,
    "API_KEY": None,
    "API_TIMEOUT": 30.0,
    "PRODUCT_ID_START": 1,
    "PRODUCT_ID_END": 50_000,
    "MAX_REQUESTS_PER_SECOND": 500.0,
    "RATE_LIMIT_BURST": None,  # None: derived from the rate, see burst_for_rate()
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
    "PROGRESS_INTERVAL": 10.0,
    "METRICS_PORT": None,
    "METRICS_ADDRESS": "127.0.0.1",
    "METRICS_LINGER": 0.0,
    # Where the product is in the API's answer (payload.py); None: the default rules.
    "PRODUCT_FIELDS": None,
    # The wholesale-failure guard (extensions/guard.py): answers in a row that
    # stop the crawl; 0 turns that check off.
    "GUARD_AUTH_FAILURES": 20,
    "GUARD_NOT_PRODUCTS": 20,
    "GUARD_404_STREAK": 500,
    # The proxy pool (productcrawler/proxies/config.py reads and checks these).
    "PROXY_URLS": None,
    "PROXY_SCORE_SUCCESS": 5.0,
    "PROXY_SCORE_FAILURE": 20.0,
    "PROXY_SCORE_MIN": 50.0,
    "PROXY_REST_BASE": 10.0,
    "PROXY_REST_MAX": 300.0,
    "PROXY_MAX_REQUESTS_PER_SECOND": None,
}


def from_environment(name: str) -> Any:
    """Project-level value of ``name``: the environment if set, else the default."""
    env = os.environ.get(name)
    if env is not None and env.strip() != "":
        return env
    return DEFAULTS[name]


def mask_url(url: str | None) -> str | None:
    """``url`` with its password and secret query options replaced by ``***`` (for messages and logs)."""
    if not url:
        return url
    base, sep, query = url.partition("?")
    try:
        parts = urlsplit(base)
        if parts.password is not None:
            netloc = parts.netloc.rsplit("@", 1)
            userinfo = netloc[0].split(":", 1)[0]
            base = urlunsplit(parts._replace(netloc=f"{userinfo}:***@{netloc[1]}"))
    except ValueError:
        return "<unparseable URL>"
    return base + sep + mask_query(query)


def _shown(name: str, value: Any) -> str:
    if name == "API_KEY":
        return "***"
    if name in ("DATABASE_URL", "REDIS_URL"):
        return repr(mask_url(str(value)))
    return repr(value)


def _number(name: str, raw: Any, kind: Callable[[Any], Any], *, minimum: float | None = None,
            above: float | None = None, maximum: float | None = None) -> Any:
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = kind(str(raw).strip()) if isinstance(raw, str) else kind(raw)
        if kind is float and value != value:  # NaN
            raise ValueError
    except (TypeError, ValueError):
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name}={_shown(name, raw)} is not {noun}") from None
    if above is not None and not value > above:
        raise ConfigError(f"{name}={_shown(name, raw)} must be greater than {above:g}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={_shown(name, raw)} must be at least {minimum:g}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name}={_shown(name, raw)} must be at most {maximum:g}")
    return value


def _http_url(name: str, raw: Any) -> str:
    url = _text(raw)
    if url is None:
        raise ConfigError(f"{name} is empty; expected an http:// or https:// URL")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name}={_shown(name, url)} is not an http:// or https:// URL")
    return url.rstrip("/")


def _database_url(raw: Any) -> str:
    url = _text(raw)
    name = "DATABASE_URL"
    if url is None:
        raise ConfigError(f"{name} is empty; expected mysql://user:password@host:port/db or sqlite:///path")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("mysql", "mysql+pymysql"):
        parts = urlsplit(url)
        try:
            options = parse_options(parts.query, MYSQL_OPTIONS)
        except ValueError as error:
            raise ConfigError(f"{name}={_shown(name, url)} {error}") from None
        if not (parts.hostname or "unix_socket" in options) or not parts.path.strip("/"):
            raise ConfigError(f"{name}={_shown(name, url)} needs a host and a database name: "
                              "mysql://user:password@host:port/db")
        try:
            parts.port  # noqa: B018 - raises on a non-numeric port
        except ValueError:
            raise ConfigError(f"{name}={_shown(name, url)} has a port that is not a number") from None
        return url
    if scheme == "sqlite":
        if "?" in url:
            raise ConfigError(f"{name}={_shown(name, url)}: sqlite:/// takes no options")
        if not url[len("sqlite://"):].startswith("/") or url == "sqlite:///":
            raise ConfigError(f"{name}={_shown(name, url)} must be sqlite:///relative/path.db "
                              "or sqlite:////absolute/path.db")
        return url
    raise ConfigError(f"{name}={_shown(name, url)} has an unknown scheme {scheme or '(none)'!r}; "
                      "expected mysql:// or sqlite:///")


#: REDIS_URL schemes: a single server (TCP, TLS, Unix socket) or a Redis Cluster.
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def _redis_url(raw: Any) -> str | None:
    url = _text(raw)
    if url is None:
        return None
    name = "REDIS_URL"
    parts = urlsplit(url)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(f"{name}={_shown(name, url)} has an unknown scheme {parts.scheme or '(none)'!r}; "
                          "expected redis://host:port/db, rediss:// (TLS) or redis+cluster://host:port")
    try:
        parts.port  # noqa: B018
    except ValueError:
        raise ConfigError(f"{name}={_shown(name, url)} has a port that is not a number") from None
    try:
        options = parse_options(parts.query, REDIS_OPTIONS)
    except ValueError as error:
        raise ConfigError(f"{name}={_shown(name, url)} {error}") from None
    tls = sorted(REDIS_TLS_OPTIONS.intersection(options))
    if tls and not parts.scheme.startswith("rediss"):
        raise ConfigError(f"{name}={_shown(name, url)} gives {tls[0]} without TLS; "
                          "use rediss:// (or rediss+cluster://)")
    if parts.scheme.endswith("+cluster"):
        db = options.get("db", parts.path.strip("/") or "0")
        if str(db) != "0":
            raise ConfigError(f"{name}={_shown(name, url)}: a Redis Cluster has database 0 only, not {db}")
    return url


def max_retries(settings: BaseSettings) -> int:
    """Retries per id: ``MAX_RETRIES``, or Scrapy's ``RETRY_TIMES`` where a user gave it."""
    return _aliased(settings, "MAX_RETRIES", "RETRY_TIMES", int, minimum=0)


def api_timeout(settings: BaseSettings) -> float:
    """Seconds per request: ``API_TIMEOUT``, or Scrapy's ``DOWNLOAD_TIMEOUT`` where a user gave it."""
    return _aliased(settings, "API_TIMEOUT", "DOWNLOAD_TIMEOUT", float, above=0)


#: Scrapy's priority of settings.py (and of the environment, which it reads).
_PROJECT_PRIORITY = 20


def _aliased(settings: BaseSettings, ours: str, scrapys: str, kind: Callable[[Any], Any],
             **bounds: float) -> Any:
    """The value of a contract setting that has a Scrapy setting of the same meaning.

    Both follow Scrapy's settings priorities: the one given at the higher
    priority wins (``-s RETRY_TIMES=0`` beats ``MAX_RETRIES`` from the
    environment or ``settings.py``). Scrapy's own default (priority "default")
    never counts. Given at the same priority with different values they are
    refused: guessing would silently ignore one of them.
    """
    our_priority, their_priority = settings.getpriority(ours), settings.getpriority(scrapys)
    given = DEFAULTS[ours] if settings.get(ours) is None else settings.get(ours)
    # settings.py fills every contract name in at project priority, with its
    # default when the environment has none: that is not "given", and must
    # neither refuse nor beat RETRY_TIMES pasted into settings.py.
    in_environment = bool((os.environ.get(ours) or "").strip())
    if our_priority == _PROJECT_PRIORITY and given == DEFAULTS[ours] and not in_environment:
        our_priority = None
    value = _number(ours, given, kind, **bounds)
    if not their_priority:  # absent, or Scrapy's default
        return value
    theirs = _number(scrapys, settings.get(scrapys), kind, **bounds)
    if our_priority is None or their_priority > our_priority:
        return theirs
    if their_priority == our_priority and theirs != value:
        raise ConfigError(f"{scrapys}={settings.get(scrapys)!r} and {ours}={given!r} "
                          f"disagree; give only one of them ({ours} is this project's name)")
    return value
def _product_fields(raw: Any) -> PayloadShape:
    try:
        return PayloadShape.parse(raw)
    except ValueError as error:
        raise ConfigError(f"PRODUCT_FIELDS={_shown('PRODUCT_FIELDS', raw)}: {error}") from None


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
    start_id: int
    end_id: int
    max_requests_per_second: float
    rate_limit_burst: float
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
    progress_interval: float
    metrics_port: int | None
    metrics_address: str
    metrics_linger: float
    product_fields: PayloadShape
    guard_auth_failures: int
    guard_not_products: int
    guard_404_streak: int

    @classmethod
    def from_settings(cls, settings: BaseSettings | Mapping[str, Any], *, start_id: Any = None,
                      end_id: Any = None) -> CrawlConfig:
        """Parse and validate the contract; spider args ``start_id``/``end_id`` win.

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
        start = _number(start_name, get("PRODUCT_ID_START") if start_id is None else start_id,
                        int, minimum=1)
        end = _number(end_name, get("PRODUCT_ID_END") if end_id is None else end_id, int, minimum=1)
        if start > end:
            raise ConfigError(f"{start_name}={start} is greater than {end_name}={end}")

        rate = _number("MAX_REQUESTS_PER_SECOND", get("MAX_REQUESTS_PER_SECOND"), float, above=0)
        burst_raw = get("RATE_LIMIT_BURST")
        burst = (burst_for_rate(rate) if _text(burst_raw) is None
                 else _number("RATE_LIMIT_BURST", burst_raw, float, minimum=1))
        backoff_base = _number("RETRY_BACKOFF_BASE", get("RETRY_BACKOFF_BASE"), float, minimum=0)
        backoff_max = _number("RETRY_BACKOFF_MAX", get("RETRY_BACKOFF_MAX"), float, minimum=0)
        if backoff_max < backoff_base:
            raise ConfigError(f"RETRY_BACKOFF_MAX={backoff_max:g} is below RETRY_BACKOFF_BASE={backoff_base:g}")
        metrics_raw = get("METRICS_PORT")
        metrics_port = (None if _text(metrics_raw) is None
                        else _number("METRICS_PORT", metrics_raw, int, minimum=0, maximum=65535))
        metrics_address = _text(get("METRICS_ADDRESS"))
        if metrics_address is None:
            raise ConfigError("METRICS_ADDRESS is empty; expected an address to listen on, e.g. 127.0.0.1")
        prefix = _text(get("REDIS_KEY_PREFIX"))
        if prefix is None:
            raise ConfigError("REDIS_KEY_PREFIX is empty")
        if "{" in prefix or "}" in prefix:
            # The pass's keys are "{prefix}:...": braces of its own would change the hash tag.
            raise ConfigError(f"REDIS_KEY_PREFIX={prefix!r} must not contain {{ or }}: the crawl wraps it "
                              "in braces itself (the Redis Cluster hash tag of its keys)")
        return cls(
            api_base_url=_http_url("API_BASE_URL", get("API_BASE_URL")),
            api_key=_text(get("API_KEY")),
            api_timeout=api_timeout(settings),
            start_id=start,
            end_id=end,
            max_requests_per_second=rate,
            rate_limit_burst=burst,
            max_retries=max_retries(settings),
            retry_backoff_base=backoff_base,
            retry_backoff_max=backoff_max,
            retry_after_max=_number("RETRY_AFTER_MAX", get("RETRY_AFTER_MAX"), float, minimum=0),
            database_url=_database_url(get("DATABASE_URL")),
            database_batch_size=_number("DATABASE_BATCH_SIZE", get("DATABASE_BATCH_SIZE"), int, minimum=1),
            database_flush_interval=_number("DATABASE_FLUSH_INTERVAL", get("DATABASE_FLUSH_INTERVAL"),
                                            float, above=0),
            database_outage_max=_number("DATABASE_OUTAGE_MAX", get("DATABASE_OUTAGE_MAX"), float, above=0),
            redis_url=_redis_url(get("REDIS_URL")),
            redis_key_prefix=prefix,
            progress_interval=_number("PROGRESS_INTERVAL", get("PROGRESS_INTERVAL"), float, above=0),
            metrics_port=metrics_port,
            metrics_address=metrics_address,
            metrics_linger=_number("METRICS_LINGER", get("METRICS_LINGER"), float, minimum=0),
            product_fields=_product_fields(get("PRODUCT_FIELDS")),
            guard_auth_failures=_number("GUARD_AUTH_FAILURES", get("GUARD_AUTH_FAILURES"), int, minimum=0),
            guard_not_products=_number("GUARD_NOT_PRODUCTS", get("GUARD_NOT_PRODUCTS"), int, minimum=0),
            guard_404_streak=_number("GUARD_404_STREAK", get("GUARD_404_STREAK"), int, minimum=0),
        )

    @property
    def total_ids(self) -> int:
        return self.end_id - self.start_id + 1

    def product_url(self, product_id: int) -> str:
        return f"{self.api_base_url}/product/{product_id}"


_ATTRIBUTE = "_productcrawler_config"


def crawl_config(crawler: Crawler, *, start_id: Any = None, end_id: Any = None) -> CrawlConfig:
    """The crawler's configuration, parsed and validated once and shared by every component.

    The spider is built first and passes its ``start_id``/``end_id`` arguments;
    every component built after it gets the same object.
    """
    config = getattr(crawler, _ATTRIBUTE, None)
    if config is None or start_id is not None or end_id is not None:
        config = CrawlConfig.from_settings(crawler.settings, start_id=start_id, end_id=end_id)
        setattr(crawler, _ATTRIBUTE, config)
    return config
