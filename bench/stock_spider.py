"""The reference: a stock Scrapy spider, default settings, no storage.

Fetches ``{base_url}/product/{id}`` for ``start_id..end_id`` and yields each
200 body as a dict. Run it outside the project so that no project setting applies
(``bench/peers.py`` and ``bench/cpu.py`` do, from /tmp; ``$REPO`` is the repository root)::

    cd /tmp && $REPO/.venv/bin/scrapy runspider $REPO/bench/stock_spider.py \
        -a base_url=http://127.0.0.1:8931/v1 -a start_id=1 -a end_id=10000
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import scrapy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from scrapy.http import Response


class StockSpider(scrapy.Spider):
    name = "stock"

    def __init__(self, base_url: str, start_id: str = "1", end_id: str = "10000", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url.rstrip("/")
        self.start_id = int(start_id)
        self.end_id = int(end_id)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for product_id in range(self.start_id, self.end_id + 1):
            yield scrapy.Request(f"{self.base_url}/product/{product_id}")

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        yield response.json()
