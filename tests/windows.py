"""Counting requests in time windows, for the rate-limit tests."""

from __future__ import annotations

import bisect


def max_in_window(times: list[float], width: float = 1.0) -> int:
    """Most events in any half-open window [a, a + width)."""
    times = sorted(times)
    return max(bisect.bisect_left(times, t + width) - i for i, t in enumerate(times))
