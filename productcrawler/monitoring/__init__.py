"""What the crawl says about itself: stats, progress, metrics, logs.

* ``stats``: the stats collector (:class:`FastStatsCollector`); the name of every
  stat is in :mod:`productcrawler.stat_keys`.
* ``progress``: the progress line and the closing summary (:class:`ProgressLog`).
* ``metrics``: the Prometheus endpoint (:class:`PrometheusMetrics`, ``METRICS_PORT``),
  fed by ``instruments`` (latency histograms) and ``request_timing``
  (:class:`RequestTiming`, a downloader middleware).
* ``pushgateway``: the pass summary pushed at the end of a run (:class:`PushgatewayPush`).
* ``traffic_stats``: Scrapy's ``downloader/*`` counts (:class:`TrafficStats`).
* ``logformatter`` and ``structured_logging``: the log's records and ``LOG_FORMAT=json``.
"""
