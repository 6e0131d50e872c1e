"""When to retry a product request, how long to wait first, and what to record on giving up.

One policy serves two callers. :class:`~productcrawler.retry.middleware.ApiRetryMiddleware`
(Scrapy's retry middleware: HTTP statuses and download errors) asks
:meth:`RetryPolicy.hold` for the delay of each retry it makes; the spider asks
:meth:`RetryPolicy.next_step` for a 200 whose body is not a product, and
:meth:`RetryPolicy.give_up` for the failure to store once an id is finished
without a product.

A retry is a new request built by Scrapy's ``get_retry_request()`` (so
``retry_times``, ``dont_filter``, the priority adjustment and the ``retry/*``
stats behave as with Scrapy's own retry middleware) that carries
``meta["retry_delay"]``, the seconds the scheduler must hold it before sending
it. Nothing here sleeps: the delay is data, the scheduler enforces it (and
counts it, once, in ``productcrawler/retry/delayed*``).

Scrapy's retry settings are honoured: ``RETRY_ENABLED``, ``RETRY_TIMES`` (see
:class:`~productcrawler.config.reader.Reader` for how it meets ``MAX_RETRIES``),
``RETRY_PRIORITY_ADJUST``, ``RETRY_GIVE_UP_LOG_LEVEL`` and the meta keys
``max_retry_times``, ``priority_adjust``, ``give_up_log_level``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.retry import get_retry_request

from productcrawler import stat_keys
from productcrawler.config.crawler import crawl_config
from productcrawler.items import FAILED, MISSING, FailureItem
from productcrawler.meta import PRODUCT_ID, RETRY_DELAY
from productcrawler.retry.retry_after import parse_retry_after

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)



class RetryPolicy:
    """Retry decisions and delays for product requests.

    ``rng`` (``uniform(a, b)``) and ``clock`` (Unix time, used for the date
    form of ``Retry-After``) are injectable so that tests are deterministic.
    """

    def __init__(
        self,
        crawler: Crawler,
        *,
        max_retries: int,
        enabled: bool = True,
        give_up_log_level: int = logging.DEBUG,
        priority_adjust: int = -1,
        backoff_base: float,
        backoff_max: float,
        retry_after_max: float,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_retries = max_retries
        self.enabled = enabled
        self.give_up_log_level = give_up_log_level
        self.priority_adjust = priority_adjust
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._capped_logged = False
        self._malformed_logged = False

    @classmethod
    def from_crawler(
        cls,
        crawler: Crawler,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Self:
        config = crawl_config(crawler).retry  # raises ConfigError (ValueError)
        return cls(
            crawler,
            max_retries=config.max_retries,
            enabled=config.enabled,
            give_up_log_level=config.give_up_log_level,
            priority_adjust=config.priority_adjust,
            backoff_base=config.backoff_base,
            backoff_max=config.backoff_max,
            retry_after_max=config.after_max,
            rng=rng,
            clock=clock,
        )

    # -- decisions ---------------------------------------------------------

    def next_step(
        self,
        request: Request,
        *,
        reason: str,
        http_status: int | None,
        retry_after: float | None = None,
    ) -> Request | FailureItem:
        """Retry ``request`` after a delay, or give its product id up as FAILED.

        ``reason`` names the failure in stats and in the stored failure
        (``http_503``, ``timeout``, ``bad_response/html``, ...); ``http_status``
        is the status of the failed response, ``None`` for a download error;
        ``retry_after`` is the server's ``Retry-After`` in seconds, if any
        (see :meth:`retry_after`).
        """
        meta = request.meta
        max_retry_times = meta.get("max_retry_times")
        if max_retry_times is None:
            max_retry_times = self.max_retries if self.enabled else 0
        new_request = get_retry_request(
            request,
            spider=self._spider(),
            reason=reason,
            max_retry_times=max_retry_times,
            priority_adjust=meta.get("priority_adjust", self.priority_adjust),
            logger=logger,
            give_up_log_level=meta.get("give_up_log_level", self.give_up_log_level),
        )
        if new_request is None:
            return self.give_up(request, reason=reason, http_status=http_status)
        return self.hold(new_request, reason=reason, retry_after=retry_after, http_status=http_status)

    def hold(self, retry: Request, *, reason: str, retry_after: float | None = None,
             http_status: int | None = None) -> Request:
        """Set how long the scheduler holds ``retry`` (built by ``get_retry_request``) before sending it.

        The scheduler counts the delay in the ``productcrawler/retry/delayed*``
        stats when it holds the request, so they are not counted here.
        """
        retry_times = retry.meta["retry_times"]
        delay = self.delay(retry_times - 1, retry_after)
        retry.meta[RETRY_DELAY] = delay
        logger.debug(
            "Retry %(retry_times)d of %(request)s (%(reason)s) held for %(delay).3fs",
            # attempts and status (of the answer that failed): not in the message,
            # fields of LOG_FORMAT=json lines.
            {"retry_times": retry_times, "request": retry, "reason": reason, "delay": delay,
             "attempts": retry_times, "status": http_status},
        )
        return retry

    def give_up(
        self,
        request: Request,
        *,
        reason: str,
        http_status: int | None,
        outcome: str = FAILED,
    ) -> FailureItem:
        """The failure to store for the product id of ``request`` (a request the spider built).

        Not counted here: the guard may hold it and drop it; the storage
        pipeline counts each failure it commits (``productcrawler/failed_reason/...``).
        """
        if outcome not in (FAILED, MISSING):
            raise ValueError(f"outcome={outcome!r} is neither {FAILED!r} nor {MISSING!r}")
        item = FailureItem(
            product_id=request.meta[PRODUCT_ID],
            outcome=outcome,
            http_status=http_status,
            reason=reason,
            attempts=request.meta.get("retry_times", 0) + 1,
        )
        logger.debug(
            "Gave up on product %(product_id)s: %(outcome)s (%(reason)s) "
            "after %(attempts)d attempt(s)",
            {"product_id": item.product_id, "outcome": outcome, "reason": reason,
             "attempts": item.attempts},
        )
        return item

    # -- delays ------------------------------------------------------------

    def delay(self, retry_times: int, retry_after: float | None = None) -> float:
        """Seconds to hold the retry of a request that already had ``retry_times`` retries.

        Records the ``Retry-After`` stats (honoured counts capped values too),
        so :meth:`next_step` calls it only once a retry is granted.

        A ``Retry-After`` replaces the backoff: the server knows when it will
        be ready better than we do. It is capped at ``RETRY_AFTER_MAX`` so that
        one odd header cannot park an id for a day.
        """
        if retry_after is None:
            return self.backoff(retry_times)
        self.stats.inc_value(stat_keys.RETRY_AFTER_HONOURED)
        if retry_after > self.retry_after_max:
            self.stats.inc_value(stat_keys.RETRY_AFTER_CAPPED)
            if not self._capped_logged:
                self._capped_logged = True
                logger.warning(
                    "Retry-After of %(retry_after).0fs exceeds RETRY_AFTER_MAX=%(max)gs, "
                    "waiting %(max)gs instead (further cappings are only counted in stats)",
                    {"retry_after": retry_after, "max": self.retry_after_max},
                )
            return self.retry_after_max
        return max(0.0, retry_after)

    def backoff(self, retry_times: int) -> float:
        """Exponential backoff with "equal jitter".

        The ceiling doubles with each retry, ``min(RETRY_BACKOFF_MAX,
        RETRY_BACKOFF_BASE * 2**retry_times)``; the delay is half the ceiling
        plus a uniform draw over the other half. Full jitter (a draw over the
        whole range) spreads load marginally better but can come out at ~0,
        i.e. hit an API that has just failed again at once; the rate limiter
        already spaces requests, so the guaranteed minimum wait is the part we
        want, and the random half still breaks up the herd of ids that fail
        together during an outage.
        """
        try:
            ceiling = min(self.backoff_max, self.backoff_base * 2.0 ** max(0, retry_times))
        except OverflowError:
            ceiling = self.backoff_max
        half = ceiling / 2
        return half + self._rng.uniform(0, half)

    def retry_after(self, response: Response) -> float | None:
        """The ``Retry-After`` of ``response`` in seconds; ``None`` if absent or malformed."""
        raw = response.headers.get("Retry-After")
        if raw is None:
            return None
        seconds = parse_retry_after(raw, now=self._clock())
        if seconds is None:
            self.stats.inc_value(stat_keys.RETRY_AFTER_MALFORMED)
            if not self._malformed_logged:
                self._malformed_logged = True
                logger.warning(
                    "Ignoring malformed Retry-After %(value)r on %(response)s, using backoff "
                    "(further malformed values are only counted in stats)",
                    {"value": raw, "response": response},
                )
        return seconds

    def _spider(self) -> Spider:
        spider: Any = self.crawler.spider
        if spider is None:
            raise RuntimeError("RetryPolicy used before the crawler has a spider")
        return spider

