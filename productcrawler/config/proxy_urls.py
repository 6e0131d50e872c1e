"""``PROXY_URLS`` parsed and checked: the proxies of the pool.

``PROXY_URLS`` is a comma-separated list of ``http://[user:password@]host:port``
or ``@/path/to/file`` (one URL a line; blank lines and ``#`` comments skipped).
Unset or empty: no proxy, and the proxy middleware is not even in the chain.
Only plain-HTTP proxies are supported (Scrapy's aiohttp download handler sends
``GET http://...`` to them, with Basic ``Proxy-Authorization``); SOCKS, HTTPS
proxies and anything else are refused at start, as a configuration error.
Passwords never appear in a message: a proxy is shown as ``user:***@host:port``
and named in stats and metrics by its ``host:port`` label.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from productcrawler.config.values import ConfigError, text

SUPPORTED_SCHEMES = ("http",)


@dataclass(frozen=True)
class Proxy:
    index: int
    url: str  #: ``http://host:port``, no credentials: what goes into ``meta["proxy"]``
    auth: bytes | None  #: the ``Proxy-Authorization`` value, if the URL had credentials
    label: str  #: ``host:port`` (``#2``... if repeated): names it in logs, stats, metrics
    key: str  #: stable id shared through Redis, without the password
    shown: str  #: the URL with its password masked

    @property
    def slot(self) -> str:
        """The Scrapy download slot of its requests: per-proxy concurrency and AutoThrottle."""
        return f"proxy {self.label}"

    def __repr__(self) -> str:  # never the password
        return f"Proxy({self.shown})"


def parse_proxy_urls(raw: Any) -> tuple[Proxy, ...]:
    given = text(raw)
    if given is None:
        return ()
    if given.startswith("@"):
        path = given[1:].strip()
        try:
            with open(path, encoding="utf-8") as file:
                lines = file.read().splitlines()
        except OSError as error:
            raise ConfigError(f"PROXY_URLS=@{path}: cannot read the file: {error.strerror or error}") from None
        items = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not items:
            raise ConfigError(f"PROXY_URLS=@{path}: the file lists no proxy")
    else:
        items = [item.strip() for item in given.split(",") if item.strip()]
    proxies: list[Proxy] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        proxy = _parse_one(index, item, seen)
        if any(p.key == proxy.key for p in proxies):
            raise ConfigError(f"PROXY_URLS lists {proxy.shown!r} twice")
        proxies.append(proxy)
    return tuple(proxies)


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***``, whatever else is wrong with it."""
    if "@" not in url:
        return url
    head, tail = url.rsplit("@", 1)
    scheme, separator, userinfo = head.rpartition("://")
    return f"{scheme}{separator}{userinfo.split(':', 1)[0]}:***@{tail}"


def _parse_one(index: int, url: str, seen: dict[str, int]) -> Proxy:
    shown = masked(url)
    if "://" not in url:
        raise ConfigError(f"PROXY_URLS: {shown!r} has no scheme; expected http://[user:password@]host:port")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SUPPORTED_SCHEMES:
        raise ConfigError(f"PROXY_URLS: {shown!r} is a {scheme or '(none)'}:// proxy; only http:// proxies "
                          "are supported (no SOCKS, no HTTPS proxy)")
    try:
        port = parts.port or 80
    except ValueError:
        raise ConfigError(f"PROXY_URLS: {shown!r} has a port that is not a number") from None
    host = parts.hostname
    if not host:
        raise ConfigError(f"PROXY_URLS: {shown!r} has no host; expected http://[user:password@]host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"PROXY_URLS: {shown!r} has a path; expected http://[user:password@]host:port")
    hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    auth = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        try:
            auth = b"Basic " + base64.b64encode(credentials.encode("latin-1"))
        except UnicodeEncodeError:
            raise ConfigError(f"PROXY_URLS: {shown!r}: the user name or password is not latin-1; "
                              "percent-encode it") from None
    seen[hostport] = seen.get(hostport, 0) + 1
    label = hostport if seen[hostport] == 1 else f"{hostport}#{seen[hostport]}"
    identity = f"{scheme}://{unquote(parts.username or '')}@{hostport}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Proxy(index=index, url=f"http://{hostport}", auth=auth, label=label, key=key, shown=shown)
