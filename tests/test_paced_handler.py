"""PacedAiohttpDownloadHandler: a request whose connection comes after its slot went stale is not sent late.

The handler is built from a real crawler with the rate limit and downloads
from the independent arrival clock (tests/support/arrival_server.py, kernel receive
time stamps). Its connector is the project's, with one thing put in front of
aiohttp's: every connection waits for a gate. Opened after 100 ms, the gate
stands for a busy event loop that gets to the connections it was opening all
at once, as after the API's stall: requests that got their slots 10 ms apart
then have their connections at the same moment.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from scrapy import Request
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.meta import WRITE_STARTED
from productcrawler.ratelimit.handler import PacedAiohttpDownloadHandler, PacedConnector
from productcrawler.ratelimit.middleware import RateLimitMiddleware
from tests.support.doubles import engine_with
from tests.support.reactor import on_reactor_loop
from tests.support.windows import max_in_window

if TYPE_CHECKING:
    from scrapy.http import Response

#: Arrivals within 10 ms and latencies: run alone (make test's second part), not beside another worker.
pytestmark = pytest.mark.timing

RATE, COUNT = 100, 20  # a slot every 10 ms; burst 1: a slot may be used up to 5 ms late
BOUND_100_MS = 10 + 1 + 1  # as in test_ratelimit_middleware.py
GATE = asyncio.Event()


class GatedTCPConnector(aiohttp.TCPConnector):
    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        await GATE.wait()
        return await super().connect(req, traces, timeout)


class GatedConnector(PacedConnector, GatedTCPConnector):
    """The project's connector over a gated aiohttp one: the slot is checked after the gate."""


class GatedHandler(PacedAiohttpDownloadHandler):
    connector_class = GatedConnector


async def download_all(base_url: str, gate_after: float | None,
                       ) -> tuple[list[Response], list[Request], RateLimitMiddleware]:
    # The bucket alone: the answers do not pass the middleware here, so the budget gate
    # would hold all but its probes.
    crawler = get_crawler(settings_dict={
        "MAX_REQUESTS_PER_SECOND": RATE, "RATE_LIMIT_BURST": 1, "RATE_LIMIT_HEADERS": "off",
        "DOWNLOAD_HANDLERS": get_project_settings().getdict("DOWNLOAD_HANDLERS")})
    limit = RateLimitMiddleware.from_crawler(crawler)
    engine_with(crawler, limit)
    handler = build_from_crawler(GatedHandler, crawler)
    if gate_after is None:
        GATE.set()
    else:
        GATE.clear()
        asyncio.get_running_loop().call_later(gate_after, GATE.set)
    requests = [Request(f"{base_url}/product/{i}") for i in range(1, COUNT + 1)]
    try:
        responses = await asyncio.gather(*(handler.download_request(request) for request in requests))
    finally:
        await handler.close()
        await limit.spider_closed()
    return responses, requests, limit


# Open, the gate holds nothing, but the first connections are opened on a loop
# busy with 20 requests at once: one may come late on a loaded machine.
@pytest.mark.parametrize(("gate_after", "late_at_least", "late_at_most"), [(None, 0, 2), (0.1, 8, COUNT)])
def test_a_request_whose_connection_came_late_takes_a_new_slot(clean_arrival_server: Any, gate_after: float | None,
                                                                 late_at_least: int, late_at_most: int) -> None:
    responses, requests, limit = on_reactor_loop(download_all(clean_arrival_server.base_url, gate_after))
    assert [response.status for response in responses] == [200] * COUNT
    arrivals = clean_arrival_server.arrivals()
    assert len(arrivals) == COUNT
    # Written at their (new) slots, not together when the gate opened: at most two in any
    # 10 ms (slots 10 ms apart, each used up to 5 ms late), the 100-ms bound held.
    assert max_in_window(arrivals, 0.01) <= 2, sorted(arrivals)
    assert max_in_window(arrivals, 0.1) <= BOUND_100_MS
    late = limit.crawler.stats.get_value(stat_keys.RATELIMIT_LATE_CONNECTIONS, 0)
    # With the gate at 100 ms, the requests whose slots were stale by then (slots 0-90 ms,
    # 5 ms of lateness each) take new ones; with the gate open, next to none.
    assert late_at_least <= late <= late_at_most
    assert limit.sent == COUNT
    # A re-paced request's latency (AutoThrottle's input) starts at its new slot: the wait for it
    # (up to ~200 ms for the last one here) is the rate limit's, not the API's.
    repaced = [request.meta["download_latency"] for request in requests if WRITE_STARTED in request.meta]
    assert len(repaced) == late
    assert max(repaced, default=0.0) < 0.08, sorted(repaced)
