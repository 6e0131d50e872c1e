"""``ids=failed``: the ids recorded failed in the latest pass, written to an id file of their own.

The ids are read once, as the pass opens (in the database pool's thread),
into a temporary file, so that the run is a pass over a file like any other
(its digest and count recorded, leased by position). The file is removed when
the pass closes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from productcrawler.ids.idfile import IdFile
from productcrawler.passes.database_sql import write_failed_ids


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


def failed_snapshot(cursor: Any, dialect: Any, id_type: str) -> FailedIds:
    """A function of a cursor (``Database.run``): read the failed ids into a temporary id file."""
    descriptor, path = tempfile.mkstemp(prefix="productcrawler-failed-", suffix=".ids")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            count, latest, source = write_failed_ids(cursor, dialect, out)
        if count == 0:
            os.unlink(path)
            return FailedIds(None, latest, source)
        return FailedIds(IdFile.scan(path, id_type), latest, source)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
