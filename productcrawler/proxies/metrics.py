"""Per-proxy Prometheus metrics, read from the crawl stats at scrape time.

Registered by :class:`productcrawler.monitoring.metrics.PrometheusMetrics` in
its registry, next to the crawl's own collector; nothing is counted per
request. Without a proxy pool there are no ``productcrawler/proxy/`` stats and
this collector yields nothing. The ``proxy`` label is the proxy's
``host:port`` (never its credentials).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from productcrawler.proxies.pool import STATS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.metrics_core import Metric
    from scrapy.crawler import Crawler

NAMESPACE = "productcrawler_proxy"

#: stat name under productcrawler/proxy/<name>/<label> -> (metric, kind, help)
PER_PROXY = {
    "requests": ("requests", CounterMetricFamily, "Requests sent through the proxy."),
    "failures": ("failures", CounterMetricFamily, "Failures blamed on the proxy."),
    "rests": ("rests", CounterMetricFamily, "Rests this instance started for the proxy."),
    "score": ("score", GaugeMetricFamily, "The proxy's health score (0-100) at the last sync."),
    "resting": ("resting", GaugeMetricFamily, "1 while the proxy rests, else 0."),
}
#: stat productcrawler/proxy/<name> -> (metric, help); all counters.
POOL = {
    "resent": ("resent", "Requests sent again through another proxy, no retry used."),
    "all_resting_wait_seconds": ("all_resting_wait_seconds", "Seconds requests waited with every proxy resting."),
}


class ProxyStatsCollector:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    def describe(self) -> list[Metric]:
        return []  # families exist only once there is a pool

    def collect(self) -> Iterator[Metric]:
        snapshot = dict(self.stats.get_stats())  # one step under the GIL, see CrawlStatsCollector
        prefix = f"{STATS}/"
        if not any(key.startswith(prefix) for key in snapshot):
            return
        families = {name: kind(f"{NAMESPACE}_{metric}", text, labels=["proxy"])
                    for name, (metric, kind, text) in PER_PROXY.items()}
        for key in sorted(snapshot):
            if not key.startswith(prefix):
                continue
            name, _, label = key[len(prefix):].partition("/")
            value = snapshot[key]
            if name in families and label and isinstance(value, (int, float)):
                families[name].add_metric([label], float(value))
        yield from families.values()
        for name, (metric, text) in POOL.items():
            family = CounterMetricFamily(f"{NAMESPACE}_{metric}", text)
            value = snapshot.get(f"{STATS}/{name}", 0)
            family.add_metric([], float(value) if isinstance(value, (int, float)) else 0.0)
            yield family
