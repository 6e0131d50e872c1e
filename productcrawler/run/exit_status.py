"""The exit code of a crawl, from the reason it stopped (README, "Exit codes").

``scrapy crawl`` (commands/crawl.py) exits with it; the Pushgateway push
(monitoring/pushgateway.py) reports it before the process ends. A
configuration error (2) and a crawler that failed to start (1) never reach a
crawl, so they are the command's alone.
"""

from __future__ import annotations

from productcrawler.guard import failure_guard as guard

#: Finish reasons that are not failures: the pass ended, or an operator stopped
#: it (Ctrl-C, SIGTERM, scrapyd's cancel) and the next run resumes it.
CLEAN_REASONS = ("finished", "shutdown")
#: The exit code of a crawl whose configuration was refused before it started.
CONFIG_ERROR = 2


def exit_code(reason: str | None) -> int:
    """0 for a clean end, 3 when the guard stopped the crawl, 1 for any other reason."""
    if reason in guard.REASONS.values():
        return guard.EXIT_CODE  # the answers said the configuration is wrong
    if reason not in CLEAN_REASONS:
        return 1
    return 0
