"""``PRODUCT_IDS=list``: a listing supplies the ids, and each product is fetched by ``PRODUCT_URL``.

For APIs whose listings lack what the product answer has (or list only ids:
``fields=id``, ``show=sku``). Each listing page's ids become product requests;
the page's mark waits until every one of them has its outcome, and goes to the
storage pipeline after them, so that (the pipeline writing in arrival order) a
page is done only once its products are committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from productcrawler.meta import LISTED_ON, PRODUCT_ID

if TYPE_CHECKING:
    from productcrawler.ids import ProductId
    from productcrawler.items import PageItem



class ListedProducts:
    def __init__(self) -> None:
        #: page -> (its ids still without an outcome, its mark).
        self._pages: dict[int, tuple[set[ProductId], PageItem]] = {}

    def listed(self, page: PageItem, ids: list[ProductId]) -> list[PageItem]:
        """A page's ids are requested: its mark now if it listed none, else once they are done."""
        if not ids:
            return [page]
        self._pages[page.page] = (set(ids), page)
        return []

    def outcome(self, request: Request, items: list[Any]) -> list[Any]:
        """``items`` (a product request's outcome), and its page's mark after them if it was the last."""
        page = request.meta.get(LISTED_ON)
        if page is None or page not in self._pages or any(isinstance(item, Request) for item in items):
            return items  # not a listed product's final outcome (a retry comes back here)
        pending, mark = self._pages[page]
        pending.discard(request.meta[PRODUCT_ID])
        if pending:
            return items
        del self._pages[page]
        return [*items, mark]

    @property
    def pages_waiting(self) -> int:
        return len(self._pages)
