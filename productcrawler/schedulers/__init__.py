"""Schedulers: Scrapy's own (one process) or the Redis-backed one (many), both
holding retries that must wait (``retry_delay`` meta) without a downloader slot."""
