"""Parsing of the ``Retry-After`` response header (RFC 9110, section 10.2.3).

The header comes in two forms::

    Retry-After: 120                              (delay-seconds)
    Retry-After: Fri, 31 Dec 1999 23:59:59 GMT    (HTTP-date)

``delay-seconds`` is ``1*DIGIT`` in the RFC; a decimal fraction (``2.0``,
which Shopify sends) is taken too, as the seconds it says. A sign, an
exponent or anything else that is not a date makes the value malformed.
Besides the IMF-fixdate shown above, the two obsolete HTTP-date forms that
recipients must still accept (RFC 850, ``Sunday, 06-Nov-94 08:49:37 GMT``, and
asctime, ``Sun Nov  6 08:49:37 1994``) are parsed too.

This module only turns a value into seconds; what the crawl does with them
(capping, falling back to backoff, stats) is :mod:`productcrawler.retry.policy`.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC
from email.utils import parsedate_to_datetime

_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # not \d: that also matches non-ASCII digits


def parse_retry_after(value: str | bytes | None, *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying, as asked by a ``Retry-After`` value.

    ``now`` is the current time as a Unix timestamp (``time.time()`` when not
    given); a date is relative to it, and a date in the past means 0. Returns
    ``None`` when ``value`` is missing, empty or malformed. A delay too large
    for a float is ``math.inf``: bounding it is the caller's business.
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip(" \t")
    if not text:
        return None
    if _DELAY_SECONDS.fullmatch(text):
        try:
            return float(int(text)) if "." not in text else float(text)
        except OverflowError:
            return math.inf
    return _seconds_until_date(text, time.time() if now is None else now)


def _seconds_until_date(text: str, now: float) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:  # pragma: no cover - Python < 3.10 returned None on garbage
        return None
    if when.tzinfo is None:  # asctime carries no zone; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    try:
        seconds = when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)
