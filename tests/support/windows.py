"""Counting requests in time windows, and the bounds the rate-limit tests hold them to."""

from __future__ import annotations

import bisect

from productcrawler.config import CrawlConfig

#: The cap of the rate-at-the-wire tests: low enough that this 2-core machine keeps up with it.
CAP = 200


def max_in_window(times: list[float], width: float = 1.0) -> int:
    """Most events in any half-open window [a, a + width)."""
    times = sorted(times)
    return max(bisect.bisect_left(times, t + width) - i for i, t in enumerate(times))


def burst(cap: float) -> float:
    return CrawlConfig.from_settings({"MAX_REQUESTS_PER_SECOND": cap}).rate.burst


def assert_within_bounds(times: list[float], cap: float, ids: int) -> None:
    assert len(times) == ids
    one_second, tenth = max_in_window(times, 1.0), max_in_window(times, 0.1)
    assert tenth <= cap / 10 + burst(cap), (one_second, tenth)
    assert one_second <= cap + burst(cap), (one_second, tenth)


def settings_for(server, mysql_url, cap: float = CAP, **extra: object) -> dict[str, object]:
    return {"API_BASE_URL": server.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": cap,
            **extra}
