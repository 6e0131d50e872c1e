"""How far an announced budget may reach: resets told apart by magnitude, and clamped.

A reset is delta seconds on some servers, Unix epoch seconds or milliseconds
on others, under the same header names (:func:`reset_seconds`). No header may
make the crawl wait longer than ``RATE_LIMIT_HEADERS_MAX_WAIT``: a reset or a
window beyond it is clamped to it (:class:`BudgetBounds`, logged once per
header with its value), and a clamped reset says nothing of the window's
length (:mod:`.reader`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from productcrawler.budget.headers import WindowBudget

logger = logging.getLogger(__name__)

#: A reset of at least this is a Unix time in seconds, not a delay: 2001-09-09 as a date, 31.7 years as a
#: delay (today's epoch seconds, about 1.8e9, are above it; no API's window is that long).
EPOCH_SECONDS_FROM = 1e9
#: A reset of at least this is a Unix time in milliseconds: 1973 in milliseconds, the year 5138 in
#: seconds (today's epoch milliseconds, about 1.8e12, are well above it; today's seconds well below).
EPOCH_MILLISECONDS_FROM = 1e11


def reset_seconds(value: float, resolution: float, wall_now: float) -> tuple[float, float, bool]:
    """A reset as seconds from now, its resolution and whether it was a Unix time.

    Told apart by magnitude: below ``EPOCH_SECONDS_FROM``, delta seconds; below
    ``EPOCH_MILLISECONDS_FROM``, epoch seconds; from it, epoch milliseconds. An
    epoch in the past (the two clocks disagree) is a reset now.
    """
    if value >= EPOCH_MILLISECONDS_FROM:
        return max(0.0, value / 1000.0 - wall_now), resolution / 1000.0, True
    if value >= EPOCH_SECONDS_FROM:
        return max(0.0, value - wall_now), resolution, True
    return value, resolution, False


class BudgetBounds:
    """Clamps resets and windows to ``max_wait``; counts the answers clamped, logs each header once."""

    def __init__(self, max_wait: float = math.inf) -> None:
        self.max_wait: float = max_wait
        self.clamped: int = 0
        self._logged: set[str] = set()

    def bounded(self, budget: WindowBudget) -> WindowBudget:
        """``budget`` with its reset and window clamped to ``max_wait``.

        A clamped reset says only that the window ends within ``max_wait`` of the
        answer: its resolution covers the whole bound, and it measures no window length.
        """
        changes: dict[str, Any] = {}
        if budget.reset_after > self.max_wait:
            self._warn(budget.reset_header, "reset", budget.reset_after)
            changes.update(reset_after=self.max_wait, resolution=self.max_wait, epoch=False, clamped=True)
        if budget.window is not None and budget.window > self.max_wait:
            self._warn(budget.window_header, "window", budget.window)
            changes.update(window=self.max_wait)
        if not changes:
            return budget
        self.clamped += 1
        return dataclasses.replace(budget, **changes)

    def _warn(self, header: str, what: str, seconds: float) -> None:
        name = header.partition(":")[0]
        if name in self._logged:
            return
        self._logged.add(name)
        logger.warning("Rate limit: %s announces a %s %.0f s away; waiting at most "
                       "RATE_LIMIT_HEADERS_MAX_WAIT=%g s instead (no more of these messages will be shown "
                       "for this header)", header, what, seconds, self.max_wait)
