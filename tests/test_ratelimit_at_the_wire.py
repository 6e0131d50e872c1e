"""The cap holds where the API counts it, judged by an independent arrival clock.

``tests/support/arrival_server.py`` time-stamps every request as it is read; it shares
no code with the project's simulator. Each test injects a stall on one side --
the crawler's reactor blocked for 100-200 ms every 0.7 s, or the API holding
its answers for 300 ms every 1.2 s -- and asserts, from the arrival record,
the token bucket's bounds: at most cap + burst requests in any sliding second
and cap/10 + burst in any 100 ms. A crawl that makes up passed slots after a
stall sends a clump and breaks the 100-ms bound.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.crawls import ROOT, crawl_command, crawl_env, run_crawl
from tests.support.services import REDIS_URL
from tests.support.stall_extension import STALLS
from tests.support.windows import CAP, assert_within_bounds, settings_for

#: Rates and delays measured in real time: `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing


def test_a_blocked_reactor_does_not_send_a_catch_up_clump(clean_arrival_server, mysql_url):
    ids = CAP * 5
    result = run_crawl("-a", f"end_id={ids}", settings=settings_for(clean_arrival_server, mysql_url, **STALLS))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'test/stalls': " in result.stderr
    assert_within_bounds(clean_arrival_server.arrivals(), CAP, ids)


def test_an_api_that_stalls_gets_no_backlog_when_it_recovers(clean_arrival_server, mysql_url):
    clean_arrival_server.hold(0.3, every=1.2)
    ids = CAP * 5
    result = run_crawl("-a", f"end_id={ids}", settings=settings_for(clean_arrival_server, mysql_url))
    assert result.returncode == 0, result.stderr[-3000:]
    assert_within_bounds(clean_arrival_server.arrivals(), CAP, ids)


def test_instances_sharing_redis_hold_the_bounds_through_stalls(clean_arrival_server, mysql_url, redis_prefix):
    cap, ids = CAP * 3 // 4, CAP * 4
    settings = settings_for(clean_arrival_server, mysql_url, cap, REDIS_URL=REDIS_URL,
                            REDIS_KEY_PREFIX=redis_prefix, **STALLS)
    processes = [subprocess.Popen(crawl_command("-a", f"end_id={ids}", settings=settings), cwd=ROOT,
                                  env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
    outputs = [p.communicate(timeout=180)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    assert_within_bounds(clean_arrival_server.arrivals(), cap, ids)
