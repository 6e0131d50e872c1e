"""Reading a crawl's log: lines by level, their times, the final summary and the stats Scrapy dumps."""

from __future__ import annotations

import ast
import re
from datetime import datetime
from typing import Any

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_STAT = re.compile(r"'([^']+)': (-?[0-9][0-9.e+-]*)")


def log_lines(stderr: str, level: str) -> list[str]:
    """The log lines of one level (``ERROR``, ``WARNING``...) of a crawl's stderr."""
    return [line for line in stderr.splitlines() if f"] {level}: " in line]


def log_time(stderr: str, text: str) -> datetime:
    """The timestamp (to the second) of the first log line containing ``text``."""
    for line in stderr.splitlines():
        if text in line:
            match = _LOG_TIME.match(line)
            if match:
                return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    raise AssertionError(f"no log line contains {text!r}")


def summary(output: str) -> tuple[int, int, int]:
    """(stored, missing, failed) from the final log line of a run."""
    line = next(line for line in output.splitlines() if "Finished (" in line)
    counts = line.split(": ")[-1].split(" in this run")[0].split(", ")
    return tuple(int(part.split()[0]) for part in counts)  # type: ignore[return-value]


def dumped_stat(log: str, key: str) -> Any:
    """The value of ``key`` in the stats Scrapy dumps at the end of a crawl's log (None if absent)."""
    match = re.search(rf"'{re.escape(key)}': ([^,\n}}]+)", log)
    return None if match is None else ast.literal_eval(match.group(1))


def dumped_stats(log: str, prefix: str = "") -> dict[str, float]:
    """The numeric stats of Scrapy's final stats dump in a crawl's log, whose key starts with ``prefix``."""
    start = log.rfind("Dumping Scrapy stats")
    if start < 0:
        return {}
    return {key: float(value) for key, value in _STAT.findall(log[start:]) if key.startswith(prefix)}
