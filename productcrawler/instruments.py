"""The crawl's timings, observed as they happen: one set of histograms per crawler.

Counts live in the crawl stats and are read when Prometheus scrapes
(``monitoring/metrics.py``); a latency distribution cannot be rebuilt from
stats, so these few histograms are observed directly. prometheus-client's
``observe`` is thread-safe (the Redis calls are timed in a worker thread) and
costs under a microsecond. The storage pipeline, the pass scheduler and
request timing observe them, from several layers, so they sit at the bottom;
the metrics extension exports them. With ``METRICS_PORT`` unset they are
still observed (a few per second for the database and Redis) except the
per-request one, whose middleware is off.
"""

from __future__ import annotations

from prometheus_client import Histogram, disable_created_metrics

from productcrawler.per_crawler import PerCrawler

NAMESPACE = "productcrawler"

#: An API that answers in 1 ms to 30 s (API_TIMEOUT's default): about 2.5x apart.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: A batch upsert or a Redis round trip: sub-millisecond to the client timeouts.
CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# No ``*_created`` series: a crawl process's start is what they would say, and
# each would be one more gauge family per histogram on every scrape.
disable_created_metrics()



class Instruments:
    """One crawler's histograms (:func:`crawl_instruments`)."""

    def __init__(self) -> None:
        # registry=None: the metrics extension registers them in its crawler's own registry.
        self.request_duration = Histogram(
            f"{NAMESPACE}_request_duration_seconds",
            "Time from sending a request to the API to its response or error, by outcome class.",
            ["outcome"], buckets=REQUEST_BUCKETS, registry=None)
        self.database_batch_duration = Histogram(
            f"{NAMESPACE}_database_batch_duration_seconds",
            "Time to write and commit one batch of outcomes (successful writes).",
            buckets=CALL_BUCKETS, registry=None)
        self.redis_call_duration = Histogram(
            f"{NAMESPACE}_redis_call_duration_seconds",
            "Time of one call of the shared scheduler to Redis (a lease, push, ack or heartbeat).",
            buckets=CALL_BUCKETS, registry=None)


#: The crawler's histograms (whoever asks first creates them).
crawl_instruments: PerCrawler[Instruments] = PerCrawler("instruments", lambda crawler: Instruments())
