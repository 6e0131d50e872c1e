"""Crawls of APIs that announce their budget: no 429 to find the limit, the budget spent, every product stored.

Judged at the imitations (tests/support/imitations/budgets.py), which enforce a real
quota by their own clock: the share of 429s, and the requests per second
between the first and the last arrival against the budget they announce.
Then APIs whose resets are absurd: under the default RATE_LIMIT_HEADERS_MAX_WAIT
the crawl still takes about the real budget's time, and an operator's stop does
not wait for them.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from productcrawler.budget.plan import QUOTA_MARGIN
from tests.support.crawls import finish, start_crawl
from tests.support.imitations.budgets import BUDGETS, BudgetServers, missing, rate_of
from tests.support.services import REDIS_URL, mysql_query

pytestmark = pytest.mark.timing

SECONDS = 5.0  # of budget each crawl needs
MAX_429_SHARE = 0.01
MIN_BUDGET_SHARE = 0.90
#: What an epoch-second reset costs by design (docs/rate-limit-headers.md): up to one second's share of the
#: first window's budget. Its crawl is measured over enough windows that this loss and the quota's margin
#: leave NOISE_SHARE of the budget between the design and the bound.
EPOCH_SECOND_LOSS = 1.0
NOISE_SHARE = 0.03
EPOCH_SECOND_FORMATS = ("x-ratelimit",)


def seconds_for(name: str) -> float:
    """Seconds of budget the crawl of ``name`` spends: (1 - margin) * D / (D + loss) >= bound + noise."""
    if name not in EPOCH_SECOND_FORMATS:
        return SECONDS
    floor = MIN_BUDGET_SHARE + NOISE_SHARE
    return max(SECONDS, EPOCH_SECOND_LOSS * floor / (1 - QUOTA_MARGIN - floor))


@pytest.fixture(scope="session")
def budget_servers() -> Iterator[BudgetServers]:
    with BudgetServers() as servers:
        yield servers


def settings_for(servers: BudgetServers, name: str, mysql_url: str, instances: int, redis_prefix: str,
                 **extra: object) -> dict[str, object]:
    settings = {"API_BASE_URL": servers.base_url(name), "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": 500,
                "PROGRESS_INTERVAL": 1, **extra}
    if instances > 1:
        settings.update({"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix})
    return settings


def crawl(servers: BudgetServers, name: str, mysql_url: str, instances: int, redis_prefix: str,
          seconds: float = SECONDS, timeout: float = 180,
          **extra: object) -> tuple[int, list[tuple[float, int, int]], list[str]]:
    servers.reset(name)
    end = int(rate_of(name) * seconds)
    settings = settings_for(servers, name, mysql_url, instances, redis_prefix, **extra)
    processes = [start_crawl("-a", f"end_id={end}", settings=settings) for _ in range(instances)]
    with ending(processes):
        outputs = []
        for process in processes:
            code, output = finish(process, timeout=timeout)
            assert code == 0, output[-3000:]
            outputs.append(output)
    return end, servers.arrivals(name), outputs


@contextmanager
def ending(processes: list[subprocess.Popen[str]]) -> Iterator[None]:
    """Kill the crawls still running when the block ends (a failed test's): none sends on to a later test's port."""
    try:
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()


def throughput(arrivals: list[tuple[float, int, int]]) -> float:
    times = sorted(at for at, _status, _id in arrivals)
    return (len(times) - 1) / (times[-1] - times[0])


def assert_all_stored(mysql_url: str, end: int) -> None:
    stored = [row[0] for row in mysql_query(mysql_url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == [i for i in range(1, end + 1) if not missing(i)]
    absent = [row[0] for row in mysql_query(mysql_url, "SELECT product_id FROM crawl_failures "
                                                       "WHERE outcome = 'missing' ORDER BY product_id")]
    assert absent == [i for i in range(1, end + 1) if missing(i)]


@pytest.mark.parametrize("instances", [1, 2], ids=["one-instance", "two-instances"])
@pytest.mark.parametrize("name", list(BUDGETS))
def test_the_announced_budget_is_spent_without_429s(budget_servers, name, instances, mysql_url, redis_prefix):
    end, arrivals, outputs = crawl(budget_servers, name, mysql_url, instances, redis_prefix,
                                   seconds=seconds_for(name))
    rejected = sum(status == 429 for _at, status, _id in arrivals)
    rate = throughput(arrivals)
    first = min(at for at, _status, _id in arrivals)
    when = [round(at - first, 2) for at, status, _id in arrivals if status == 429]
    print(f"{name} x{instances}: {len(arrivals)} requests, {rejected} 429s (at {when[:12]} s), "
          f"{rate:.1f}/s of {rate_of(name):g}/s")
    assert rejected <= MAX_429_SHARE * len(arrivals), (rejected, len(arrivals))
    assert rate >= MIN_BUDGET_SHARE * rate_of(name), (rate, rate_of(name))
    assert_all_stored(mysql_url, end)
    assert all(f"productcrawler/ratelimit/budget/format': '{name}'" in output for output in outputs)


def clamp_warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "WARNING" in line and "RATE_LIMIT_HEADERS_MAX_WAIT" in line]


@pytest.mark.parametrize("instances", [1, 2], ids=["one-instance", "two-instances"])
def test_a_reset_in_epoch_milliseconds_is_read_as_one(budget_servers, instances, mysql_url, redis_prefix):
    end, arrivals, outputs = crawl(budget_servers, "x-ratelimit-ms", mysql_url, instances, redis_prefix)
    rejected = sum(status == 429 for _at, status, _id in arrivals)
    first = min(at for at, _status, _id in arrivals)
    when = [round(at - first, 2) for at, status, _id in arrivals if status == 429]
    # When it fails (ci2 once, 584 of 1,584; never in 13 runs alone or under load), say when and what each
    # instance's budget said.
    said = [[line for line in output.splitlines() if "budget" in line][-12:] for output in outputs]
    for number, lines in enumerate(said):  # printed whole: an assertion's message is cut
        print(f"instance {number + 1}:", *lines, sep="\n  ")
    assert rejected <= MAX_429_SHARE * len(arrivals), (rejected, len(arrivals), when[:20], when[-5:], said)
    assert throughput(arrivals) >= MIN_BUDGET_SHARE * rate_of("x-ratelimit-ms"), throughput(arrivals)
    assert_all_stored(mysql_url, end)
    assert not any(clamp_warnings(output) for output in outputs)


ABSURD = {"absurd-delta": r"900000000", "absurd-epoch-s": r"[0-9]{10}", "absurd-epoch-ms": r"[0-9]{13}"}


@pytest.mark.parametrize("instances", [1, 2], ids=["one-instance", "two-instances"])
@pytest.mark.parametrize("name", list(ABSURD))
def test_an_absurd_reset_slows_the_crawl_no_more_than_the_real_budget(
        budget_servers, name, instances, mysql_url, redis_prefix):
    # The real budget: 200 per 1-s window; every answer tells the true remaining count and says its reset is
    # 10^9 s (31 years) away. Under the default RATE_LIMIT_HEADERS_MAX_WAIT (300 s), spreading that count over
    # the clamped reset would take 600 ids at 0.66/s: 15 minutes.
    seconds = 3.0
    started = time.monotonic()
    end, arrivals, outputs = crawl(budget_servers, name, mysql_url, instances, redis_prefix, seconds=seconds,
                                   timeout=30)
    elapsed = time.monotonic() - started
    rejected = sum(status == 429 for _at, status, _id in arrivals)
    times = sorted(at for at, _status, _id in arrivals)
    print(f"{name} x{instances}: {len(arrivals)} requests, {rejected} 429s, "
          f"{times[-1] - times[0]:.1f} s at the API, {elapsed:.1f} s in all")
    assert_all_stored(mysql_url, end)
    assert rejected <= MAX_429_SHARE * len(arrivals), (rejected, len(arrivals))
    # What is left goes at the cap, then a probe a second after the last request finds the next window:
    # at most twice the real budget's time.
    assert times[-1] - times[0] <= 2 * seconds, times[-1] - times[0]
    for output in outputs:
        warnings = clamp_warnings(output)
        assert len(warnings) == 1, warnings
        assert re.search(f"X-RateLimit-Reset: {ABSURD[name]} announces a reset", warnings[0]), warnings


@pytest.mark.parametrize("instances", [1, 2], ids=["one-instance", "two-instances"])
def test_a_stop_does_not_wait_for_an_announced_reset(budget_servers, instances, mysql_url, redis_prefix):
    # What one broken answer said, in every answer: nothing left, "reset in 900000000 s". With the
    # default longest wait (300 s) the crawl waits, probing at doubling intervals; an operator stops it.
    budget_servers.reset("stalling")
    settings = settings_for(budget_servers, "stalling", mysql_url, instances, redis_prefix)
    end = 30
    processes = [start_crawl("-a", f"end_id={end}", settings=settings) for _ in range(instances)]
    with ending(processes):
        deadline = time.monotonic() + 60
        while not (arrivals := budget_servers.arrivals("stalling")) or time.time() - arrivals[-1][0] < 2.0:
            assert time.monotonic() < deadline, "the crawl never started waiting"
            assert all(process.poll() is None for process in processes), finish(processes[0])[1][-3000:]
            time.sleep(0.2)
        assert len(arrivals) < end  # it waits: the ids are not all fetched
        print(f"waiting after {len(arrivals)} requests, {time.monotonic() - deadline + 60:.1f} s in")
        # SIGTERM (docker stop, Kubernetes) and SIGINT (Ctrl-C): both stop gracefully.
        for process, sent in zip(processes, (signal.SIGTERM, signal.SIGINT), strict=False):
            process.send_signal(sent)
        stopped = time.monotonic()
        for process in processes:
            code, output = finish(process, timeout=60)
            assert time.monotonic() - stopped < 5, output[-3000:]
            assert code == 0, output[-3000:]
    # Read again: a probe may have gone between the look above and the stop.
    answered = sorted(product_id for _at, status, product_id in budget_servers.arrivals("stalling")
                      if status == 200)
    assert [row[0] for row in mysql_query(mysql_url, "SELECT product_id FROM products ORDER BY product_id")] \
        == answered
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome <> 'missing'") == [(0,)]
    print(f"stopped in {time.monotonic() - stopped:.1f} s")
    # The next run, with a short longest wait, fetches the rest.
    started = time.monotonic()
    processes = [start_crawl("-a", f"end_id={end}", settings={**settings, "RATE_LIMIT_HEADERS_MAX_WAIT": 0.5})
                 for _ in range(instances)]
    with ending(processes):
        for process in processes:
            code, output = finish(process, timeout=120)
            assert code == 0, output[-3000:]
    print(f"the next run took {time.monotonic() - started:.1f} s")
    assert_all_stored(mysql_url, end)
