"""``ids=failed``: the ids recorded failed in the latest pass, in an id file of their own.

The pass reads them once, as it opens (``passes/failed.py``), into a
temporary file, so that the run is a pass over a file like any other (its
digest and count recorded, leased by position). The file is removed when the
pass closes.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from productcrawler.ids.idfile import IdFile


@dataclass(frozen=True)
class FailedIds:
    #: The ids, as a scanned file (None: no failed ids).
    ids: IdFile | None
    #: The latest pass (None: no pass yet).
    latest_pass: int | None
    #: The pass a run over these ids names as its source.
    source_pass: int | None

    def nothing_to_fetch(self) -> str:
        """The line a run over no failed ids ends with."""
        latest = "no pass yet" if self.latest_pass is None else f"pass {self.latest_pass}"
        return f"No ids are recorded failed in the latest pass ({latest}): nothing to fetch"

    def describe(self) -> str:
        """The ids for a pass's opening line."""
        total = 0 if self.ids is None else self.ids.total
        return f"the {total} ids recorded failed in the latest pass (pass {self.latest_pass})"

    def remove(self) -> None:
        if self.ids is not None:
            self.ids.close()
            with contextlib.suppress(OSError):
                os.unlink(self.ids.path)
