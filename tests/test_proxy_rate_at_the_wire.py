"""Each proxy's cap holds where the proxy provider counts it, judged by an independent arrival clock.

The crawl's ``PROXY_URLS`` are the arrival server's proxy ports
(``tests/support/arrival_server.py``): each stamps the requests sent to that proxy
with the kernel's receive time. The proxies are the limit here (three of
20/s under a global cap of 100/s), so each proxy's bucket is what paces its
requests: at most cap + burst of them in any sliding second and cap/10 +
burst in any 100 ms, the global cap's rules applied to
``PROXY_MAX_REQUESTS_PER_SECOND``. (When the global cap is the limit instead,
a proxy's slot is taken before the global one and requests can reach a proxy
up to two more per 100 ms than that, and a stalled reactor one more; per
second the proxy's cap still holds. docs/proxies.md.)
"""

from __future__ import annotations

import itertools
import subprocess

import pytest

from productcrawler.config import burst_for_rate
from tests.support.crawls import ROOT, crawl_command, crawl_env
from tests.support.services import REDIS_URL
from tests.support.stall_extension import STALLS
from tests.support.windows import assert_within_bounds, max_in_window, settings_for

#: Rates and delays measured in real time: `make test` runs these alone (see pyproject.toml).
pytestmark = pytest.mark.timing

GLOBAL_CAP, PROXY_CAP, PROXIES = 100, 20, 3
IDS = PROXIES * PROXY_CAP * 6  # about 6 s at the proxies' pace


def crawl_through_proxies(server, mysql_url, instances: int = 1, **extra: object) -> list[list[float]]:
    """Each proxy's arrival times, after checking the global bounds on all of them."""
    settings = settings_for(server, mysql_url, GLOBAL_CAP, PROXY_URLS=",".join(server.proxy_urls),
                            PROXY_MAX_REQUESTS_PER_SECOND=PROXY_CAP, **extra)
    processes = [subprocess.Popen(crawl_command("-a", f"end_id={IDS}", settings=settings), cwd=ROOT,
                                  env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(instances)]
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    assert [p.returncode for p in processes] == [0] * instances, "".join(o[-2000:] for o in outputs)
    by_proxy = server.arrivals_by_proxy()
    assert_within_bounds(list(itertools.chain(*by_proxy)), GLOBAL_CAP, IDS)
    return by_proxy


def assert_each_proxy_within_bounds(by_proxy: list[list[float]], running: float = 1.0, late: int = 0) -> None:
    """Each proxy within its caps (``late`` more in 100 ms); together at 80 % of their caps or more, in the
    ``running`` share of the time."""
    burst = burst_for_rate(PROXY_CAP)
    assert len(by_proxy) == PROXIES
    assert all(len(times) >= IDS // (PROXIES + 1) for times in by_proxy), [len(times) for times in by_proxy]
    windows = [(max_in_window(times, 1.0), max_in_window(times, 0.1)) for times in by_proxy]
    assert all(second <= PROXY_CAP + burst for second, _ in windows), windows
    assert all(tenth <= PROXY_CAP / 10 + burst + late for _, tenth in windows), windows
    # Paced at its cap, not slower: the three proxies together, over the whole crawl, in the time the
    # reactor runs (a stalled one sends nothing, and a slot it missed is not made up for afterwards).
    span = max(max(times) for times in by_proxy) - min(min(times) for times in by_proxy)
    assert (IDS - 1) / span >= 0.8 * running * PROXIES * PROXY_CAP, span


def test_each_proxy_keeps_to_its_cap_at_the_wire_when_the_api_stalls(clean_arrival_server, mysql_url):
    clean_arrival_server.hold(0.3, every=1.2)
    assert_each_proxy_within_bounds(crawl_through_proxies(clean_arrival_server, mysql_url))


def test_each_proxy_keeps_to_its_cap_at_the_wire_when_the_reactor_stalls(clean_arrival_server, mysql_url):
    # A stall of 0.15 s on average after every 0.7 s of running: the reactor runs 82 % of the time.
    # (Judged against the whole time, 80 % of the caps was within 3 % of the most it can do: it failed
    # a CI run at 76 %, 45.4 requests/s.) A request that had its proxy's slot and was waiting for the
    # global one when the reactor stalled goes out after the stall beside the proxy's next slot: one
    # more in that 100 ms (4 where cap/10 + burst is 3, in 3 of 23 runs; docs/proxies.md).
    stall = (float(STALLS["STALL_MIN"]) + float(STALLS["STALL_MAX"])) / 2
    running = float(STALLS["STALL_EVERY"]) / (float(STALLS["STALL_EVERY"]) + stall)
    assert_each_proxy_within_bounds(crawl_through_proxies(clean_arrival_server, mysql_url, **STALLS),
                                    running, late=1)


def test_instances_sharing_redis_keep_each_proxy_to_its_cap_at_the_wire(clean_arrival_server, mysql_url,
                                                                         redis_prefix):
    clean_arrival_server.hold(0.3, every=1.2)
    # Two instances, one pass and the same buckets (the global one and each proxy's) in Redis.
    assert_each_proxy_within_bounds(crawl_through_proxies(clean_arrival_server, mysql_url, instances=2,
                                                          REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix))
