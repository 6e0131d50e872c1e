"""Scrapy's own aiohttp download handler, paced: what the lean one is measured against.

``bench/cpu.py --variants ours+scrapy-handler`` (imported by the crawl as
``bench.scrapy_handler``: the repository root is on its PYTHONPATH).
"""

from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler

from productcrawler.ratelimit.handler import PacedDownloadMixin


class PacedScrapyAiohttpDownloadHandler(PacedDownloadMixin, AiohttpDownloadHandler):
    """Scrapy's aiohttp handler as it is, waiting for the rate-limit slot first."""
