"""``python -m tests.support.counted_pools crawl products ...``: the real ``scrapy`` command, counting Redis pools.

Every asyncio connection pool the process builds is counted by its client
name; at exit the counts go to stderr as ``redis pools: {name: count}``. A
connection pool is what a client is (redis-py's ``from_url`` builds one per
client), and the server's ``CLIENT LIST`` cannot tell pools apart: it lists
connections, which a pool opens as its calls overlap.
"""

from __future__ import annotations

import atexit
import sys
from collections import Counter
from typing import Any

import redis.asyncio
from scrapy.cmdline import execute

POOLS: Counter[str | None] = Counter()
_original = redis.asyncio.ConnectionPool.__init__


def _counting(self: redis.asyncio.ConnectionPool, *args: Any, **kwargs: Any) -> None:
    _original(self, *args, **kwargs)
    POOLS[self.connection_kwargs.get("client_name")] += 1


def _report() -> None:
    print(f"redis pools: {dict(POOLS)!r}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    redis.asyncio.ConnectionPool.__init__ = _counting  # type: ignore[method-assign]
    atexit.register(_report)
    sys.argv = ["scrapy", *sys.argv[1:]]
    execute()
