"""Waiting for a rate limiter's slot: never before the slot, never on a stale one.

The one wait of both limits a request goes through: each proxy's own rate
(:class:`~productcrawler.proxies.middleware.ProxyMiddleware`) and the global
one (:class:`~productcrawler.ratelimit.middleware.RateLimitMiddleware`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from scrapy.utils.asyncio import sleep

from productcrawler.ratelimit.bucket import wake_time

if TYPE_CHECKING:
    from collections.abc import Callable

    from productcrawler.ratelimit.bucket import RateLimiter, Reservation


async def wait_for_fresh_slot(limiter: RateLimiter,
                              on_late: Callable[[], None] | None = None) -> tuple[Reservation, bool]:
    """A slot of ``limiter`` that has come and is not stale yet, and whether the wait slept.

    A request woken past its slot's deadline (event-loop lag) would crowd the
    slots granted after its own: the slot is given up (``on_late`` counts it)
    and a new one taken.
    """
    slept = False
    while True:
        reservation = await limiter.acquire()
        now = time.monotonic()
        if now < reservation.at:
            slept = True
            # Woken with the other slots of its tick (see wake_time); a timer
            # that fires before the slot itself (the loop rounds to the
            # millisecond) sleeps again: never sent before its slot.
            wake = wake_time(reservation.at, reservation.deadline, 1.0 / limiter.rate)
            while now < reservation.at:
                await sleep(wake - now)
                now = time.monotonic()
        if now <= reservation.deadline:
            return reservation, slept
        if on_late is not None:
            on_late()
