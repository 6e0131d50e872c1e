"""Which pagination style a listing uses: from the settings, or recognised from its first answer.

Detection tries, in order: numbered pages with a total (a page or offset
parameter in the listing URL or in its next link, and a total in the headers
or body: any page can then be asked for at once), the ``Link`` header's
``rel="next"``, a next URL in the body, a cursor in the body, and numbered
pages without a total. A first page that has none of these and fewer
products than the page size asked for is the whole listing.
"""

from __future__ import annotations

from productcrawler.listing import urls
from productcrawler.listing.answer import ListAnswer, ListingError, shown_keys
from productcrawler.listing.clues import Total, find_cursor, find_next_url, find_total, next_url_at
from productcrawler.listing.numbered import OffsetPaginator, PageNumberPaginator
from productcrawler.listing.options import LIMIT_PARAMS, OFFSET_PARAMS, PAGE_PARAMS, ListingOptions
from productcrawler.listing.paginators import (
    CursorPaginator,
    LinkHeaderPaginator,
    NextUrlPaginator,
    Paginator,
    cursor_param,
)


def paginator_for(config: ListingOptions) -> Paginator | None:
    """The style ``LIST_PAGINATION`` names, built from the settings (what they leave unset is found in the
    answers); None for ``auto``: ``detect`` chooses from the first answer."""
    style = config.pagination
    if style == "link_header":
        return LinkHeaderPaginator()
    if style == "next_url":
        return NextUrlPaginator(path=config.next)
    if style == "cursor":
        return CursorPaginator(path=config.next, param=config.cursor_param)
    if style in ("page_number", "offset"):
        kind = PageNumberPaginator if style == "page_number" else OffsetPaginator
        param = (config.page_param if style == "page_number" else config.offset_param) or kind.param
        total = config.total_spec()
        return kind(param=param, limit_param=config.limit_param, total=total, find=total is None,
                    counts=config.forced_counts)
    return None


def detect(first: ListAnswer, products_on_page: int, options: ListingOptions | None = None) -> Paginator:
    """The style of the listing whose first answer this is; ``ListingError`` naming what was seen if none fits.

    ``options`` (the ``LIST_*`` settings): an explicit ``LIST_PAGINATION`` is used as is; the
    parameters, paths and total they name replace the ones detection would look for.
    """
    options = options or ListingOptions()
    chosen = paginator_for(options)
    if chosen is not None:
        return chosen
    next_link = _next_link(first, options)
    numbered = _numbered(first, options, next_link)
    if numbered is not None and numbered.total_of(first) is not None:
        numbered.total_pages(first, products_on_page)
        return numbered
    if urls.link_targets(first.headers.get("Link", ""), "next"):
        return LinkHeaderPaginator()
    next_path = options.next if options.next is not None else find_next_url(first.body)
    if next_path is not None and next_url_at(first.body, next_path) is not None:
        return NextUrlPaginator(path=next_path)
    cursor_path = options.next if options.next is not None else find_cursor(first.body)
    if cursor_path is not None:
        return CursorPaginator(path=cursor_path, param=options.cursor_param or cursor_param(first.url, cursor_path))
    if numbered is not None:
        return numbered
    limit = _limit(first.url, options)
    if limit is not None and products_on_page < limit:
        return LinkHeaderPaginator(why=f"nowhere: page 1 holds fewer products than ?{limit_name(first.url)}= "
                                       "asks for and names no next page, so it is the whole listing")
    raise ListingError(_unrecognised(first, options))


def _next_link(first: ListAnswer, options: ListingOptions) -> str | None:
    """The next page's URL the first answer gives, if any (the Link header's, else the body's)."""
    targets = urls.link_targets(first.headers.get("Link", ""), "next")
    if targets:
        return urls.resolve(first.url, targets[0])
    path = options.next if options.next is not None else find_next_url(first.body)
    link = next_url_at(first.body, path) if path is not None else None
    return urls.resolve(first.url, link) if link is not None else None


def _numbered(first: ListAnswer, options: ListingOptions,
              next_link: str | None) -> PageNumberPaginator | OffsetPaginator | None:
    """Page numbers or offsets, when the listing URL or its next link has the parameter; with the total found."""
    places = [first.url] + ([next_link] if next_link else [])
    kinds: tuple[tuple[type[PageNumberPaginator | OffsetPaginator], str | None, tuple[str, ...]], ...] = (
        (PageNumberPaginator, options.page_param, PAGE_PARAMS), (OffsetPaginator, options.offset_param, OFFSET_PARAMS))
    for kind, configured, known in kinds:
        for name in [configured] if configured else known:
            if any(urls.query_value(url, name) is not None for url in places):
                total: Total | None = options.total_spec() or find_total(first, kind.prefer, options.forced_counts)
                return kind(param=name, limit_param=options.limit_param or limit_name(first.url), total=total,
                            counts=options.forced_counts)
    return None


def _limit(url: str, options: ListingOptions) -> int | None:
    name = options.limit_param or limit_name(url)
    value = urls.query_value(url, name) if name else None
    return int(value) if value is not None and value.isdigit() else None


def limit_name(url: str) -> str | None:
    """The first page-size parameter (``LIMIT_PARAMS``) the URL has."""
    return next((name for name in LIMIT_PARAMS if urls.query_value(url, name) is not None), None)


def _unrecognised(first: ListAnswer, options: ListingOptions) -> str:
    params = ", ".join(name for name, _ in urls.query_params(first.url)) or "none"
    headers = ", ".join(first.headers) or "none"
    page = options.page_param or "page"
    return (f"cannot tell how the listing pages from its first answer ({first.url}): no Link header with "
            f"rel=\"next\" (headers: {headers}), no next URL or cursor in the body ({shown_keys(first.body)}), "
            f"no page or offset parameter in the URL (parameters: {params}); set LIST_PAGINATION "
            f"(link_header, next_url or cursor with LIST_NEXT, page_number with LIST_PAGE_PARAM={page!r} "
            f"and LIST_TOTAL, offset with LIST_OFFSET_PARAM)")
