"""RedisPass against the real Redis: which pass an instance is on, and what is left behind."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
import redis
import redis.asyncio

from productcrawler.ids import RangeIds
from productcrawler.passes import redis_scripts
from productcrawler.passes.base import FINISHED, LOST, REPLACED, RUNNING, Entry, Lease
from productcrawler.passes.redis_pass import FINISHED_TTL, RedisPass
from tests.support.reactor import on_reactor_loop
from tests.support.services import REDIS_URL, redis_keys

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def run(scenario: Callable[[redis.asyncio.Redis], Awaitable[None]]) -> None:
    """Run ``scenario`` with an asyncio client of the real Redis, on the asyncio reactor's loop
    (what the crawl runs it on; ``asyncio.run`` would also unset that loop for the next tests)."""
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        try:
            await scenario(client)
        finally:
            await client.aclose()

    on_reactor_loop(main())


def test_reading_the_state_does_not_move_an_instance_onto_a_newer_pass(redis_prefix):
    async def scenario(client):
        first = RedisPass(client, redis_prefix, RangeIds(1, 100))
        await first.open(fresh=False)
        # another instance replaces it
        await RedisPass(client, redis_prefix, RangeIds(1, 100), instance="other").open(fresh=True)
        state = await first.state()
        assert state is not None and state.pass_id == 2  # what Redis has now...
        assert first.pass_id == 1  # ...but this instance still works on (and stops with) its own
        assert await first.status() == REPLACED
        assert (await first.lease(10)).status == REPLACED

    run(scenario)


def test_the_acknowledgement_that_finishes_a_pass_gives_its_keys_a_ttl(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, 3))
        await redis_pass.open(fresh=False)
        lease = await redis_pass.lease(10)
        assert [entry.position for entry in lease.entries] == [1, 2, 3]
        assert await redis_pass.acknowledge([1, 2]) == RUNNING
        await redis_pass.push([(Entry(3, 1), 60)])  # a retry waiting, then done by a duplicate fetch
        assert await redis_pass.acknowledge([3]) == FINISHED
        # Every key of the pass gets its TTL from the acknowledgement itself, even if no instance settles it.
        for name in ("done", "done_count", "delayed", "instances"):
            assert 0 < await client.ttl(redis_pass.key(name)) <= FINISHED_TTL, name
        assert await redis_pass.status() == FINISHED
        assert await redis_pass.close("finished", lost=False) is True

    run(scenario)


def test_a_retry_is_leased_again_only_once_due_and_with_its_retry_count(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, 2))
        await redis_pass.open(fresh=False)
        first, second = (await redis_pass.lease(2)).entries
        await redis_pass.push([(Entry(first.position, 1), 0.3), (Entry(second.position, 2), 0.0)])
        assert (await redis_pass.lease(10)).entries == [Entry(second.position, 2)]
        assert (await redis_pass.lease(10)).entries == []  # the other is not due yet
        await asyncio.sleep(0.35)
        assert (await redis_pass.lease(10)).entries == [Entry(first.position, 1)]

    run(scenario)


def test_a_dead_instances_leases_are_recovered_by_a_live_one(redis_prefix):
    async def scenario(client):
        dead = RedisPass(client, redis_prefix, RangeIds(1, 10), instance="dead")
        await dead.open(fresh=False)
        taken = [entry.position for entry in (await dead.lease(4)).entries]
        await client.delete(dead.heartbeat_key())  # killed: its heartbeat expired
        alive = RedisPass(client, redis_prefix, RangeIds(1, 10), instance="alive")
        await alive.open(fresh=False)
        status, recovered = await alive.beat({})
        assert (status, recovered) == (RUNNING, 4)
        assert [entry.position for entry in (await alive.lease(4)).entries] == taken

    run(scenario)


@pytest.mark.parametrize("ttl", [2.5, 10.0])
def test_the_heartbeat_lasts_the_instances_ttl(redis_prefix, ttl):
    async def scenario(client):
        instance = RedisPass(client, redis_prefix, RangeIds(1, 10), instance="short", heartbeat_ttl=ttl)
        await instance.open(fresh=False)
        await instance.beat({})
        assert ttl * 1000 - 500 < await client.pttl(instance.heartbeat_key()) <= ttl * 1000

    run(scenario)


def test_the_crawls_pass_gets_redis_heartbeat_ttl():
    from scrapy.utils.test import get_crawler

    from productcrawler.passes.crawler import crawl_pass

    crawler = get_crawler(settings_dict={"REDIS_URL": REDIS_URL, "REDIS_HEARTBEAT_TTL": "3.5"})
    assert crawl_pass(crawler).heartbeat_ttl == 3.5


def test_a_fresh_pass_replacing_one_with_no_live_instance_leaves_no_key_without_ttl(redis_prefix):
    async def scenario(client):
        dead = RedisPass(client, redis_prefix, RangeIds(1, 100), instance="dead")
        await dead.open(fresh=False)
        entries = (await dead.lease(5)).entries
        await dead.push([(Entry(entries[0].position, 1), 60)])  # a retry waiting
        await dead.push([(Entry(entries[1].position, 1), 0)])  # a retry due
        await dead.acknowledge([entries[2].position])
        await client.delete(dead.heartbeat_key())  # killed: its leases are still in Redis
        old_keys = [key async for key in client.scan_iter(f"{{{redis_prefix}}}:products:pass:1:*")]
        assert len(old_keys) >= 5  # queue, delayed, done, done_count, instances, inflight

        fresh = RedisPass(client, redis_prefix, RangeIds(1, 100), instance="fresh")
        await fresh.open(fresh=True)
        assert fresh.pass_id == 2
        for key in old_keys:
            assert 0 < await client.ttl(key) <= FINISHED_TTL, key

    run(scenario)


def test_instances_given_fresh_together_start_one_pass(redis_prefix):
    async def scenario(client):
        finished = RedisPass(client, redis_prefix, RangeIds(1, 50))
        await finished.open(fresh=False)
        await finished.acknowledge([e.position for e in (await finished.lease(50)).entries])
        clients = [redis.asyncio.Redis.from_url(REDIS_URL) for _ in range(3)]
        instances = [RedisPass(c, redis_prefix, RangeIds(1, 50), instance=f"i{n}") for n, c in enumerate(clients)]
        await asyncio.gather(*(instance.open(fresh=True) for instance in instances))
        assert [instance.pass_id for instance in instances] == [2, 2, 2]
        for c in clients:
            await c.aclose()

    run(scenario)


def test_a_pass_whose_keys_vanished_is_lost_not_finished(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, 100))
        await redis_pass.open(fresh=False)
        await redis_pass.lease(10)
        sync = redis.Redis.from_url(REDIS_URL)
        await client.delete(*redis_keys(sync, redis_prefix))  # Redis restarted empty
        assert await redis_pass.status() == LOST
        assert await redis_pass.lease(10) == Lease([], LOST)
        assert await redis_pass.acknowledge([1, 2]) == RUNNING  # not counted: the next look says lost
        # A new pass that happens to get the same id is still not ours: our late acknowledgement,
        # retry and lease must not touch it (before pass tokens, these ids finished it).
        new = RedisPass(client, redis_prefix, RangeIds(1, 5), instance="new")
        await new.open(fresh=False)
        assert new.pass_id == redis_pass.pass_id == 1
        assert await redis_pass.status() == LOST
        assert await redis_pass.acknowledge([1, 2, 3, 4, 5]) == RUNNING
        await redis_pass.push([(Entry(3, 1), 0.0)])
        assert (await redis_pass.lease(10)).entries == []
        assert await new.done_count() == 0 and await new.status() == RUNNING
        assert [e.position for e in (await new.lease(10)).entries] == [1, 2, 3, 4, 5]
        sync.close()

    run(scenario)


def test_only_redis_being_away_counts_as_unavailable_not_an_error_reply():
    assert RedisPass.is_unavailable(redis.ConnectionError("Connection refused"))
    assert RedisPass.is_unavailable(redis.TimeoutError("Timeout reading from socket"))
    assert RedisPass.is_unavailable(redis.ResponseError("LOADING Redis is loading the dataset in memory"))
    assert RedisPass.is_unavailable(redis.ResponseError("READONLY You can't write against a read only replica."))
    # A script's error or a wrong type is a bug: logged as one, not retried as an outage forever.
    assert not RedisPass.is_unavailable(redis.ResponseError("ERR Error running script: bit offset is not an integer"))
    assert not RedisPass.is_unavailable(redis.ResponseError("WRONGTYPE Operation against a key"))


#: More ids than Lua's unpack() can spread onto its stack in one go (about 8,000).
MANY = 20_000


async def hold(redis_pass: RedisPass, count: int) -> list[int]:
    """Lease ``count`` ids as the crawl does, in calls of a few each (a thousand here, to be quick)."""
    held: list[int] = []
    while len(held) < count:
        held += [entry.position for entry in (await redis_pass.lease(min(1000, count - len(held)))).entries]
    return held


def test_a_dead_instance_holding_more_leases_than_lua_can_unpack_has_them_all_recovered(redis_prefix):
    async def scenario(client):
        dead = RedisPass(client, redis_prefix, RangeIds(1, MANY), instance="dead")
        await dead.open(fresh=False)
        taken = await hold(dead, MANY)
        await client.delete(dead.heartbeat_key())  # killed: its heartbeat expired
        alive = RedisPass(client, redis_prefix, RangeIds(1, MANY), instance="alive")
        await alive.open(fresh=False)
        assert await alive.beat({}) == (RUNNING, MANY)
        assert sorted(await hold(alive, MANY)) == taken
        assert not await client.exists(dead.inflight_key)

    run(scenario)


def test_an_instance_closing_with_more_leases_than_lua_can_unpack_gives_them_all_back(redis_prefix):
    async def scenario(client):
        leaving = RedisPass(client, redis_prefix, RangeIds(1, MANY), instance="leaving")
        await leaving.open(fresh=False)
        taken = await hold(leaving, MANY)
        assert await leaving.close("shutdown", lost=False) is False
        staying = RedisPass(client, redis_prefix, RangeIds(1, MANY), instance="staying")
        await staying.open(fresh=False)
        assert sorted(await hold(staying, MANY)) == taken
        assert not await client.exists(leaving.inflight_key)

    run(scenario)


def test_an_acknowledgement_of_more_ids_than_lua_can_unpack_counts_them_all(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, MANY))
        await redis_pass.open(fresh=False)
        taken = await hold(redis_pass, MANY)
        assert await redis_pass.acknowledge(taken) == FINISHED  # say, Redis was away for a while
        assert await redis_pass.done_count() == MANY
        assert not await client.exists(redis_pass.inflight_key)  # none of them is still leased

    run(scenario)


def test_a_lease_of_more_ids_than_lua_can_unpack_records_them_all(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, MANY))
        await redis_pass.open(fresh=False)
        entries = (await redis_pass.lease(MANY)).entries
        assert [entry.position for entry in entries] == list(range(1, MANY + 1))
        assert await client.hlen(redis_pass.inflight_key) == MANY

    run(scenario)


def test_more_retries_than_lua_can_unpack_are_leased_again_in_one_call(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, MANY))
        await redis_pass.open(fresh=False)
        taken = await hold(redis_pass, MANY)
        retries = [Entry(product_id, 2) for product_id in taken[:10_000]]
        await redis_pass.push([(entry, 0.0) for entry in retries])
        assert await client.hlen(redis_pass.inflight_key) == MANY - len(retries)
        assert (await redis_pass.lease(MANY)).entries == retries  # the queue holds nothing else
        assert await client.hlen(redis_pass.inflight_key) == MANY

    run(scenario)


async def server_ms(client: redis.asyncio.Redis) -> int:
    """The Redis server's clock in ms: what the pass schedules retries by."""
    seconds, micros = await client.time()
    return seconds * 1000 + micros // 1000


def count_commands(client: redis.asyncio.Redis) -> list[str]:
    """Record the name of every command ``client`` sends from now on (each one a round trip)."""
    sent: list[str] = []
    execute = client.execute_command

    async def counted(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]).upper())
        return await execute(*args, **options)

    client.execute_command = counted  # type: ignore[method-assign]
    return sent


#: A 503 storm's retries, handed back in one call: due now, in 0.3 s, in 0.8 s.
STORM_DELAYS = [0.0] * 100 + [0.3] * 200 + [0.8] * 200


def test_a_burst_of_retries_is_one_round_trip_and_each_comes_back_once_its_delay_is_over(redis_prefix):
    async def scenario(client):
        # leases hand out nothing but retries
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, len(STORM_DELAYS)))
        await redis_pass.open(fresh=False)
        taken = await hold(redis_pass, len(STORM_DELAYS))
        retries = [(Entry(product_id, 1 + n % 3), delay)
                   for n, (product_id, delay) in enumerate(zip(taken, STORM_DELAYS))]
        await client.script_load(redis_scripts.PUSH)  # as the first push of a run would have
        pushed_from = await server_ms(client)
        sent = count_commands(client)
        await redis_pass.push(retries)
        assert sent == ["EVALSHA"]
        pushed_by = await server_ms(client)
        assert await client.hlen(redis_pass.inflight_key) == 0  # no longer leased to us

        delays = dict(retries)
        back: dict[Entry, tuple[int, int]] = {}  # entry: (the last lease without it began, the one with it ended)
        last_began = pushed_from
        while len(back) < len(retries) and await server_ms(client) < pushed_by + 5000:
            began = await server_ms(client)
            entries = (await redis_pass.lease(1000)).entries
            ended = await server_ms(client)
            for entry in entries:
                assert entry not in back, entry  # once only
                back[entry] = (last_began, ended)
            last_began = began
            await asyncio.sleep(0.05)
        assert set(back) == set(delays)  # every retry, with its retry count
        for entry, (before, ended) in back.items():
            delay_ms = delays[entry] * 1000
            assert ended >= pushed_from + delay_ms, (entry, delays[entry])  # not before its delay
            assert before < pushed_by + delay_ms, (entry, delays[entry])  # nor held once it was over
        assert sum(1 for before, _ in back.values() if before == pushed_from) == 100  # the due ones at once

    run(scenario)


def test_a_burst_of_retries_for_a_pass_that_is_no_longer_ours_pushes_nothing(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, len(STORM_DELAYS)))
        await redis_pass.open(fresh=False)
        taken = await hold(redis_pass, len(STORM_DELAYS))
        await client.hset(redis_pass.pass_key, "token", "another")  # Redis lost it; a new pass has its id
        await redis_pass.push([(Entry(product_id, 1), delay) for product_id, delay in zip(taken, STORM_DELAYS)])
        assert await client.llen(redis_pass.key("queue")) == 0
        assert await client.zcard(redis_pass.key("delayed")) == 0
        assert await client.hlen(redis_pass.inflight_key) == len(taken)  # untouched

    run(scenario)


def test_more_delayed_retries_than_lua_can_unpack_all_wait_in_one_call(redis_prefix):
    async def scenario(client):
        redis_pass = RedisPass(client, redis_prefix, RangeIds(1, MANY))
        await redis_pass.open(fresh=False)
        taken = await hold(redis_pass, MANY)
        await redis_pass.push([(Entry(product_id, 1), 60.0) for product_id in taken[:10_000]])
        assert await client.zcard(redis_pass.key("delayed")) == 10_000
        assert await client.hlen(redis_pass.inflight_key) == MANY - 10_000

    run(scenario)
