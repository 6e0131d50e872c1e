"""A service lost for good mid-crawl: the crawl stops with exit 1, loses nothing, and a rerun finishes.

MySQL behind a TCP proxy that is cut and never restored; Redis losing the pass
(its keys deleted, as a restart without persistence or a failover to an empty
replica would).
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.support.catalogue import assert_pass_complete, present_ids
from tests.support.crawls import finish, start_crawl, wait_until_stored
from tests.support.services import REDIS_URL, mysql_query, redis_keys, stored_count
from tests.support.tcp_proxy import TcpProxy

END = 3000
#: DATABASE_OUTAGE_MAX: the writer retries after 0.5, 1, 2, 4... s, so it gives up 3.5 s into the outage.
OUTAGE_MAX = 3
#: The reruns' rate: what they must show is that the pass completes, not how fast.
RERUN = {"MAX_REQUESTS_PER_SECOND": 1000}


@pytest.fixture
def mysql_proxy():
    with TcpProxy("127.0.0.1", 3306) as proxy:
        yield proxy


@pytest.mark.parametrize("use_redis", [False, True], ids=["database-ledger", "redis"])
def test_mysql_down_for_good_exits_1_soon_after_the_outage_limit_and_a_rerun_finishes(
        use_redis, clean_simulator, mysql_url, mysql_proxy, redis_prefix):
    database = mysql_url.rsplit("/", 1)[1]
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_proxy.url("mysql", f"/{database}", user="root"),
                "DATABASE_OUTAGE_MAX": OUTAGE_MAX}
    if use_redis:
        settings |= {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}
    process = start_crawl("-a", f"end_id={END}", settings=settings)
    wait_until_stored(process, mysql_url, 300)
    mysql_proxy.cut(10**6)  # never restored
    cut_at = time.monotonic()
    code, output = finish(process, timeout=OUTAGE_MAX + 80)
    stopped_after = time.monotonic() - cut_at
    assert code == 1, output[-3000:]
    assert f"The database has been unavailable for {OUTAGE_MAX} s" in output
    assert "Finished (database_unavailable)" in output and "Traceback" not in output
    # Soon after the limit: the crawl does not hang on in-flight items or restart its writer.
    assert stopped_after < OUTAGE_MAX + 30, output[-3000:]
    # Stopped short of the end of the pass (some ids are 404s, so count products only).
    assert stored_count(mysql_url) < len(present_ids(END))
    if not use_redis:  # left to resume (a Redis pass is not in crawl_passes)
        assert mysql_query(mysql_url, "SELECT finished_at FROM crawl_passes") == [(None,)]

    # The database is back (the crawl goes to it directly): the rerun completes the pass.
    code, output = finish(start_crawl("-a", f"end_id={END}",
                                      settings={**settings, "DATABASE_URL": mysql_url, **RERUN}), timeout=240)
    assert code == 0, output[-3000:]
    assert_pass_complete(mysql_url, END)


def test_redis_losing_the_pass_mid_crawl_stops_every_instance_with_exit_1_and_a_rerun_finishes(
        clean_simulator, mysql_url, redis_prefix):
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_url, "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}
    processes = [start_crawl("-a", f"end_id={END}", settings=settings) for _ in range(2)]
    wait_until_stored(processes[0], mysql_url, 500)
    # What a Redis restart without persistence does to this crawl's keys (only this test's own).
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(*redis_keys(client, redis_prefix))
    client.close()
    for process in processes:
        code, output = finish(process, timeout=60)
        assert code == 1, output[-3000:]
        assert output.count("vanished from Redis") == 1, output[-3000:]
        assert "Finished (redis_pass_lost)" in output and "Traceback" not in output
    assert stored_count(mysql_url) < END

    code, output = finish(start_crawl("-a", f"end_id={END}", settings={**settings, **RERUN}), timeout=240)
    assert code == 0, output[-3000:]
    assert_pass_complete(mysql_url, END)
