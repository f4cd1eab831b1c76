"""Parquet drops: rows read row group by row group, with each page checked before a reader decodes it.

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
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from topicmap.archive.drop_rows import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    ArchiveFileError,
    RowError,
    SourceRow,
    check_columns,
)
from topicmap.archive.warc import DEFAULT_READ_LIMITS, MIB, ReadLimits


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


def _plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Dictionary-encoded columns (pandas writes a Categorical so) as their values, so each row is checked and
    read like a plain column's; the batch was sized by the dictionary's longest value (``_plan_row_groups``)."""
    if not any(pa.types.is_dictionary(field.type) for field in batch.schema):
        return batch
    arrays = [
        column.dictionary_decode() if pa.types.is_dictionary(column.type) else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def parquet_rows(path: Path, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Iterator[SourceRow | RowError]:
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
    check_columns(path, columns, REQUIRED_COLUMNS)
    wanted = [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in columns]
    for name in wanted:
        kind = parquet.schema_arrow.field(name).type
        if pa.types.is_dictionary(kind):  # a pandas Categorical: its values are what is stored
            kind = kind.value_type
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
            for batch in map(_plain, batches):
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
