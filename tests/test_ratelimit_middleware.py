"""RateLimitMiddleware built from settings; its slot wait called directly on an asyncio loop."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis
from scrapy.exceptions import NotConfigured
from scrapy.http import Request, Response
from scrapy.settings import Settings
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.ratelimit import LocalRateLimiter, RedisTokenBucket
from productcrawler.ratelimit.middleware import ASYNCIO_REACTOR, RateLimitMiddleware, _check_asyncio
from tests.support.services import REDIS_URL
from tests.support.windows import max_in_window

#: Rates and delays measured in real time: `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing

UNSET = object()


PROJECT_HANDLERS = get_project_settings().getdict("DOWNLOAD_HANDLERS")


def build(**settings: Any) -> RateLimitMiddleware:
    # The bucket alone: no answers come here, and the budget gate would hold all but its probes.
    values = {"MAX_REQUESTS_PER_SECOND": 100, "RATE_LIMIT_BURST": 1, "RATE_LIMIT_HEADERS": "off",
              "DOWNLOAD_HANDLERS": PROJECT_HANDLERS, **settings}
    crawler = get_crawler(settings_dict={k: v for k, v in values.items() if v is not UNSET})
    return RateLimitMiddleware.from_crawler(crawler)


# Sends in any 100 ms at 100/s with a burst of 1 (slots used up to 5 ms late).
BOUND_100_MS = 10 + 1 + 1


async def send_all(mw: RateLimitMiddleware, count: int) -> list[float]:
    """Run ``count`` slot waits concurrently, as the download handler does; return send times."""
    sent: list[float] = []

    async def one(i: int) -> None:
        await mw.wait_for_slot(Request(f"http://api.test/product/{i}"))
        sent.append(time.monotonic())

    await asyncio.gather(*(one(i) for i in range(count)))
    return sent


@pytest.mark.parametrize("value", [False, "False", "false", 0, "0"])
def test_disabled_switch_raises_bare_not_configured(value: object) -> None:
    with pytest.raises(NotConfigured) as info:
        build(RATE_LIMIT_ENABLED=value)
    assert info.value.args == ()


@pytest.mark.parametrize("value", [UNSET, True, "true", 1])
def test_enabled_by_default(value: object) -> None:
    assert isinstance(build(RATE_LIMIT_ENABLED=value).limiter, LocalRateLimiter)


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"RATE_LIMIT_ENABLED": "maybe"}, "RATE_LIMIT_ENABLED='maybe'"),
     ({"MAX_REQUESTS_PER_SECOND": 0}, "MAX_REQUESTS_PER_SECOND=0"),
     ({"MAX_REQUESTS_PER_SECOND": -5}, "MAX_REQUESTS_PER_SECOND=-5"),
     ({"MAX_REQUESTS_PER_SECOND": "fast"}, "MAX_REQUESTS_PER_SECOND='fast'"),
     ({"RATE_LIMIT_BURST": 0.5}, "RATE_LIMIT_BURST=0.5")],
)
def test_invalid_settings_raise_value_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(**settings)


@pytest.mark.parametrize(
    ("reactor", "enabled", "ok"),
    [(ASYNCIO_REACTOR, True, True), (None, False, True),
     ("twisted.internet.epollreactor.EPollReactor", True, False), (None, True, False)],
)
def test_shared_limit_needs_asyncio(reactor: str | None, enabled: bool, ok: bool) -> None:
    settings = Settings({"TWISTED_REACTOR": reactor, "TWISTED_REACTOR_ENABLED": enabled})
    if ok:
        _check_asyncio(settings)
    else:
        with pytest.raises(ValueError, match=f"TWISTED_REACTOR={reactor!r}"):
            _check_asyncio(settings)


def test_default_burst_and_rate_come_from_the_contract() -> None:
    mw = build(MAX_REQUESTS_PER_SECOND=UNSET, RATE_LIMIT_BURST=UNSET)
    assert (mw.limiter.rate, mw.limiter.burst) == (500, 10)


def test_concurrent_requests_wait_their_turn_without_blocking_the_loop() -> None:
    mw = build()  # 100/s, burst 1
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def main() -> tuple[list[float], float]:
        tick_task = asyncio.create_task(ticker())
        started = time.monotonic()
        sent = await send_all(mw, 50)
        elapsed = time.monotonic() - started
        tick_task.cancel()
        await mw.spider_closed()
        return sent, elapsed

    sent, elapsed = asyncio.run(main())
    # 49 intervals of 10 ms, judged from the recorded send times: never faster, and a
    # loaded machine only makes it slower (late wake-ups take new slots).
    assert 0.47 <= max(sent) - min(sent) <= elapsed <= 2.0
    assert ticks >= 30  # the loop kept running other callbacks meanwhile
    assert max_in_window(sent, 0.1) <= BOUND_100_MS
    stats = mw.crawler.stats
    assert stats.get_value(stat_keys.RATELIMIT_WAITS) == 49
    assert stats.get_value(stat_keys.RATELIMIT_WAIT_SECONDS) == pytest.approx(0.01 * 49 * 50 / 2, rel=0.15)
    assert stats.get_value(stat_keys.RATELIMIT_EFFECTIVE_RATE) == pytest.approx(100, rel=0.1)
    assert (mw.sent, mw.waiting, mw.rate_factor, mw.current_rate) == (50, 0, 1.0, 100)
    assert mw.effective_rate == pytest.approx(100, rel=0.1)


def test_rates_for_a_metrics_exporter() -> None:
    mw = build()
    assert (mw.effective_rate, mw.recent_rate) == (None, None)
    for k in range(151):  # 100/s for 1 s, then 50/s for 1 s
        mw._record_send(500.0 + (k * 0.01 if k <= 100 else 1 + (k - 100) * 0.02))
    assert mw.recent_rate == pytest.approx(50)
    assert mw.effective_rate == pytest.approx(75)
    assert mw.crawler.stats.get_value(stat_keys.RATELIMIT_EFFECTIVE_RATE) == pytest.approx(75)


def test_a_request_woken_late_takes_a_new_slot() -> None:
    mw = build()  # 100/s, burst 1: one slot every 10 ms

    async def stall() -> None:
        await asyncio.sleep(0.055)
        time.sleep(0.1)  # the event loop is busy: 10 slots pass

    async def main() -> list[float]:
        sent, _ = await asyncio.gather(send_all(mw, 30), stall())
        return sent

    sent = asyncio.run(main())
    # Only the request whose slot is at most 5 ms old goes out when the loop
    # comes back; the others take new slots.
    clump = 1
    assert mw.late_wakeups >= 10 - clump - 1
    assert max_in_window(sent, 0.001) <= clump
    assert max_in_window(sent, 0.1) <= BOUND_100_MS
    assert mw.sent == 30


def test_429_backs_off_once_per_rate_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    mw = build()
    requests = [Request(f"http://api.test/product/{i}") for i in range(4)]

    async def main() -> None:
        for request in requests[:2]:
            await mw.wait_for_slot(request)
        ok = Response(requests[0].url, status=200)
        assert await mw.process_response(requests[0], ok) is ok
        for request in requests[:2]:  # both granted before the backoff: one backoff
            await mw.process_response(request, Response(request.url, status=429))
        await mw.wait_for_slot(requests[2])
        await mw.process_response(requests[2], Response(requests[2].url, status=429))
        # A 429 for a request that never went through the limiter counts as fresh.
        await mw.process_response(requests[3], Response(requests[3].url, status=429))

    with caplog.at_level(logging.DEBUG, logger="productcrawler.ratelimit.middleware"):
        asyncio.run(main())
    stats = mw.crawler.stats
    assert stats.get_value(stat_keys.RATELIMIT_429) == 4
    assert stats.get_value(stat_keys.RATELIMIT_BACKOFFS) == 3 == mw.backoffs
    assert mw.rate_factor == pytest.approx(0.125, abs=1e-3)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if "429" in r.getMessage()]
    assert [level for level, _ in logged] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "backing off to 50.0 requests/second" in logged[0][1]
    assert "no more backoff messages will be shown" in logged[0][1]


def test_instances_share_the_rate_and_the_backoff_through_redis(redis_prefix: str) -> None:
    first, second = (build(REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix) for _ in range(2))
    assert isinstance(first.limiter, RedisTokenBucket)

    async def main() -> tuple[list[float], float]:
        started = time.monotonic()
        a, b = await asyncio.gather(send_all(first, 30), send_all(second, 30))
        elapsed = time.monotonic() - started
        request = Request("http://api.test/product/1")
        await first.wait_for_slot(request)
        await first.process_response(request, Response(request.url, status=429))
        # The other instance sees the factor with its next lease.
        await send_all(second, second.limiter.lease_max + 1)
        await first.spider_closed()
        await second.spider_closed()
        return a + b, elapsed

    sent, elapsed = asyncio.run(main())
    # 60 requests at 100/s in total, not per instance (that would take 0.3 s), judged
    # from the recorded send times; a loaded machine only makes it slower.
    assert 0.55 <= max(sent) - min(sent) <= elapsed <= 2.5
    assert max_in_window(sent, 0.1) <= BOUND_100_MS
    assert first.sent == 31
    assert first.rate_factor == pytest.approx(0.5, abs=0.01)
    assert second.rate_factor == pytest.approx(0.5, abs=0.01)  # seen through Redis


@pytest.mark.parametrize(
    ("handlers", "ok"),
    [({}, True), ({"https": None}, True),
     ({"http": "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler"}, True),
     ({"http": "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"}, False),
     ({"https": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"}, False)],
)
def test_a_download_handler_that_does_not_pace_is_refused(handlers: dict[str, Any], ok: bool) -> None:
    settings = {"DOWNLOAD_HANDLERS": {**PROJECT_HANDLERS, **handlers}}
    if ok:
        assert isinstance(build(**settings), RateLimitMiddleware)
    else:
        with pytest.raises(ValueError, match=r"DOWNLOAD_HANDLERS\['http"):
            build(**settings)


def test_unreachable_redis_fails_at_start() -> None:
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError, match="REDIS_URL='redis://127.0.0.1:1/0'"):
        build(REDIS_URL="redis://127.0.0.1:1/0")
    assert time.monotonic() - started < 2
