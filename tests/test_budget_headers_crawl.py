"""Crawls of APIs that announce their budget: no 429 to find the limit, the budget spent, every product stored.

Judged at the imitations (tests/support/imitations/budgets.py), which enforce a real
quota by their own clock: the share of 429s, and the requests per second
between the first and the last arrival against the budget they announce.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.crawls import finish, start_crawl
from tests.support.imitations.budgets import BUDGETS, BudgetServers, missing, rate_of
from tests.support.services import REDIS_URL, mysql_query

pytestmark = pytest.mark.timing

SECONDS = 5.0  # of budget each crawl needs
MAX_429_SHARE = 0.01
MIN_BUDGET_SHARE = 0.90


@pytest.fixture(scope="session")
def budget_servers() -> Iterator[BudgetServers]:
    with BudgetServers() as servers:
        yield servers


def crawl(servers: BudgetServers, name: str, mysql_url: str, instances: int, redis_prefix: str,
          **extra: object) -> tuple[int, list[tuple[float, int, int]], list[str]]:
    servers.reset(name)
    end = int(rate_of(name) * SECONDS)
    settings = {"API_BASE_URL": servers.base_url(name), "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": 500,
                "PROGRESS_INTERVAL": 1, **extra}
    if instances > 1:
        settings.update({"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix})
    processes = [start_crawl("-a", f"end_id={end}", settings=settings) for _ in range(instances)]
    outputs = []
    for process in processes:
        code, output = finish(process)
        assert code == 0, output[-3000:]
        outputs.append(output)
    return end, servers.arrivals(name), outputs


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
    end, arrivals, outputs = crawl(budget_servers, name, mysql_url, instances, redis_prefix)
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
