"""A crawl with REDIS_URL talks to Redis through one client: one connection pool, named for the instance.

The shared pass, the rate limit's bucket, the announced budget and the
proxies' health all use Redis in a crawl with proxies; each built a client
of its own from REDIS_URL before: four connection pools per crawler. The
crawl below names its client through REDIS_URL (``client_name``, which wins
over the crawl's own name). The server's ``CLIENT LIST`` read mid-crawl shows
the name reached it, but it lists connections, which one pool opens as its
calls overlap (at the start, the pool's first sync, the pass opening and the
budget's probes go together): 2 to 6 on one pool, 7 on main's four. So the
pools themselves are counted in the crawl's process
(``tests/support/counted_pools.py``): one, four on main's code.
"""

from __future__ import annotations

import ast
import re
import sys
import time
import uuid

import redis
from scrapy.utils.test import get_crawler

from productcrawler.redis_connection import client_name, crawler_redis
from tests.support.crawls import LoggedCrawl
from tests.support.services import PROXY_PASSWORD, PROXY_USER, REDIS_URL, stored_count

END = 600  # ids: six seconds at the cap, enough to look at the connections mid-crawl
CAP = 100


def connections_named(name: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(1 for entry in client.client_list() if entry.get("name") == name)
    finally:
        client.close()


def test_a_crawl_with_redis_opens_one_connection_pool(clean_simulator, mysql_url, proxies, redis_prefix):
    name = f"pctest-{uuid.uuid4().hex[:12]}"
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": CAP,
                "REDIS_URL": f"{REDIS_URL}?client_name={name}", "REDIS_KEY_PREFIX": redis_prefix,
                "PROXY_URLS": ",".join(proxies.urls(user=PROXY_USER, password=PROXY_PASSWORD))}
    command = [sys.executable, "-m", "tests.support.counted_pools", "crawl", "products", "-a", f"end_id={END}"]
    for setting, value in settings.items():
        command += ["-s", f"{setting}={value}"]
    crawl = LoggedCrawl(command)
    try:
        deadline = time.monotonic() + 60
        while stored_count(mysql_url) < 100:  # every component has called Redis by now
            assert crawl.process.poll() is None, "".join(crawl.log)[-3000:]
            assert time.monotonic() < deadline, "the crawl made no progress"
            time.sleep(0.1)
        connections = connections_named(name)
        assert crawl.process.poll() is None, "the crawl ended before its connections were counted"
        code, log = crawl.wait()
    finally:
        crawl.kill()
    assert code == 0, log[-3000:]
    assert "productcrawler/proxy/requests/" in log  # the proxies' health was shared through Redis
    assert connections >= 1  # the crawl's connections carry its client's name
    pools = re.search(r"redis pools: (\{.*\})", log)
    assert pools is not None, log[-3000:]
    assert ast.literal_eval(pools[1]).get(name) == 1, pools[1]


def test_the_crawlers_client_is_named_for_the_instance_and_built_once() -> None:
    crawler = get_crawler()
    client = crawler_redis(crawler, REDIS_URL)
    assert crawler_redis(crawler, REDIS_URL) is client
    assert client.connection_pool.connection_kwargs["client_name"] == client_name()
    assert client_name().startswith("productcrawler:")
