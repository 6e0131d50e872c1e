"""What a pass is to the scheduler: the one interface both implementations have.

A pass is one sweep over an id list: a range, or a file of ids
(``productcrawler/ids``). It runs over the list's positions 1..N (for a
range, position p is id start + p - 1) and its ``ids`` source says which id
is at each: leases, retries, bitmaps and acknowledgements are of positions,
requests and rows of ids. The scheduler (``scheduler.py``) is
its only driver: it opens the pass, leases ids in small batches and turns
them into requests, gives ids back for another attempt (``push``, with the
retry's delay), acknowledges ids whose outcome the database has committed,
beats while the crawl runs and settles at close. Everything else (the
pipeline's row stamp, the progress line, the metrics) only reads it.

- ``DatabasePass`` (``database.py``): one process, the database is the
  ledger. An id is done when a row written by this pass says so; leasing,
  retries and acknowledgement live in memory.
- ``RedisPass`` (``redis_pass.py``): any number of instances share the pass
  in Redis; leases end when the outcome is acknowledged.

Every method that may wait (on the database or Redis) is a coroutine, run on
the reactor's asyncio loop; none blocks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from productcrawler.ids import IdSource

#: What ``lease`` says of a pass that had nothing to hand out right now.
#: RUNNING: more may come (retries waiting, ids leased by other instances);
#: FINISHED: nothing more will (every id handed out, or the pass is complete);
#: REPLACED: a newer pass took over; LOST: the pass vanished (Redis emptied).
RUNNING, FINISHED, REPLACED, LOST = "running", "finished", "replaced", "lost"


@dataclass(frozen=True)
class Entry:
    """A position of the pass to fetch, and how many retries its id has had (Scrapy's ``retry_times``)."""

    position: int
    retry_times: int = 0

    def encode(self) -> str:
        return f"{self.position}:{self.retry_times}"

    @classmethod
    def decode(cls, raw: bytes | str) -> Entry:
        text = raw.decode() if isinstance(raw, bytes) else raw
        position, retry_times = text.split(":", 1)
        return cls(int(position), int(retry_times))


@dataclass(frozen=True)
class Lease:
    entries: list[Entry]
    #: Only read when ``entries`` is empty: one of RUNNING, FINISHED, REPLACED, LOST.
    status: str = RUNNING


class Pass(Protocol):
    @property
    def total(self) -> int:
        """Positions in the pass (ids of its list, duplicates included; a listing's pages known so far)."""
    #: Seconds between looks at a pass that had nothing to hand out.
    poll_interval: float

    @property
    def ids(self) -> IdSource:
        """Which id is at each position (known once the pass is open: ``failed`` ids are read then)."""

    @property
    def pass_id(self) -> int | None: ...

    @property
    def row_stamp(self) -> int | None:
        """The ``pass_id`` column of every row written now (None: rows carry no pass)."""

    @property
    def started_at(self) -> float | None:
        """When the pass began, in Unix seconds."""

    @property
    def instance(self) -> str | None:
        """This process's name in a shared pass (None for a pass of one process)."""

    def is_unavailable(self, error: BaseException) -> bool:
        """Whether ``error`` means "the store is away for now" (retried by the next beat or poll);
        anything else is a bug and is logged as such."""

    async def open(self, *, fresh: bool) -> str:
        """Join or resume the pass over the id list, or start one; returns a line saying which."""

    async def lease(self, count: int) -> Lease:
        """Up to ``count`` positions to fetch now: due retries first, then positions never handed out."""

    async def push(self, retries: list[tuple[Entry, float]]) -> None:
        """Give positions back for another attempt, each after its delay in seconds."""

    async def acknowledge(self, positions: list[int], revealed: dict[int, str] | None = None) -> str:
        """These positions' outcomes are committed; returns RUNNING, or FINISHED once every one is done.

        ``revealed``: in a listing pass, the pages (position -> URL) these pages' answers made known;
        empty in a pass by id."""

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        """Liveness: publish ``status``, take back dead instances' leases; (pass status, ids taken back)."""

    async def give_back_lost(self) -> int:
        """Ids leased to this process that it never received (a reply lost mid-call), back to the pass."""

    def done(self, this_run: int) -> int:
        """Ids of the pass with an outcome, given this process's count; no I/O."""

    async def close(self, reason: str, *, lost: bool) -> bool:
        """Give back every lease and settle the pass; True if it is over (complete, or replaced)."""
