"""RedisPass against the real Redis: which pass an instance is on, and what is left behind."""

from __future__ import annotations

import threading

import pytest
import redis

from productcrawler.passes.redis_pass import FINISHED_TTL, Entry, RedisPass
from tests.conftest import REDIS_URL
from tests.helpers import redis_keys


@pytest.fixture
def client():
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def test_reading_the_state_does_not_move_an_instance_onto_a_newer_pass(client, redis_prefix):
    first = RedisPass(client, redis_prefix)
    first.open(1, 100, fresh=False)
    RedisPass(client, redis_prefix).open(1, 100, fresh=True)  # another instance replaces it
    state = first.state()
    assert state is not None and state.pass_id == 2  # what Redis has now...
    assert first.pass_id == 1  # ...but this instance still works on (and stops with) its own
    assert first.status() == "replaced"


def test_the_acknowledgement_that_finishes_a_pass_gives_its_keys_a_ttl(client, redis_prefix):
    redis_pass = RedisPass(client, redis_prefix)
    redis_pass.open(1, 3, fresh=False)
    ids = [entry.product_id for entry in redis_pass.pop(10)]
    assert redis_pass.acknowledge(ids) == 3
    for name in ("done", "done_count"):
        assert 0 < client.ttl(redis_pass._key(name)) <= FINISHED_TTL, name
    assert redis_pass.status() == "finished"


def test_a_fresh_pass_replacing_one_with_no_live_instance_leaves_no_key_without_ttl(client, redis_prefix):
    dead = RedisPass(client, redis_prefix)
    dead.open(1, 100, fresh=False)
    entries = dead.pop(5)
    dead.push(Entry(entries[0].product_id, 1), delay=60)  # a retry waiting
    dead.push(Entry(entries[1].product_id, 1))  # a retry due
    dead.acknowledge([entries[2].product_id])
    dead.stop_heartbeat()  # killed: its leases are still in Redis
    old_keys = list(client.scan_iter(f"{{{redis_prefix}}}:products:pass:1:*"))
    assert len(old_keys) >= 5  # queue, delayed, done, done_count, instances, inflight

    fresh = RedisPass(client, redis_prefix)
    fresh.open(1, 100, fresh=True)
    assert fresh.pass_id == 2
    for key in old_keys:
        assert 0 < client.ttl(key) <= FINISHED_TTL, key


def test_instances_given_fresh_together_start_one_pass(client, redis_prefix):
    finished = RedisPass(client, redis_prefix)
    finished.open(1, 50, fresh=False)
    finished.acknowledge([e.product_id for e in finished.pop(50)])
    passes: list[int] = []
    barrier = threading.Barrier(3)

    def start() -> None:
        instance = RedisPass(redis.Redis.from_url(REDIS_URL), redis_prefix)
        barrier.wait()
        instance.open(1, 50, fresh=True)
        passes.append(instance.pass_id)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert passes == [2, 2, 2]


def test_a_pass_whose_keys_vanished_is_lost_not_finished(client, redis_prefix):
    redis_pass = RedisPass(client, redis_prefix)
    redis_pass.open(1, 100, fresh=False)
    redis_pass.pop(10)
    client.delete(*redis_keys(client, redis_prefix))  # Redis restarted empty
    assert redis_pass.status() == "lost"
    assert redis_pass.pop(10) == []
    assert redis_pass.acknowledge([1, 2]) < 0
    # A new pass that happens to get the same id is still not ours.
    RedisPass(client, redis_prefix).open(1, 100, fresh=False)
    assert redis_pass.status() == "lost"
