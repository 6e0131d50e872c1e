"""Health scores and rests: the same steps in this process and in Redis (the real one)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import redis.asyncio

from productcrawler.proxies.books import LocalHealthBook
from productcrawler.proxies.health import SCORE_MAX, HealthPolicy, ProxyHealth
from productcrawler.proxies.shared import RedisHealthBook
from productcrawler.redis_keys import Keys
from tests.support.services import REDIS_URL

POLICY = HealthPolicy(success=5, failure=20, minimum=50, rest_base=10, rest_max=300)
KEYS = ["proxy-a", "proxy-b"]


def test_rest_lengths_double_with_equal_jitter_up_to_the_maximum():
    assert POLICY.rest_seconds(1, 0.0) == 5 and POLICY.rest_seconds(1, 0.999) == pytest.approx(9.995)
    assert POLICY.rest_seconds(2, 0.0) == 10
    assert POLICY.rest_seconds(3, 0.5) == 30
    assert POLICY.rest_seconds(10, 1.0) == 300
    assert POLICY.rest_seconds(10_000, 0.0) == 150  # no overflow


def test_a_failure_lowers_more_than_a_success_raises():
    health = ProxyHealth()
    assert health.apply(POLICY, 0, 1, now=0, draw=0) is None and health.score == 80
    assert health.apply(POLICY, 2, 0, now=0, draw=0) is None and health.score == 90
    assert health.apply(POLICY, 10, 0, now=0, draw=0) is None and health.score == SCORE_MAX


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture(params=["local", "redis"])
def make_book(request, redis_prefix):
    """Books of one pool: several from the same fixture share their scores (Redis) or are one (local)."""
    if request.param == "local":
        books: dict[HealthPolicy, LocalHealthBook] = {}
        return lambda policy=POLICY: books.setdefault(
            policy, LocalHealthBook(policy, len(KEYS), rng=random.Random(1)))

    def redis_book(policy=POLICY):
        return RedisHealthBook(redis.asyncio.Redis.from_url(REDIS_URL), key=Keys(redis_prefix).proxy_health, keys=KEYS,
                               policy=policy, rng=random.Random(1))
    return redis_book


def test_three_failures_rest_a_proxy_at_the_minimum_score(make_book):
    async def scenario():
        book = make_book()
        first = await book.sync([(0, 2), (1, 0)])
        third = await book.sync([(0, 1), (3, 0)])
        return first, third
    first, third = run(scenario())
    assert first.rested == {} and first.health[0].score == 60
    assert list(third.rested) == [0] and 5 <= third.rested[0] <= 10
    now = time.monotonic()
    assert third.health[0].resting(now) and third.health[0].score == 50 and third.health[0].rests == 1
    assert 4 <= third.health[0].rest_until - now <= 10
    assert not third.health[1].resting(now) and third.health[1].score == SCORE_MAX


def test_outcomes_during_a_rest_are_ignored(make_book):
    async def scenario():
        book = make_book()
        await book.sync([(0, 3), (0, 0)])
        return await book.sync([(10, 5), (0, 0)])
    snapshot = run(scenario())
    assert snapshot.rested == {} and snapshot.health[0].score == 50 and snapshot.health[0].rests == 1


@pytest.mark.timing
def test_back_from_a_rest_one_failure_rests_it_twice_as_long_and_full_health_starts_over(make_book):
    quick = HealthPolicy(success=5, failure=20, minimum=50, rest_base=0.2, rest_max=300)

    async def scenario():
        book = make_book(quick)
        await book.sync([(0, 3), (0, 0)])
        await asyncio.sleep(0.25)
        second = await book.sync([(0, 1), (0, 0)])
        await asyncio.sleep(0.45)
        healed = await book.sync([(10, 0), (0, 0)])
        third = await book.sync([(0, 3), (0, 0)])
        return second, healed, third
    second, healed, third = run(scenario())
    assert 0.2 <= second.rested[0] <= 0.4 and second.health[0].rests == 2
    assert healed.health[0].score == SCORE_MAX and healed.health[0].rests == 0
    assert third.health[0].rests == 1 and 0.1 <= third.rested[0] <= 0.2


def test_every_instance_sees_a_rest_and_only_the_one_that_caused_it_is_told(redis_prefix):
    def book():
        return RedisHealthBook(redis.asyncio.Redis.from_url(REDIS_URL), key=Keys(redis_prefix).proxy_health, keys=KEYS,
                               policy=POLICY)

    async def scenario():
        first, second = book(), book()
        await first.sync([(0, 2), (0, 0)])
        caused = await second.sync([(0, 1), (0, 0)])  # the third failure, seen by another instance
        seen = await first.sync([(0, 0), (0, 0)])
        await first.client.aclose()
        await second.client.aclose()
        return caused, seen
    caused, seen = run(scenario())
    assert list(caused.rested) == [0]
    assert seen.rested == {} and seen.health[0].resting(time.monotonic())
    assert seen.health[0].rest_until == pytest.approx(caused.health[0].rest_until, abs=0.05)


def test_with_redis_away_the_pool_keeps_its_counts_rests_proxies_itself_and_says_so_once(caplog):
    from scrapy.utils.test import get_crawler

    from productcrawler.config.proxy_urls import parse_proxy_urls
    from productcrawler.proxies.pool import ProxyPool

    proxies = parse_proxy_urls("http://10.0.0.1:3128,http://10.0.0.2:3128")
    away = RedisHealthBook(redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1),
                           key=Keys("pctest:away").proxy_health, keys=[p.key for p in proxies], policy=POLICY)
    stats = get_crawler().stats
    pool = ProxyPool(proxies, away, POLICY.minimum, stats, fallback=LocalHealthBook(POLICY, 2))

    async def scenario():
        for _ in range(3):
            pool.failed(proxies[0], "connection_refused")
            await pool.sync()
    run(scenario())
    assert pool._deltas[0] == [0, 3]  # sent once Redis is back
    assert [pool.choose().label for _ in range(2)] == ["10.0.0.2:3128"] * 2  # rested here meanwhile
    assert stats.get_value("productcrawler/proxy/book_errors") == 3
    assert sum("cannot reach the shared book" in r.getMessage() for r in caplog.records) == 1
