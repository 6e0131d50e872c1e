"""The rate cap inside real crawls, judged by the simulator's arrival record.

The simulator rejects (429, fault ``rate_limited``) anything above its own
limit, set 5 % above our cap as the issue's benchmark does. Rates are kept
well under what this 2-core CI machine can drive; ``bench/`` measures 500/s.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from productcrawler.config import burst_for_rate
from tests.support.crawls import ROOT, crawl_command, crawl_env, finish, run_crawl, start_crawl
from tests.support.services import REDIS_URL
from tests.support.windows import max_in_window

#: Rates and delays measured in real time: `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing

CAP = 150

#: The cap is held: judged from the busiest 1-second window of the arrival
#: record (cap + burst; for two instances the simulator's own 5 % tolerance, as
#: a starved simulator stamps arrivals in clumps). The rate is not throttled far
#: below the cap: a loose floor, since how close a crawl gets to the cap depends
#: on the machine (a loaded 2-core box drove 0.85-0.95 of it). A limiter that
#: grants a fraction of the tokens it should (say a rate halved twice, or a
#: refill per 2 s) misses half the cap whatever the machine; one that is off
#: breaks the ceiling instead.
NOT_THROTTLED = 0.5


def steady_rate(times: list[float]) -> float:
    times = sorted(times)
    trimmed = [t for t in times if times[0] + 0.5 <= t <= times[-1] - 0.5]
    return (len(trimmed) - 1) / (trimmed[-1] - trimmed[0])


def settings_for(simulator, mysql_url, **extra: object) -> dict[str, object]:
    return {"API_BASE_URL": simulator.base_url, "DATABASE_URL": mysql_url,
            "MAX_REQUESTS_PER_SECOND": CAP, **extra}


def test_one_instance_holds_the_cap_in_every_second(clean_simulator, mysql_url):
    clean_simulator.set_faults([], rate_limit=CAP * 1.05)
    result = run_crawl("-a", f"end_id={CAP * 4}", settings=settings_for(clean_simulator, mysql_url))
    assert result.returncode == 0, result.stderr[-3000:]
    arrivals = clean_simulator.arrivals()
    assert [a for a in arrivals if a[3] == "rate_limited"] == []
    times = [a[0] for a in arrivals]
    assert max_in_window(times) <= CAP + burst_for_rate(CAP), max_in_window(times)
    assert steady_rate(times) >= CAP * NOT_THROTTLED, steady_rate(times)
    assert "productcrawler/ratelimit/waits" in result.stderr


def test_two_instances_sharing_redis_hold_the_cap_together(clean_simulator, mysql_url, redis_prefix):
    # A lower cap: two crawlers, the simulator, MariaDB and Redis share 2 cores
    # here, and a starved simulator stamps arrivals late, in clumps.
    cap = CAP * 2 // 3
    clean_simulator.set_faults([], rate_limit=cap * 1.05)
    settings = settings_for(clean_simulator, mysql_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix,
                            MAX_REQUESTS_PER_SECOND=cap)
    processes = [subprocess.Popen(crawl_command("-a", f"end_id={cap * 6}", settings=settings), cwd=ROOT,
                                  env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
    outputs = [p.communicate(timeout=180)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    arrivals = clean_simulator.arrivals()
    assert [a for a in arrivals if a[3] == "rate_limited"] == []
    times = [a[0] for a in arrivals]
    assert max_in_window(times) <= cap * 1.05, max_in_window(times)
    assert steady_rate(times) >= cap * NOT_THROTTLED, steady_rate(times)


def rate_between(times: list[float], start: float, end: float) -> float:
    """Requests per second that arrived in [start, end)."""
    return sum(start <= t < end for t in times) / (end - start)


#: The 429 backoff tests run below CAP, so that even a loaded machine drives the full rate
#: before the backoff: the ratio after/before is then the bucket's factor.
BACKOFF_CAP = 100


def test_429s_back_the_rate_off_and_are_logged_once(clean_simulator, mysql_url):
    # One 429 after 1.5 s at the full rate; the rate then recovers by only 2 % of
    # the cap a second, so the next seconds run at about half of it (measured from
    # 1.5 s on: the requests that already hold a slot go out at the old pace).
    # The 300 ids after it take about 6 s at half the cap, 3 s at the full cap.
    clean_simulator.set_faults(["429s=150"], retry_after=1)
    result = run_crawl("-a", "end_id=450", settings=settings_for(clean_simulator, mysql_url,
                                                                  MAX_REQUESTS_PER_SECOND=BACKOFF_CAP))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("no more backoff messages will be shown") == 1
    arrivals = clean_simulator.arrivals()
    times = [a[0] for a in arrivals]
    hit = next(a[0] for a in arrivals if a[2] == 429)
    assert times[-1] >= hit + 3.3, "the record ends before the rate after the 429 can be measured"
    before = rate_between(times, times[0] + 0.3, hit)
    after = rate_between(times, hit + 0.3, hit + 3.3)
    assert 0.35 <= after / before <= 0.75, (before, after)
    assert after <= 0.65 * BACKOFF_CAP, (before, after)


def test_a_429_slows_every_instance_through_redis_to_the_floor_and_back_gradually(
        clean_simulator, mysql_url, redis_prefix):
    """Two instances share one bucket: docs/passes.md's promise, measured in the arrival record.

    Id 150 answers 429 once (the shared rate halves); every 4th id of 400-479
    answers 429 once (for about 8 s at the floor's pace, repeated halvings
    would take the rate far below its 10 % floor if there were none); then
    it recovers by 2 % of the cap a second. Requests already holding a slot
    when a backoff lands still go out at the old pace, and only a 429 for a
    slot granted after the last backoff halves again: each instance books up
    to CONCURRENT_REQUESTS slots ahead, so that is kept at 8 here (plenty
    for 100/s) to let the halvings follow each other within a second or so.
    Windows are placed well after the events that cause them.
    """
    cap, dense = BACKOFF_CAP, range(400, 480, 4)
    clean_simulator.set_faults(["429s=150", "429s=" + ",".join(map(str, dense))], retry_after=1)
    settings = settings_for(clean_simulator, mysql_url, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix,
                            MAX_REQUESTS_PER_SECOND=cap, CONCURRENT_REQUESTS=8, CONCURRENT_REQUESTS_PER_DOMAIN=8)
    processes = [start_crawl("-a", "end_id=3000", settings=settings) for _ in range(2)]
    try:
        # The last window measured below ends 11 s after the last 429.
        arrivals = watch_until_recovered(clean_simulator, processes, dense, recovery=11.5)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
    for process in processes:
        code, output = finish(process, timeout=60)
        assert code == 0, output[-3000:]
    times = [a[0] for a in arrivals]
    rejected = [(a[0], a[1]) for a in arrivals if a[2] == 429]
    assert {i for _, i in rejected} == {150, *dense}, rejected

    # Halved, for both instances together: the other instance does not take up the slack.
    first = rejected[0][0]
    before = rate_between(times, times[0] + 0.3, first)
    halved = rate_between(times, first + 1.5, first + 3.5)
    assert 0.35 <= halved / before <= 0.75, (before, halved)
    assert halved <= 0.65 * cap, (before, halved)

    # Floor: once the 429s keep coming, the slowest 2 s stay near 10 % of the cap, not below it.
    dense_first, last = next(at for at, i in rejected if i in dense), rejected[-1][0]
    starts = [dense_first + k * 0.25 for k in range(int((last + 2 - dense_first) / 0.25))]
    slowest, slowest_at = min((rate_between(times, t, t + 2), t) for t in starts)
    assert 0.07 * cap <= slowest <= 0.3 * cap, (slowest, slowest_at - dense_first)

    # Recovery after the last 429: gradual, by about 2 % of the cap a second (+16 % in 8 s),
    # not back to the cap at once.
    assert times[-1] >= last + 11, "the record ends before the recovery can be measured"
    early, late = rate_between(times, last + 1, last + 3), rate_between(times, last + 9, last + 11)
    assert early + 0.06 * cap <= late <= 0.6 * cap, (early, late)


def watch_until_recovered(simulator, processes, dense: range, recovery: float) -> list:
    """The arrival record, once every dense id has had its 429 and ``recovery`` seconds have passed."""
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        for process in processes:
            assert process.poll() is None, finish(process)[1][-3000:]
        arrivals = simulator.arrivals()
        rejected = [a for a in arrivals if a[2] == 429]
        if {a[1] for a in rejected} >= set(dense) and arrivals[-1][0] >= rejected[-1][0] + recovery:
            return arrivals
        time.sleep(0.5)
    raise AssertionError("the dense 429s and the recovery after them did not happen within 150 s")
