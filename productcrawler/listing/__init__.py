"""Walking the API's product listing (``PRODUCT_LIST_URL``): its pagination styles and its products.

Pure functions and classes over one recorded answer (``ListAnswer``), no I/O:
``find_products`` finds a page's products, ``detect`` recognises the style from
the first answer (``paginator_for`` builds the one ``LIST_PAGINATION`` names),
and each style's ``next_url`` says where the next page is (None: the end);
the numbered styles also build any page's URL (``page_url``) from the total.
"""

from productcrawler.listing.answer import AnswerHeaders, ListAnswer, ListingError, find_products
from productcrawler.listing.detect import detect, paginator_for
from productcrawler.listing.numbered import OffsetPaginator, PageNumberPaginator
from productcrawler.listing.options import STYLES, ListingOptions
from productcrawler.listing.paginators import CursorPaginator, LinkHeaderPaginator, NextUrlPaginator, Paginator

__all__ = [
    "STYLES",
    "AnswerHeaders",
    "CursorPaginator",
    "LinkHeaderPaginator",
    "ListAnswer",
    "ListingError",
    "ListingOptions",
    "NextUrlPaginator",
    "OffsetPaginator",
    "PageNumberPaginator",
    "Paginator",
    "detect",
    "find_products",
    "paginator_for",
]
