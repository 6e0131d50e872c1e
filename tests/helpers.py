"""Shared test helpers (no fixtures: those are in conftest.py)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from tests.conftest import ROOT, crawl_command, crawl_env

if TYPE_CHECKING:
    from collections.abc import Callable


def start_crawl(*args: str, settings: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real ``scrapy crawl products`` in the background, stdout and stderr together."""
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str,
             timeout: float = 60) -> None:
    """Poll ``condition`` while ``process`` runs; fail if it ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the crawl ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


def run_scrapy(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
               cwd: Any = ROOT) -> subprocess.CompletedProcess[str]:
    """Run any real ``scrapy`` command of the project (``fetch``, ``shell``, ``crawl``) and wait."""
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def dumped_stat(log: str, key: str) -> Any:
    """The value of ``key`` in the stats Scrapy dumps at the end of a crawl's log (None if absent)."""
    match = re.search(rf"'{re.escape(key)}': ([^,\n}}]+)", log)
    return None if match is None else ast.literal_eval(match.group(1))
