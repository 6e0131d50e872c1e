"""A stats collector without Scrapy 2.19's per-access ``__getattribute__`` hook.

``StatsCollector.__getattribute__`` wraps the public methods to warn about a
deprecated ``spider`` argument and, on every attribute access (``self._stats``
inside ``inc_value`` included), formats a ``_cached_<name>`` string and raises
and catches an ``AttributeError``: a few microseconds per stats call, and a
crawl makes a dozen stats calls per response. This class restores plain
attribute access; it only loses the deprecation warning for callers that still
pass ``spider=`` (this project does not).
"""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector


class FastStatsCollector(MemoryStatsCollector):
    __getattribute__ = object.__getattribute__
