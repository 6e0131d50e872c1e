"""One instance's reading of the budget: successive observations made into reports.

An answer's headers (:mod:`.headers`) say the budget as the API saw it
when it handled that request. A report adds what one answer cannot say:

* ``seq``, the number the budget gate gave the answered request when it was
  let through (:mod:`.plan`): the requests let through after it are in
  flight or about to be, and will spend budget the answer does not count yet;
* for a fixed window, a reset time as tight as the answers allow. A reset in
  whole seconds is rounded up, so each answer bounds the reset to an interval
  ``resolution`` wide; the answers of one window are intersected. When a new
  window opens (the remaining count went up, or the bounds no longer meet),
  the old reset lies between the last answer of the old window and the first
  of the new one, and with the window's length known (a header, or the step
  between successive epoch resets) the new reset is one length after it;
* for a leaky bucket, the leak rate, when the API does not say it (no header
  does; a GraphQL API's ``restoreRate`` does): the level of
  the oldest answer of the last ``LEAK_HORIZON`` seconds plus the requests let
  through since, minus the level now, is what leaked. Requests are numbered
  when let through, not when they reach the API, and a few numbered before
  the answered one may arrive after it (each instance lets ``AHEAD`` wait at
  once): ``SKEW`` requests are taken off what leaked, so that the rate is
  an underestimate over a short baseline and tends to the true one over a
  long one. A bucket that ran empty meanwhile also makes it an underestimate.

A reset clamped to ``RATE_LIMIT_HEADERS_MAX_WAIT`` (:mod:`.headers`)
gives no window length: at that reset, the gate knows no budget until an
answer tells it (its requests are probes again).

Times are this process's ``time.monotonic()``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from productcrawler.budget.headers import LeakyBudget, WindowBudget

#: Seconds an answer's reading of the API's clock may precede its arrival here (latency).
SLACK = 0.05
LEAK_HORIZON = 2.0  # seconds of answers the leak rate is measured over
LEAK_MIN_BASELINE = 0.2  # seconds: two answers closer than that measure mostly the skew
SKEW = 8  # requests numbered before an answered one that may reach the API after it


@dataclass(frozen=True)
class WindowReport:
    seq: int | None
    observed_at: float
    remaining: int
    reset_at: float  # the latest the reset can be
    reset_from: float | None  # the earliest
    quota: int | None
    window: float | None  # seconds, announced or measured; None: unknown
    clamped: bool = False  # the reset is RATE_LIMIT_HEADERS_MAX_WAIT after the answer, as far as is known


@dataclass(frozen=True)
class LeakyReport:
    seq: int | None
    observed_at: float
    level: int
    size: int
    leak: float | None  # units (requests, or points) leaked per second; None: not measured yet
    cost: int = 1  # units one request takes


Report = WindowReport | LeakyReport


class BudgetReader:
    def __init__(self) -> None:
        self._bounds: tuple[float, float] | None = None  # the current window's reset
        self._latest: tuple[int | None, int, float] | None = None  # seq, remaining, at of the newest answer
        self._epoch_reset: float | None = None  # the newest answer's reset as a Unix time, if given as one
        self._window: float | None = None
        self._longest_reset: float = 0.0
        self._levels: deque[tuple[float, int, int]] = deque()  # at, level, seq
        self._leak: float | None = None

    def read(self, budget: WindowBudget | LeakyBudget, seq: int | None, at: float,
             wall_now: float) -> Report | None:
        """The report of one answer received at ``at``; None for an answer older than one already read."""
        if isinstance(budget, LeakyBudget):
            return self._leaky(budget, seq, at)
        return self._fixed(budget, seq, at, wall_now)

    def _newer(self, seq: int | None) -> bool:
        return self._latest is None or seq is None or self._latest[0] is None or seq > self._latest[0]

    def _fixed(self, budget: WindowBudget, seq: int | None, at: float, wall_now: float) -> WindowReport | None:
        high = at + budget.reset_after
        low = high - budget.resolution - SLACK
        epoch = wall_now + budget.reset_after if budget.epoch else None
        newer = self._newer(seq)
        if budget.clamped:
            return self._clamped(budget, seq, at, low, high) if newer else None
        if self._bounds is not None and max(low, self._bounds[0]) <= min(high, self._bounds[1]) and not (
                newer and self._latest is not None and budget.remaining > self._latest[1]):
            self._bounds = (max(low, self._bounds[0]), min(high, self._bounds[1]))
        elif not newer:
            return None  # an answer of a window already over, arriving late
        else:
            self._bounds = self._new_window(low, high, budget, at, epoch)
        if newer:
            self._latest = (seq, budget.remaining, at)
            self._epoch_reset = epoch
        self._longest_reset = max(self._longest_reset, budget.reset_after)
        window = budget.window or self._window
        return WindowReport(seq, at, budget.remaining, self._bounds[1], self._bounds[0], budget.quota,
                            window if window is not None else (self._longest_reset or None))

    def _clamped(self, budget: WindowBudget, seq: int | None, at: float, low: float,
                 high: float) -> WindowReport:
        """A reset clamped to RATE_LIMIT_HEADERS_MAX_WAIT: within that of this answer, no closer.

        Not narrowed by earlier answers: a count lower than theirs does not tell the same window
        when the resets cannot, and an earlier bound may be a window already over. When this
        window ends, what follows is unknown (no window length).
        """
        self._bounds = (low, high)
        self._latest = (seq, budget.remaining, at)
        self._epoch_reset = None
        return WindowReport(seq, at, budget.remaining, high, low, budget.quota, None, clamped=True)

    def _new_window(self, low: float, high: float, budget: WindowBudget, at: float,
                    epoch: float | None) -> tuple[float, float]:
        if epoch is not None and self._epoch_reset is not None:
            step = round(epoch - self._epoch_reset)
            if step >= 1 and (self._window is None or step < self._window):
                self._window = float(step)  # a skipped window makes a longer step: the shortest is the length
        window = budget.window or self._window
        if self._bounds is None or self._latest is None or window is None:
            return low, high
        old_low, old_high = max(self._bounds[0], self._latest[2] - SLACK), min(self._bounds[1], at)
        predicted = (old_low + window, old_high + window)
        if old_low <= old_high and max(low, predicted[0]) <= min(high, predicted[1]):
            return max(low, predicted[0]), min(high, predicted[1])
        return low, high

    def _leaky(self, budget: LeakyBudget, seq: int | None, at: float) -> LeakyReport | None:
        if not self._newer(seq):
            return None
        self._latest = (seq, budget.level, at)
        if budget.leak is not None:  # announced: nothing to measure
            return LeakyReport(seq, at, budget.level, budget.size, budget.leak, budget.cost)
        leak = None
        if seq is not None:
            while self._levels and at - self._levels[0][0] > LEAK_HORIZON:
                self._levels.popleft()
            if self._levels and at - self._levels[0][0] >= LEAK_MIN_BASELINE:
                then, level, then_seq = self._levels[0]
                leaked = level + (seq - then_seq) - budget.level - SKEW
                leak = max(0.0, leaked / (at - then))
                self._leak = leak
            else:
                leak = self._leak
            self._levels.append((at, budget.level, seq))
        if leak is not None and not math.isfinite(leak):
            leak = None
        return LeakyReport(seq, at, budget.level, budget.size, leak)
