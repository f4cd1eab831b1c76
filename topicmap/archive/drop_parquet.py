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
  1,000, and a page of skewed values costs at most its own size, which the page limit bounds. A page whose values
  share prefixes (DELTA_BYTE_ARRAY) holds each value as the prefix of the one before and a suffix, so any of its
  values may be as long as the whole page: its rows are counted at the page's size each.
* What the whole file decodes to is bounded too (``file_decoded_bound``: ``max_expansion`` times its size on
  disk, ``max_file_bytes`` at most), before any row is read: a dictionary value is decoded once but stored in
  every row holding it (a 5 KB file of 200 rows of one 30 MiB dictionary value is 6 GB of stories). The page
  headers tell what each column chunk decodes to at most (a page of dictionary indices as its rows times the
  dictionary's longest value); when that is over the bound, the dictionary columns are counted exactly from
  their indices, read as a dictionary so that no value is expanded, and a file still over it is refused unread,
  naming the row group that takes it past the bound, its lines, its largest column and the limit.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from topicmap.archive.drop_rows import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    ArchiveFileError,
    FileBound,
    RowError,
    SourceRow,
    check_columns,
    file_decoded_bound,
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

#: what one batch of a Parquet row group may decode to, by the average values of its pages (``_chunk_sizes``)
PARQUET_BATCH_BYTES = 32 * MIB
#: rows a Parquet batch holds at most
PARQUET_BATCH_ROWS = 1000
#: read buffer of a Parquet column chunk (without it, pyarrow reads a whole compressed chunk at once)
_PARQUET_BUFFER = MIB

#: rows of dictionary indices counted at once when what a file decodes to is counted (``_count_dictionary_values``):
#: pyarrow writes at most this many rows to a row group by default
_COUNT_BATCH_ROWS = 1 << 20

# Parquet page types (parquet.thrift PageType)
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
# Parquet encodings (parquet.thrift Encoding) of data pages whose values are indices into the dictionary, and the
# one whose values share prefixes: a value may be as long as all the bytes of its page
_DICTIONARY_ENCODINGS = frozenset({2, 8})  # PLAIN_DICTIONARY, RLE_DICTIONARY
_DELTA_BYTE_ARRAY = 7


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
    encoding: int | None = None  # a data page's (parquet.thrift Encoding)


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
            encoding = detail.get(2 if kind == _DATA_PAGE else 4)
            encoding = encoding if isinstance(encoding, int) else None
            pages.append(_Page(row, rows, size, False, handle.tell(), compressed, encoding))
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
    """How one row group is read: refused (with why) or in batches of ``batch_rows`` rows. ``decoded``: what
    each column read decodes to at most, as its page headers tell (``_ChunkSizes``); ``countable``: the columns
    whose data pages start with pages of dictionary indices, which can be counted exactly (``_ChunkSizes.count``)."""

    index: int
    first_row: int  # 0-based within the file
    num_rows: int
    refused: str | None = None
    batch_rows: int = PARQUET_BATCH_ROWS
    decoded: dict[str, int] = field(default_factory=dict)
    countable: dict[str, tuple[int, int]] = field(default_factory=dict)


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


@dataclass(frozen=True)
class _ChunkSizes:
    """What a column chunk decodes to, from its page headers (and its dictionary page's values)."""

    #: what one row is taken to decode to, for sizing batches
    per_value: int
    #: what all its rows decode to at most: a data page of dictionary indices as its rows times the
    #: dictionary's longest value, any other page as its own size (a prefix-sharing page may decode to more:
    #: what a file decodes to is counted again as its rows are read, ``topicmap.archive.drops.iter_drop``)
    decoded: int
    #: when its data pages start with pages of dictionary indices (a writer falls back to plain pages when the
    #: dictionary grows too large, never back): the rows of those pages, whose exact size is counted from their
    #: indices without expanding a value (``_count_dictionary_values``), and the size of the pages after them
    count: tuple[int, int] | None


def _chunk_sizes(pages: list[_Page], handle: BinaryIO, column: Any) -> _ChunkSizes:
    """A column chunk's sizes. A row is taken to decode to the largest average value of its data pages (the
    chunk's last page aside when there are others: it may hold a single long value, and it is one page, whose
    cost the page limit bounds), the longest value of its dictionary (each row holding it expands it again),
    and the whole size of a prefix-sharing page (each value may be as long as all the page's bytes)."""
    longest = max(
        (_longest_dictionary_value(handle, column, page) for page in pages if page.dictionary), default=0
    )
    data = [page for page in pages if not page.dictionary]
    averaged = [page for page in data if page.rows]
    if len(averaged) > 1:
        averaged = averaged[:-1]
    per_value = max(
        [longest]
        + [page.size // page.rows for page in averaged]
        + [page.size for page in data if page.encoding == _DELTA_BYTE_ARRAY]
    )
    decoded = sum(
        page.rows * longest if page.encoding in _DICTIONARY_ENCODINGS else page.size for page in data
    )
    leading = next(
        (i for i, page in enumerate(data) if page.encoding not in _DICTIONARY_ENCODINGS), len(data)
    )
    indexed_rows = sum(page.rows for page in data[:leading])
    count = None
    if (
        column.physical_type == "BYTE_ARRAY"
        and longest
        and indexed_rows
        and all(page.encoding not in _DICTIONARY_ENCODINGS for page in data[leading:])
        # a plain page after them is not read: the rows before it are counted in one batch
        and (leading == len(data) or indexed_rows <= _COUNT_BATCH_ROWS)
    ):
        count = (indexed_rows, sum(page.size for page in data[leading:]))
    return _ChunkSizes(per_value, decoded, count)


def _plan_row_groups(
    path: Path, parquet: pq.ParquetFile, wanted: Sequence[str], limits: ReadLimits
) -> list[_RowGroupPlan]:
    """Each row group's plan, from the footer and the page headers of the wanted columns: a row group with a
    page ``_page_refused`` refuses (or, when its page headers cannot be read, a column chunk over the same
    limits) is refused; the others are read in batches of rows that decode to about
    ``PARQUET_BATCH_BYTES``, by ``_chunk_sizes``."""
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
            decoded: dict[str, int] = {}
            countable: dict[str, tuple[int, int]] = {}
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
                        decoded[name] = chunk_size
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
                sizes = _chunk_sizes(pages, handle, column)
                row_bytes += sizes.per_value
                decoded[name] = sizes.decoded
                if sizes.count is not None:
                    countable[name] = sizes.count
            if refused is not None:
                last_line = first_line + num_rows - 1
                rows = f"{num_rows:,} row{'s' if num_rows != 1 else ''}"
                refused = (
                    f"row group {index} (lines {first_line:,}-{last_line:,}: {rows}) is not read: {refused}. "
                    "The other row groups are read."
                )
            batch_rows = max(1, min(PARQUET_BATCH_ROWS, PARQUET_BATCH_BYTES // max(row_bytes, 1)))
            plans.append(_RowGroupPlan(index, first_row, num_rows, refused, batch_rows, decoded, countable))
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


def _decoded_lengths(column: pa.Array) -> pa.Array | None:
    """Each row's value length in bytes as decoded (int64, 0 for a null), or None for a column that is not
    text or binary. A dictionary column's lengths come from its indices and its dictionary's value lengths:
    nothing is expanded to tell them."""
    if pa.types.is_dictionary(column.type):
        values = _decoded_lengths(column.dictionary)
        return None if values is None else pc.take(values, column.indices).fill_null(0)
    if not (
        pa.types.is_string(column.type)
        or pa.types.is_large_string(column.type)
        or pa.types.is_binary(column.type)
        or pa.types.is_large_binary(column.type)
    ):
        return None
    return pc.binary_length(column).cast(pa.int64()).fill_null(0)


def _rows_over(batch: pa.RecordBatch, cap: int) -> dict[int, str]:
    """The rows of a batch whose fields decode to more than ``cap`` bytes together, with why (none when
    the whole batch is within it, the usual case, which is told without looking at a row). Told before a
    dictionary column is decoded."""
    if batch.nbytes <= cap:  # a dictionary column's values are in nbytes once, and a row holds one of them
        return {}
    lengths = {
        name: found
        for name, column in zip(batch.schema.names, batch.columns, strict=True)
        if (found := _decoded_lengths(column)) is not None
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
    """Dictionary-encoded columns (pandas writes a Categorical so) as their values, so each row is read like a
    plain column's; the batch was sized by the dictionary's longest value (``_plan_row_groups``)."""
    if not any(pa.types.is_dictionary(field.type) for field in batch.schema):
        return batch
    arrays = [
        column.dictionary_decode() if pa.types.is_dictionary(column.type) else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _count_dictionary_values(path: Path, plan: _RowGroupPlan) -> dict[str, int]:
    """What the ``countable`` columns of a row group decode to, exactly: for the rows of their pages of
    dictionary indices, each row's dictionary value length, from the indices (read as a dictionary, nothing
    is expanded; the dictionary is one page, within the page limit), and the pages after them as their size.
    Reading stops at the last of those rows: a plain page after them would grow the dictionary read."""
    counting = pq.ParquetFile(
        path, read_dictionary=list(plan.countable), buffer_size=_PARQUET_BUFFER, pre_buffer=False
    )
    sizes: dict[str, int] = {}
    for name, (rows, rest) in plan.countable.items():
        counted, size = 0, rest
        batches = counting.iter_batches(
            batch_size=min(rows, _COUNT_BATCH_ROWS),
            row_groups=[plan.index],
            columns=[name],
            use_threads=False,
        )
        for batch in batches:
            column = batch.column(0).slice(0, rows - counted)
            lengths = _decoded_lengths(column)
            size += (pc.sum(lengths).as_py() or 0) if lengths is not None else column.nbytes
            counted += len(column)
            if counted >= rows:
                break
        sizes[name] = size
    return sizes


def _refuse_past_file_bound(path: Path, plans: Sequence[_RowGroupPlan], bound: FileBound) -> None:
    """Refuse the file before any row is read when what its rows decode to is over ``bound``: a dictionary
    value counts once per row holding it. The page headers tell it for most files (a page of dictionary
    indices as its rows times the dictionary's longest value); when that is over the bound, the dictionary
    columns of the row groups up to it are counted exactly, row by row, from their indices. Names the row
    group that takes the file past the bound, its lines, and its largest column."""
    read = [plan for plan in plans if plan.refused is None]
    if sum(sum(plan.decoded.values()) for plan in read) <= bound.bytes:
        return
    total = 0
    for plan in read:
        sizes = dict(plan.decoded)
        if plan.countable and total + sum(sizes.values()) > bound.bytes:
            sizes.update(_count_dictionary_values(path, plan))
        group = sum(sizes.values())
        if total + group <= bound.bytes:
            total += group
            continue
        largest = max(sizes, key=sizes.__getitem__)
        first_line = plan.first_row + 2
        rows = f"{plan.num_rows:,} row{'s' if plan.num_rows != 1 else ''}"
        repeated = " (values of its dictionary repeated in its rows)" if largest in plan.countable else ""
        raise ArchiveFileError(
            f"{path}: row group {plan.index} (lines {first_line:,}-{first_line + plan.num_rows - 1:,}: {rows}) "
            f"would bring what the file's rows decode to up to {total + group:,} bytes, more than the "
            f"{bound.limit}; its {largest!r} column decodes to {sizes[largest]:,} bytes{repeated}; nothing of the "
            "file is read"
        )


def parquet_rows(path: Path, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Iterator[SourceRow | RowError]:
    """Rows of a Parquet file, row group by row group; a file whose rows would decode to more than
    ``file_decoded_bound`` is refused before any row is read; a row group that would decode a page (the unit
    a reader decodes whole) over the page limit, or a single value over the row limit, is reported as one
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
        _refuse_past_file_bound(path, plans, file_decoded_bound(path.stat().st_size, limits))
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
                if over:  # the rows over the limit are not decoded
                    batch = batch.filter(pa.array([i not in over for i in range(batch.num_rows)]))
                kept = iter(_plain(batch).to_pylist())
                for position in range(batch.num_rows + len(over)):
                    if position in over:
                        yield RowError(str(path), line, over[position])
                    else:
                        yield SourceRow(line, line, next(kept))
                    line += 1
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(f"{path}: unreadable from row {line - 1} on: {exc}") from exc
