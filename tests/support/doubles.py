"""Unit-test doubles: a product request as the spider builds it, a random source that is not random,
an engine that only holds downloader middlewares."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

PRODUCT_URL = "http://api.test/v1/product/7"


class FakeRandom(random.Random):
    """``uniform(a, b)`` lands at ``fraction`` of the way from a to b; calls are recorded.

    ``fraction=1.0`` makes every jittered delay its ceiling, ``0.0`` its floor.
    """

    def __init__(self, fraction: float = 0.5) -> None:
        super().__init__(0)
        self.fraction = fraction
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return a + (b - a) * self.fraction


def product_request(**meta: Any) -> Request:
    """A request for product 7, as the spider builds it, with extra ``meta``."""
    return Request(PRODUCT_URL, meta={"product_id": 7, **meta})


def engine_with(crawler: Crawler, *middlewares: Any) -> None:
    """Give ``crawler`` an engine whose downloader has ``middlewares``, for components built one by one
    that find their peers with ``crawler.get_downloader_middleware()`` (no crawl runs)."""
    crawler.engine = SimpleNamespace(  # type: ignore[assignment]  # what get_downloader_middleware reads
        downloader=SimpleNamespace(middleware=SimpleNamespace(middlewares=list(middlewares)), active=set()))
