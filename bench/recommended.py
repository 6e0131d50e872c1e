"""The settings this bench recommends for productcrawler/settings.py, as ``-s`` overrides.

``bench/peers.py``, ``bench/memory.py`` and ``bench/throughput.py`` run the
project with these on top of its own settings ("ours-tuned") as well as
without ("ours"), so a result shows what the proposal buys. Once settings.py
carries them, the two coincide: as of the commit that moved
``FastStatsCollector`` into ``productcrawler/stats.py`` and replaced
``DownloaderStats`` with ``TrafficStats``, settings.py carries all of them.
"""

from __future__ import annotations

from typing import Any

from _common import downloader_middlewares

# Default Scrapy downloader middlewares that do nothing for an API client, each
# costing a call (or an async-gen layer) per request and/or response.
UNUSED_DOWNLOADER_MIDDLEWARES = {
    # No allowed_domains: the check finds nothing to filter.
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    # No http_user/http_pass: auth is ApiKeyMiddleware's job.
    "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,
    # Asks for gzip/br/zstd and decodes it: a few-KB JSON body is cheaper sent plain on a LAN.
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    # No proxy between us and the API (and no http_proxy from the environment).
    "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware": None,
    # Builds the raw HTTP text of every request and response to count bytes:
    # our own productcrawler/* stats say what a run did.
    "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
}
UNUSED_SPIDER_MIDDLEWARES = {
    # The spider follows no links: no URL to check, no depth to track, no meta copied.
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
}


AIOHTTP_HANDLER = "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler"  # Scrapy's, paced


def recommended(*, aiohttp: bool = True) -> dict[str, Any]:
    """The proposal. ``aiohttp=False`` leaves DOWNLOAD_HANDLERS to the project (which uses the
    aiohttp handler since cf7e52c; bench/cpu.py's ``ours+twisted-handler`` measures the other one)."""
    settings = {
        "DOWNLOADER_MIDDLEWARES": downloader_middlewares(UNUSED_DOWNLOADER_MIDDLEWARES),
        "SPIDER_MIDDLEWARES": dict(UNUSED_SPIDER_MIDDLEWARES),
        # In settings.py since e564f6c; repeated so the bench measures the same thing on older trees.
        "LOG_FORMATTER": "productcrawler.logformatter.QuietLogFormatter",
        "STATS_CLASS": "productcrawler.stats.FastStatsCollector",
    }
    if aiohttp:
        # Scrapy 2.19's aiohttp handler (marked experimental); bench/handler_check.py finds the
        # same outcome for every simulator fault.
        settings["DOWNLOAD_HANDLERS"] = {"http": AIOHTTP_HANDLER, "https": AIOHTTP_HANDLER}
    return settings
