"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import re

_STAT = re.compile(r"'([^']+)': (-?[0-9][0-9.e+-]*)")


def dumped_stats(log: str, prefix: str = "") -> dict[str, float]:
    """The numeric stats of Scrapy's final stats dump in a crawl's log, whose key starts with ``prefix``."""
    start = log.rfind("Dumping Scrapy stats")
    if start < 0:
        return {}
    return {key: float(value) for key, value in _STAT.findall(log[start:]) if key.startswith(prefix)}
