"""Whether an answer says "over the rate limit": a 429, or a 403 that says it is one.

Some APIs answer an exhausted limit with 403, not 429: GitHub's primary limit
(``x-ratelimit-remaining: 0`` and its reset), Mashery-style gateways such as
Best Buy's (``<h1>Over Quota</h1>``, ``"errorMessage": "Over Quota"``; Mashery's
own ``X-Mashery-Error-Code: ERR_403_DEVELOPER_OVER_QPS`` or ``..._OVER_RATE``
with ``<h1>Developer Over Qps</h1>``). Such a 403 is an exhausted budget:
retried after the reset (or a backoff), counted with the 429s, never a
refused key for the guard. A 403 that says none of this stays a refused key
(Mashery's ``ERR_403_DEVELOPER_INACTIVE``, ``ERR_403_NOT_AUTHORIZED`` among them).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from productcrawler.budget.headers import FORMATS, BudgetHeaders, LeakyBudget

if TYPE_CHECKING:
    from scrapy.http import Response

#: Words of an over-quota answer's body (gateways that send no budget headers), in its first KB.
_OVER_QUOTA = re.compile(rb"over\s+(?:the\s+)?quota|quota\s+exceeded|rate\s+limit\s+exceeded|"
                         rb"over\s+queries\s+per\s+second|over\s+qps|over\s+rate\b|too\s+many\s+requests",
                         re.IGNORECASE)
#: Mashery's error code of a key (or a service) over its per-second or per-period limit.
_MASHERY_OVER = re.compile(rb"ERR_403_[A-Z]+_OVER_(?:QPS|RATE)")
_HEADERS = BudgetHeaders(FORMATS)


def is_rate_limited(response: Response) -> bool:
    """A 429, or a 403 whose budget headers say nothing is left, whose gateway code says over the limit
    or, with neither, whose body says over quota."""
    if response.status == 429:
        return True
    if response.status != 403:
        return False
    budget = _HEADERS.parse(response.headers, time.time())
    if budget is not None:
        return budget.level >= budget.size if isinstance(budget, LeakyBudget) else budget.remaining == 0
    code = response.headers.get("X-Mashery-Error-Code")
    if code is not None:
        return _MASHERY_OVER.fullmatch(code.strip()) is not None
    return _OVER_QUOTA.search(response.body[:1024]) is not None


def reset_after(response: Response) -> float | None:
    """Seconds until the budget an answer's headers announce is reset, if they say."""
    budget = _HEADERS.parse(response.headers, time.time())
    return None if budget is None or isinstance(budget, LeakyBudget) else budget.reset_after
