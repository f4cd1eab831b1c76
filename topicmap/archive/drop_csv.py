"""CSV drops: rows with their physical lines, read strictly and in bounded memory.

* CSV: fields up to ``ReadLimits.max_row_bytes`` (32 Mi characters a row, all its fields and lines; the csv
  module's own 128 KiB field limit is raised to it, so a long ``html`` field never makes the reader lose its
  place). A longer row stops the file at its line without being read whole (a file without a line break
  must not be read into memory); a rejected row is reported with its exact physical lines (header = line 1; a row whose quoted field spans lines reports ``lines 5-9``). The CSV is
  parsed strictly: a syntax error (an unclosed quote, text after a closing quote) stops the file there and
  fails it, naming the line, because reading on after a quoting error would turn lines inside a field into
  invented rows.
* A CSV decodes to at most as many characters as it has bytes: a file larger than ``max_file_bytes`` is refused
  unread (``csv_drop_rows``).
* Invalid UTF-8 rejects the row, naming its lines and how many bytes are invalid. Replacing the bytes would
  store an altered title, text or URL that no later run can repair; the usual cause is a file saved in
  another encoding, which the user fixes by saving it as UTF-8 and dropping it again (the rows that
  already loaded are recognised, the fixed ones load).
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from topicmap.archive.drop_rows import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    ArchiveFileError,
    RowError,
    SourceRow,
    check_columns,
)
from topicmap.archive.warc import DEFAULT_READ_LIMITS, ReadLimits

# surrogateescape decodes each invalid byte to one lone surrogate U+DC80..U+DCFF, at its exact place
_INVALID_UTF8 = re.compile("[\udc80-\udcff]")


def _invalid_bytes(value: str) -> list[str]:
    return _INVALID_UTF8.findall(value)


def _allow_fields_up_to(size: int) -> None:
    """Raise the csv module's field limit (128 KiB by default, process-wide) to at least `size` characters."""
    limit = min(max(size + 1, csv.field_size_limit()), sys.maxsize)
    if limit > csv.field_size_limit():
        csv.field_size_limit(limit)


class _CappedLines:
    """A CSV file's physical lines for the csv reader, a row at most ``cap`` characters long (all its lines).

    Each line is read with a bound, so a row over the cap is refused where it starts without being read
    whole; ``start_row`` is called as the reader starts each row."""

    def __init__(self, handle: Any, cap: int, path: Path) -> None:
        self.handle, self.cap, self.path = handle, cap, path
        self.row_chars = 0
        self.row_line = 1

    def start_row(self, line: int) -> None:
        self.row_chars, self.row_line = 0, line

    def __iter__(self) -> _CappedLines:
        return self

    def __next__(self) -> str:
        room = self.cap - self.row_chars
        text = self.handle.readline(room + 1) if room >= 0 else ""
        if room < 0 or (len(text) > room and not text.endswith(("\n", "\r"))):
            raise ArchiveFileError(
                f"{self.path}:{self.row_line}: the row starting on this line is longer than "
                f"{self.cap:,} characters (the max_row_bytes read limit); reading stopped here without "
                "reading it whole: the rows before it were read"
            )
        if not text:
            raise StopIteration
        self.row_chars += len(text)
        return text


def read_csv_rows(
    path: Path,
    required: Sequence[str] = REQUIRED_COLUMNS,
    expected: Sequence[str] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
    max_row_chars: int = DEFAULT_READ_LIMITS.max_row_bytes,
) -> Iterator[SourceRow | RowError]:
    """Rows of a UTF-8 CSV (a BOM is allowed) as SourceRows with their physical lines, or RowErrors.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the csv module's own rule). Raises ArchiveFileError for a
    missing header or column, for a CSV syntax error (where reading has to stop; module doc), and for a row
    over ``max_row_chars``.
    """
    _allow_fields_up_to(max_row_chars)
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
        lines = _CappedLines(handle, max_row_chars, path)
        reader = csv.reader(lines, strict=True)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise ArchiveFileError(f"{path}:1: the header line is not valid CSV: {exc}") from exc
        if header is None:
            raise ArchiveFileError(f"{path}: empty file (no header line)")
        header = [name.strip() for name in header]
        if any(_invalid_bytes(name) for name in header):
            raise ArchiveFileError(f"{path}:1: the header line has invalid UTF-8; save the file as UTF-8")
        check_columns(path, header, required, expected)
        while True:
            start = reader.line_num + 1
            lines.start_row(start)
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise ArchiveFileError(
                    f"{path}:{start}: CSV syntax error in the row starting on this line ({exc}); reading "
                    "stopped here so that no line inside a quoted field is taken for a row: the rows "
                    "before it were read, fix the file to load the rest"
                ) from exc
            end = reader.line_num
            if not fields:  # a blank line
                continue
            invalid = [char for value in fields for char in _invalid_bytes(value)]
            if invalid:
                first = bytes([ord(invalid[0]) - 0xDC00])
                yield RowError(
                    str(path),
                    start,
                    f"{len(invalid)} invalid UTF-8 byte(s) (the first is {first!r}); the row is rejected "
                    "rather than stored with replaced characters: save the file as UTF-8",
                    end,
                )
                continue
            if len(fields) != len(header):
                yield RowError(
                    str(path), start, f"row has {len(fields)} fields, header has {len(header)}", end
                )
                continue
            yield SourceRow(start, end, dict(zip(header, fields, strict=True)))


def csv_drop_rows(path: Path, limits: ReadLimits) -> Iterator[SourceRow | RowError]:
    """The rows of a CSV drop, each within ``max_row_bytes``. A CSV decodes to at most as many characters as it
    has bytes, so the whole file is within ``max_file_bytes`` when its size is: a larger one is refused unread."""
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise ArchiveFileError(
            f"{path}: {size:,} bytes, more than the max_file_bytes read limit of {limits.max_file_bytes:,} "
            "bytes; nothing of the file is read (split it, or raise the limit)"
        )
    return read_csv_rows(path, max_row_chars=limits.max_row_bytes)
