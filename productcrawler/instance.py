"""This process's name among the crawl's instances: ``host:pid:token``.

The same name is the shared pass's lease holder in Redis, what ``scrapy
progress`` lists, and the ``instance`` field of every JSON log line (from
the first one, before any pass exists). The token tells two processes apart
that reuse a pid on one host (containers).
"""

from __future__ import annotations

import functools
import os
import socket
import uuid


@functools.cache
def _name(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"


def instance_name() -> str:
    return _name(os.getpid())  # keyed by pid: a forked child is another instance
