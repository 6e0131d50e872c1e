"""A pool of HTTP proxies with health scores, shared by every instance through Redis.

``config`` reads ``PROXY_URLS`` and the pool's settings; ``health`` holds the
score and rest arithmetic; ``books`` (the interface, :class:`~.books.HealthBook`,
and this process's book) and ``shared`` (Redis's) keep the scores, and
:func:`new_book` picks one; ``pool`` is this instance's view (which proxy next,
which rest); ``middleware`` applies it to requests; ``outage`` stops the crawl
when every proxy keeps failing; ``metrics`` exports the per-proxy stats to
Prometheus. (Nothing that installs a reactor is imported here: the crawl
command reads ``config`` before the reactor is installed.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import DownloadFailedError

from productcrawler.meta import PROXY_INDEX
from productcrawler.proxies.books import LocalHealthBook
from productcrawler.proxies.shared import RedisHealthBook

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy import Request

    from productcrawler.proxies.books import HealthBook
    from productcrawler.proxies.health import HealthPolicy
    from productcrawler.redis_connection import AsyncClient

#: A gateway's "I got no answer": through a proxy, the proxy's own word that the API did not answer.
GATEWAY_STATUSES = frozenset({502, 504})


class ProxyGatewayError(DownloadFailedError):
    """An id's last answer was a 502/504 through a proxy: the proxy could not reach the API.

    Sent with the ``no_answer`` signal (the guard's no-answer streak), not raised.
    """


def gateway_no_answer(request: Request, status: int) -> bool:
    """Whether ``status`` is a proxy's word that it got no answer from the API (a 502/504 through a proxy)."""
    return status in GATEWAY_STATUSES and request.meta.get(PROXY_INDEX) is not None


def gateway_error(request: Request, status: int) -> ProxyGatewayError | None:
    """The no-answer error that a ``status`` answered through a proxy stands for, if it stands for one."""
    if not gateway_no_answer(request, status):
        return None
    return ProxyGatewayError(f"HTTP {status} from the proxy at {request.meta.get('proxy')}: "
                             "it got no answer from the API")


def new_book(client: AsyncClient | None, key: str, proxies: Sequence[str], policy: HealthPolicy) -> HealthBook:
    """The health of ``proxies`` (their keys): in this process without a client, else shared in Redis at ``key``."""
    if client is None:
        return LocalHealthBook(policy, len(proxies))
    return RedisHealthBook(client, key=key, keys=proxies, policy=policy)
