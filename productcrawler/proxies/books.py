"""Where the pool's health lives: in this process, or in Redis for every instance.

A book takes the outcomes counted since its last call (``deltas``: successes
and failures per proxy) and answers with every proxy's health as of now, rest
times on this process's ``time.monotonic()`` clock, and the rests that this
very call started (so that exactly one instance logs a rest). The pool calls
it every ``SYNC_INTERVAL`` seconds and at once after a failure.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from productcrawler.proxies.health import HealthPolicy, ProxyHealth

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Seconds between two looks at the shared health (and flushes of successes).
SYNC_INTERVAL = 0.5


@dataclass(frozen=True)
class Snapshot:
    health: list[ProxyHealth]  #: rest_until on local monotonic time
    rested: dict[int, float]  #: proxy index -> seconds of a rest this call started


class HealthBook(Protocol):
    """Where the pool's health lives: :class:`LocalHealthBook`, or Redis's (``shared.py``)."""

    async def sync(self, deltas: Sequence[tuple[int, int]]) -> Snapshot: ...


class LocalHealthBook:
    """One process's book: no I/O, the same arithmetic as the shared one."""

    def __init__(self, policy: HealthPolicy, count: int, *, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.policy = policy
        self.health = [ProxyHealth() for _ in range(count)]
        self.clock = clock
        self.rng = rng or random.Random()

    def __str__(self) -> str:
        return "in this process"

    async def sync(self, deltas: Sequence[tuple[int, int]]) -> Snapshot:
        now = self.clock()
        rested: dict[int, float] = {}
        for index, (successes, failures) in enumerate(deltas):
            if successes or failures:
                rest = self.health[index].apply(self.policy, successes, failures, now, self.rng.random())
                if rest is not None:
                    rested[index] = rest
        return Snapshot([replace(h) for h in self.health], rested)
