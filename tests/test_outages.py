"""MySQL and Redis cut for 10 seconds mid-crawl: the crawl goes on and loses nothing."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT, crawl_command, crawl_env, mysql_query
from tests.helpers import END, assert_pass_complete, finish, kill_when_stored, present_ids, stored_count
from tests.tcp_proxy import TcpProxy


@pytest.fixture
def mysql_proxy():
    proxy = TcpProxy("127.0.0.1", 3306)
    yield proxy
    proxy.close()


@pytest.fixture
def redis_proxy():
    proxy = TcpProxy("127.0.0.1", 6379)
    yield proxy
    proxy.close()


def start(settings: dict[str, object]) -> subprocess.Popen[str]:
    return subprocess.Popen(crawl_command("-a", f"end_id={END}", settings=settings), cwd=ROOT, env=crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_mysql_cut_for_ten_seconds_mid_crawl_loses_nothing(clean_simulator, mysql_url, mysql_proxy):
    database = mysql_url.rsplit("/", 1)[1]
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_proxy.url("mysql", f"/{database}", user="root")}
    process = start(settings)
    kill_when_stored(process, mysql_url, 500, 0)
    mysql_proxy.cut(10)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    assert "Cannot write to the database" in output and "reachable again" in output
    # The outage state behind productcrawler_database_up went to 1 and back to 0.
    assert "'productcrawler/db/outage': 0" in output
    assert_pass_complete(mysql_url)


def test_mysql_down_past_the_limit_stops_cleanly_and_a_restart_finishes(clean_simulator, mysql_url, mysql_proxy):
    database = mysql_url.rsplit("/", 1)[1]
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_proxy.url("mysql", f"/{database}", user="root"), "DATABASE_OUTAGE_MAX": 3}
    process = start(settings)
    kill_when_stored(process, mysql_url, 500, 0)
    mysql_proxy.cut(30)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 1, output[-3000:]
    assert "The database has been unavailable for 3 s" in output
    assert "Traceback" not in output
    # Stopped short of the end of the pass (some ids are 404s, so count products only).
    assert stored_count(mysql_url) < len(present_ids())
    assert mysql_query(mysql_url, "SELECT finished_at FROM crawl_passes") == [(None,)]
    code, output = direct_restart(settings, mysql_url)
    assert code == 0, output[-3000:]
    assert_pass_complete(mysql_url)


def direct_restart(settings: dict[str, object], mysql_url: str) -> tuple[int, str]:
    """The same crawl, straight to MySQL (the proxy is still cutting)."""
    return finish(start({**settings, "DATABASE_URL": mysql_url}), timeout=240)


def test_redis_cut_for_ten_seconds_mid_crawl_loses_nothing(clean_simulator, mysql_url, redis_proxy, redis_prefix):
    settings = {"API_BASE_URL": clean_simulator.base_url, "MAX_REQUESTS_PER_SECOND": 300,
                "DATABASE_URL": mysql_url, "REDIS_URL": redis_proxy.url("redis", "/0"),
                "REDIS_KEY_PREFIX": redis_prefix}
    process = start(settings)
    kill_when_stored(process, mysql_url, 500, 0)
    before_cut = redis_proxy.accepted
    redis_proxy.cut(10)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output[-3000:]
    assert "Redis is unreachable" in output
    # The outage state behind productcrawler_redis_up went to 1 and back to 0.
    assert "'productcrawler/redis/outage': 0" in output
    # Failed calls are tried again by the next heartbeat or poll, not in a tight loop.
    errors = re.search(r"'productcrawler/redis/errors': (\d+)", output)
    assert errors is not None and int(errors[1]) < 300, errors
    assert_pass_complete(mysql_url)
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'")[0][0] == 0
    # The crawl's Redis traffic went through the proxy, and it reconnected after the cut.
    assert before_cut >= 1 and redis_proxy.accepted > before_cut, (before_cut, redis_proxy.accepted)
