"""``ids=failed``: the ids recorded failed in the latest pass, read into a temporary id file as the pass opens."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from productcrawler.ids.failed import FailedIds
from productcrawler.ids.idfile import IdFile
from productcrawler.passes.database_sql import write_failed_ids


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
