"""Push the run's pass summary to a Prometheus Pushgateway at its end (``PUSHGATEWAY_URL``; unset: off).

A crawl that runs 100 s an hour is mostly not running when Prometheus
scrapes it; what it pushed stays on the Pushgateway until the next run
replaces it. At the end of every run, finished or stopped, one push (an HTTP
PUT, so the group holds exactly the last run's series) sends:

==============================================================  ===================================
series                                                          what
==============================================================  ===================================
``productcrawler_run_exit_status``                              the exit code ``scrapy crawl`` returns
``productcrawler_run_end_time_seconds``                         when the run ended (Unix time)
``productcrawler_run_duration_seconds``                         how long it ran
``productcrawler_run_products{outcome}``                        this run's stored / missing / failed
``productcrawler_run_info{process, reason}``                    1; the process (``host:pid:token``, as
                                                                in the logs) and why it stopped
``productcrawler_last_complete_pass_end_time_seconds``          when the last complete pass ended
                                                                (absent until a pass is complete)
``productcrawler_pass_id{pass}``                                ``pass="last"``: the last complete
                                                                pass, ``"previous"``: the one before
``productcrawler_pass_products{pass, outcome}``                 their stored / missing / failed /
                                                                changed / removed
``productcrawler_pass_coverage{pass, column}``                  their share (0..1) of stored products
                                                                with a non-NULL value, per column
==============================================================  ===================================

The group is ``job="productcrawler"``, ``spider="products"``, ``ids="START-END"``:
every run over the same id range replaces the same group (whichever instance
or container ran it), so no group of a finished container is left behind;
two ranges crawled side by side keep a group each.

The push runs in a thread of the reactor's pool (``deferToThread``: it is
blocking urllib) with a timeout of ``PUSH_TIMEOUT`` seconds, and never fails
the crawl: a Pushgateway that is away costs one WARNING line. A URL with
``user:password@`` sends them as HTTP basic auth.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
from prometheus_client.exposition import basic_auth_handler, default_handler
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from productcrawler import stat_keys
from productcrawler.config import mask_url
from productcrawler.config.crawler import crawl_config
from productcrawler.instance import instance_name
from productcrawler.meta import exit_code
from productcrawler.passes.summary import passes_summary
from productcrawler.storage.crawler import crawl_database

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

    from productcrawler.config import CrawlConfig
    from productcrawler.passes.summary import PassSummary

logger = logging.getLogger(__name__)

JOB = "productcrawler"
#: Seconds the push may take (connecting, sending, the answer) before it is given up.
PUSH_TIMEOUT = 10.0
#: Passes read to find the last two complete ones.
PASSES_READ = 50
_RUN_OUTCOMES = {"stored": stat_keys.STORED, "missing": stat_keys.MISSING, "failed": stat_keys.FAILED}
_PASS_COUNTS = ("stored", "missing", "failed", "changed", "removed")


class PushgatewayPush:
    def __init__(self, crawler: Crawler, config: CrawlConfig) -> None:
        assert config.monitoring.pushgateway_url is not None
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.url, self.handler = _url_and_handler(config.monitoring.pushgateway_url)
        self.grouping_key = {"spider": "products", "ids": f"{config.ids.start_id}-{config.ids.end_id}"}
        self._started = time.monotonic()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PushgatewayPush:
        config = crawl_config(crawler)
        if config.monitoring.pushgateway_url is None:
            raise NotConfigured
        push = cls(crawler, config)
        crawler.signals.connect(push.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(push.spider_closed, signal=signals.spider_closed)
        return push

    def spider_opened(self) -> None:
        self._started = time.monotonic()

    async def spider_closed(self, reason: str) -> None:
        status = exit_code(self.stats.get_value(stat_keys.EXIT_REASON) or reason)
        try:
            database = crawl_database(self.crawler)
            passes = await maybe_deferred_to_future(database.run(passes_summary, PASSES_READ))
        except Exception as error:  # noqa: BLE001 - the database may be why the crawl stopped
            logger.info("The Pushgateway gets no pass summary: the passes could not be read (%s)", error)
            passes = []
        registry = self.registry(reason, status, [p for p in passes if p.summarized])
        push = partial(push_to_gateway, self.url, job=JOB, registry=registry, grouping_key=self.grouping_key,
                       timeout=PUSH_TIMEOUT, handler=self.handler)
        try:
            await maybe_deferred_to_future(deferToThread(push))
        except Exception as error:  # noqa: BLE001 - whatever it is, the crawl's outcome stands
            self.stats.set_value(stat_keys.PUSHGATEWAY_FAILED, 1)
            logger.warning("Could not push the run's summary to the Pushgateway at %s: %s",
                           mask_url(self.config.monitoring.pushgateway_url), error)
            return
        logger.info("Pushed the run's summary to the Pushgateway at %s (exit status %d)",
                    mask_url(self.config.monitoring.pushgateway_url), status)

    def registry(self, reason: str, status: int, complete: list[PassSummary]) -> CollectorRegistry:
        """The series of one push, on a registry of their own (never the process's default one)."""
        registry = CollectorRegistry(auto_describe=True)

        def gauge(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(f"{JOB}_{name}", documentation, labels, registry=registry)

        gauge("run_exit_status", "Exit code of the last run (0 ok, 1 failed, 3 stopped by the guard)").set(status)
        gauge("run_end_time_seconds", "When the last run ended, Unix time").set(time.time())
        gauge("run_duration_seconds", "How long the last run took").set(time.monotonic() - self._started)
        run = gauge("run_products", "Outcomes the last run recorded", ("outcome",))
        for outcome, key in _RUN_OUTCOMES.items():
            run.labels(outcome).set(self.stats.get_value(key, 0))
        gauge("run_info", "The process of the last run and why it stopped", ("process", "reason")).labels(
            instance_name(), self.stats.get_value(stat_keys.EXIT_REASON) or reason).set(1)
        if not complete:
            return registry  # no complete pass: the stale-catalogue alert sees the end time absent
        last = complete[0]
        if last.finished_at is not None:
            gauge("last_complete_pass_end_time_seconds", "When the last complete pass ended, Unix time").set(
                last.finished_at.replace(tzinfo=UTC).timestamp())
        pass_id = gauge("pass_id", "The last complete pass and the one before it", ("pass",))
        products = gauge("pass_products", "Outcomes of the last complete passes", ("pass", "outcome"))
        coverage = gauge("pass_coverage", "Share of a pass's stored products with a non-NULL value",
                         ("pass", "column"))
        for label, summary in zip(("last", "previous"), complete, strict=False):
            pass_id.labels(label).set(summary.pass_id)
            for outcome in _PASS_COUNTS:
                count = getattr(summary, outcome)
                if count is not None:
                    products.labels(label, outcome).set(count)
            for column, share in summary.coverage.items():
                coverage.labels(label, column).set(share)
        return registry


def _url_and_handler(url: str) -> tuple[str, Callable[..., Any]]:
    """The URL without its userinfo, and a handler that sends that as basic auth (if any)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, default_handler
    host = parts.netloc.rsplit("@", 1)[1]
    handler = partial(_basic_auth, username=unquote(parts.username), password=unquote(parts.password or ""))
    return urlunsplit(parts._replace(netloc=host)), handler


def _basic_auth(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]], data: bytes,
                *, username: str, password: str) -> Callable[[], None]:
    return basic_auth_handler(url, method, timeout, headers, data, username, password)
