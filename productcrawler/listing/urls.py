"""Listing URLs: one query parameter read or set, relative links resolved, ``Link`` headers parsed.

Setting a parameter keeps every other one as written and in its order; names
match whether their brackets are percent-encoded or not
(``searchCriteria%5BcurrentPage%5D`` is ``searchCriteria[currentPage]``).
Every URL given out is normalised as Scrapy's ``Request`` does
(``w3lib.url.safe_url_string``), so page 1 is the listing URL as Scrapy sends it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_plus, urljoin, urlsplit, urlunsplit

from w3lib.url import safe_url_string

# RFC 8288: `<target>; param=value; param="quoted, value"`, link-values separated by commas.
_LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[^\s;,=]+\s*(?:=\s*(?:"(?:[^"\\]|\\.)*"|[^;,]*))?)*)')
_LINK_PARAM = re.compile(r';\s*([^\s;,=]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^;,]*))?')


def normalise(url: str) -> str:
    """The URL as Scrapy's ``Request`` sends it."""
    return safe_url_string(url)


def query_params(url: str) -> list[tuple[str, str]]:
    """The query's ``(name, value)`` pairs, decoded, in order."""
    pairs = []
    for part in urlsplit(url).query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((unquote_plus(name), unquote_plus(value)))
    return pairs


def query_value(url: str, name: str) -> str | None:
    """The decoded value of the first parameter ``name`` in the URL's query; None when it has none."""
    return next((value for key, value in query_params(url) if key == name), None)


def with_param(url: str, name: str, value: str | int) -> str:
    """The URL with parameter ``name`` set to ``value`` (in place of its first occurrence, else appended)."""
    parts = urlsplit(url)
    encoded = quote(str(value), safe="")
    kept: list[str] = []
    done = False
    for part in parts.query.split("&") if parts.query else []:
        raw_name = part.partition("=")[0]
        if unquote_plus(raw_name) == name:
            if not done:
                kept.append(f"{raw_name}={encoded}")
                done = True
            continue
        kept.append(part)
    if not done:
        kept.append(f"{quote(name, safe='[]')}={encoded}")
    return normalise(urlunsplit(parts._replace(query="&".join(kept))))


def resolve(base: str, link: str) -> str:
    """``link`` (absolute, ``/path?q`` or a bare ``?query``) resolved against the URL that was requested."""
    return normalise(urljoin(base, link.strip()))


def link_targets(header: str, rel: str) -> list[str]:
    """The targets of a ``Link`` header whose ``rel`` includes ``rel`` (case-insensitive), in order."""
    targets = []
    for match in _LINK.finditer(header):
        for param in _LINK_PARAM.finditer(match.group(2)):
            name, value = param.group(1).lower(), (param.group(2) or "").strip()
            if name == "rel" and rel.lower() in value.strip('"').lower().split():
                targets.append(match.group(1).strip())
                break
    return targets
