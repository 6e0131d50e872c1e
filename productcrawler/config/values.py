"""Checks of single values of the contract: numbers, URLs, ``PRODUCT_FIELDS``; masking of secrets.

Each check raises :class:`ConfigError` (a ``ValueError``) naming the setting
and the offending value, with passwords, secret query options and ``API_KEY``
masked. :mod:`.declared` parses each setting with these.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from productcrawler.answer.payload import PayloadShape
from productcrawler.config.url_options import (
    MYSQL_OPTIONS,
    REDIS_OPTIONS,
    REDIS_TLS_OPTIONS,
    SECRET_OPTIONS,
    SHOWN_OPTIONS,
    database_number,
    parse_options,
    secret_values,
)
from productcrawler.listing import ListingError

#: DATABASE_URL schemes of PostgreSQL (psycopg); they take MySQL's query options.
POSTGRESQL_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


class ConfigError(ValueError):
    """A setting of the contract has a value the crawl cannot run with."""


@contextmanager
def listing_rules() -> Iterator[None]:
    """Listing's rules (``listing/``) refuse a setting with ListingError, naming it: said here as ConfigError."""
    try:
        yield
    except ListingError as error:
        raise ConfigError(str(error)) from None


def text(value: Any) -> str | None:
    """``value`` as stripped text, or ``None`` when it is unset or blank."""
    if value is None:
        return None
    stripped = str(value).strip()
    return stripped or None


#: The words a yes-or-no setting takes.
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def truth(raw: Any) -> bool | None:
    """``raw`` as a yes or a no (a bool, or one of TRUE_WORDS / FALSE_WORDS); None when it is neither."""
    if isinstance(raw, bool):
        return raw
    value = (text(raw) or "").lower()
    return True if value in TRUE_WORDS else False if value in FALSE_WORDS else None


def yes_or_no(refusal: str) -> Callable[[str, Any], bool]:
    """The parser of a yes-or-no setting: :func:`truth`, or ConfigError with ``refusal``
    (formatted with ``name``, ``raw`` and ``shown``, the value masked)."""

    def parse(name: str, raw: Any) -> bool:
        value = truth(raw)
        if value is None:
            raise ConfigError(refusal.format(name=name, raw=raw, shown=shown(name, raw)))
        return value

    return parse


# Every yes-or-no setting is read by truth(); each kind keeps the message it always had.
#: A yes-or-no setting of the contract (LIST_REMOVALS, KEEP_ANSWER).
flag = yes_or_no("{name}={raw!r}: expected true or false (1/0, yes/no, on/off)")
#: A component's ``*_ENABLED`` switch, as Scrapy's own switches are written.
switch = yes_or_no("{name}={raw!r} is not a boolean; expected True/False, 1/0, 'true'/'false'")
#: API_TLS_VERIFY.
boolean = yes_or_no("{name}={shown} is not a boolean; expected true or false")


def mask_url(url: str | None) -> str | None:
    """``url`` with its password and secret query options replaced by ``***`` (for messages and logs).

    A password with an unencoded ``/``, ``?``, ``#`` or ``@`` makes the URL
    ambiguous: urlsplit (and so the drivers) ends the authority at the first
    ``/?#``, where its writer meant the userinfo to end at the last ``@`` before
    the host. So every reading is taken (no userinfo, or userinfo ending at any
    ``@`` that can end one: see :func:`_userinfo_ends`) and what any of them
    calls a password or a secret option's value is hidden: an odd URL may show
    less than it could, never part of a secret.
    """
    if not url:
        return url
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    spans: list[tuple[int, int]] = []
    for end in [None, *_userinfo_ends(url)]:
        if end is not None and (colon := url.find(":", start, end)) >= 0:
            spans.append((colon + 1, end))  # the password
        query = url.find("?", start if end is None else end + 1)
        if query >= 0:
            spans += [(query + 1 + a, query + 1 + b) for a, b in secret_values(url[query + 1:])]
    shown: list[str] = []
    shown_to = 0
    for a, b in sorted(spans):
        if a > shown_to or not shown:
            shown += [url[shown_to:a], "***"]
        shown_to = max(shown_to, b)
    return "".join(shown) + url[shown_to:]


#: An authority (all up to the first ``/?#``) that reads as ``[userinfo@]host[:port]``.
_PLAIN_AUTHORITY = re.compile(r"(?:.*@)?(?:\[[^\]]*\]|[^:@\[\]]*)(?::[0-9]+)?")
#: What can follow the ``@`` that ends a userinfo: a host name or address, a port, then ``/?#`` or the end.
_HOST_AFTER_USERINFO = re.compile(r"(?:\[[^\]]*\]|[A-Za-z0-9._-]+)(?::[0-9]*)?(?:[/?#]|$)")
_OPTION_NAMES = SHOWN_OPTIONS | SECRET_OPTIONS


def _userinfo_ends(url: str) -> list[int]:
    """Where ``url``'s userinfo may end: every ``@`` after the scheme, but those in an option's value.

    An ``@`` inside the value of one of our options (``?ssl_ca=/etc/ca@2026.pem``)
    ends no userinfo when the authority urlsplit reads is a plain
    ``[userinfo@]host[:port]``: ending it there would take a password that holds
    ``?ssl_ca=`` itself. When that authority is not plain (``u:pa`` of a password
    ``pa?ssl_ca=/x`` read as a port), the password may well run into the query:
    every ``@`` counts. So does one that a host follows when the authority has
    no ``@`` of its own (``u:123`` of a password ``123?ssl_ca=/x@host:3306``,
    read as a host and a port).
    """
    scheme_end = url.find("://")
    if scheme_end < 0:
        return []
    start = scheme_end + 3
    ends = [i for i in range(start, len(url)) if url[i] == "@"]
    authority_end = next((i for i in range(start, len(url)) if url[i] in "/?#"), len(url))
    query = url.find("?", authority_end)
    fragment = url.find("#", authority_end)
    if (query < 0 or 0 <= fragment < query
            or not _PLAIN_AUTHORITY.fullmatch(url[start:authority_end])):
        return ends
    query_end = fragment if fragment >= 0 else len(url)
    in_values: set[int] = set()
    offset = query + 1
    for part in url[offset:query_end].split("&"):
        name, sep, _ = part.partition("=")
        if sep and unquote(name) in _OPTION_NAMES:
            in_values.update(range(offset + len(name) + 1, offset + len(part)))
        offset += len(part) + 1
    has_userinfo = "@" in url[start:authority_end]
    return [i for i in ends if i not in in_values
            or (not has_userinfo and _HOST_AFTER_USERINFO.match(url, i + 1))]


_USERINFO = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^\s/:@'\"]*:)[^\s/@'\"]*@", re.IGNORECASE)


def mask_credentials(text: str) -> str:
    """``text`` (an exception's message, say) with the password of every URL in it replaced by ``***``.

    aiohttp puts a proxy's URL, credentials included, into some of its errors.
    """
    return _USERINFO.sub(r"\g<head>***@", text)


#: Added to an error about a URL whose userinfo holds an unencoded ``?``, ``#`` or ``/``.
PASSWORD_HINT = "if the password contains ? # / or @, percent-encode it (e.g. ? as %3F)"


def ambiguous_userinfo(url: str) -> bool:
    """Whether ``url``'s userinfo (all before the last ``@`` that can end it) holds ``?``, ``#`` or ``/``.

    urlsplit, and so the drivers, end the authority at the first of them: the
    rest of the password is read as the port, the options or the path, and the
    error about those would send its reader looking in the wrong place.
    """
    ends = _userinfo_ends(url)
    return bool(ends) and any(c in url[url.find("://") + 3:ends[-1]] for c in "?#/")


def password_hint(url: str) -> str:
    """``"; <PASSWORD_HINT>"`` for an error about ``url`` when its userinfo is ambiguous, else ``""``."""
    return f"; {PASSWORD_HINT}" if ambiguous_userinfo(url) else ""


#: Settings that are URLs: shown with their passwords and secret query options masked.
URL_SETTINGS = frozenset({"API_BASE_URL", "PRODUCT_URL", "PRODUCT_LIST_URL", "DATABASE_URL", "REDIS_URL",
                          "PUSHGATEWAY_URL"})
#: Settings that may hold a secret: what :func:`masked` changes.
SECRET_SETTINGS = URL_SETTINGS | {"API_KEY", "API_HEADERS", "PROXY_URLS"}


def masked(name: str, value: Any) -> Any:
    """``value`` of the setting ``name`` as a message, a log line or ``scrapy settings`` may show it.

    ``API_KEY`` is ``***``; URLs' passwords and secret options are masked, in
    ``PROXY_URLS`` too; ``API_HEADERS`` keeps its header names, its values are
    ``***`` (a header may carry a second credential). Anything else, and an
    unset value, is ``value``.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return value
    if name == "API_KEY":
        return "***"
    if name in URL_SETTINGS:
        return mask_url(str(value))
    if name == "PROXY_URLS":
        return ",".join(mask_url(item) or item for item in str(value).split(","))
    if name == "API_HEADERS":
        given = value
        if not isinstance(given, dict):
            try:
                given = json.loads(str(value))
            except json.JSONDecodeError:
                return "***"
        if not isinstance(given, dict):
            return "***"
        return json.dumps(dict.fromkeys(given, "***"))
    return value


def shown(name: str, value: Any) -> str:
    """``value`` as a message may show it (:func:`masked`), quoted."""
    if name == "API_KEY":
        return "***"
    return repr(masked(name, value))


def refuse_credentials(name: str, url: str) -> None:
    """``ConfigError`` if the API URL ``url`` (of the setting ``name``) holds a user or a password.

    Sent as they are, they would go to every URL the answers lead to and into
    every DEBUG ``Crawled`` line; ``API_AUTH=basic`` sends them only to the
    API's own URLs, and no log line shows them.
    """
    if "@" in urlsplit(url).netloc:
        raise ConfigError(f"{name}={shown(name, url)} holds credentials (user:password@): the crawl would "
                          "show them in its logs; use API_AUTH=basic with API_KEY=user:password "
                          "(or API_KEY_FILE) instead")


def number(name: str, raw: Any, kind: Callable[[Any], Any], *, minimum: float | None = None,
           above: float | None = None, maximum: float | None = None) -> Any:
    """``raw`` as ``kind`` (``int`` or ``float``) within the bounds, or ``ConfigError`` naming ``name``."""
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = kind(str(raw).strip()) if isinstance(raw, str) else kind(raw)
        if kind is float and value != value:  # NaN
            raise ValueError
    except (TypeError, ValueError):
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name}={shown(name, raw)} is not {noun}") from None
    if above is not None and not value > above:
        raise ConfigError(f"{name}={shown(name, raw)} must be greater than {_bound(above)}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={shown(name, raw)} must be at least {_bound(minimum)}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name}={shown(name, raw)} must be at most {_bound(maximum)}")
    return value


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def http_url(name: str, raw: Any) -> str:
    url = text(raw)
    if url is None:
        raise ConfigError(f"{name} is empty; expected an http:// or https:// URL")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name}={shown(name, url)} is not an http:// or https:// URL")
    return url.rstrip("/")


def ca_file(name: str, raw: Any) -> str | None:
    """A PEM file of CA certificates (``API_CA_FILE``), checked as ``ssl`` will load it; None when unset."""
    path = text(raw)
    if path is None:
        return None
    if not Path(path).is_file():
        raise ConfigError(f"{name}={path!r} is not a readable file; expected a PEM file of CA certificates")
    try:
        ssl.create_default_context(cafile=path)
    except (OSError, ValueError) as error:  # ssl.SSLError is an OSError: no certificate in it, or a broken one
        raise ConfigError(f"{name}={path!r} cannot be read as PEM CA certificates ({error})") from None
    return path


def database_url(raw: Any) -> str:
    url = text(raw)
    if url is None:
        raise ConfigError("DATABASE_URL is empty; expected mysql://user:password@host:port/db or sqlite:///path")
    try:
        return _database_url(url)
    except ConfigError as error:
        raise ConfigError(f"{error}{password_hint(url)}") from None


def _options_error(url: str, error: ValueError) -> str:
    # Read from a password, the options' names and values are pieces of it: not shown.
    return "has query options that cannot be read" if ambiguous_userinfo(url) else str(error)


def _database_url(url: str) -> str:
    name = "DATABASE_URL"
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("mysql", "mysql+pymysql", *POSTGRESQL_SCHEMES):
        parts = urlsplit(url)
        try:
            options = parse_options(parts.query, MYSQL_OPTIONS)
        except ValueError as error:
            raise ConfigError(f"{name}={shown(name, url)} {_options_error(url, error)}") from None
        if not (parts.hostname or "unix_socket" in options) or not parts.path.strip("/"):
            raise ConfigError(f"{name}={shown(name, url)} needs a host and a database name: "
                              f"{scheme}://user:password@host:port/db")
        try:
            parts.port  # noqa: B018 - raises on a non-numeric port
        except ValueError:
            raise ConfigError(f"{name}={shown(name, url)} has a port that is not a number") from None
        return url
    if scheme == "sqlite":
        if "?" in url:
            raise ConfigError(f"{name}={shown(name, url)}: sqlite:/// takes no options")
        if not url[len("sqlite://"):].startswith("/") or url == "sqlite:///":
            raise ConfigError(f"{name}={shown(name, url)} must be sqlite:///relative/path.db "
                              "or sqlite:////absolute/path.db")
        return url
    raise ConfigError(f"{name}={shown(name, url)} has an unknown scheme {scheme or '(none)'!r}; "
                      "expected mysql://, postgresql:// or sqlite:///")


#: REDIS_URL schemes: a single server (TCP, TLS, Unix socket) or a Redis Cluster.
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def redis_url(raw: Any) -> str | None:
    url = text(raw)
    if url is None:
        return None
    try:
        return _redis_url(url)
    except ConfigError as error:
        raise ConfigError(f"{error}{password_hint(url)}") from None


def _redis_url(url: str) -> str:
    name = "REDIS_URL"
    parts = urlsplit(url)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(f"{name}={shown(name, url)} has an unknown scheme {parts.scheme or '(none)'!r}; "
                          "expected redis://host:port/db, rediss:// (TLS) or redis+cluster://host:port")
    try:
        parts.port  # noqa: B018
    except ValueError:
        raise ConfigError(f"{name}={shown(name, url)} has a port that is not a number") from None
    try:
        options = parse_options(parts.query, REDIS_OPTIONS)
    except ValueError as error:
        raise ConfigError(f"{name}={shown(name, url)} {_options_error(url, error)}") from None
    db = unquote(parts.path).strip("/")
    if parts.scheme != "unix" and db:
        try:
            database_number(db)  # redis-py would quietly select database 0 instead
        except ValueError:
            raise ConfigError(f"{name}={shown(name, url)}: the database (the path after the host) must be "
                              "a whole number, 0 or more: redis://host:port/0") from None
    tls = sorted(REDIS_TLS_OPTIONS.intersection(options))
    if tls and not parts.scheme.startswith("rediss"):
        raise ConfigError(f"{name}={shown(name, url)} gives {tls[0]} without TLS; "
                          "use rediss:// (or rediss+cluster://)")
    if parts.scheme.endswith("+cluster"):
        db = options.get("db", parts.path.strip("/") or "0")
        if str(db) != "0":
            raise ConfigError(f"{name}={shown(name, url)}: a Redis Cluster has database 0 only, not {db}")
    return url


def product_fields(raw: Any) -> PayloadShape:
    try:
        return PayloadShape.parse(raw)
    except ValueError as error:
        raise ConfigError(f"PRODUCT_FIELDS={shown('PRODUCT_FIELDS', raw)}: {error}") from None


def pushgateway_url(raw: Any) -> str | None:
    """``PUSHGATEWAY_URL``: None (unset: no push), or the Pushgateway's http(s):// base URL."""
    url = text(raw)
    if url is None:
        return None
    name = "PUSHGATEWAY_URL"
    url = http_url(name, url)
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ConfigError(f"{name}={shown(name, url)} has an invalid port") from None
    if parts.query or parts.fragment:
        raise ConfigError(f"{name}={shown(name, url)} must not have a query or fragment: the push "
                          "adds /metrics/job/... to its path")
    return url


def field_drift(raw: Any, minimum_sample: int) -> int:
    """``GUARD_FIELD_DRIFT``: 0 (off), or how many first answers of a pass the check looks at."""
    name = "GUARD_FIELD_DRIFT"
    value = number(name, raw, int, minimum=0)
    if 0 < value < minimum_sample:
        raise ConfigError(f"{name}={shown(name, raw)} must be 0 (off) or at least {minimum_sample}: fewer "
                          "answers cannot tell a vanished field from products that happen to lack it")
    return value
