"""What a proxy is blamed for, told from what came back through it; shared by the middleware and the guard.

The proxy middleware (``middleware.py``) re-sends what is the proxy's or may
be, and the guard's streaks (``guard/failure_guard.py``) must not count those
answers as the API's. Nothing here imports either of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from productcrawler.meta import PROXY_INDEX, PROXY_SUSPECT
from productcrawler.proxies import gateway_no_answer

if TYPE_CHECKING:
    from scrapy import Request

# Reasons of download errors (download/errors.py): the proxy's, or unclear (the proxy's or the id's).
# Neither: tls_certificate, the API's certificate refused inside the tunnel (the proxy may be intercepting
# it): resting the proxy would keep it in the pool and blame an outage; the guard stops the crawl instead.
PROXY_FAILURE_REASONS = frozenset({"connection_refused", "connect_error", "dns_lookup_failed", "tunnel_error"})
PROXY_FAILURE_STATUSES = frozenset({407})
UNCLEAR_REASONS = frozenset({"timeout", "connection_lost", "connection_closed", "response_failed"})
UNCLEAR_STATUSES = frozenset({403, 429, 502, 504})



def resent_through_another_proxy(request: Request, status: int) -> bool:
    """Whether :class:`ProxyMiddleware` re-sends this answer instead of passing it on.

    Such an answer is the proxy's (407) or not yet known to be the id's (a
    first 403, 429, 502 or 504 through a proxy): answers watched before the
    middleware sees them (the guard's streaks) must not count it.
    """
    meta = request.meta
    if meta.get(PROXY_INDEX) is None:
        return False
    return status in PROXY_FAILURE_STATUSES or (status in UNCLEAR_STATUSES and PROXY_SUSPECT not in meta)


def no_answer_from_the_api(request: Request, status: int) -> bool:
    """Whether this answer is not the API's: a proxy's (re-sent), or a gateway's 502/504 through a proxy."""
    return resent_through_another_proxy(request, status) or gateway_no_answer(request, status)

