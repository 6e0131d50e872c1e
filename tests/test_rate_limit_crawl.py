"""The rate cap inside real crawls, judged by the simulator's arrival record.

The simulator rejects (429, fault ``rate_limited``) anything above its own
limit, set 5 % above our cap as the issue's benchmark does. Rates are kept
well under what this 2-core CI machine can drive; ``bench/`` measures 500/s.
"""

from __future__ import annotations

import subprocess

from tests.conftest import REDIS_URL, ROOT, crawl_command, crawl_env, run_crawl
from tests.windows import max_in_window

CAP = 150


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
    assert max_in_window(times) <= CAP * 1.05
    assert steady_rate(times) >= CAP * 0.9
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
    assert max_in_window(times) <= cap * 1.05
    assert steady_rate(times) >= cap * 0.85


def test_429s_back_the_rate_off_and_are_logged_once(clean_simulator, mysql_url):
    clean_simulator.set_faults(["429s=50-59"], retry_after=1)
    result = run_crawl("-a", "end_id=300", settings=settings_for(clean_simulator, mysql_url))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("no more backoff messages will be shown") == 1
    assert "'productcrawler/ratelimit/responses_429': 10" in result.stderr
