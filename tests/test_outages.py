"""MySQL and Redis cut for a while mid-crawl: the crawl goes on and loses nothing.

A database that stays away past DATABASE_OUTAGE_MAX is test_services_lost.py's.
"""

from __future__ import annotations

import re

import pytest

from tests.support.catalogue import assert_pass_complete
from tests.support.crawls import kill_when_stored, start_crawl
from tests.support.tcp_proxy import TcpProxy

END = 1500
#: Seconds MySQL is cut: the writer retries after 0.5, 1, 2, 4... s, so the crawl
#: goes on without it for 3.5 s and then finds it back.
MYSQL_CUT = 3
#: The crawl's REDIS_HEARTBEAT_TTL here (seconds; the default is 10): Redis is cut for as
#: long, so its heartbeat can lapse before the crawl reaches Redis again.
REDIS_HEARTBEAT_TTL = 4
REDIS_CUT = REDIS_HEARTBEAT_TTL


@pytest.fixture
def mysql_proxy():
    with TcpProxy("127.0.0.1", 3306) as proxy:
        yield proxy


@pytest.fixture
def redis_proxy():
    with TcpProxy("127.0.0.1", 6379) as proxy:
        yield proxy


def test_mysql_cut_for_a_few_seconds_mid_crawl_loses_nothing(clean_simulator, mysql_url, mysql_proxy):
    database = mysql_url.rsplit("/", 1)[1]
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_proxy.url("mysql", f"/{database}", user="root")}
    process = start_crawl("-a", f"end_id={END}", settings=settings)
    kill_when_stored(process, mysql_url, 500, 0)
    mysql_proxy.cut(MYSQL_CUT)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    assert "Cannot write to the database" in output and "reachable again" in output
    # The outage state behind productcrawler_database_up went to 1 and back to 0.
    assert "'productcrawler/db/outage': 0" in output
    assert_pass_complete(mysql_url, END)


def test_redis_cut_for_as_long_as_the_heartbeat_ttl_mid_crawl_loses_nothing(clean_simulator, mysql_url,
                                                                             redis_proxy, redis_prefix):
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_url, "REDIS_URL": redis_proxy.url("redis", "/0"),
                "REDIS_KEY_PREFIX": redis_prefix, "REDIS_HEARTBEAT_TTL": REDIS_HEARTBEAT_TTL}
    process = start_crawl("-a", f"end_id={END}", settings=settings)
    kill_when_stored(process, mysql_url, 500, 0)
    before_cut = redis_proxy.accepted
    redis_proxy.cut(REDIS_CUT)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    assert "Redis is unreachable" in output
    # The outage state behind productcrawler_redis_up went to 1 and back to 0.
    assert "'productcrawler/redis/outage': 0" in output
    # Failed calls are tried again by the next heartbeat or poll, not in a tight loop.
    errors = re.search(r"'productcrawler/redis/errors': (\d+)", output)
    assert errors is not None and int(errors[1]) < 300, errors
    assert_pass_complete(mysql_url, END)
    # The crawl's Redis traffic went through the proxy, and it reconnected after the cut.
    assert before_cut >= 1 and redis_proxy.accepted > before_cut, (before_cut, redis_proxy.accepted)
