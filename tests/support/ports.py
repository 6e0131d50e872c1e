"""The fixed ports of the servers the tests start, moved per checkout and per pytest-xdist worker.

Those servers (servers.py, test_ratelimit_redis_stall.py) listen on fixed ports of
this project's test range, 27000-27499, each moved by ``offset()``.
"""

from __future__ import annotations

import os

import pytest

#: Under pytest-xdist (``make test`` runs most of the suite on several workers) each
#: worker moves the fixed ports by this much more than the worker before it, on top of
#: TEST_SERVER_PORT_OFFSET, so that each worker's session servers have ports of their
#: own. 10 works for up to 8 workers: no two of those ports (27001-27003, their cluster
#: bus ports 27101-27103, 27306, 27379, 27400) differ by 10, 20, ... 70. Every port
#: stays below 27500, so a second checkout at TEST_SERVER_PORT_OFFSET=500 never meets them.
WORKER_PORT_STRIDE = 10
MAX_WORKERS = 8


def offset() -> int:
    """How far this process moves every fixed port (TEST_SERVER_PORT_OFFSET, 0 by default:
    what CI and the README use; two checkouts on one machine set different ones)."""
    return int(os.environ.get("TEST_SERVER_PORT_OFFSET", "0"))


def spread_over_workers() -> None:
    """Add this pytest-xdist worker's share to TEST_SERVER_PORT_OFFSET (nothing outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1"... set by pytest-xdist before conftest loads
    if worker is None:
        return
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > MAX_WORKERS:
        raise pytest.UsageError(f"at most {MAX_WORKERS} pytest-xdist workers: one more would share ports "
                                "with the first (tests/support/ports.py, WORKER_PORT_STRIDE)")
    os.environ["TEST_SERVER_PORT_OFFSET"] = str(offset() + WORKER_PORT_STRIDE * int(worker.removeprefix("gw")))
