"""The scheduler's rules, against a pass of our own interface held in memory (no crawl, no network).

The end-to-end tests (test_pass_crawl.py, test_crawl.py, ...) run the same
scheduler over the real DatabasePass and RedisPass; these pin what it does
with each answer of a pass, one rule at a time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.ids import RangeIds
from productcrawler.items import MISSING, FailureItem
from productcrawler.meta import PASS_POSITION as POSITION
from productcrawler.meta import RESEND_NOW
from productcrawler.meta import RETRY_DELAY as RETRY_DELAY_META
from productcrawler.passes.base import FINISHED, LOST, RUNNING, Entry, Lease
from productcrawler.passes.scheduler import LEASE_BATCH, PassScheduler
from productcrawler.spiders.products import ProductsSpider
from tests.support.reactor import on_reactor_loop


class PassInMemory:
    """The ``base.Pass`` interface over a list of ids; records every call."""

    poll_interval = 0.01
    instance = "test-instance"
    row_stamp = None
    started_at = None
    pass_id = 7

    def __init__(self, ids: list[int]) -> None:
        self.remaining = list(ids)
        self.ids = RangeIds(1, 10**6)  # position p is id p
        self.total = len(ids)
        self.calls: list[tuple[str, Any]] = []
        self.pushed: list[tuple[Entry, float]] = []
        self.acknowledged: list[list[int]] = []
        self.status_when_empty = RUNNING
        self.unavailable = 0  # calls that fail as if Redis were away

    @staticmethod
    def is_unavailable(error: BaseException) -> bool:
        return isinstance(error, redis.ConnectionError)

    def _maybe_fail(self) -> None:
        if self.unavailable:
            self.unavailable -= 1
            raise redis.ConnectionError("Connection refused")

    async def open(self, *, fresh: bool) -> str:
        self.calls.append(("open", fresh))
        return "Started pass 7"

    async def lease(self, count: int) -> Lease:
        self.calls.append(("lease", count))
        self._maybe_fail()
        taken, self.remaining = self.remaining[:count], self.remaining[count:]
        return Lease([Entry(i) for i in taken], RUNNING if taken else self.status_when_empty)

    async def push(self, retries: list[tuple[Entry, float]]) -> None:
        self.calls.append(("push", len(retries)))
        self._maybe_fail()
        self.pushed += retries

    async def acknowledge(self, product_ids: list[int], revealed: dict[int, str] | None = None) -> str:
        self._maybe_fail()
        self.acknowledged.append(list(product_ids))
        return RUNNING

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        return RUNNING, 0

    async def give_back_lost(self) -> int:
        return 0

    def done(self, this_run: int) -> int:
        return this_run

    async def close(self, reason: str, *, lost: bool) -> bool:
        self.calls.append(("close", lost))
        return False


class IdleEngine:
    """What the scheduler asks of Scrapy's engine: is it idle, take a request, close."""

    def __init__(self, spider: ProductsSpider) -> None:
        self.spider = spider
        self.scheduler: PassScheduler | None = None
        self.crawled: list[Any] = []
        self.closed: list[str] = []

    def spider_is_idle(self) -> bool:
        return not self.scheduler.has_pending_requests()

    def crawl(self, request: Any) -> None:
        # As Scrapy's engine does: the request goes to the scheduler, and the engine asks for the next one.
        self.crawled.append(request)
        assert self.scheduler is not None
        self.scheduler.enqueue_request(request)

    async def close_spider_async(self, *, reason: str) -> None:
        self.closed.append(reason)


def leased_request(spider: ProductsSpider, product_id: int) -> Any:
    """A request as the scheduler hands it out for position ``product_id`` (ids and positions are equal here)."""
    request = spider.make_request(product_id)
    request.meta[POSITION] = product_id
    return request


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
def make_scheduler():
    schedulers = []

    def make(ids: list[int], **spider_args: Any) -> tuple[PassScheduler, PassInMemory, ProductsSpider]:
        crawler = get_crawler(ProductsSpider, {"API_BASE_URL": "http://api.test/v1"})
        crawler.spider = spider = ProductsSpider.from_crawler(crawler, **spider_args)
        crawler.stats.open_spider()
        crawler.engine = IdleEngine(spider)
        crawl_pass = PassInMemory(ids)
        scheduler = crawler.engine.scheduler = PassScheduler(crawler, crawl_pass)
        on_reactor_loop(scheduler._open(spider))
        on_reactor_loop(settle())
        schedulers.append(scheduler)
        return scheduler, crawl_pass, spider

    yield make
    for scheduler in schedulers:
        on_reactor_loop(scheduler._close("test"))


def test_ids_are_leased_ahead_and_become_the_spiders_requests_in_order(make_scheduler):
    scheduler, crawl_pass, spider = make_scheduler(list(range(1, 101)), fresh="1")
    assert crawl_pass.calls[:2] == [("open", True), ("lease", LEASE_BATCH)]
    requests = []
    for _ in range(100):
        request = scheduler.next_request()
        if request is None:
            on_reactor_loop(settle())
            request = scheduler.next_request()
        requests.append(request)
    assert [r.meta["product_id"] for r in requests] == list(range(1, 101))
    assert requests[0].url == spider.config.api.product_url(1) and requests[0].callback == spider.parse
    assert scheduler.stats.get_value("scheduler/dequeued/pass") == 100


def test_a_retry_goes_back_to_the_pass_with_its_delay_and_count(make_scheduler):
    scheduler, crawl_pass, spider = make_scheduler([1, 2, 3])
    request = leased_request(spider, 2)
    request.meta.update({"retry_times": 1, RETRY_DELAY_META: 1.5})
    assert scheduler.enqueue_request(request)
    assert scheduler.has_pending_requests()  # not idle until the pass has it
    on_reactor_loop(settle())
    assert crawl_pass.pushed == [(Entry(2, 1), 1.5)]
    assert scheduler.stats.get_value(stat_keys.RETRY_DELAYED) == 1
    assert scheduler.stats.get_value(stat_keys.RETRY_DELAY_SECONDS) == 1.5


def test_a_burst_of_retries_goes_back_to_the_pass_in_one_call(make_scheduler):
    # A 503 storm: each call to a shared pass is a round trip to Redis.
    scheduler, crawl_pass, spider = make_scheduler(list(range(1, 101)))
    for product_id in range(1, 65):
        request = leased_request(spider, product_id)
        request.meta.update({"retry_times": 1, RETRY_DELAY_META: product_id / 10})
        scheduler.enqueue_request(request)
    on_reactor_loop(settle())
    assert [call for call in crawl_pass.calls if call[0] == "push"] == [("push", 64)]
    assert crawl_pass.pushed == [(Entry(i, 1), i / 10) for i in range(1, 65)]
    assert scheduler.stats.get_value("scheduler/enqueued/pass") == 64


def test_a_proxy_resend_stays_here_and_is_sent_next(make_scheduler):
    scheduler, crawl_pass, spider = make_scheduler([1, 2, 3])
    request = leased_request(spider, 3)
    request.meta[RESEND_NOW] = True
    scheduler.enqueue_request(request)
    assert scheduler.next_request() is request
    on_reactor_loop(settle())
    assert crawl_pass.pushed == []


def test_committed_outcomes_are_acknowledged_in_one_call_per_batch(make_scheduler):
    scheduler, crawl_pass, _ = make_scheduler([1, 2, 3])
    assert [scheduler.next_request().meta["product_id"] for _ in range(3)] == [1, 2, 3]
    outcomes = [FailureItem(i, MISSING, 404, "not_found", 1) for i in (1, 2, 3)]
    scheduler._committed([], outcomes)
    on_reactor_loop(settle())
    assert crawl_pass.acknowledged == [[1, 2, 3]]


def test_the_crawl_stays_open_until_the_pass_has_nothing_more_to_hand_out(make_scheduler):
    scheduler, crawl_pass, _ = make_scheduler([])
    with pytest.raises(DontCloseSpider):
        scheduler._idle()  # more may come (a retry, another instance's dead leases)
    crawl_pass.status_when_empty = FINISHED
    on_reactor_loop(asyncio.sleep(0.05))  # the idle poll looks again
    assert scheduler.finished
    scheduler._idle()  # no DontCloseSpider: the engine may close


def test_a_lost_pass_stops_the_crawl_and_is_never_called_complete(make_scheduler):
    scheduler, crawl_pass, _ = make_scheduler([])
    crawl_pass.status_when_empty = LOST
    scheduler.next_request()
    on_reactor_loop(asyncio.sleep(0.05))
    assert scheduler.lost and not scheduler.finished
    assert scheduler.stats.get_value(stat_keys.EXIT_REASON) == "redis_pass_lost"
    with pytest.raises(DontCloseSpider):
        scheduler._idle()  # closing already, with its own reason
    on_reactor_loop(scheduler._close("redis_pass_lost"))
    assert crawl_pass.calls[-1] == ("close", True)


def test_a_store_away_is_logged_once_and_the_next_poll_tries_again(make_scheduler, caplog):
    scheduler, crawl_pass, _ = make_scheduler([])
    crawl_pass.remaining = [5, 6]
    crawl_pass.unavailable = 3
    with caplog.at_level(logging.INFO, logger="productcrawler.passes"):
        assert scheduler.next_request() is None
        on_reactor_loop(asyncio.sleep(0.2))
    assert [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()] == [
        "Redis is unreachable (Connection refused); retrying, nothing is lost meanwhile"]
    assert scheduler.stats.get_value(stat_keys.REDIS_ERRORS) == 3
    assert "Redis is reachable again" in caplog.text
    request = scheduler.next_request()
    assert request is not None and request.meta["product_id"] == 5


def test_close_acknowledges_and_pushes_what_is_left_then_closes_the_pass(make_scheduler):
    scheduler, crawl_pass, spider = make_scheduler([1, 2])
    assert scheduler.next_request().meta["product_id"] == 1
    on_reactor_loop(settle())
    crawl_pass.unavailable = 2  # the acknowledgement and the push fail while running
    scheduler._committed([], [FailureItem(1, MISSING, 404, "not_found", 1)])
    retry = leased_request(spider, 2)
    retry.meta[RETRY_DELAY_META] = 3.0
    scheduler.enqueue_request(retry)
    on_reactor_loop(settle())
    assert crawl_pass.acknowledged == [] and crawl_pass.pushed == []
    on_reactor_loop(scheduler._close("shutdown"))
    assert crawl_pass.acknowledged == [[1]]
    assert crawl_pass.pushed == [(Entry(2, 0), 3.0)]
    assert crawl_pass.calls[-1] == ("close", False)
