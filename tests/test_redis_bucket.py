"""The shared bucket against the real Redis at REDIS_TEST_URL (default 127.0.0.1:6379)."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from productcrawler.ratelimit import RedisTokenBucket, Reservation, late_tolerance
from productcrawler.ratelimit import redis_bucket as redis_bucket_module
from productcrawler.ratelimit.redis_bucket import KEY_TTL, ping
from productcrawler.redis_connection import WAITED_FOR_TIMEOUTS, async_redis_client
from productcrawler.redis_keys import Keys
from tests.support.services import REDIS_URL
from tests.support.tcp_proxy import TcpProxy
from tests.support.windows import max_in_window

#: Rates and delays measured in real time: `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing


@pytest.fixture
def prefix(redis_prefix: str) -> str:
    return redis_prefix


def make_bucket(prefix: str, rate: float = 200, burst: float = 4, **kwargs: object) -> RedisTokenBucket:
    return bucket_at(REDIS_URL, prefix, rate=rate, burst=burst, **kwargs)


def bucket_at(url: str, prefix: str, **kwargs: Any) -> RedisTokenBucket:
    """A shared bucket with a client of its own (a crawler's is ``crawler_redis``), closed by the test."""
    return RedisTokenBucket(async_redis_client(url, **WAITED_FOR_TIMEOUTS), key=Keys(prefix).rate_bucket, **kwargs)


async def take(bucket: RedisTokenBucket, count: int) -> list[Reservation]:
    return [await bucket.acquire() for _ in range(count)]


def run_client(prefix: str, workers: int, duration: float, out: list[Reservation],
               counts: list[tuple[int, int]], seed: int) -> None:
    """One instance: its own connection and event loop, ``workers`` concurrent requests."""

    async def main() -> None:
        bucket = make_bucket(prefix)
        rnd = random.Random(seed)
        deadline = time.monotonic() + duration

        async def worker() -> None:
            while time.monotonic() < deadline:
                reservation = await bucket.acquire()
                out.append(reservation)
                await asyncio.sleep(max(0.0, reservation.at - time.monotonic()))
                await asyncio.sleep(rnd.uniform(0.001, 0.01))  # the "download"

        await asyncio.gather(*(worker() for _ in range(workers)))
        counts.append((bucket.redis_calls, bucket.expired_slots))
        await bucket.client.aclose()

    asyncio.run(main())


def test_concurrent_instances_share_one_rate(prefix: str) -> None:
    rate, burst = 200, 4
    granted: list[Reservation] = []
    counts: list[tuple[int, int]] = []
    threads = [threading.Thread(target=run_client, args=(prefix, 12, 2.0, granted, counts, seed))
               for seed in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(counts) == 3

    server_slots = [r.slot for r in granted]
    assert max_in_window(server_slots) <= rate + burst
    # Local send times: server slots moved by each call's measured offset
    # (error under half a round trip), so allow one more.
    assert max_in_window([r.at for r in granted]) <= rate + burst + 1
    start = min(server_slots)
    steady = [t for t in server_slots if start + 0.5 <= t < start + 1.5]
    assert len(steady) >= 0.95 * rate
    redis_calls = sum(calls for calls, _ in counts)
    assert redis_calls / len(granted) < 0.5
    assert sum(expired for _, expired in counts) < 0.02 * len(granted)


def test_a_departed_instance_leaves_no_extra_capacity(prefix: str) -> None:
    rate, burst = 200, 4
    interval = 1 / rate

    async def main() -> tuple[list[Reservation], list[Reservation]]:
        gone = make_bucket(prefix)
        leased = await take(gone, 40)  # 0.2 s of slots it will never use
        await gone.client.aclose()
        newcomer = make_bucket(prefix)
        fresh = await take(newcomer, 40)
        await newcomer.client.aclose()
        return leased, fresh

    leased, fresh = asyncio.run(main())
    # The newcomer queues behind the departed instance's slots, burst included.
    assert fresh[0].slot >= leased[-1].slot + interval - (burst - 1) * interval - 1e-6
    assert fresh[0].at > time.monotonic() - 1
    all_slots = [r.slot for r in leased + fresh]
    assert max_in_window(all_slots, width=0.2) <= rate * 0.2 + burst
    assert len({round(t, 6) for t in all_slots}) >= len(all_slots) - burst


def test_backoff_factor_is_shared_between_instances(prefix: str) -> None:
    rate = 200

    async def main() -> None:
        first, second = make_bucket(prefix), make_bucket(prefix)
        before = await second.acquire()
        assert await first.backoff(None) is True
        assert first.factor == pytest.approx(0.5)
        slots = [r.slot for r in await take(second, 30)]
        assert second.factor == pytest.approx(0.5, abs=0.01)  # seen by the other instance
        gaps = [b - a for a, b in zip(slots[-10:], slots[-9:])]
        assert gaps == pytest.approx([2 / rate] * 9, rel=0.02)
        # A 429 for a request granted before the shared backoff changes nothing.
        assert await second.backoff(before.granted_at) is False
        assert second.factor == pytest.approx(0.5, abs=0.01)
        assert await second.backoff(slots[-1]) is True
        assert second.factor == pytest.approx(0.25, abs=0.01)
        await first.client.aclose()
        await second.client.aclose()

    asyncio.run(main())


def test_state_lives_under_the_prefix_with_a_ttl(prefix: str) -> None:
    async def main() -> None:
        bucket = make_bucket(prefix)
        await take(bucket, 3)
        await bucket.client.aclose()

    asyncio.run(main())
    client = redis.Redis.from_url(REDIS_URL)
    keys = [key.decode() for key in client.scan_iter(f"{prefix}:*")]
    assert keys == [f"{prefix}:ratelimit:bucket"]
    assert 0 < client.pttl(keys[0]) <= (KEY_TTL + 1) * 1000
    client.close()


def test_leases_batch_redis_calls(prefix: str) -> None:
    async def main() -> RedisTokenBucket:
        bucket = make_bucket(prefix, rate=500, burst=10)
        assert bucket.lease_max == 10
        await asyncio.gather(*(bucket.acquire() for _ in range(100)))
        await bucket.client.aclose()
        return bucket

    bucket = asyncio.run(main())
    assert bucket.redis_calls <= 11  # the first waiter leases alone, the 99 others 10 at a time


def test_ping_names_the_masked_url() -> None:
    with pytest.raises(redis.ConnectionError, match=r"REDIS_URL='redis://u:\*\*\*@127.0.0.1:1/0'") as info:
        ping("redis://u:secret@127.0.0.1:1/0")
    assert "secret" not in str(info.value)


def test_an_outage_is_waited_out_then_reported(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(redis_bucket_module, "OUTAGE_MAX", 0.3)
    monkeypatch.setattr(redis_bucket_module, "OUTAGE_RETRY_DELAY", 0.1)

    async def main() -> None:
        bucket = bucket_at("redis://127.0.0.1:1/0", "unused", rate=10, burst=1)
        with pytest.raises(redis.ConnectionError):
            await bucket.acquire()
        await bucket.client.aclose()

    with caplog.at_level(logging.DEBUG, logger=redis_bucket_module.__name__):
        started = time.monotonic()
        asyncio.run(main())
    assert 0.3 <= time.monotonic() - started < 2
    levels = [record.levelno for record in caplog.records]
    assert levels[0] == logging.WARNING
    assert set(levels[1:]) == {logging.DEBUG}
    assert "no more of these messages" in caplog.records[0].getMessage()


def test_leases_grow_while_every_slot_gets_used(prefix: str) -> None:
    # One request at a time and no waiting (the cap far above the demand):
    # a lease of max(pending, 1) would cost one Redis call per request.
    async def main() -> RedisTokenBucket:
        bucket = make_bucket(prefix, rate=100_000, burst=10)
        for _ in range(300):
            await bucket.acquire()
        await bucket.client.aclose()
        return bucket

    bucket = asyncio.run(main())
    assert bucket.redis_calls < 300 / 10, bucket.redis_calls


def test_a_distant_redis_still_gets_requests_sent_within_the_cap(prefix: str) -> None:
    # 20 ms each way (Redis in another region): a lease's first slots were
    # granted for the moment the script ran, 40 ms stale on arrival, past the
    # late tolerance (14.4 ms at 500/s), and every lease was dropped: nothing sent, ever.
    rate, burst = 500, 10
    sends: list[float] = []

    async def main(url: str) -> None:
        bucket = bucket_at(url, prefix, rate=rate, burst=burst)
        stop = time.monotonic() + 2

        async def worker() -> None:
            while time.monotonic() < stop:
                reservation = await bucket.acquire()
                await asyncio.sleep(max(0.0, reservation.at - time.monotonic()))
                now = time.monotonic()
                if now <= reservation.deadline:  # what the download handler sends
                    sends.append(now)

        try:
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(32))), 5)
        except TimeoutError:
            pass  # a worker that never got a usable slot
        await bucket.client.aclose()

    redis_at = urlsplit(REDIS_URL)
    with TcpProxy(redis_at.hostname or "127.0.0.1", redis_at.port or 6379, delay=0.02) as proxy:
        asyncio.run(main(f"redis://127.0.0.1:{proxy.port}{redis_at.path}"))
    # One lease (10 slots) per 40 ms round trip: about 250/s; 0 before the fix.
    assert len(sends) >= 200, len(sends)
    assert max_in_window(sends) <= rate + burst
    assert max_in_window(sends, 0.1) <= rate / 10 + burst


def test_at_a_slow_pace_slots_keep_the_caps_window_and_are_not_granted_early(prefix: str) -> None:
    # AutoThrottle's pace at 10/s under a cap of 500/s. Measured in the pace's interval, the send
    # window was 720 ms and the first two slots were granted at once: sent late after the pace
    # sped up again, they crowded the fast slots (tests/test_bucket.py has the ramp).
    async def main() -> list[Reservation]:
        bucket = make_bucket(prefix, rate=500, burst=10)
        bucket.set_pace(10)
        try:
            return await take(bucket, 3)
        finally:
            await bucket.client.aclose()

    reservations = asyncio.run(main())
    assert [r.deadline - r.at for r in reservations] == pytest.approx([late_tolerance(1 / 500, 10)] * 3)
    # Spacing as granted, on the server's clock: the local times (``at``) also carry the clock
    # offset, which each lease call narrows, so they move by up to half a round trip (2.5 ms
    # under load in CI) between leases.
    slots = [r.slot for r in reservations]
    assert slots[1] - slots[0] == pytest.approx(0.1 - 1.8 / 500, abs=0.002)
    assert slots[2] - slots[1] == pytest.approx(0.1, abs=0.002)
