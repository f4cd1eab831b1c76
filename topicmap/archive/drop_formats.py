"""The formats a drop file may have: one entry each, found by the file's name.

A format is a name, the file-name endings it is known by, and a reader that yields the file's rows
(``SourceRow``: the story's fields ``url, title, text, publish_date, medium[, html]`` with the row's place in the
file) and the rows it rejects (``RowError``), and raises ``ArchiveFileError`` when the file cannot be read on. The
rows are checked and stored the same way whatever their format (``topicmap.archive.drops``), so a new archive source
that arrives as files is one reader and one entry in ``DROP_FORMATS`` (docs/extending.md shows one).

This module stays light (the readers' libraries, pyarrow and warcio, load with the first file read), because the
Dagster resource that lists the drops folder imports it as the code location loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topicmap.archive.drop_rows import RowError, SourceRow
    from topicmap.archive.warc import ReadLimits

#: what a format's reader yields
Rows = Iterator["SourceRow | RowError"]


@dataclass(frozen=True)
class DropFormat:
    """One kind of drop file."""

    name: str
    #: lowercase file-name endings, with their dot (``.warc.gz`` is one ending)
    suffixes: tuple[str, ...]
    #: the file's rows and rejected rows, in file order, within the limits
    read: Callable[[Path, ReadLimits], Rows]

    def matches(self, path: Path) -> bool:
        return path.name.lower().endswith(self.suffixes)


def _csv_rows(path: Path, limits: ReadLimits) -> Rows:
    from topicmap.archive.drop_csv import csv_drop_rows

    return csv_drop_rows(path, limits)


def _parquet_rows(path: Path, limits: ReadLimits) -> Rows:
    from topicmap.archive.drop_parquet import parquet_rows

    return parquet_rows(path, limits)


def _warc_rows(path: Path, limits: ReadLimits) -> Rows:
    from topicmap.archive.drop_warc import warc_rows

    return warc_rows(path, limits)


DROP_FORMATS: list[DropFormat] = [
    DropFormat("CSV", (".csv",), _csv_rows),
    DropFormat("Parquet", (".parquet", ".pq"), _parquet_rows),
    DropFormat("WARC/ARC", (".warc", ".warc.gz", ".arc", ".arc.gz"), _warc_rows),
]


def drop_format(path: Path) -> DropFormat | None:
    """The format a file's name says it has, or None."""
    return next((fmt for fmt in DROP_FORMATS if fmt.matches(path)), None)


def known_endings() -> str:
    """The endings of every format, for a message: ``.csv, .parquet, .pq, ...``."""
    return ", ".join(suffix for fmt in DROP_FORMATS for suffix in fmt.suffixes)
