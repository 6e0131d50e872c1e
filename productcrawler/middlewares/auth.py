"""Adds ``Authorization: Bearer <API_KEY>`` at send time, to requests for ``API_BASE_URL`` only.

Set here rather than on the request when it is made, so the key never sits in
a queue (Redis) or in a serialized request. Only URLs under ``API_BASE_URL``
get it: ``scrapy shell``/``fetch`` on another site, or another spider of the
project, must not hand the key to whatever host they visit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.exceptions import NotConfigured

from productcrawler.config import crawl_config

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class ApiKeyMiddleware:
    def __init__(self, api_key: str, api_base_url: str) -> None:
        self._header = f"Bearer {api_key}"
        # As Scrapy writes request URLs (host lowercased, path percent-encoded), so
        # that the prefix matches the spider's requests. API_BASE_URL has no
        # trailing slash (config strips it): the base itself, or a URL below it.
        self._prefix = Request(f"{api_base_url}/").url
        self._base = self._prefix[:-1]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ApiKeyMiddleware:
        config = crawl_config(crawler)
        if config.api_key is None:
            raise NotConfigured
        return cls(config.api_key, config.api_base_url)

    def process_request(self, request: Request) -> None:
        url = request.url
        if url.startswith(self._prefix) or url == self._base:
            request.headers["Authorization"] = self._header

    def __repr__(self) -> str:  # never show the key
        return "ApiKeyMiddleware(api_key=***)"
