"""``API_AUTH``, ``API_KEY`` (or ``API_KEY_FILE``), ``API_HEADERS``: what goes into the API's requests.

``API_AUTH`` says how the key is sent: ``bearer`` (``Authorization: Bearer
KEY``, the default), ``header:NAME`` (``NAME: KEY``), ``query:NAME``
(``NAME=KEY`` added to the URL's query) or ``basic`` (``API_KEY`` is
``user:password``, sent as RFC 7617's ``Authorization: Basic``).
``API_HEADERS`` is a JSON object of fixed headers sent with them.

No message here shows the key, nor any part of it.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from productcrawler.config.values import ConfigError, mask_url, text

MODES = "bearer, basic, header:NAME or query:NAME"
#: The largest API_KEY_FILE read: a key is far shorter; a bigger file is the wrong one.
_MAX_KEY_FILE = 64 * 1024
#: RFC 9110's token: what a header's name (and so header:NAME) may be made of.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Characters no header value may hold (a CR or LF would end the header; RFC 9110 forbids the other controls).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True, repr=False)
class ApiAuth:
    """The credential and the fixed headers, and the URLs they may go to (those under ``prefix``)."""

    mode: str
    prefix: str
    #: Every header to add, the credential's (if any) and API_HEADERS', in that order.
    headers: tuple[tuple[str, str], ...]
    #: ``NAME=KEY``, encoded, for query:NAME; else None.
    query: str | None
    #: The forms the secrets take on the wire, for :meth:`scrub`.
    secrets: tuple[str, ...]

    def sends_to(self, url: str) -> bool:
        """Whether ``url`` is one of the API's own (under ``prefix``), as HttpAuthMiddleware's domain rule."""
        return url.startswith(self.prefix) or url == self.prefix[:-1]

    def url_for(self, url: str) -> str:
        """``url`` with ``NAME=KEY`` in its query (after any it has), for query:NAME; else ``url``."""
        if self.query is None:
            return url
        url, hash_, fragment = url.partition("#")
        separator = "&" if "?" in url else "?"
        if url.endswith(("?", "&")):
            separator = ""
        return f"{url}{separator}{self.query}{hash_}{fragment}"

    def scrub(self, message: str) -> str:
        """``message`` with every form of the secrets in it replaced by ``***``."""
        for secret in self.secrets:
            message = message.replace(secret, "***")
        return message

    def __repr__(self) -> str:
        return f"ApiAuth(mode={self.mode!r}, prefix={mask_url(self.prefix)!r}, headers=***)"


def api_key(raw_key: Any, raw_file: Any) -> str | None:
    """``API_KEY``, or the content of ``API_KEY_FILE`` without its trailing newline; None if neither is set."""
    key = text(raw_key)
    path = text(raw_file)
    if path is None:
        return key
    if key is not None:
        raise ConfigError(f"API_KEY and API_KEY_FILE={path!r} are both set; give the key once")
    try:
        with open(path, "rb") as file:
            content = file.read(_MAX_KEY_FILE + 1)
    except OSError as error:
        raise ConfigError(f"API_KEY_FILE={path!r}: cannot read the file: {error.strerror or error}") from None
    if len(content) > _MAX_KEY_FILE:
        raise ConfigError(f"API_KEY_FILE={path!r} is larger than {_MAX_KEY_FILE} bytes: not a key")
    try:
        decoded = content.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"API_KEY_FILE={path!r} is not UTF-8 text") from None
    key = decoded.removesuffix("\n").removesuffix("\r")
    if not key.strip():
        raise ConfigError(f"API_KEY_FILE={path!r} is empty")
    return key


def api_auth(raw_mode: Any, raw_key: Any, raw_headers: Any, prefix: str) -> ApiAuth | None:
    """The three settings checked, or None when there is neither a key nor a fixed header to send."""
    key = text(raw_key)
    mode = _mode(raw_mode, key)
    extra = _extra_headers(raw_headers)
    if key is None and not extra:
        return None
    headers: list[tuple[str, str]] = []
    query = None
    secrets: list[str] = []
    if key is not None:
        if _CONTROL.search(key):
            raise ConfigError("API_KEY holds a control character (a line break?): no HTTP request can carry it")
        secrets.append(key)
        kind, _, name = mode.partition(":")
        if kind == "bearer":
            headers.append(("Authorization", f"Bearer {key}"))
        elif kind == "header":
            headers.append((name, key))
        elif kind == "basic":
            user, colon, password = key.partition(":")
            if not colon or not user:
                raise ConfigError("API_KEY must be user:password with API_AUTH=basic "
                                  "(WooCommerce: consumer_key:consumer_secret); it has no colon after a user")
            secrets += [part for part in (user, password) if len(part) >= 4]
            token = base64.b64encode(key.encode()).decode("ascii")
            headers.append(("Authorization", f"Basic {token}"))
            secrets.append(token)
        else:
            query = f"{quote(name, safe='')}={quote(key, safe='')}"
        given = {header.lower() for header, _ in extra}
        if headers and headers[0][0].lower() in given:
            raise ConfigError(f"API_HEADERS sets {headers[0][0]}, the header API_AUTH={mode} sends API_KEY in; "
                              "give it only once")
    headers += extra
    # As given, and as a URL carries them (percent-encoded).
    forms = {form for secret in secrets for form in (secret, quote(secret, safe=""), quote(secret)) if form}
    return ApiAuth(mode=mode, prefix=prefix, headers=tuple(headers), query=query,
                   secrets=tuple(sorted(forms, key=len, reverse=True)))


def _mode(raw: Any, key: str | None) -> str:
    mode = text(raw) or "bearer"
    kind, colon, name = mode.partition(":")
    kind = kind.strip().lower()
    name = name.strip()
    if kind in ("bearer", "basic") and not colon:
        return kind
    if kind == "header" and _TOKEN.fullmatch(name):
        return f"header:{name}"
    if kind == "query" and name and not _CONTROL.search(name):
        return f"query:{name}"
    raise ConfigError(f"API_AUTH={_masked(mode, key)} is not one of {MODES} "
                      "(header:X-Auth-Token, query:apiKey)")


def _masked(value: str, key: str | None) -> str:
    """``value`` as a message may show it: any piece of the key in it hidden (a key pasted in the wrong place)."""
    if key:
        for piece in sorted({key, *key.split(":")}, key=len, reverse=True):
            if len(piece) >= 4:
                value = value.replace(piece, "***")
    return repr(value)


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
               type(None): "null", dict: "an object"}


def _extra_headers(raw: Any) -> tuple[tuple[str, str], ...]:
    """``API_HEADERS``: a JSON object of header names to strings. Values are never shown (they may be secrets)."""
    if isinstance(raw, dict):
        given: Any = raw
    else:
        source = text(raw)
        if source is None:
            return ()
        try:
            given = json.loads(source)
        except json.JSONDecodeError as error:
            raise ConfigError(f"API_HEADERS is not JSON ({error.msg} at character {error.pos}); expected an "
                              'object of header names to values: {"X-EBAY-C-MARKETPLACE-ID": "EBAY_US"}') from None
    if not isinstance(given, dict):
        raise ConfigError(f"API_HEADERS is {_JSON_KINDS.get(type(given), 'a value')}, not a JSON object "
                          'of header names to values: {"X-EBAY-C-MARKETPLACE-ID": "EBAY_US"}')
    headers = []
    for name, value in given.items():
        if not _TOKEN.fullmatch(name):
            raise ConfigError(f"API_HEADERS names a header {name!r} that is not a valid header name")
        if not isinstance(value, str):
            raise ConfigError(f"API_HEADERS gives {name} {_JSON_KINDS.get(type(value), 'a value')}, not a string")
        if _CONTROL.search(value):
            raise ConfigError(f"API_HEADERS gives {name} a value with a control character (a line break?)")
        headers.append((name, value))
    return tuple(headers)
