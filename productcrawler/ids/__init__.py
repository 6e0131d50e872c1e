"""Which ids a pass fetches: a pass runs over positions 1..N, an id source says which id is at each.

``RangeIds`` is a dense range (position p is id start + p - 1); ``IdFile``
(``idfile.py``) is a file of one id a line, streamed through a sparse offset
index; ``failed.py`` writes the ids recorded ``failed`` in the latest pass to
such a file. The passes (``passes/``) keep their bitmap, cursor and leases
over positions, so a pass over ten million ids costs the same whatever the ids are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from productcrawler.ids.idfile import IdFile, IdFileError

#: A product id: an integer (PRODUCT_ID_TYPE=int) or a string (PRODUCT_ID_TYPE=string).
ProductId = int | str

__all__ = ["IdFile", "IdFileError", "IdSource", "ProductId", "RangeIds"]


class IdSource(Protocol):
    @property
    def total(self) -> int:
        """How many positions the pass has (1..total)."""

    @property
    def descriptor(self) -> str:
        """What a shared pass records to tell this id list from another (``range:..`` or ``file:..``)."""

    def describe(self) -> str:
        """The id list for a log line."""

    def ids_at(self, positions: list[int]) -> list[ProductId]:
        """The id at each position (ascending runs are cheapest)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class RangeIds:
    start: int
    end: int

    @property
    def total(self) -> int:
        return self.end - self.start + 1

    @property
    def descriptor(self) -> str:
        return f"range:{self.start}-{self.end}"

    def describe(self) -> str:
        return f"ids {self.start}..{self.end}"

    def ids_at(self, positions: list[int]) -> list[ProductId]:
        start = self.start - 1
        return [start + position for position in positions]

    def position_of(self, product_id: int) -> int:
        return product_id - self.start + 1

    def close(self) -> None:
        pass
