"""The guard's streaks: what each one is, and what its ERROR line says when it trips.

The guard (``guard/failure_guard.py``) grows, breaks and trips them; the table of
what grows and breaks each one is in its docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from productcrawler.config import mask_credentials
from productcrawler.download.errors import exception_detail, known_reason
from productcrawler.listing.graphql import GRAPHQL_ERRORS
from productcrawler.meta import AUTH, NO_ANSWER, NOT_PRODUCT

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from productcrawler.config import CrawlConfig



class Streak:
    """A run of answers (or of ids without one) of one kind, and the outcomes it holds back."""

    __slots__ = ("held", "kind", "last", "length", "limit", "started_at", "url")

    def __init__(self, kind: str, limit: int) -> None:
        self.kind = kind
        self.limit = limit
        self.length = 0
        self.held: list[Deferred[None]] = []
        self.url = ""  # the last URL of the streak
        self.last: Any = None  # its last status, BadResponse or exception
        self.started_at = 0.0  # monotonic time of its first step


def diagnosis(streak: Streak, config: CrawlConfig, *, products: int, proxies: bool, now: float) -> str:
    """What was seen and what to check, for the one ERROR line (URLs' passwords masked)."""
    text = _diagnosis(streak, config, products=products, proxies=proxies, now=now)
    return mask_credentials(text)


def _diagnosis(streak: Streak, config: CrawlConfig, *, products: int, proxies: bool, now: float) -> str:
    count = streak.length
    if streak.kind == AUTH:
        key = "set" if config.api.key else "not set"
        if products:
            return (f"{count} answers in a row were HTTP 401/403 (last: {streak.last} for {streak.url}) "
                    f"after {products} products in this run: the API key was refused, "
                    f"perhaps revoked; check API_KEY ({key})")
        return (f"the API refused every request: {count} answers in a row were HTTP 401/403 "
                f"(last: {streak.last} for {streak.url}); check API_KEY ({key})")
    if streak.kind == NOT_PRODUCT:
        error = streak.last
        if error.detail.startswith(f"{GRAPHQL_ERRORS}: "):  # the query is wrong, not the mapping
            return (f"the API answered the GraphQL query with errors, {count} in a row (last: "
                    f"{error.detail.removeprefix(f'{GRAPHQL_ERRORS}: ')}; URL {streak.url}); check PRODUCT_LIST_QUERY")
        keys = ", ".join(error.keys) if error.keys else "none"
        return (f"{count} answers in a row were 200s without a product (last: {error}; keys found: "
                f"{keys}; URL {streak.url}); check PRODUCT_FIELDS "
                f"({config.answer.fields.describe()}) against one answer of the API")
    if streak.kind == NO_ANSWER:
        error = streak.last
        last = exception_detail(error)
        also = ", PROXY_URLS" if proxies else ""
        seen = (f"the API stopped answering after {products} products in this run, "
                f"{now - streak.started_at:.0f} s ago" if products else "the API did not answer")
        if isinstance(error, RedisError):  # the shared rate limit gave up on Redis before the request was sent
            check = "check REDIS_URL: Redis stayed unreachable, so no request could take its rate-limit slot"
        elif known_reason(error) is None:  # not a download error: raised by one of our components
            check = "check DOWNLOAD_HANDLERS and DOWNLOADER_MIDDLEWARES: the last error is not a download error"
        else:
            check = f"check {config.api.product_url_setting}{also} and that the API is reachable"
        return f"{seen}: {count} ids in a row ended with no answer (last: {last} for {streak.url}); {check}"
    return (f"{count} answers were HTTP 404 with no product in between, which the API's usual "
            f"share of missing ids cannot explain; check {config.api.product_url_setting}: "
            f"one URL requested was {streak.url} (if the range really has a gap this long, raise GUARD_404_STREAK)")


def certificate_diagnosis(error: BaseException, url: str, config: CrawlConfig, *, proxies: bool) -> str:
    """The ERROR line's text for a certificate that failed verification (URLs' passwords masked)."""
    through = (" If only the proxies' tunnels fail, a proxy of PROXY_URLS answers them with a certificate of its "
               "own (TLS interception): it could read the key, so it cannot carry this crawl." if proxies else "")
    return mask_credentials(
        f"the API's TLS certificate was refused for {url} ({error}). Check that {config.api.product_url_setting} "
        f"names the API's host; a private CA is trusted with API_CA_FILE (or SSL_CERT_FILE).{through}")
