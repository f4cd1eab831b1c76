"""The story archive's inputs: CSV, Parquet and WARC drops (url, title, text, publish_date, medium[, html]).

What a drop promises: no row is lost without a report and none is invented.

* CSV: fields up to ``ReadLimits.max_row_bytes`` (32 Mi characters a row, all its fields and lines; the csv
  module's own 128 KiB field limit is raised to it, so a long ``html`` field never makes the reader lose its
  place). A longer row stops the file at its line without being read whole (a file without a line break
  must not be read into memory); a rejected row is reported with its exact physical lines (header = line 1; a row whose quoted field spans lines reports ``lines 5-9``). The CSV is
  parsed strictly: a syntax error (an unclosed quote, text after a closing quote) stops the file there and
  fails it, naming the line, because reading on after a quoting error would turn lines inside a field into
  invented rows.
* A NUL character in a text field (url, title, text, medium, publish_date) rejects the row: the store
  cannot hold one, and dropping it would store a text that differs from the file's.
* Invalid UTF-8 rejects the row, naming its lines and how many bytes are invalid. Replacing the bytes would
  store an altered title, text or URL that no later run can repair; the usual cause is a file saved in
  another encoding, which the user fixes by saving it as UTF-8 and dropping it again (the rows that
  already loaded are recognised, the fixed ones load).
* Parquet is read row group by row group, batch by batch; a file pyarrow cannot open (truncated, or not
  Parquet at all) fails, and so does one whose columns are not of text type (a ``text`` column of lists is
  not a text to store as "") or whose metadata (footer) is longer than ``ReadLimits.max_page_bytes``.
  A few compressed megabytes can decode to gigabytes, and a reader decodes a page (of values, or a
  column's dictionary) whole, so before anything is decoded the page headers of the columns read are
  checked, in bytes as decoded: a page over ``max_page_bytes`` (128 MiB), or a page holding a single value
  over ``max_row_bytes`` (that value alone is over the row limit), makes its row group unread, reported as
  one rejected entry naming the row group, its lines (row number + 1), the column, the page and the limit
  (counted as all its rows); the other row groups load. A page of many values may be over the row limit
  with every row far under it (pyarrow puts up to 1,024 values in a page: 1,024 html values of 46 KB make
  a 47 MB page) and is read; a page over the page limit is refused with how to write the file with
  smaller pages. Once decoded, a row whose fields together are over ``max_row_bytes`` is rejected with its
  line before it becomes Python strings. A batch holds as many rows (1 to 1,000) as fit in
  ``PARQUET_BATCH_BYTES`` at, for each column, the largest average value of its pages (the chunk's last
  page aside) and the longest value of its dictionary (a dictionary value is expanded in each row holding
  it, so it is read from the dictionary page rather than averaged): an ordinary file reads in batches of
  1,000, and a page of skewed values costs at most its own size, which the page limit bounds.
* A file whose name is not valid UTF-8, or a link leading out of the drops folder, is refused unread and
  recorded once with its reason (keyed by its name, so a renamed copy loads).
* WARC/ARC: see ``topicmap.archive.warc`` (bounded decompression, truncation reported with its offset);
  a story's place is its record offset.
* URLs longer than the store's ``MAX_URL_LENGTH`` (1024) are rejected with a reason, never cut: every URL
  column of the store is an indexed VARCHAR(1024) that the spider matches on (as Media Cloud does), and
  a cut URL is another URL that would match, or merge with, the wrong story.

A file that cannot be read fails alone (`load_drop`): it is recorded in ``archive_files`` with state
``failed`` and its reason, the good files beside it load, and it is retried only when its content (sha256)
changes. Rows read before the point of failure are kept (they are valid; loading is idempotent).
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlalchemy import select

from topicmap.archive.warc import DEFAULT_READ_LIMITS, MIB, ReadLimits, WarcReadError
from topicmap.archive.warc_stories import stories_from_warc
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.web.extract import extract_story
from topicmap.web.urls import is_http_url

REQUIRED_COLUMNS = ("url", "title", "text", "publish_date")
OPTIONAL_COLUMNS = ("medium", "html")
EARLIEST_DATE = datetime(2008, 1, 1, tzinfo=UTC)
#: stories handed to the store per transaction while a drop streams in, and what their texts may add up to
LOAD_BATCH = 500
LOAD_BATCH_BYTES = 32 * MIB
#: row errors kept per file for the report (all are counted)
MAX_REPORTED_ERRORS = 1000

STATE_LOADED = "loaded"
STATE_FAILED = "failed"


class ArchiveFileError(ValueError):
    """A whole file cannot be read (missing columns, unknown format, broken CSV or Parquet): names the file,
    where, and the problem."""


@dataclass(frozen=True)
class RowError:
    """A rejected row: its physical line(s) in a CSV (header = 1), row number + 1 in a Parquet file, or the
    record's byte offset in a WARC/ARC file (``unit="offset"``). ``rows``: how many rows it rejects (a
    Parquet row group refused unread is one error for all its rows)."""

    path: str
    line: int
    problem: str
    end_line: int | None = None
    unit: str = "line"
    rows: int = 1

    @property
    def where(self) -> str:
        if self.unit == "offset":
            return f"offset {self.line}"
        if self.end_line is not None and self.end_line != self.line:
            return f"lines {self.line}-{self.end_line}"
        return f"line {self.line}"

    def __str__(self) -> str:
        if self.unit == "line" and (self.end_line is None or self.end_line == self.line):
            return f"{self.path}:{self.line}: {self.problem}"
        return f"{self.path}: {self.where}: {self.problem}"


@dataclass(frozen=True)
class SourceRow:
    """One row of a drop before validation, with where it is in the file."""

    line: int
    end_line: int
    values: dict[str, Any]
    unit: str = "line"


@dataclass
class ParsedDrop:
    path: Path
    sha256: str
    stories: list[NewStory] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- validation


def url_problem(url: object) -> str | None:
    """Why `url` cannot be a story URL, or None. Too long is a reason, never a cut (module doc)."""
    if not url or not isinstance(url, str) or not is_http_url(url):
        return f"url {url!r} is not an absolute http(s) URL"
    if len(url) > s.MAX_URL_LENGTH:
        return (
            f"url is {len(url)} characters, longer than the store's {s.MAX_URL_LENGTH} "
            f"(not cut, which would make it another URL): {url[:80]}..."
        )
    return None


def parse_publish_date(value: object) -> datetime | None:
    """ISO dates and datetimes (naive = UTC). Empty → None. Raises ValueError on anything else."""
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        if not text:
            return None
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


#: the fields of a row that are stored as text (html is stored as bytes, where a NUL is just a byte)
TEXT_FIELDS = ("url", "title", "text", "medium", "publish_date")


def _text_field_problem(row: dict) -> str | None:
    """Why a text field cannot be stored as it is in the file: not text, or holding a NUL character."""
    for name in TEXT_FIELDS:
        value = row.get(name)
        if isinstance(value, str):
            if "\x00" in value:
                return (
                    f"{name} holds a NUL character (at character {value.index(chr(0)) + 1}); the row is "
                    "rejected rather than stored without it"
                )
        elif value is not None and not (name == "publish_date" and isinstance(value, date)):
            return f"{name} is a {type(value).__name__}, not text"
    return None


def story_from_row(row: dict, now: datetime | None = None) -> NewStory:
    """Validate one archive row; raises ValueError with the reason."""
    problem = _text_field_problem(row)
    if problem:
        raise ValueError(problem)
    url = row.get("url").strip() if isinstance(row.get("url"), str) else row.get("url")
    problem = url_problem(url)
    if problem:
        raise ValueError(problem)
    title = row.get("title")
    text = row.get("text")
    if (not isinstance(title, str) or not title.strip()) and (not isinstance(text, str) or not text.strip()):
        raise ValueError("both title and text are empty")
    try:
        publish_date = parse_publish_date(row.get("publish_date"))
    except ValueError as exc:
        raise ValueError(f"publish_date {row.get('publish_date')!r} is not an ISO date: {exc}") from exc
    now = now or datetime.now(UTC)
    if publish_date is not None and not (EARLIEST_DATE <= publish_date <= now):
        raise ValueError(f"publish_date {publish_date.isoformat()} is before 2008 or in the future")
    medium = row.get("medium")
    html = row.get("html")
    if isinstance(html, str):
        html = html.encode("utf-8")
    fields = {
        "title": title.strip() if isinstance(title, str) else None,
        "text": text if isinstance(text, str) else "",
        "medium_name": medium.strip() if isinstance(medium, str) and medium.strip() else None,
        "html": html if isinstance(html, bytes) and html else None,
        "encoding": "utf-8" if html else None,
    }
    extracted = row.get("extracted")
    if extracted is not None:
        # a page of a generic crawl, read by the spider's extraction: its date keeps the page's own UTC offset
        # (the page's calendar day), and how title, date and language were found is kept with the story
        return NewStory.from_extracted(url, extracted, **fields)
    return NewStory(url=url, publish_date=publish_date, **fields)


def _check_columns(
    path: Path,
    columns: Sequence[str],
    required: Sequence[str],
    expected: Sequence[str] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise ArchiveFileError(f"{path}: missing column(s) {missing}; expected {list(expected)}")


# ---------------------------------------------------------------------------------------------- CSV

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
        _check_columns(path, header, required, expected)
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


# ---------------------------------------------------------------------------------------------- Parquet


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


_PARQUET_TYPES = {
    "url": _is_text,
    "title": _is_text,
    "text": _is_text,
    "medium": _is_text,
    "html": lambda kind: _is_text(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind),
    "publish_date": lambda kind: _is_text(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind),
}
_PARQUET_TYPE_NAMES = {
    **dict.fromkeys(("url", "title", "text", "medium"), "string"),
    "html": "string or binary",
    "publish_date": "string, date or timestamp",
}

#: what one batch of a Parquet row group may decode to, by the average values of its pages (``_value_bytes``)
PARQUET_BATCH_BYTES = 32 * MIB
#: rows a Parquet batch holds at most
PARQUET_BATCH_ROWS = 1000
#: read buffer of a Parquet column chunk (without it, pyarrow reads a whole compressed chunk at once)
_PARQUET_BUFFER = MIB

# Parquet page types (parquet.thrift PageType)
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3


class _PageHeaderError(ValueError):
    """A Parquet page header that cannot be read."""


class _PageHeaderReader:
    """Just enough of the Thrift compact protocol to read a Parquet ``PageHeader`` from a file.

    Fields come back as ``{field id: int | dict}``; binary fields (page statistics can hold a whole value)
    are seeked past, never read. A header may not be longer than pyarrow's own limit (16 MiB)."""

    MAX_DEPTH = 16
    MAX_HEADER_BYTES = 16 * MIB

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.end = handle.tell() + self.MAX_HEADER_BYTES

    def _skip(self, size: int) -> None:
        if self.handle.seek(size, os.SEEK_CUR) > self.end:
            raise _PageHeaderError(f"a page header longer than {self.MAX_HEADER_BYTES:,} bytes")

    def _byte(self) -> int:
        data = self.handle.read(1)
        if not data:
            raise _PageHeaderError("the file ends inside a page header")
        return data[0]

    def _varint(self) -> int:
        result = 0
        for shift in range(0, 70, 7):
            byte = self._byte()
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
        raise _PageHeaderError("a varint longer than 10 bytes")

    def _zigzag(self) -> int:
        value = self._varint()
        return (value >> 1) ^ -(value & 1)

    def _value(self, kind: int, depth: int) -> int | dict | None:
        if kind in (1, 2, 3):  # a bool inside a list or map, or an i8: one byte
            self._byte()
        elif kind in (4, 5, 6):  # i16, i32, i64
            return self._zigzag()
        elif kind == 7:  # double
            self._skip(8)
        elif kind == 8:  # binary: skipped unread
            self._skip(self._varint())
        elif kind in (9, 10):  # list, set
            head = self._byte()
            size, element = head >> 4, head & 0x0F
            if size == 15:
                size = self._varint()
            for _ in range(size):
                self._value(element, depth + 1)
                self._skip(0)
        elif kind == 11:  # map
            size = self._varint()
            if size:
                kinds = self._byte()
                for _ in range(size):
                    self._value(kinds >> 4, depth + 1)
                    self._value(kinds & 0x0F, depth + 1)
                    self._skip(0)
        elif kind == 12:
            return self.struct(depth + 1)
        elif kind == 13:  # uuid
            self._skip(16)
        else:
            raise _PageHeaderError(f"unknown Thrift type {kind}")
        return None

    def struct(self, depth: int = 0) -> dict[int, Any]:
        if depth > self.MAX_DEPTH:
            raise _PageHeaderError("page header nested too deep")
        fields: dict[int, Any] = {}
        last = 0
        while True:
            head = self._byte()
            if head == 0:
                return fields
            kind, delta = head & 0x0F, head >> 4
            last = last + delta if delta else self._zigzag()
            # a bool field carries its value in its type (1 true, 2 false)
            fields[last] = kind == 1 if kind in (1, 2) else self._value(kind, depth)
            self._skip(0)


@dataclass(frozen=True)
class _Page:
    """One page of a column chunk: the rows of its row group it holds (0-based; a dictionary page holds
    the values of the rows of the data pages after it), what it decodes to, and where its (compressed)
    data is in the file."""

    first_row: int
    rows: int  # a dictionary page: how many values it holds
    size: int
    dictionary: bool = False
    offset: int = 0
    compressed: int = 0


def _column_pages(handle: BinaryIO, column: Any, num_rows: int, file_size: int) -> list[_Page]:
    """The pages of one column chunk of a flat column, from their headers (no page is decompressed)."""
    offsets = [o for o in (column.dictionary_page_offset, column.data_page_offset) if o]
    if not offsets:
        raise _PageHeaderError("the column chunk has no page offset")
    position, row, pages = min(offsets), 0, []
    while row < num_rows:
        if position >= file_size:
            raise _PageHeaderError(f"pages for {num_rows - row:,} more rows are missing")
        handle.seek(position)
        header = _PageHeaderReader(handle).struct()
        kind, size, compressed = header.get(1), header.get(2), header.get(3)
        if not isinstance(size, int) or not isinstance(compressed, int) or size < 0 or compressed < 0:
            raise _PageHeaderError(f"a page header at byte {position:,} has no valid sizes")
        if kind == _DICTIONARY_PAGE:
            detail = header.get(7)
            values = detail.get(1) if isinstance(detail, dict) else None
            values = values if isinstance(values, int) and values >= 0 else 0
            pages.append(_Page(row, values, size, True, handle.tell(), compressed))
        elif kind in (_DATA_PAGE, _DATA_PAGE_V2):
            detail = header.get(5 if kind == _DATA_PAGE else 8)
            # a flat column has one value (or null) a row: v1 counts values, v2 counts rows
            rows = detail.get(1 if kind == _DATA_PAGE else 3) if isinstance(detail, dict) else None
            if not isinstance(rows, int) or rows < 0:
                raise _PageHeaderError(f"the data page at byte {position:,} does not say how many rows")
            pages.append(_Page(row, rows, size, False, handle.tell(), compressed))
            row += rows
        elif kind != _INDEX_PAGE:
            raise _PageHeaderError(f"unknown page type {kind} at byte {position:,}")
        position = handle.tell() + compressed
    return pages


_UINT32 = struct.Struct("<I")
#: Parquet codecs (ColumnChunkMetaData.compression) that pyarrow can decompress alone (Parquet's legacy LZ4
#: has a framing of its own)
_PARQUET_CODECS = {
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "BROTLI": "brotli",
    "ZSTD": "zstd",
    "LZ4_RAW": "lz4_raw",
}


def _longest_dictionary_value(handle: BinaryIO, column: Any, page: _Page) -> int:
    """The longest value of a dictionary page in bytes, as decoded: what any one row of the data pages
    that use the dictionary can decode to. A fixed-width type's values are all as long; a text's are read
    from the page (decompressed: at most ``max_page_bytes``, which it was checked against). When the page
    cannot be read here (an unknown codec, a malformed page), its whole size: no value is longer."""
    if page.rows <= 1 or column.physical_type != "BYTE_ARRAY":
        return page.size // max(page.rows, 1)
    codec = _PARQUET_CODECS.get(column.compression)
    if column.compression != "UNCOMPRESSED" and (codec is None or not pa.Codec.is_available(codec)):
        return page.size
    if page.compressed > page.size + MIB:  # not what a codec makes of this page: not read
        return page.size
    try:
        handle.seek(page.offset)
        data: Any = handle.read(page.compressed)
        if len(data) != page.compressed:
            return page.size
        if codec is not None:  # read in place (the Arrow buffer), not copied
            data = memoryview(pa.Codec(codec).decompress(data, decompressed_size=page.size))
    except (pa.ArrowException, OSError, ValueError):
        return page.size
    # PLAIN byte arrays: a 4-byte little-endian length, then the value
    longest, position, end = 0, 0, len(data)
    for _ in range(page.rows):
        if position + 4 > end:
            return page.size
        (length,) = _UINT32.unpack_from(data, position)
        position += 4 + length
        longest = max(longest, length)
    return longest if position <= end else page.size


@dataclass(frozen=True)
class _RowGroupPlan:
    """How one row group is read: refused (with why) or in batches of ``batch_rows`` rows."""

    index: int
    first_row: int  # 0-based within the file
    num_rows: int
    refused: str | None = None
    batch_rows: int = PARQUET_BATCH_ROWS


def _page_where(page: _Page, first_line: int) -> str:
    if page.dictionary:
        return f"dictionary page (the values of the rows from line {first_line + page.first_row:,} on)"
    first = first_line + page.first_row
    return (
        f"page for line {first:,}"
        if page.rows == 1
        else f"page for lines {first:,}-{first + page.rows - 1:,}"
    )


def _page_refused(page: _Page, name: str, first_line: int, limits: ReadLimits) -> str | None:
    """Why a page is not to be decoded, or None: one value over the row limit, or a page over the page
    limit (with how to write the file)."""
    where = _page_where(page, first_line)
    if page.rows == 1 and page.size > limits.max_row_bytes:
        return (
            f"its {name!r} {where} holds a single value that decodes to {page.size:,} bytes, more than the "
            f"max_row_bytes read limit of {limits.max_row_bytes:,} (a row holding it is over the row "
            "limit); a page is decoded whole before any value in it can be checked"
        )
    if page.size <= limits.max_page_bytes:
        return None
    problem = (
        f"its {name!r} {where} decodes to {page.size:,} bytes, more than the max_page_bytes read limit of "
        f"{limits.max_page_bytes:,}; a page is decoded whole before any value in it can be checked"
    )
    if page.rows > 1:
        problem += (
            f". The page holds {page.rows:,} {'values' if page.dictionary else 'rows'} "
            f"({page.size // page.rows:,} bytes each on average): write the file with smaller pages "
            "(pyarrow: a smaller data_page_size and write_batch_size, or use_dictionary=False for this "
            "column) or raise the page limit"
        )
    return problem


def _value_bytes(pages: list[_Page], handle: BinaryIO, column: Any) -> int:
    """What one row of a column chunk is taken to decode to, in bytes, for sizing batches: the largest
    average value of its data pages (the chunk's last page aside when there are others: it may hold a
    single long value, and it is one page, whose cost the page limit bounds) and the longest value of its
    dictionary (each row holding it expands it again)."""
    data = [page for page in pages if not page.dictionary and page.rows]
    if len(data) > 1:
        data = data[:-1]
    per_value = max((page.size // page.rows for page in data), default=0)
    for page in pages:
        if page.dictionary:
            per_value = max(per_value, _longest_dictionary_value(handle, column, page))
    return per_value


def _plan_row_groups(
    path: Path, parquet: pq.ParquetFile, wanted: Sequence[str], limits: ReadLimits
) -> list[_RowGroupPlan]:
    """Each row group's plan, from the footer and the page headers of the wanted columns: a row group with a
    page ``_page_refused`` refuses (or, when its page headers cannot be read, a column chunk over the same
    limits) is refused; the others are read in batches of rows that decode to about
    ``PARQUET_BATCH_BYTES``, by ``_value_bytes``."""
    metadata = parquet.metadata
    schema = metadata.schema
    index_of = {schema.column(j).path: j for j in range(metadata.num_columns)}
    file_size = path.stat().st_size
    plans, first_row = [], 0
    with path.open("rb") as handle:
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            num_rows, first_line = group.num_rows, first_row + 2  # row 1 is line 2, as in a CSV
            refused, row_bytes = None, 0
            for name in wanted:
                column = group.column(index_of[name])
                chunk_size = column.total_uncompressed_size
                try:
                    pages = _column_pages(handle, column, num_rows, file_size)
                except (_PageHeaderError, OSError) as exc:
                    # nothing tells what its pages decode to: the chunk is judged as one page
                    if num_rows == 1 and chunk_size > limits.max_row_bytes:
                        limit = f"max_row_bytes read limit of {limits.max_row_bytes:,} (for its one row)"
                    elif chunk_size > limits.max_page_bytes:
                        limit = f"max_page_bytes read limit of {limits.max_page_bytes:,}"
                    else:
                        row_bytes += chunk_size  # a value is never longer than its column chunk
                        continue
                    refused = (
                        f"its {name!r} column decodes to {chunk_size:,} bytes, more than the {limit}, and "
                        f"its page headers cannot be read to tell its pages' sizes: {exc}"
                    )
                    break
                refused = next(
                    (
                        problem
                        for page in pages
                        if (problem := _page_refused(page, name, first_line, limits)) is not None
                    ),
                    None,
                )
                if refused is not None:
                    break
                row_bytes += _value_bytes(pages, handle, column)
            if refused is not None:
                last_line = first_line + num_rows - 1
                rows = f"{num_rows:,} row{'s' if num_rows != 1 else ''}"
                refused = (
                    f"row group {index} (lines {first_line:,}-{last_line:,}: {rows}) is not read: {refused}. "
                    "The other row groups are read."
                )
            batch_rows = max(1, min(PARQUET_BATCH_ROWS, PARQUET_BATCH_BYTES // max(row_bytes, 1)))
            plans.append(_RowGroupPlan(index, first_row, num_rows, refused, batch_rows))
            first_row += num_rows
    return plans


def _check_parquet_footer(path: Path, cap: int) -> None:
    """Refuse a footer (the file's metadata) longer than ``cap`` before pyarrow reads it whole."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size < 12:
            return  # pyarrow reports the file as not Parquet
        handle.seek(size - 8)
        tail = handle.read(8)
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and length > cap:
        raise ArchiveFileError(
            f"{path}: its Parquet metadata (footer) is {length:,} bytes, more than the max_page_bytes read "
            f"limit of {cap:,}; nothing of the file is read"
        )


def _rows_over(batch: pa.RecordBatch, cap: int) -> dict[int, str]:
    """The rows of a batch whose fields decode to more than ``cap`` bytes together, with why (none when
    the whole batch is within it, the usual case, which is told without looking at a row)."""
    if batch.nbytes <= cap:
        return {}
    lengths = {
        name: pc.binary_length(column).cast(pa.int64()).fill_null(0)
        for name, column in zip(batch.schema.names, batch.columns, strict=True)
        if pa.types.is_string(column.type)
        or pa.types.is_large_string(column.type)
        or pa.types.is_binary(column.type)
        or pa.types.is_large_binary(column.type)
    }
    if not lengths:
        return {}
    total = pa.array([0] * batch.num_rows, pa.int64())
    for column in lengths.values():
        total = pc.add(total, column)
    over: dict[int, str] = {}
    for position in pc.indices_nonzero(pc.greater(total, cap)).to_pylist():
        sizes = {name: column[position].as_py() for name, column in lengths.items()}
        longest = max(sizes, key=sizes.__getitem__)
        over[position] = (
            f"the row's fields decode to {total[position].as_py():,} bytes, more than the max_row_bytes read "
            f"limit of {cap:,} (its {longest!r} alone is {sizes[longest]:,} bytes); the row is rejected"
        )
    return over


def _parquet_rows(path: Path, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Iterator[SourceRow | RowError]:
    """Rows of a Parquet file, row group by row group; a row group that would decode a page (the unit a
    reader decodes whole) over the page limit, or a single value over the row limit, is reported as one
    RowError and not read (module doc), the others are read in batches sized by their pages, and a row over
    ``max_row_bytes`` is rejected before it becomes Python strings."""
    _check_parquet_footer(path, limits.max_page_bytes)
    try:
        parquet = pq.ParquetFile(path, buffer_size=_PARQUET_BUFFER, pre_buffer=False)
        columns = parquet.schema_arrow.names
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(
            f"{path}: not a readable Parquet file (truncated, or not Parquet at all): {exc}"
        ) from exc
    _check_columns(path, columns, REQUIRED_COLUMNS)
    wanted = [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in columns]
    for name in wanted:
        kind = parquet.schema_arrow.field(name).type
        if not _PARQUET_TYPES[name](kind):
            raise ArchiveFileError(
                f"{path}: column {name!r} is of type {kind}, expected {_PARQUET_TYPE_NAMES[name]}; "
                "nothing of the file is read (its values cannot be stored as they are)"
            )
    try:
        plans = _plan_row_groups(path, parquet, wanted, limits)
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(f"{path}: its row groups cannot be read: {exc}") from exc
    line = 2  # the same numbering as a CSV with a header line
    try:
        for plan in plans:
            line = plan.first_row + 2
            if plan.refused is not None:
                yield RowError(str(path), line, plan.refused, line + plan.num_rows - 1, rows=plan.num_rows)
                continue
            batches = parquet.iter_batches(
                batch_size=plan.batch_rows, row_groups=[plan.index], columns=wanted, use_threads=False
            )
            for batch in batches:
                over = _rows_over(batch, limits.max_row_bytes)
                if not over:
                    for row in batch.to_pylist():
                        yield SourceRow(line, line, row)
                        line += 1
                    continue
                kept = iter(
                    batch.filter(pa.array([i not in over for i in range(batch.num_rows)])).to_pylist()
                )
                for position in range(batch.num_rows):
                    if position in over:
                        yield RowError(str(path), line, over[position])
                    else:
                        yield SourceRow(line, line, next(kept))
                    line += 1
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(f"{path}: unreadable from row {line - 1} on: {exc}") from exc


# ---------------------------------------------------------------------------------------------- WARC

WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")


def is_warc(path: Path) -> bool:
    return path.name.lower().endswith(WARC_SUFFIXES)


def _warc_rows(path: Path, limits: ReadLimits) -> Iterator[SourceRow | RowError]:
    """Stories of a WARC/ARC file, then its read errors. Story-indexer archives carry title, text and date
    in their metadata; for a generic crawl they are extracted from the captured HTML. A story's place is
    its record's byte offset."""
    errors: list[WarcReadError] = []
    for record in stories_from_warc(path, errors=errors, limits=limits):
        if record.get("title") is None and record.get("text") is None and record.get("html"):
            extracted = extract_story(record["html"], record["url"])
            record = {
                **record,
                "title": extracted.title,
                "text": extracted.text,
                "publish_date": extracted.publish_date,
                "extracted": extracted,
            }
        yield SourceRow(record["offset"], record["offset"], record, unit="offset")
    for error in errors:
        if error.file_level:  # cut short, or over the file's decompression cap: the file fails
            continue
        where = " of the decompressed stream" if error.decompressed else ""
        yield RowError(
            str(path), error.offset, f"unreadable WARC record{where}: {error.reason}", unit="offset"
        )
    fatal = next((error for error in errors if error.file_level), None)
    if fatal is not None:
        raise ArchiveFileError(f"{fatal}; the records before it were read")


# ---------------------------------------------------------------------------------------------- reading


def iter_drop(
    path: str | Path, now: datetime | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[NewStory | RowError]:
    """A drop's valid stories and rejected rows, in file order, streamed. Raises ArchiveFileError when the
    file (or the rest of it) cannot be read."""
    path = Path(path)
    name = path.name.lower()
    rows: Iterator[SourceRow | RowError]
    if name.endswith(".csv"):
        rows = read_csv_rows(path, max_row_chars=limits.max_row_bytes)
    elif name.endswith((".parquet", ".pq")):
        rows = _parquet_rows(path, limits)
    elif is_warc(path):
        rows = _warc_rows(path, limits)
    else:
        raise ArchiveFileError(
            f"{path}: unknown archive format {path.suffix.lower()!r} "
            "(expected .csv, .parquet, .warc[.gz] or .arc[.gz])"
        )
    for row in rows:
        if isinstance(row, RowError):
            yield row
            continue
        try:
            yield story_from_row(row.values, now)
        except ValueError as exc:
            yield RowError(str(path), row.line, str(exc), row.end_line, row.unit)


def parse_drop(
    path: str | Path, now: datetime | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> ParsedDrop:
    """Read a whole CSV, Parquet or WARC drop into valid stories and per-row errors (tests and small
    drops; `load_drop` streams into the store)."""
    path = Path(path)
    drop = ParsedDrop(path=path, sha256=file_sha256(path))
    for item in iter_drop(path, now, limits):
        (drop.errors if isinstance(item, RowError) else drop.stories).append(item)
    return drop


# ---------------------------------------------------------------------------------------------- loading


def _story_bytes(story: NewStory) -> int:
    """About what a story holds in memory: its text, title and html (the rest is small)."""
    return len(story.text or "") + len(story.title or "") + len(story.html or b"")


@dataclass
class DropLoad:
    """What loading one file did. ``state``: loaded | failed (now) | already loaded | failed before."""

    path: Path
    sha256: str
    state: str
    stories_read: int = 0
    created: int = 0
    existing: int = 0
    rows_rejected: int = 0
    errors: list[RowError] = field(default_factory=list)  # the first MAX_REPORTED_ERRORS
    reason: str | None = None


def printable_name(path: Path) -> str:
    """The path as text that can be logged and stored: bytes that are not UTF-8 shown as \\x escapes."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def refused_file_reason(path: Path, folder: Path | None) -> str | None:
    """Why a file in the drops folder is not read at all, or None."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return "the file name is not valid UTF-8 (shown with \\x escapes): rename the file to load it"
    if folder is not None and path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(folder.resolve()):
            return f"a link to {printable_name(target)}, outside the drops folder: not followed"
    return None


def refused_file_key(path: Path) -> str:
    """The ``archive_files`` key of a refused file: its name's, not its content's (which is not read)."""
    return hashlib.sha256(b"refused:" + os.fsencode(path)).hexdigest()


def _record_refused(store: TopicStore, path: Path, reason: str) -> DropLoad:
    """Record a refused file once, keyed by its name (its content is not read)."""
    key = refused_file_key(path)
    known = archive_file_record(store, key)
    if known is not None:
        return DropLoad(path, key, "failed before", reason=known.reason)
    record_archive_file(store, Path(printable_name(path)), key, STATE_FAILED, 0, 0, reason)
    return DropLoad(path, key, STATE_FAILED, reason=reason)


@dataclass(frozen=True)
class ArchiveFileRecord:
    path: str
    state: str
    reason: str | None
    rows_loaded: int
    rows_rejected: int


def archive_file_record(store: TopicStore, sha256: str) -> ArchiveFileRecord | None:
    """What the store knows of a file with this content, or None."""
    af = s.archive_files
    with store.engine.connect() as conn:
        row = conn.execute(
            select(af.c.path, af.c.state, af.c.reason, af.c.rows_loaded, af.c.rows_rejected).where(
                af.c.sha256 == sha256
            )
        ).first()
    return ArchiveFileRecord(*row) if row is not None else None


def record_archive_file(
    store: TopicStore,
    path: Path,
    sha256: str,
    state: str,
    rows_loaded: int,
    rows_rejected: int,
    reason: str | None = None,
) -> None:
    """Record the outcome for this content (an upsert: a failed file retried and loaded becomes loaded)."""
    row = {
        "path": str(path)[:2048],
        "sha256": sha256,
        "state": state,
        "reason": reason,
        "rows_loaded": rows_loaded,
        "rows_rejected": rows_rejected,
        "loaded_at": now_utc(),
    }
    with store.engine.begin() as conn:
        store.upsert(
            conn,
            s.archive_files,
            [row],
            ["sha256"],
            ["path", "state", "reason", "rows_loaded", "rows_rejected", "loaded_at"],
        )


def load_drop(
    store: TopicStore,
    path: str | Path,
    *,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    retry_failed: bool = False,
    now: datetime | None = None,
    progress: Callable[[str], None] | None = None,
    folder: Path | None = None,
) -> DropLoad:
    """Stream one drop into the store and record the outcome for its content hash.

    A file ``refused_file_reason`` refuses (a name that is not UTF-8, a link out of ``folder``) is not read:
    it is recorded once as failed, keyed by its name, and skipped on later runs.

    A file whose content was loaded before is skipped; one that failed before is skipped too (with its
    recorded reason) unless `retry_failed`. ArchiveFileError fails this file alone; the stories read before
    the failure are kept. Errors of the store itself (the database is down) propagate: they are not the
    file's fault and must not mark it failed.
    """
    path = Path(path)
    refused = refused_file_reason(path, folder)
    if refused is not None:
        return _record_refused(store, path, refused)
    sha = file_sha256(path)
    known = archive_file_record(store, sha)
    if known is not None and (known.state == STATE_LOADED or not retry_failed):
        return DropLoad(
            path,
            sha,
            "already loaded" if known.state == STATE_LOADED else "failed before",
            rows_rejected=known.rows_rejected,
            reason=known.reason,
        )
    result = DropLoad(path, sha, STATE_LOADED)
    batch: list[NewStory] = []
    batch_bytes = 0
    source = f"archive:{path.name}"

    def flush() -> None:
        nonlocal batch_bytes
        batch_bytes = 0
        if batch:
            added = store.add_stories(batch, source=source)
            result.created += added.created
            result.existing += added.existing
            batch.clear()

    try:
        for item in iter_drop(path, now, limits):
            if isinstance(item, RowError):
                result.rows_rejected += item.rows
                if len(result.errors) < MAX_REPORTED_ERRORS:
                    result.errors.append(item)
                continue
            batch.append(item)
            batch_bytes += _story_bytes(item)
            result.stories_read += 1
            if len(batch) >= LOAD_BATCH or batch_bytes >= LOAD_BATCH_BYTES:
                flush()
                if progress and result.stories_read % (LOAD_BATCH * 20) == 0:
                    progress(f"{path.name}: {result.stories_read} stories read so far")
    except ArchiveFileError as exc:
        flush()  # the rows before the failure are valid
        result.state = STATE_FAILED
        result.reason = str(exc)
    else:
        flush()
    record_archive_file(
        store, path, sha, result.state, result.stories_read, result.rows_rejected, result.reason
    )
    return result
