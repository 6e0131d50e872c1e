"""``LOG_FORMAT=json``: one JSON object per log line, for a log pipeline.

Scrapy's root handler formats with ``logging.Formatter(LOG_FORMAT)`` and is
re-created for each crawler, so a formatter cannot be swapped in afterwards.
In JSON mode the crawl command therefore tells Scrapy not to install its root
handler (``LOG_INSTALL_ROOT_HANDLER=False``, Scrapy's own switch) and installs
one of its own, before any line is logged: to ``LOG_FILE`` if set (scrapyd
sets it), else to stderr (nowhere with ``--nolog``), at ``LOG_LEVEL``. python-json-logger formats it.

Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``;
where they apply: ``product_id``, ``attempt``, ``status``, ``elapsed`` (seconds
the request took), ``pass_id`` and ``instance``. The per-request fields come
from the request, response or values a log call passes as its ``%(name)s``
arguments (Scrapy's retry and "Crawled" lines, our retry policy's), so no
log call needs changing. ``LOG_FORMAT`` comes from the environment or the
Scrapy setting of the same name (whose other values stay Scrapy's format
strings); the default is Scrapy's human format.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from productcrawler.config import ConfigError
from productcrawler.instance import instance_name
from productcrawler.meta import PRODUCT_ID
from productcrawler.passes.crawler import built_pass

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

ENV = "LOG_FORMAT"
JSON = "json"
HUMAN = "human"
#: Scrapy passes the spider and crawler objects as ``extra``: their reprs say nothing useful.
_NOT_FIELDS = (*RESERVED_ATTRS, "spider", "crawler")


def json_requested(settings: Settings) -> bool:
    """``LOG_FORMAT=json`` in the environment (or as a setting); ``human`` or unset: the default."""
    env = (os.environ.get(ENV) or "").strip()
    if env not in ("", JSON, HUMAN):
        raise ConfigError(f"{ENV}={env!r} is not a log format; expected {JSON!r} or {HUMAN!r}")
    return env == JSON or settings.get(ENV) == JSON


class CrawlJsonFormatter(JsonFormatter):
    def __init__(self) -> None:
        super().__init__("{asctime}{levelname}{name}{message}", style="{",
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                         reserved_attrs=_NOT_FIELDS, json_ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class CrawlFields(logging.Filter):
    """Adds the structured fields to each record (JSON mode only: a filter of its handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.crawler: Crawler | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping):
            self._request_fields(record, args)
        crawl_pass = None if self.crawler is None else built_pass(self.crawler)
        if crawl_pass is not None and crawl_pass.pass_id is not None:
            record.pass_id = crawl_pass.pass_id
        record.instance = instance_name()
        return True

    @staticmethod
    def _request_fields(record: logging.LogRecord, args: Mapping[str, Any]) -> None:
        response = args.get("response")
        request = args.get("request") or getattr(response, "request", None)
        meta = getattr(request, "meta", None) or {}
        fields = {
            "product_id": args.get("product_id", meta.get(PRODUCT_ID)),
            "attempt": args.get("attempts", meta.get("retry_times", 0) + 1 if meta else None),
            "status": args.get("status", args.get("http_status", getattr(response, "status", None))),
            "elapsed": _rounded(meta.get("download_latency")),
        }
        for name, value in fields.items():
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)


class JsonLogging:
    """The JSON handler of this process; ``attach`` gives it the crawler for pass and instance."""

    def __init__(self, settings: Settings) -> None:
        self.fields = CrawlFields()
        filename = settings.get("LOG_FILE")
        self.handler: logging.Handler
        if filename:
            mode = "a" if settings.getbool("LOG_FILE_APPEND") else "w"
            self.handler = logging.FileHandler(filename, mode=mode, encoding=settings.get("LOG_ENCODING"))
        elif settings.getbool("LOG_ENABLED"):
            self.handler = logging.StreamHandler()
        else:  # --nolog: as Scrapy's own root handler (scrapy.utils.log._get_handler)
            self.handler = logging.NullHandler()
        self.handler.setFormatter(CrawlJsonFormatter())
        self.handler.setLevel(settings.get("LOG_LEVEL"))
        self.handler.addFilter(self.fields)

    @classmethod
    def install(cls, settings: Settings) -> JsonLogging:
        """Replace Scrapy's root handler by ours, for the whole process; call before Scrapy logs."""
        settings.set("LOG_INSTALL_ROOT_HANDLER", False, priority="cmdline")
        json_logging = cls(settings)
        logging.root.setLevel(logging.NOTSET)  # as Scrapy does: the handler's level filters
        logging.root.addHandler(json_logging.handler)
        return json_logging

    def attach(self, crawler: Crawler) -> None:
        self.fields.crawler = crawler


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 6)
