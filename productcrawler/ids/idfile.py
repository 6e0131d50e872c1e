"""An id file, one id a line, streamed: one scan at start, then a sparse index of byte offsets.

The scan reads the file once, in 64 KiB chunks: it checks every line, counts
the ids, computes the file's SHA-256 digest and keeps the byte offset of
every ``INDEX_EVERY``-th id. Memory is that index (8 bytes per 1,024 ids:
80 KB for ten million) whatever the file's size.

Position p (1..total) is the p-th id of the file. Blank lines do not count
and ASCII whitespace around an id is dropped; every other line is an id,
``#`` included (SKUs may start with one), but a string id with a control
character other than tab is refused, naming its line. A duplicate is an id like any
other: each of its positions is fetched and counted.

``ids_at`` reads forward from where its last read ended, so ascending
positions (sequential leasing, another instance's interleaved batches) cost a
read each; any other position (a retry, a recovered lease) seeks to the index
entry before it and reads at most ``INDEX_EVERY`` lines.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Ids between two entries of the offset index.
INDEX_EVERY = 1024
#: The longest id, in characters (the VARCHAR(64) of the tables).
MAX_ID_LENGTH = 64
#: The largest integer id (a signed BIGINT).
MAX_INT_ID = 2**63 - 1
_CHUNK = 1 << 16
#: Control characters (C0, DEL, C1) a string id may not hold: all but tab (and the newline that ends a line).
#: A NUL would be stored as it is, and ends the id in a C string; the others are a file's damage, not a SKU.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class IdFileError(ValueError):
    """The id file cannot be used: unreadable, empty, or a line that is not an id (its number is in the message)."""


def parse_id(raw: bytes, id_type: str) -> int | str:
    """One stripped, non-empty line as an id of ``id_type``; raises ``ValueError`` saying why not."""
    if len(raw) > MAX_ID_LENGTH:
        text = raw.decode("utf-8", errors="replace")
        if len(text) > MAX_ID_LENGTH:
            raise ValueError(f"the id is {len(text)} characters long; at most {MAX_ID_LENGTH} are allowed")
    if id_type == "int":
        if not raw.isdigit():  # bytes.isdigit: ASCII digits only
            raise ValueError(f"{_shown(raw)} is not an integer id (PRODUCT_ID_TYPE=int)")
        value = int(raw)
        if not 1 <= value <= MAX_INT_ID:
            raise ValueError(f"{_shown(raw)} is not between 1 and {MAX_INT_ID}")
        return value
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{_shown(raw)} is not UTF-8") from None
    fault = string_id_fault(text)
    if fault is not None:
        raise ValueError(f"{_shown(raw)} {fault}")
    return text


def string_id_fault(text: str) -> str | None:
    """Why ``text`` cannot be a string id (too long, a control character), or None: the rule for an id
    read from a file and for one a listing gives."""
    if len(text) > MAX_ID_LENGTH:
        return f"is {len(text)} characters long; at most {MAX_ID_LENGTH} are allowed"
    control = _CONTROL.search(text)
    if control is not None:
        return (f"holds the control character U+{ord(control.group()):04X}; "
                "an id may hold a tab, but no other control character")
    return None


def _shown(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return repr(text if len(text) <= 40 else text[:40] + "...")


class IdFile:
    """A scanned id file: its digest, its id count and the offset index; ``ids_at`` maps positions to ids."""

    def __init__(self, path: str, id_type: str, total: int, digest: str, offsets: array[int]) -> None:
        self.path = path
        self.id_type = id_type
        self.total = total
        self.digest = digest
        self.offsets = offsets  # offsets[k]: the byte offset of position k * INDEX_EVERY + 1
        self._reader: IO[bytes] | None = None
        self._next = 1  # the position the reader is at

    @classmethod
    def scan(cls, path: str, id_type: str) -> IdFile:
        """Read and check the whole file once; raises ``IdFileError`` naming the line at fault."""
        digest = hashlib.sha256()
        offsets = array("q")
        count = line_number = 0
        try:
            with open(path, "rb") as file:
                pending, base = b"", 0  # base: the file offset of pending's first byte
                while True:
                    chunk = file.read(_CHUNK)
                    digest.update(chunk)
                    lines = (pending + chunk).split(b"\n")
                    pending = lines.pop() if chunk else b""
                    for line in lines:
                        line_number += 1
                        raw = line.strip()
                        if raw:
                            try:
                                parse_id(raw, id_type)
                            except ValueError as error:
                                raise IdFileError(f"line {line_number}: {error}") from None
                            if count % INDEX_EVERY == 0:
                                offsets.append(base)
                            count += 1
                        base += len(line) + 1
                    if not chunk:
                        break
        except OSError as error:
            raise IdFileError(f"cannot read the file: {error.strerror or error}") from None
        if count == 0:
            raise IdFileError("the file has no ids (it is empty or only blank lines)")
        return cls(path, id_type, count, digest.hexdigest(), offsets)

    @property
    def descriptor(self) -> str:
        return f"file:{self.digest}:{self.total}"

    def describe(self) -> str:
        return f"{self.total} ids of {self.path} (SHA-256 {self.digest[:16]})"

    def ids_at(self, positions: list[int]) -> list[int | str]:
        return [self._id_at(position) for position in positions]

    def _id_at(self, position: int) -> int | str:
        if not 1 <= position <= self.total:
            raise IndexError(f"position {position} is outside 1..{self.total}")
        if self._reader is None:
            self._reader = open(self.path, "rb")  # kept open for the pass; closed by close()
            self._next = 1
        if not self._next <= position < self._next + INDEX_EVERY:
            block = (position - 1) // INDEX_EVERY
            self._reader.seek(self.offsets[block])
            self._next = block * INDEX_EVERY + 1
        while True:
            line = self._reader.readline()
            if not line:
                raise IdFileError(f"{self.path} changed while the crawl ran: it has no id at position {position}")
            raw = line.strip()
            if raw:
                self._next += 1
                if self._next - 1 == position:
                    return parse_id(raw, self.id_type)

    def chunks(self, size: int) -> Iterator[list[tuple[int, int | str]]]:
        """Every (position, id), in lists of ``size``, read in order through a handle of its own."""
        batch: list[tuple[int, int | str]] = []
        position = 0
        with open(self.path, "rb") as file:
            for line in file:
                raw = line.strip()
                if raw:
                    position += 1
                    batch.append((position, parse_id(raw, self.id_type)))
                    if len(batch) >= size:
                        yield batch
                        batch = []
        if batch:
            yield batch

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


_scanned: dict[tuple[str, int, int, str], IdFile] = {}


def scanned(path: str, id_type: str) -> IdFile:
    """``IdFile.scan``, once per process for an unchanged file (the start-up check and the crawler share it)."""
    try:
        stat = os.stat(path)
    except OSError as error:
        raise IdFileError(f"cannot read the file: {error.strerror or error}") from None
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns, id_type)
    found = _scanned.get(key)
    if found is None:
        found = _scanned[key] = IdFile.scan(path, id_type)
    return found
