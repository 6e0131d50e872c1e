"""The parsers the declaration (:mod:`.declared`) names: each reads one setting's raw value.

A parser is called as ``parse(name, raw)`` with the raw value (the default when
the setting is unset) and returns the typed value or raises ``ConfigError``
naming the setting. Rules between settings are not here: :mod:`.sections`
checks them where it combines the values.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from productcrawler.answer.declared import DeclaredColumn, parse_columns
from productcrawler.config.values import ConfigError, http_url, listing_rules, number, refuse_credentials, shown, text
from productcrawler.listing.since import FullPassEvery

Parser = Callable[[str, Any], Any]

#: Seconds between an instance's heartbeats in a shared pass (not a setting:
#: REDIS_HEARTBEAT_TTL must be longer, or a live instance would count as dead between two beats).
HEARTBEAT_INTERVAL = 2.0
#: REDIS_HEARTBEAT_TTL's upper bound, seconds (a day).
MAX_HEARTBEAT_TTL = 24 * 3600
#: The budget-header formats RATE_LIMIT_HEADERS names (productcrawler/budget/headers.py),
#: in the order ``auto`` tries them.
RATE_LIMIT_HEADER_FORMATS = ("ietf", "x-ratelimit", "bigcommerce", "shopify")
#: PRODUCT_ID_TYPE's values.
ID_TYPES = ("int", "string")


def raw(name: str, value: Any) -> Any:
    """A value another setting's rule reads as given (PRODUCT_URL needs API_BASE_URL, ...)."""
    return value


def optional_text(name: str, value: Any) -> str | None:
    """Stripped text; None when unset or blank."""
    return text(value)


def lowered_text(name: str, value: Any) -> str | None:
    """Stripped, lowercased text; None when unset or blank."""
    given = text(value)
    return None if given is None else given.lower()


def whole(*, minimum: float | None = None, maximum: float | None = None) -> Parser:
    """A whole number within the bounds."""
    return lambda name, value: number(name, value, int, minimum=minimum, maximum=maximum)


def real(*, minimum: float | None = None, above: float | None = None, maximum: float | None = None) -> Parser:
    """A number within the bounds."""
    return lambda name, value: number(name, value, float, minimum=minimum, above=above, maximum=maximum)


def optional(parse: Parser) -> Parser:
    """``parse``, or None when the value is unset or blank."""
    return lambda name, value: None if text(value) is None else parse(name, value)


def api_url(name: str, value: Any) -> str:
    """An http(s) URL of the API, with no credentials in it (API_AUTH sends them)."""
    url = http_url(name, value)
    refuse_credentials(name, url)
    return url


def id_type(name: str, value: Any) -> str:
    """PRODUCT_ID_TYPE: ``int`` or ``string``."""
    given = str(value).strip().lower()
    if given not in ID_TYPES:
        raise ConfigError(f"{name}={value!r}: expected int or string")
    return given


def duration(name: str, value: Any) -> float:
    """Seconds: a number, or a number with a unit (``90s``, ``5m``, ``2h``, ``1d``)."""
    given = text(value if not isinstance(value, (int, float)) else str(value))
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", given or "", re.IGNORECASE)
    if found is None:
        raise ConfigError(f"{name}={value!r}: expected seconds, or a duration such as 90s, 5m, 2h, 1d")
    return float(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[found[2].lower()]


def product_columns(name: str, value: Any) -> tuple[DeclaredColumn, ...]:
    """PRODUCT_COLUMNS: ``name:type=path,...`` (answer/declared.py)."""
    try:
        return parse_columns(value)
    except ValueError as error:
        raise ConfigError(f"{name}={value!r}: {error}") from None


def rate_limit_headers(name: str, value: Any) -> tuple[str, ...]:
    """RATE_LIMIT_HEADERS: the budget-header formats to read (none for ``off``)."""
    given = (text(value) or "").lower()
    if given == "auto":
        return RATE_LIMIT_HEADER_FORMATS
    if given == "off":
        return ()
    if given in RATE_LIMIT_HEADER_FORMATS:
        return (given,)
    raise ConfigError(f"{name}={value!r} is not one of auto, off, {', '.join(RATE_LIMIT_HEADER_FORMATS)}")


def key_prefix(name: str, value: Any) -> str:
    """REDIS_KEY_PREFIX: not empty, no braces."""
    prefix = text(value)
    if prefix is None:
        raise ConfigError(f"{name} is empty")
    if "{" in prefix or "}" in prefix:
        # The pass's keys are "{prefix}:...": braces of its own would change the hash tag.
        raise ConfigError(f"{name}={prefix!r} must not contain {{ or }}: the crawl wraps it "
                          "in braces itself (the Redis Cluster hash tag of its keys)")
    return prefix


def heartbeat_ttl(name: str, value: Any) -> float:
    """REDIS_HEARTBEAT_TTL: seconds, longer than the heartbeats' interval, at most a day."""
    ttl = number(name, value, float, maximum=MAX_HEARTBEAT_TTL)
    if not ttl > HEARTBEAT_INTERVAL:
        raise ConfigError(f"{name}={shown(name, value)} must be greater than "
                          f"{HEARTBEAT_INTERVAL:g}, the seconds between an instance's heartbeats (a live "
                          "instance would count as dead between two of them)")
    return ttl


def listen_address(name: str, value: Any) -> str:
    """METRICS_ADDRESS: not empty."""
    address = text(value)
    if address is None:
        raise ConfigError(f"{name} is empty; expected an address to listen on, e.g. 127.0.0.1")
    return address


def gc_threshold(name: str, value: Any) -> int:
    """GC_GEN0_THRESHOLD: 0 (Python's own thresholds) or a positive whole number."""
    try:
        threshold = int(value)
    except (TypeError, ValueError):
        threshold = -1
    if threshold < 0:
        raise ConfigError(f"{name}={value!r}: expected 0 (keep Python's thresholds) or a positive whole number")
    return threshold


def scrapy_switch(name: str, value: Any) -> bool:
    """A switch of Scrapy's own, read as Scrapy reads it (``getbool``)."""
    if isinstance(value, bool):
        return value
    if value in ("True", "true"):
        return True
    if value in ("False", "false"):
        return False
    try:
        return bool(int(value))
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not true or false") from None


def scrapy_integer(name: str, value: Any) -> int:
    """An integer setting of Scrapy's own, read as Scrapy reads it (``getint``); a bool is refused."""
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not an integer") from None


def log_level(name: str, value: Any) -> int:
    """RETRY_GIVE_UP_LOG_LEVEL as a number; a name that is not a level is refused at start."""
    level = value
    if isinstance(value, str):
        # -s gives a number as text: "30" is a level, as the message below promises.
        given = value.strip()
        level = int(given) if given.isdigit() else logging.getLevelName(given.upper())
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"{name}={value!r} is not a log level "
                          "(DEBUG, INFO, WARNING, ERROR, CRITICAL or a number)")
    return level


def http_statuses(name: str, value: Any) -> list[int]:
    """RETRY_HTTP_CODES as statuses: a list, a JSON list or a comma list; refused if not."""
    try:
        codes: Any = value
        if isinstance(value, str):
            given = value.strip()
            codes = json.loads(given) if given.startswith("[") else [v for v in given.split(",") if v.strip()]
        if codes is None:
            codes = []
        if any(isinstance(code, bool) for code in codes):
            raise ValueError
        statuses = [int(code) for code in codes]
        if any(not 100 <= code <= 599 for code in statuses):
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not a list of HTTP statuses "
                          "(e.g. [503, 429] or 503,429)") from None
    return statuses


def full_pass_every(name: str, value: Any) -> FullPassEvery:
    """FULL_PASS_EVERY: a number of passes or a duration (listing/since.py)."""
    with listing_rules():
        return FullPassEvery.parse(value)
