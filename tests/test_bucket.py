"""GCRA arithmetic of the local token bucket, on a fake clock."""

from __future__ import annotations

import asyncio
import heapq
import random

import pytest

from productcrawler.ratelimit import (
    BackoffPolicy,
    LocalRateLimiter,
    Reservation,
    TokenBucket,
    granting_burst,
    late_tolerance,
    wake_time,
)
from productcrawler.ratelimit.bucket import TICK_MAX
from tests.support.windows import max_in_window


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def simulate(bucket: TokenBucket, clock: FakeClock, *, workers: int, duration: float,
             seed: int = 1) -> list[float]:
    """Workers that reserve, sleep until their slot, 'download', and reserve again."""
    rnd = random.Random(seed)
    start = clock.now
    events = [(start + rnd.random() * 0.05, w) for w in range(workers)]
    heapq.heapify(events)
    sends = []
    while events:
        now, worker = heapq.heappop(events)
        if now >= start + duration:
            continue
        clock.now = now
        slot = bucket.reserve()
        assert slot >= now
        sends.append(slot)
        latency = rnd.expovariate(1 / 0.02) + rnd.choice([0.0, 0.0, 0.0, 0.3])
        heapq.heappush(events, (slot + latency, worker))
    return sends


def test_concurrent_reservations_get_distinct_spaced_slots() -> None:
    clock = FakeClock()
    bucket = TokenBucket(500, 10, clock=clock)
    slots = [bucket.reserve() for _ in range(1000)]
    # Granted with a fifth of the burst's span (the rest is for lateness at send time): 2.8.
    assert slots[:2] == [clock.now] * 2
    assert slots[2] == pytest.approx(clock.now + 0.2 / 500)
    gaps = [b - a for a, b in zip(slots[2:], slots[3:])]
    assert gaps == pytest.approx([1 / 500] * len(gaps))
    assert slots[-1] - clock.now == pytest.approx((999 - 1.8) / 500)


@pytest.mark.parametrize(("rate", "burst"), [(500, 10), (150, 3), (100, 1), (1000, 25)])
def test_slots_used_as_late_as_allowed_stay_within_rate_plus_burst(rate: float, burst: float) -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate, burst, clock=clock)
    tolerance = late_tolerance(1 / rate, burst)
    slots = [bucket.reserve() for _ in range(3 * rate)]
    # Worst case: the first slots of the burst are used at once, the rest as late as allowed.
    sends = slots[:int(granting_burst(burst))] + [t + tolerance for t in slots[int(granting_burst(burst)):]]
    for width in (1.0, 0.1):
        assert max_in_window(sends, width) <= width * rate + max(burst, 1 + tolerance * rate)


@pytest.mark.parametrize(("burst", "immediate"), [(1, 1), (4.5, 1), (10, 2), (25, 5)])
def test_burst_bound_after_idle(burst: float, immediate: int) -> None:
    clock = FakeClock()
    bucket = TokenBucket(100, burst, clock=clock)
    bucket.reserve()
    clock.now += 60  # long idle: the bucket is full, but holds no more than `burst`
    slots = [bucket.reserve() for _ in range(50)]
    assert slots.count(clock.now) == immediate
    assert max_in_window(slots) <= 100 + burst


def test_sequential_client_gets_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(200, 4, clock=clock)
    sends = []
    for _ in range(2000):
        clock.now = bucket.reserve()
        sends.append(clock.now)
    assert (len(sends) - 1) / (sends[-1] - sends[0]) == pytest.approx(200, rel=0.01)


def test_long_run_with_many_reservers_never_exceeds_rate_plus_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(500, 10, clock=clock)
    sends = simulate(bucket, clock, workers=200, duration=60)
    assert max_in_window(sends) <= 500 + 10
    steady = [t for t in sends if 1001 <= t < 1059]
    assert len(steady) / 58 >= 0.99 * 500


def test_under_demand_the_window_bound_still_holds_and_rate_follows_demand() -> None:
    clock = FakeClock()
    bucket = TokenBucket(500, 10, clock=clock)
    sends = simulate(bucket, clock, workers=5, duration=30)  # ~5 / 0.095 s < 500/s
    assert max_in_window(sends) <= 510
    assert len(sends) / 30 < 500


def test_rate_change_applies_to_new_reservations() -> None:
    clock = FakeClock()
    bucket = TokenBucket(500, 10, clock=clock)
    before = simulate(bucket, clock, workers=100, duration=5)
    bucket.set_rate(100)
    after = simulate(bucket, clock, workers=100, duration=5)
    later = [t for t in after if t >= clock.now - 3]
    assert max_in_window(later) <= 100 + 10
    assert len([t for t in after if 1007 <= t < 1009]) / 2 == pytest.approx(100, rel=0.02)
    assert max_in_window(before) <= 510
    with pytest.raises(ValueError, match="rate=0"):
        bucket.set_rate(0)


def test_lease_equals_individual_reservations() -> None:
    clock = FakeClock()
    one_by_one = TokenBucket(300, 6, clock=clock)
    leased = TokenBucket(300, 6, clock=clock)
    expected = [one_by_one.reserve() for _ in range(20)]
    got = leased.lease(8).slots() + leased.lease(12).slots()
    assert got == pytest.approx(expected)


def test_backoff_halves_then_floors_and_recovers() -> None:
    clock = FakeClock()
    policy = BackoffPolicy(multiplier=0.5, floor=0.1, recovery_per_second=0.02)
    bucket = TokenBucket(500, 10, policy=policy, clock=clock)
    granted = clock.now
    clock.now += 0.1
    assert bucket.backoff(granted) is True
    assert bucket.factor() == 0.5
    # A 429 for a request granted before that backoff answers the old rate.
    assert bucket.backoff(granted) is False
    assert bucket.factor() == 0.5
    for _ in range(5):
        assert bucket.backoff(clock.now) is True
    assert bucket.factor() == 0.1  # floor: 10 % of the cap
    clock.now += 5
    assert bucket.factor() == pytest.approx(0.2)  # +10 % of the cap per 5 s
    clock.now += 41
    assert bucket.factor() == 1.0  # capped at the full rate
    assert bucket.backoff(None) is True  # unknown grant time: treated as fresh
    assert bucket.factor() == 0.5


def test_backoff_spaces_new_slots_at_the_lower_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(500, 10, clock=clock)
    for _ in range(100):
        clock.now = bucket.reserve()
    bucket.backoff(clock.now)
    slots = [bucket.reserve() for _ in range(50)]
    gaps = [b - a for a, b in zip(slots[10:], slots[11:])]
    assert gaps == pytest.approx([1 / 250] * len(gaps))


@pytest.mark.parametrize(
    ("rate", "burst", "message"),
    [(0, 1, "rate=0"), (-5, 1, "rate=-5"), (float("nan"), 1, "rate=nan"), ("500", 1, "rate='500'"),
     (10, 0.5, "burst=0.5"), (10, float("inf"), "burst=inf")],
)
def test_invalid_rate_or_burst(rate: object, burst: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenBucket(rate, burst)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"multiplier": 1.0}, {"floor": 0}, {"recovery_per_second": -1}])
def test_invalid_backoff_policy(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        BackoffPolicy(**kwargs)


def test_local_limiter_reservations() -> None:
    clock = FakeClock()
    limiter = LocalRateLimiter(TokenBucket(100, 2, clock=clock))

    async def run() -> list[Reservation]:
        return [await limiter.acquire() for _ in range(4)]

    reservations = asyncio.run(run())
    # Burst 2: granted with 1.2; each slot may be used up to 8 ms late.
    assert [r.at for r in reservations] == pytest.approx([1000, 1000.008, 1000.018, 1000.028])
    assert [r.deadline - r.at for r in reservations] == pytest.approx([0.008] * 4)
    assert asyncio.run(limiter.backoff(None)) is True
    assert limiter.factor == 0.5
    assert (limiter.rate, limiter.burst) == (100, 2)


async def sends_at_their_worst(rate: float, burst: float, seed: int) -> list[float]:
    """Sends in runs at their deadlines, then runs at their slots, as the pace moves and 429s back off."""
    rnd = random.Random(seed)
    clock = FakeClock()
    limiter = LocalRateLimiter(TokenBucket(rate, burst, clock=clock))
    sends, late = [], False
    for _ in range(2000):
        if rnd.random() < 0.02:
            limiter.set_pace(rnd.choice([None, rate * rnd.uniform(0.2, 1.5)]))
        if rnd.random() < 0.002:
            await limiter.backoff(None)
        if rnd.random() < 0.1:
            late = not late
        clock.now += rnd.choice([0.0, 0.0, 0.0, 0.001, 1 / rate, 0.05 * rnd.random()])
        reservation = await limiter.acquire()
        sends.append(reservation.deadline if late else reservation.at)
    return sends


@pytest.mark.parametrize(("rate", "burst"), [(200, 4), (500, 10), (100, 2)])
def test_sends_anywhere_before_the_deadline_hold_the_bounds_as_the_pace_changes(rate: float, burst: float) -> None:
    # The rule the download handler keeps: a request is written between its slot and its
    # deadline, or takes a new slot. Such sends stay within rate/10 + burst per 100 ms and
    # rate + burst per second even at their worst -- runs at their deadlines, then runs at
    # their slots, which packs a window from both ends -- while AutoThrottle's pace moves
    # (slots granted at one interval are used with that interval's tolerance beside slots
    # granted at another) and 429s back off.
    for seed in range(8):
        sends = asyncio.run(sends_at_their_worst(rate, burst, seed))
        assert max_in_window(sends, 0.1) <= rate / 10 + burst, seed
        assert max_in_window(sends, 1.0) <= rate + burst, seed


def _reservations(rate: float, burst: float, count: int) -> list[Reservation]:
    limiter = LocalRateLimiter(TokenBucket(rate, burst, clock=FakeClock()))

    async def run() -> list[Reservation]:
        return [await limiter.acquire() for _ in range(count)]

    return asyncio.run(run())


@pytest.mark.parametrize(("rate", "burst"), [(500, 10), (200, 4), (150, 3), (100, 1), (1000, 25)])
def test_wake_times_group_slots_and_keep_the_window(rate: float, burst: float) -> None:
    reservations = _reservations(rate, burst, 3 * rate)
    wakes = [wake_time(r.at, r.deadline, 1 / rate) for r in reservations]
    for r, wake in zip(reservations, wakes):
        # Never before the slot; in the first half of its send window, the rest left for the loop's lag.
        assert r.at <= wake <= r.at + 0.5 * (r.deadline - r.at) + 1e-9
    assert wakes == sorted(wakes)
    for width in (1.0, 0.1):
        # Sent at their wake-ups, or as late as the window allows after them: the bound holds.
        bound = width * rate + max(burst, 1 + late_tolerance(1 / rate, burst) * rate)
        assert max_in_window(wakes, width) <= bound
        assert max_in_window([r.deadline for r in reservations], width) <= bound
    if burst >= 10:
        # Several slots share one wake-up: fewer turns of the event loop than requests.
        assert len(set(wakes)) <= 0.3 * len(wakes)


def test_wake_times_at_500_per_second_come_in_ticks_of_several_requests() -> None:
    reservations = _reservations(500, 10, 5000)
    wakes = [wake_time(r.at, r.deadline, 1 / 500) for r in reservations]
    # A 14.4 ms window, a 7.2 ms tick: 3-4 requests a tick, about 139 wake-ups a second, not 500.
    assert len(set(wakes)) / (5000 / 500) == pytest.approx(1 / 0.0072, rel=0.02)


def test_a_long_send_window_wakes_on_ticks_of_at_most_tick_max() -> None:
    # A cap of 1e6/s (an unthrottled crawl) with a burst of 100,000: an 80 ms send window.
    at, deadline = 1000.0001, 1000.0001 + late_tolerance(1 / 1_000_000, 100_000)
    assert deadline - at > 2 * TICK_MAX
    wake = wake_time(at, deadline, 1 / 1_000_000)
    assert at <= wake <= at + TICK_MAX
    assert wake_time(at, at, 1 / 1_000_000) == at


@pytest.mark.parametrize(("rate", "burst"), [(50, 1), (100, 2)])
def test_no_tick_where_a_tick_cannot_hold_two_slots(rate: float, burst: float) -> None:
    # A 5-8 ms window at 20-10 ms between slots: a tick would only spend the margin for lag.
    for r in _reservations(rate, burst, 50):
        assert wake_time(r.at, r.deadline, 1 / rate) == r.at


def _ramp(rate: float, burst: float, first_delay: float, factor: float, depth: int = 64) -> list[tuple[float, float]]:
    """AutoThrottle speeding its pace up response by response (the API recovered), ``depth`` requests in flight:
    each takes its slot when the one ``depth`` places before it was sent. Returns (slot, deadline) pairs."""
    clock = FakeClock()
    limiter = LocalRateLimiter(TokenBucket(rate, burst, clock=clock))
    delays = [first_delay] * 100
    while delays[-1] > 1 / rate:
        delays.append(delays[-1] * factor)

    async def run() -> list[tuple[float, float]]:
        windows: list[tuple[float, float]] = []
        for delay in [*delays, *[None] * 600]:
            if len(windows) >= depth:
                clock.now = max(clock.now, windows[-depth][0])
            limiter.set_pace(None if delay is None else 1 / delay)
            reservation = await limiter.acquire()
            windows.append((reservation.at, reservation.deadline))
        return windows

    return asyncio.run(run())


def _most_sends_possible(windows: list[tuple[float, float]], width: float) -> int:
    """The most requests an adversary can put in one window of ``width``: each anywhere in [slot, deadline]."""
    starts = [at for at, _ in windows] + [deadline for _, deadline in windows]
    return max(sum(1 for at, deadline in windows if at < start + width and deadline >= start) for start in starts)


@pytest.mark.parametrize(("rate", "burst", "factor"), [(500, 10, 0.5), (500, 10, 0.7), (1000, 25, 0.5)])
def test_the_bound_holds_while_autothrottle_speeds_the_pace_up(rate: float, burst: float, factor: float) -> None:
    # From a 94 ms delay to the cap. With the send window measured in the slow pace's interval, a slot
    # granted early in the ramp could be sent as late as the fast slots after it: 67 in 100 ms at 500/s.
    windows = _ramp(rate, burst, 0.094, factor)
    for width in (0.1, 1.0):
        assert _most_sends_possible(windows, width) <= width * rate + burst
