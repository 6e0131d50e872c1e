"""An optional Prometheus endpoint per crawl process, off unless METRICS_PORT is set.

Counts are read from the crawl stats when Prometheus scrapes, by a collector
registered in a registry of this crawler's own, and so are the gauges (requests
in flight and waiting for a rate-limit slot, database and Redis state, the
pass): nothing is counted twice and nothing runs per request for them. The
only per-request work is the latency histogram (``instruments.py``, observed
by ``monitoring/request_timing.py``). prometheus-client serves ``/metrics``
from a daemon thread of its own, which never touches the reactor.

``METRICS_PORT=0`` picks a free port; the log line ``Prometheus metrics at
http://ADDRESS:PORT/metrics`` gives the real one. ``METRICS_ADDRESS`` (default
127.0.0.1) is the address to listen on; ``0.0.0.0`` in a container.
``METRICS_LINGER`` keeps the endpoint up that many seconds after the spider
closes (default 0), so that Prometheus scrapes a short job's final values.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet.task import deferLater

from productcrawler import stat_keys
from productcrawler.config import ConfigError, CrawlConfig
from productcrawler.config.crawler import crawl_config
from productcrawler.instruments import crawl_instruments
from productcrawler.monitoring.traffic_stats import REQUEST_COUNT, RESPONSE_STATUS_PREFIX
from productcrawler.passes.crawler import built_pass
from productcrawler.proxies.metrics import ProxyStatsCollector
from productcrawler.ratelimit.middleware import RateLimitMiddleware

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterator
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.metrics_core import Metric
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

NAMESPACE = "productcrawler"

#: Scrapy's ``retry/*`` stats; ``downloader/*`` counts come from TrafficStats.
RETRY_REASON_PREFIX = "retry/reason_count/"


class CrawlStatsCollector:
    """Builds the metric families from a snapshot of the crawl stats at scrape time."""

    def __init__(self, crawler: Crawler, config: CrawlConfig) -> None:
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.config = config
        self._rate_limit: RateLimitMiddleware | None = None
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)

    def _engine_started(self) -> None:
        # The downloader's middlewares exist once the engine does; a scrape before this shows no waits.
        self._rate_limit = self.crawler.get_downloader_middleware(RateLimitMiddleware)

    def describe(self) -> list[Metric]:
        # Names only, so that the registry never calls collect() at registration.
        return [*self._families({}, None), *self._state_families({}, None)]

    def collect(self) -> Iterator[Metric]:
        # Runs on the metrics server's thread while the reactor thread updates
        # the stats: dict() copies the dict in one step under the GIL, so the
        # loops below never see it change size.
        snapshot = dict(self.stats.get_stats())
        crawl_pass = built_pass(self.crawler)
        yield from self._families(snapshot, crawl_pass)
        yield from self._state_families(snapshot, crawl_pass)

    def _families(self, stats: dict[str, object], crawl_pass: Any) -> Iterator[Metric]:
        def number(key: str) -> float:
            return _stat(stats, key)

        def counter(name: str, documentation: str, key: str) -> CounterMetricFamily:
            return _counter(name, documentation, number(key))

        yield counter("requests", "Requests sent to the API (retries included).", REQUEST_COUNT)
        responses = CounterMetricFamily(f"{NAMESPACE}_responses", "API responses by HTTP status.",
                                        labels=["status"])
        retries = CounterMetricFamily(f"{NAMESPACE}_retries", "Retries scheduled, by reason.",
                                      labels=["reason"])
        for key in sorted(stats):
            if key.startswith(RESPONSE_STATUS_PREFIX):
                responses.add_metric([key[len(RESPONSE_STATUS_PREFIX):]], number(key))
            elif key.startswith(RETRY_REASON_PREFIX):
                retries.add_metric([key[len(RETRY_REASON_PREFIX):]], number(key))
        yield responses
        yield retries
        yield counter("products_stored", "Products written to the database in this run.",
                      stat_keys.STORED)
        yield counter("products_missing", "Ids the API answered 404 for in this run.",
                      stat_keys.MISSING)
        yield counter("products_failed", "Ids given up on (retries used up) in this run.",
                      stat_keys.FAILED)
        yield counter("ratelimit_wait_seconds", "Seconds requests waited for a rate-limit token.",
                      stat_keys.RATELIMIT_WAIT_SECONDS)
        rate = GaugeMetricFamily(f"{NAMESPACE}_ratelimit_effective_rate",
                                 "Requests per second let through by the rate limiter, recently.")
        rate.add_metric([], number(stat_keys.RATELIMIT_EFFECTIVE_RATE))
        yield rate
        yield from _budget_families(stats)

        # Before the spider opens its crawl_pass both are 0.
        total = float(getattr(crawl_pass, "total", 0))
        done = 0.0
        if crawl_pass is not None:
            done = float(crawl_pass.done(int(sum(
                number(key) for key in (stat_keys.STORED, stat_keys.MISSING, stat_keys.FAILED)))))
        done_family = GaugeMetricFamily(
            f"{NAMESPACE}_pass_ids_done",
            "Ids of the pass with an outcome (all instances, when they share a Redis).")
        done_family.add_metric([], done)
        yield done_family
        total_family = GaugeMetricFamily(f"{NAMESPACE}_pass_ids_total", "Ids in the pass.")
        total_family.add_metric([], total)
        yield total_family

    def _state_families(self, stats: dict[str, object], crawl_pass: Any) -> Iterator[Metric]:
        """What the crawl is doing now, the database and Redis, and which pass this is."""

        def count(key: str) -> float:
            return _stat(stats, key)

        yield _gauge("requests_in_flight", "Requests sent to the API and not answered yet.",
                    self._in_flight())
        yield _gauge("requests_waiting_for_slot", "Requests waiting for a rate-limit slot.",
                    float(getattr(self._rate_limit, "waiting", 0)))
        yield _gauge("ratelimit_cap_requests_per_second",
                    "MAX_REQUESTS_PER_SECOND: the cap shared by every instance of the pass.",
                    self.config.rate.max_requests_per_second)

        rows = CounterMetricFamily(f"{NAMESPACE}_database_rows_written", "Rows committed, by table.",
                                   labels=["table"])
        rows.add_metric(["products"], count(stat_keys.STORED))
        rows.add_metric(["crawl_failures"], count(stat_keys.MISSING) + count(stat_keys.FAILED))
        yield rows
        yield _counter("database_write_errors", "Batch writes that failed (and were retried).",
                       count(stat_keys.DB_WRITE_ERRORS))
        yield _gauge("database_up", "0 while the database is unreachable (writes held and retried), else 1.",
                    1.0 - count(stat_keys.DB_OUTAGE))
        if self.config.redis.url is not None:
            yield _counter("redis_errors", "Calls of the shared scheduler to Redis that failed.",
                           count(stat_keys.REDIS_ERRORS))
            yield _gauge("redis_up", "0 while Redis is unreachable (calls retried), else 1.",
                        1.0 - count(stat_keys.REDIS_OUTAGE))

        info = GaugeMetricFamily(f"{NAMESPACE}_pass_info", "The pass this instance works on (value 1).",
                                 labels=["pass_id"])
        pass_id = getattr(crawl_pass, "pass_id", None)
        if pass_id is not None:
            info.add_metric([str(pass_id)], 1.0)
        yield info
        yield _gauge("pass_start_time_seconds", "When the pass began, in Unix seconds (0 before it opens).",
                    float(getattr(crawl_pass, "started_at", None) or 0.0))

    def _downloader(self) -> Any:
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not set before the crawl starts
            return None
        return getattr(engine, "downloader", None)

    def _in_flight(self) -> float:
        """Requests in the download slots' hands (Scrapy's own record of what is on the wire)."""
        downloader = self._downloader()
        if downloader is None:
            return 0.0
        return float(sum(len(slot.transferring) for slot in list(downloader.slots.values())))


class PrometheusMetrics:
    def __init__(self, crawler: Crawler, config: CrawlConfig, port: int, address: str) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CrawlStatsCollector(crawler, config))
        self.registry.register(ProxyStatsCollector(crawler))  # yields nothing without PROXY_URLS
        instruments = crawl_instruments(crawler)
        self.registry.register(instruments.request_duration)
        self.registry.register(instruments.database_batch_duration)
        if config.redis.url is not None:
            self.registry.register(instruments.redis_call_duration)
        self.linger = config.monitoring.metrics_linger
        self.port = port
        self.address = address
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrometheusMetrics:
        config = crawl_config(crawler)
        if config.monitoring.metrics_port is None:
            raise NotConfigured
        extension = cls(crawler, config, config.monitoring.metrics_port, config.monitoring.metrics_address)
        # Started here, not at spider_opened: a port that is taken must stop
        # the crawl before it starts, not be logged and ignored by a signal.
        extension.start()
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self._server.server_port}/metrics"

    def start(self) -> None:
        try:
            self._server, self._thread = start_http_server(self.port, self.address, registry=self.registry)
        except OSError as error:
            raise ConfigError(f"METRICS_PORT={self.port}: cannot listen on METRICS_ADDRESS={self.address} "
                              f"port {self.port}: {error.strerror or error}") from None
        logger.info("Prometheus metrics at %s", self.url)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        # shutdown() waits for the serving loop to notice (at most its 0.5 s poll).
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def spider_closed(self) -> Deferred[None] | None:
        if self.linger > 0 and self._server is not None:
            from twisted.internet import reactor  # the installed one, once the crawl runs

            # Scrapy waits for this Deferred (the reactor does not: the other
            # spider_closed handlers run meanwhile) before the process exits.
            logger.info("Serving the final metrics for %g s more (METRICS_LINGER)", self.linger)
            return deferLater(reactor, self.linger, self.stop)
        self.stop()
        return None


def _budget_families(stats: dict[str, object]) -> Iterator[Metric]:
    """The budget the API announces (RATE_LIMIT_HEADERS); 0 until an answer carries one."""
    yield _gauge("ratelimit_budget_pace_requests_per_second",
                 "Requests per second the API's announced budget allows now (below the cap).",
                 _stat(stats, stat_keys.BUDGET_PACE))
    yield _gauge("ratelimit_budget_remaining", "Requests the announced budget has left in its window "
                 "(room left in a leaky bucket).", _stat(stats, stat_keys.BUDGET_REMAINING))
    yield _gauge("ratelimit_budget_reset_seconds", "Seconds until the announced budget's window resets.",
                 _stat(stats, stat_keys.BUDGET_RESET_SECONDS))
    yield _counter("ratelimit_budget_answers", "Answers that carried budget headers.",
                   _stat(stats, stat_keys.BUDGET_ANSWERS))


def _stat(stats: dict[str, object], key: str) -> float:
    value = stats.get(key, 0)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(f"{NAMESPACE}_{name}", documentation)
    family.add_metric([], value)
    return family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{NAMESPACE}_{name}", documentation)
    family.add_metric([], value)
    return family
