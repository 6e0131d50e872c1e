"""``PRODUCT_URL``: the template of a product's URL, one ``{id}`` in it; how an id goes in and comes back out.

The id is percent-encoded with nothing left safe, so a SKU such as
``WS12 M/Blue`` stays one path segment (``WS12%20M%2FBlue``). Unset, the
template is ``{API_BASE_URL}/product/{id}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from w3lib.url import safe_url_string

from productcrawler.config.values import ConfigError, mask_url, refuse_credentials, text

PLACEHOLDER = "{id}"
#: An id made only of characters that no URL normalisation changes: where it
#: lands in a normalised URL splits that URL into the template's two parts.
_MARKER = "0productcrawler0id0"


@dataclass(frozen=True)
class ProductUrl:
    """A URL template split at its ``{id}``: ``head + encoded id + tail``."""

    head: str
    tail: str

    @classmethod
    def parse(cls, raw: Any, api_base_url: str) -> ProductUrl:
        """``PRODUCT_URL`` checked, or ``{api_base_url}/product/{id}`` when it is unset."""
        template = text(raw)
        if template is None:
            return cls(f"{api_base_url}/product/", "")
        shown = repr(mask_url(template))
        parts = urlsplit(template)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"PRODUCT_URL={shown} is not an http:// or https:// URL")
        refuse_credentials("PRODUCT_URL", template)
        count = template.count(PLACEHOLDER)
        if count != 1:
            raise ConfigError(f"PRODUCT_URL={shown} has {count} {PLACEHOLDER} placeholders; "
                              f"expected exactly one, where the product's id goes "
                              "(https://shop.example/products/{id}.json)")
        head, tail = template.split(PLACEHOLDER)
        if any(brace in head + tail for brace in "{}"):
            raise ConfigError(f"PRODUCT_URL={shown} has braces other than its {PLACEHOLDER}; "
                              "percent-encode them (%7B, %7D)")
        if PLACEHOLDER in parts.netloc or "#" in head:
            raise ConfigError(f"PRODUCT_URL={shown}: {PLACEHOLDER} must be in the path or the query, "
                              "not the host or the fragment")
        return cls(head, tail)

    def url(self, product_id: int | str) -> str:
        if type(product_id) is int:  # digits, nothing to encode
            return f"{self.head}{product_id}{self.tail}"
        return f"{self.head}{quote(str(product_id), safe='')}{self.tail}"

    def id_in(self, url: str) -> str | None:
        """The id (decoded) of a URL this template makes, as given or as Scrapy normalises it; else None."""
        normal_head, _, normal_tail = safe_url_string(self.url(_MARKER)).partition(_MARKER)
        for head, tail in ((self.head, self.tail), (normal_head, normal_tail)):
            if len(url) > len(head) + len(tail) and url.startswith(head) and url.endswith(tail):
                encoded = url[len(head):len(url) - len(tail)]
                if not any(c in encoded for c in "/?#&"):  # a longer path, or another URL
                    return unquote(encoded)
        return None

    @property
    def prefix(self) -> str:
        """Scheme, host and the path up to its last ``/`` before the id: the API's own URLs."""
        head = self.head.partition("?")[0]
        start = head.find("/", head.find("://") + 3)
        return f"{head}/" if start < 0 else head[:head.rfind("/") + 1]

    def __str__(self) -> str:
        return f"{self.head}{PLACEHOLDER}{self.tail}"
