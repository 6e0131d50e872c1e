"""A pool of HTTP proxies with health scores, shared by every instance through Redis.

``config`` reads ``PROXY_URLS`` and the pool's settings; ``health`` holds the
score and rest arithmetic; ``books`` and ``shared`` keep the scores (in this
process, or in Redis); ``pool`` is this instance's view (which proxy next,
which rest); ``middleware`` applies it to requests; ``metrics`` exports the
per-proxy stats to Prometheus. (Nothing is imported here: the crawl command
reads ``config`` before the reactor is installed.)
"""

#: Meta key set on a request the proxy middleware gave up on because the crawl
#: is stopping: no outcome is recorded for its id (the next run fetches it).
META_ABANDONED = "proxy_abandoned"
