"""A range far larger than one run's worth starts at once, with flat memory.

Scrapy reads ``start()`` without pause while the downloader is full; before
the spider handed requests over lazily, a 2,000,000-id range on the default
(local) scheduler spent about a minute building every request before the first
one was sent, and needed gigabytes to hold them.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.support.crawls import ROOT, crawl_command, crawl_env, finish

RANGE = 2_000_000
MAX_RSS_MB = 150


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def wait_for_arrivals(simulator, process: subprocess.Popen[str], count: int, within: float) -> None:
    deadline = time.monotonic() + within
    while len(simulator.arrivals()) < count:
        assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"fewer than {count} requests within {within} s"
        time.sleep(0.2)


def test_a_huge_range_starts_at_once_and_holds_little(clean_simulator, tmp_path):
    settings = {"API_BASE_URL": clean_simulator.base_url,
                "DATABASE_URL": f"sqlite:///{tmp_path / 'products.db'}",
                "MAX_REQUESTS_PER_SECOND": 500}
    process = subprocess.Popen(crawl_command("-a", f"end_id={RANGE}", settings=settings), cwd=ROOT,
                               env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_arrivals(clean_simulator, process, 400, within=20)
        early = rss_mb(process.pid)
        wait_for_arrivals(clean_simulator, process, 1600, within=15)
        late = rss_mb(process.pid)
        arrivals = clean_simulator.arrivals()
        process.send_signal(signal.SIGTERM)
        code, output = finish(process, timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, output[-3000:]
    assert late < MAX_RSS_MB, f"RSS {late:.0f} MB with {len(arrivals)} requests sent"
    # Flat: the requests sent so far are not kept.
    assert late <= early * 1.1, (early, late)
    # Ids go out in order from the start of the range, each once.
    ids = [a[1] for a in arrivals]
    assert len(set(ids)) == len(ids)
    assert max(ids) < len(ids) + 200
