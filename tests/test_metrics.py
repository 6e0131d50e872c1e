"""The Prometheus endpoint: off by default, on a free port with METRICS_PORT=0, live during a crawl."""

from __future__ import annotations

import queue
import re
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.config import ConfigError
from productcrawler.monitoring.metrics import PrometheusMetrics
from simulator import catalog
from tests.support.crawls import LoggedCrawl, crawl_command, crawl_env
from tests.support.services import mysql_query

if TYPE_CHECKING:
    from collections.abc import Iterator

# 127.0.0.1 must never go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
LOG_LINE = re.compile(r"Prometheus metrics at (http://127\.0\.0\.1:(\d+)/metrics)")

#: Every family the endpoint exposes, with its type (counters' samples end in _total).
FAMILIES = {
    "productcrawler_requests": "counter",
    "productcrawler_responses": "counter",  # label: status
    "productcrawler_retries": "counter",  # label: reason
    "productcrawler_products_stored": "counter",
    "productcrawler_products_missing": "counter",
    "productcrawler_products_failed": "counter",
    "productcrawler_ratelimit_wait_seconds": "counter",
    "productcrawler_ratelimit_effective_rate": "gauge",
    "productcrawler_ratelimit_budget_pace_requests_per_second": "gauge",
    "productcrawler_ratelimit_budget_remaining": "gauge",
    "productcrawler_ratelimit_budget_reset_seconds": "gauge",
    "productcrawler_ratelimit_budget_answers": "counter",
    "productcrawler_pass_ids_done": "gauge",
    "productcrawler_pass_ids_total": "gauge",
    "productcrawler_requests_in_flight": "gauge",
    "productcrawler_requests_waiting_for_slot": "gauge",
    "productcrawler_ratelimit_cap_requests_per_second": "gauge",
    "productcrawler_database_rows_written": "counter",  # label: table
    "productcrawler_database_write_errors": "counter",
    "productcrawler_database_up": "gauge",
    "productcrawler_pass_info": "gauge",  # label: pass_id
    "productcrawler_pass_start_time_seconds": "gauge",
    "productcrawler_request_duration_seconds": "histogram",  # label: outcome
    "productcrawler_database_batch_duration_seconds": "histogram",
}
#: Only with REDIS_URL.
REDIS_FAMILIES = {
    "productcrawler_redis_errors": "counter",
    "productcrawler_redis_up": "gauge",
    "productcrawler_redis_call_duration_seconds": "histogram",
}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape_text(url: str) -> str:
    with _OPENER.open(url, timeout=5) as response:
        return response.read().decode()


def families(text: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def samples_of(text: str) -> Samples:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(url: str) -> Samples:
    text = scrape_text(url)
    assert families(text) == FAMILIES
    return samples_of(text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def metrics() -> Iterator[PrometheusMetrics]:
    crawler = get_crawler(settings_dict={"METRICS_PORT": 0})
    extension = PrometheusMetrics.from_crawler(crawler)
    yield extension
    extension.stop()


# --- the component -----------------------------------------------------------


@pytest.mark.parametrize("port", [None, ""])
def test_off_unless_metrics_port_is_set(port: str | None) -> None:
    crawler = get_crawler(settings_dict={"METRICS_PORT": port})
    with pytest.raises(NotConfigured):
        PrometheusMetrics.from_crawler(crawler)


@pytest.mark.parametrize(("port", "message"), [("abc", "not an integer"), ("70000", "at most 65535"),
                                               ("-1", "at least 0")])
def test_invalid_port_is_an_error_naming_the_setting(port: str, message: str) -> None:
    crawler = get_crawler(settings_dict={"METRICS_PORT": port})
    with pytest.raises(ValueError, match=f"METRICS_PORT={port!r} .*{message}"):
        PrometheusMetrics.from_crawler(crawler)


@pytest.mark.parametrize(("linger", "message"), [("soon", "not a number"), ("-1", "at least 0")])
def test_invalid_linger_is_an_error_naming_the_setting(linger: str, message: str) -> None:
    crawler = get_crawler(settings_dict={"METRICS_PORT": 0, "METRICS_LINGER": linger})
    with pytest.raises(ValueError, match=f"METRICS_LINGER={linger!r} .*{message}"):
        PrometheusMetrics.from_crawler(crawler)


def test_port_zero_serves_on_a_free_port_logs_it_and_stops_at_close(
        caplog: pytest.LogCaptureFixture) -> None:
    # No other extension: spider_closed is sent below without a crawl having run.
    crawler = get_crawler(settings_dict={"METRICS_PORT": "0", "EXTENSIONS_BASE": {}})
    with caplog.at_level("INFO", logger="productcrawler.monitoring.metrics"):
        extension = PrometheusMetrics.from_crawler(crawler)  # kept: signals hold handlers weakly
    try:
        [message] = [m for name, _, m in caplog.record_tuples if name == "productcrawler.monitoring.metrics"]
        found = LOG_LINE.search(message)
        assert found and int(found[2]) > 0, message
        assert extension.url == found[1]
        text = scrape_text(found[1])
        assert families(text) == FAMILIES
        # Nothing counted yet: every unlabelled counter is there at 0.
        samples = samples_of(text)
        for name, kind in FAMILIES.items():
            if kind == "counter" and name not in ("productcrawler_responses", "productcrawler_retries",
                                                  "productcrawler_database_rows_written"):
                assert samples[(f"{name}_total", ())] == 0.0, name
        assert samples[("productcrawler_database_up", ())] == 1.0
        assert samples[("productcrawler_requests_in_flight", ())] == 0.0
        assert samples[("productcrawler_ratelimit_cap_requests_per_second", ())] == 500.0
    finally:
        crawler.signals.send_catch_log(signal=signals.spider_closed, spider=None, reason="finished")
    with pytest.raises(urllib.error.URLError):
        scrape(found[1])


def test_a_port_in_use_stops_the_crawl_with_the_setting_named(metrics: PrometheusMetrics) -> None:
    taken = metrics.url.rsplit(":", 1)[1].split("/")[0]
    crawler = get_crawler(settings_dict={"METRICS_PORT": taken})
    expected = f"METRICS_PORT={taken}: cannot listen on METRICS_ADDRESS=127.0.0.1 port {taken}: Address already"
    with pytest.raises(ConfigError, match=expected):
        PrometheusMetrics.from_crawler(crawler)


def test_values_come_from_the_crawl_stats(metrics: PrometheusMetrics) -> None:
    stats = metrics.crawler.stats
    stats.set_value("downloader/request_count", 12)
    stats.set_value("downloader/response_status_count/200", 8)
    stats.set_value("downloader/response_status_count/404", 1)
    stats.set_value("downloader/response_status_count/503", 3)
    stats.set_value("retry/reason_count/http_503", 3)
    stats.set_value(stat_keys.STORED, 8)
    stats.set_value(stat_keys.MISSING, 1)
    stats.set_value(stat_keys.RATELIMIT_WAIT_SECONDS, 0.25)
    stats.set_value(stat_keys.RATELIMIT_EFFECTIVE_RATE, 199.5)

    samples = scrape(metrics.url)
    assert value(samples, "productcrawler_requests_total") == 12
    assert value(samples, "productcrawler_responses_total", status="200") == 8
    assert value(samples, "productcrawler_responses_total", status="404") == 1
    assert value(samples, "productcrawler_responses_total", status="503") == 3
    assert value(samples, "productcrawler_retries_total", reason="http_503") == 3
    assert value(samples, "productcrawler_products_stored_total") == 8
    assert value(samples, "productcrawler_products_missing_total") == 1
    assert value(samples, "productcrawler_products_failed_total") == 0
    assert value(samples, "productcrawler_ratelimit_wait_seconds_total") == 0.25
    assert value(samples, "productcrawler_ratelimit_effective_rate") == 199.5
    # No spider yet: no pass to report on.
    assert value(samples, "productcrawler_pass_ids_total") == 0
    assert value(samples, "productcrawler_database_up") == 1
    assert value(samples, "productcrawler_database_rows_written_total", table="products") == 8
    assert value(samples, "productcrawler_database_rows_written_total", table="crawl_failures") == 1
    stats.set_value(stat_keys.DB_OUTAGE, 1)
    assert value(scrape(metrics.url), "productcrawler_database_up") == 0
    stats.set_value(stat_keys.DB_OUTAGE, 0)
    # A later scrape sees later values: nothing is cached.
    stats.inc_value(stat_keys.STORED, 5)
    assert value(scrape(metrics.url), "productcrawler_products_stored_total") == 13


def test_redis_families_only_with_redis_and_read_from_the_stats() -> None:
    crawler = get_crawler(settings_dict={"METRICS_PORT": 0, "REDIS_URL": "redis://127.0.0.1:6379/0"})
    extension = PrometheusMetrics.from_crawler(crawler)
    try:
        assert families(scrape_text(extension.url)) == {**FAMILIES, **REDIS_FAMILIES}
        crawler.stats.set_value(stat_keys.REDIS_ERRORS, 3)
        crawler.stats.set_value(stat_keys.REDIS_OUTAGE, 1)
        samples = samples_of(scrape_text(extension.url))
        assert value(samples, "productcrawler_redis_errors_total") == 3
        assert value(samples, "productcrawler_redis_up") == 0
    finally:
        extension.stop()


# --- the real crawl ----------------------------------------------------------

END = 600  # 3 s at 200/s: long enough to see the counts grow
#: The last id answers after SLOW seconds: while it is in flight every other id
#: is done and the numbers hold still long enough to compare with the database.
SLOW = 5.0


def test_crawl_exposes_live_metrics_that_match_the_database(clean_simulator, mysql_url) -> None:
    clean_simulator.set_faults(["503=10-19", f"slow={END}"], slow_delay=SLOW)
    command = crawl_command("-a", "start_id=1", "-a", f"end_id={END}",
                            settings={"MAX_REQUESTS_PER_SECOND": 200, "METRICS_PORT": 0,
                                      "RETRY_BACKOFF_BASE": 0.1, "RETRY_BACKOFF_MAX": 0.5})
    crawl = LoggedCrawl(command, crawl_env(API_BASE_URL=clean_simulator.base_url, DATABASE_URL=mysql_url))
    process, lines, log = crawl.process, crawl.lines, crawl.log
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline and process.poll() is None:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            found = LOG_LINE.search(line) if line is not None else None
            url = found[1] if found else None
        assert url is not None, "no metrics log line:\n" + "".join(log)[-3000:]

        missing = sum(1 for i in range(1, END + 1) if catalog.is_missing(i))
        stored_seen: list[float] = []
        settled: Samples | None = None
        deadline = time.monotonic() + 40
        while settled is None and time.monotonic() < deadline and process.poll() is None:
            samples = scrape(url)
            stored_seen.append(value(samples, "productcrawler_products_stored_total"))
            if value(samples, "productcrawler_pass_ids_done") == END - 1:
                settled = samples
                rows = mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0]
                missing_rows = mysql_query(
                    mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'missing'")[0][0]
            time.sleep(0.2)
        assert settled is not None, ("the crawl never reached its last id while the metrics were "
                                     "up:\n" + "".join(log)[-3000:])
        assert process.wait(timeout=30) == 0, "".join(log)[-3000:]
    finally:
        crawl.kill()

    # Counts grew while the crawl ran.
    assert stored_seen == sorted(stored_seen)
    assert len(set(stored_seen)) >= 3, stored_seen
    # While the last id was in flight the metrics agreed with the database.
    assert value(settled, "productcrawler_products_stored_total") == rows
    assert value(settled, "productcrawler_products_missing_total") == missing_rows == missing
    assert value(settled, "productcrawler_products_failed_total") == 0
    assert rows + missing_rows == END - 1
    assert value(settled, "productcrawler_pass_ids_total") == END
    assert value(settled, "productcrawler_retries_total", reason="http_503") == 10
    assert value(settled, "productcrawler_responses_total", status="503") == 10
    # Every id was requested once (the last one is still in flight), plus the ten retries.
    assert value(settled, "productcrawler_requests_total") == END + 10
    assert value(settled, "productcrawler_responses_total", status="404") == missing
    assert value(settled, "productcrawler_responses_total", status="200") == rows
    assert value(settled, "productcrawler_requests_total") == END + 10
    assert value(settled, "productcrawler_ratelimit_wait_seconds_total") > 0
    assert 0 < value(settled, "productcrawler_ratelimit_effective_rate") <= 200 * 1.1
    # And the crawl then finished the pass.
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0] == END - missing


def test_a_request_abandoned_before_it_was_sent_has_no_latency():
    # The guard had stopped the crawl (WholesaleFailureGuard.refuse_unsent): no send, no error to time.
    from scrapy import Request
    from scrapy.exceptions import DownloadTimeoutError, IgnoreRequest

    from productcrawler.instruments import Instruments
    from productcrawler.meta import ABANDONED as META_ABANDONED
    from productcrawler.monitoring.request_timing import RequestTiming

    histogram = Instruments().request_duration
    timing = RequestTiming(histogram)

    def observed(outcome: str) -> float:
        return next(sample.value for family in histogram.collect() for sample in family.samples
                    if sample.name.endswith("_count") and sample.labels["outcome"] == outcome)

    abandoned = Request("http://api.test/v1/product/7", meta={META_ABANDONED: True})
    timing.process_request(abandoned)
    timing.process_exception(abandoned, IgnoreRequest("not sent: the guard stopped the crawl"))
    sent = Request("http://api.test/v1/product/8")
    timing.process_request(sent)
    timing.process_exception(sent, DownloadTimeoutError("took too long"))
    assert (observed("error"), observed("timeout")) == (0, 1)
