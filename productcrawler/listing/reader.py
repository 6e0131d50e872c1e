"""Reading one listing page's answer: its products, and the pages it makes known.

The spider hands each page's answer here. The pagination style is the one
``LIST_PAGINATION`` names, or the one :func:`~productcrawler.listing.detect`
recognises in the first answer this process reads (said once, at INFO). What
a page makes known is what the pass then leases: every later page at once
when page 1 of a numbered listing gives the total, else the next page of the
chain, or nothing at the listing's end.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from productcrawler.answer.cleaning import decode_answer
from productcrawler.listing import ListAnswer, ListingError, detect, find_products, paginator_for
from productcrawler.listing.graphql import read_page

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.http import Response

    from productcrawler.listing import ListingOptions, Paginator
    from productcrawler.listing.graphql import GraphqlQuery

logger = logging.getLogger(__name__)


class PageReader:
    def __init__(self, locator: Callable[[int], str], options: ListingOptions,
                 graphql: GraphqlQuery | None = None) -> None:
        #: A page's URL (a GraphQL page's variables), as the pass has it once open ({since} filled in).
        self.locator = locator
        self.options = options
        self.graphql = graphql
        self.paginator: Paginator | None = paginator_for(options)
        #: Pages in the listing, once page 1 of a numbered listing said; None: unknown.
        self.total_pages: int | None = None

    def read(self, page: int, response: Response) -> tuple[list[Any], dict[int, str]]:
        """The page's product objects, and the pages it makes known (page -> URL).

        A page that repeats the one before (an answer past the end) is the listing's end, with no products.

        Raises ``BadResponse`` for an answer that is not JSON, ``ListingError`` for one that is
        no listing page (no products where they should be, no pagination to recognise),
        ``GraphqlErrors`` for a GraphQL answer with errors.
        """
        body = decode_answer(response.body)
        if self.graphql is not None:
            try:
                products, page_info = read_page(body)
            except ValueError as error:
                raise ListingError(f"not a GraphQL listing page: {error}") from None
            following = self.graphql.next_locator(self.locator(page), page_info)
            return products, {} if following is None else {page + 1: following}
        products, _ = find_products(body, self.options.products)
        headers = {key.decode("latin-1"): b", ".join(values).decode("latin-1")
                   for key, values in response.headers.items()}
        answer = ListAnswer(url=response.url, status=response.status, headers=headers, body=body)
        paginator = self.paginator
        if paginator is None:
            # Each style's parameters are read off the listing's first URL (the page parameter,
            # the cursor's start marker), whichever page this process reads first.
            first = answer if page == 1 else ListAnswer(self.locator(1), answer.status, headers, body)
            paginator = self.paginator = detect(first, len(products), self.options)
            logger.info("Listing %s: %s", self.locator(1), paginator.describe())
        # What tells one page's products from another's (the echo check): each object's id, else the object.
        ids = [listed.get("id", listed) if isinstance(listed, dict) else listed for listed in products]
        revealed = self._revealed(paginator, page, answer, len(products), ids)
        if paginator.echoed(page):
            # Magento's answer past the end: the last page again, whose products that page brought.
            return [], revealed
        return products, revealed

    def _revealed(self, paginator: Paginator, page: int, answer: ListAnswer, count: int,
                  ids: list[object]) -> dict[int, str]:
        if paginator.numbered and page == 1:
            self.total_pages = paginator.total_pages(answer, count)
            if self.total_pages is not None:
                first_url = self.locator(1)
                return {n: paginator.page_url(first_url, n) for n in range(2, self.total_pages + 1)}
        elif paginator.numbered and self.total_pages is not None:
            return {}
        following = paginator.next_url(answer, count, page, ids)
        return {} if following is None else {page + 1: urljoin(answer.url, following)}
