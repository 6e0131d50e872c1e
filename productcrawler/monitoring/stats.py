"""The crawl's stats collector: Scrapy's in-memory one, with plain attribute access.

Scrapy 2.19's ``StatsCollector.__getattribute__`` wraps the public methods to
warn about a deprecated ``spider`` argument. It runs on *every* attribute
access, ``self._stats`` inside ``inc_value`` included: it formats a
``_cached_<name>`` string and raises and catches an ``AttributeError`` each
time, and a crawl makes about a dozen stats calls per response
(docs/design-notes.md#per-call-costs-items-log-records-stats). This class restores ``object``'s attribute access;
the only thing lost is that deprecation warning, for callers that still pass
``spider=`` (this project does not).
"""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector


class FastStatsCollector(MemoryStatsCollector):
    __getattribute__ = object.__getattribute__
