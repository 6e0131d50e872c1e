"""ServerClock: Redis server time as local time, for the shared rate limit and the proxies' shared health."""

from __future__ import annotations

import pytest

from productcrawler.redis_clock import ServerClock


def test_the_offset_is_as_tight_as_the_fastest_call_and_a_slow_reply_does_not_move_it():
    clock = ServerClock()
    assert clock.observe(1000.5, started=0.0, received=1.0) == pytest.approx(1000.0)  # bounds 999.5..1000.5
    assert clock.observe(1010.02, started=10.0, received=10.1) == pytest.approx(999.97)  # 999.92..1000.02
    # A reply that took 2 s: alone its midpoint would say 1000.9; the bounds keep the fast call's.
    assert clock.observe(1021.9, started=20.0, received=22.0) == pytest.approx(999.97)
    assert clock.offset == pytest.approx(999.97)


def test_bounds_that_no_longer_overlap_start_again_from_the_latest_call():
    clock = ServerClock()
    clock.observe(1000.05, started=0.0, received=0.1)
    assert clock.observe(2030.05, started=30.0, received=30.1) == pytest.approx(2000.0)  # the server's clock stepped
