"""Adds ``Authorization: Bearer <API_KEY>`` at send time.

Set here rather than on the request when it is made, so the key never sits in
a queue (Redis) or in a serialized request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from productcrawler.config import crawl_config

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class ApiKeyMiddleware:
    def __init__(self, api_key: str) -> None:
        self._header = f"Bearer {api_key}"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ApiKeyMiddleware:
        api_key = crawl_config(crawler).api_key
        if api_key is None:
            raise NotConfigured
        return cls(api_key)

    def process_request(self, request: Request) -> None:
        request.headers["Authorization"] = self._header

    def __repr__(self) -> str:  # never show the key
        return "ApiKeyMiddleware(api_key=***)"
