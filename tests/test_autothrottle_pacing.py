"""AutoThrottle's contract kept, with the token bucket doing the pacing (BucketAutoThrottle)."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.http import Request, Response
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from productcrawler.ratelimit.autothrottle import BucketAutoThrottle
from productcrawler.ratelimit.middleware import RateLimitMiddleware
from tests.support.crawls import run_crawl
from tests.support.doubles import engine_with


def build(**settings: Any) -> tuple[BucketAutoThrottle, RateLimitMiddleware]:
    values = {"DOWNLOAD_HANDLERS": get_project_settings().getdict("DOWNLOAD_HANDLERS"),
              "MAX_REQUESTS_PER_SECOND": 500, "AUTOTHROTTLE_ENABLED": True,
              "AUTOTHROTTLE_TARGET_CONCURRENCY": 4, "AUTOTHROTTLE_START_DELAY": 0, **settings}
    crawler = get_crawler(settings_dict=values)
    limit = RateLimitMiddleware.from_crawler(crawler)
    throttle = BucketAutoThrottle.from_crawler(crawler)
    engine_with(crawler, limit)
    throttle.spider_opened()
    return throttle, limit


def downloaded(throttle: BucketAutoThrottle, latency: float, status: int = 200) -> None:
    request = Request("http://api.test/product/1", meta={"download_latency": latency})
    throttle.response_downloaded(Response(request.url, status=status), request)


def test_latency_sets_the_buckets_pace_by_autothrottles_rule() -> None:
    throttle, limit = build()
    assert limit.limiter.bucket.pace is None  # START_DELAY 0: the cap
    downloaded(throttle, 0.2)  # target delay 0.05: above the mean, taken at once
    assert throttle.delay == pytest.approx(0.05)
    assert limit.limiter.bucket.effective_rate() == pytest.approx(20)
    downloaded(throttle, 0.04)  # target 0.01: the mean of 0.05 and 0.01
    assert throttle.delay == pytest.approx(0.03)
    downloaded(throttle, 0.0, status=404)  # an error page does not lower it
    assert throttle.delay == pytest.approx(0.03)
    for _ in range(30):
        downloaded(throttle, 0.001)  # a fast API: 4000/s, the cap rules
    assert limit.limiter.bucket.effective_rate() == pytest.approx(500)


def test_max_delay_and_min_delay_bound_the_pace() -> None:
    throttle, limit = build(AUTOTHROTTLE_MAX_DELAY=0.1, DOWNLOAD_DELAY=0.01)
    downloaded(throttle, 10.0)
    assert limit.limiter.bucket.effective_rate() == pytest.approx(10)
    for _ in range(30):
        downloaded(throttle, 0.0001)
    assert limit.limiter.bucket.effective_rate() == pytest.approx(100)


def test_disabled_and_invalid_settings() -> None:
    with pytest.raises(NotConfigured):
        build(AUTOTHROTTLE_ENABLED=False)
    with pytest.raises(ValueError, match="AUTOTHROTTLE_TARGET_CONCURRENCY=0.0"):
        build(AUTOTHROTTLE_TARGET_CONCURRENCY=0)


@pytest.mark.timing
def test_a_slowing_api_slows_the_crawl(clean_arrival_server, mysql_url):
    # From id 401 on the API answers in 100 ms: AutoThrottle's target with a
    # target concurrency of 4 is 40 requests/second, where 64 requests in
    # flight would otherwise still reach the cap of 200.
    cap, target, latency = 200, 4, 0.1
    clean_arrival_server.slow(from_id=401, seconds=latency)
    settings = {"API_BASE_URL": clean_arrival_server.base_url, "DATABASE_URL": mysql_url,
                "MAX_REQUESTS_PER_SECOND": cap, "AUTOTHROTTLE_TARGET_CONCURRENCY": target}
    result = run_crawl("-a", "end_id=700", settings=settings)
    assert result.returncode == 0, result.stderr[-3000:]
    arrivals = sorted(clean_arrival_server.arrivals_by_id())
    fast = [t for t, i in arrivals if 50 < i <= 400]
    slow = [t for t, i in arrivals if i > 500]
    fast_rate = (len(fast) - 1) / (fast[-1] - fast[0])
    slow_rate = (len(slow) - 1) / (slow[-1] - slow[0])
    assert target / latency * 0.5 <= slow_rate <= target / latency * 1.5, (fast_rate, slow_rate)
    assert fast_rate >= 2 * slow_rate, (fast_rate, slow_rate)
