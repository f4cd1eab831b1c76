"""Parquet and CSV written from a stream of Arrow record batches, byte for byte what
``topicmap.snapshots.files`` writes of the whole table: the out-of-core engine's tables
(``topicmap.snapshots.engine``) go to disk one row group at a time.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from topicmap.snapshots.dictionary import describe


def parquet_options(schema: pa.Schema, store_schema: bool = False) -> dict[str, Any]:
    """Integers delta-encoded, text with its dictionary; the Arrow schema stored only with ``store_schema``."""
    integers = [f.name for f in schema if pa.types.is_integer(f.type)]
    others = [f.name for f in schema if f.name not in integers]
    return {
        "compression": "snappy",
        # the Arrow schema in the file keeps the fields' descriptions (and the same bytes for the same data)
        "store_schema": store_schema,
        "use_dictionary": others or False,
        "column_encoding": dict.fromkeys(integers, "DELTA_BINARY_PACKED"),
    }


#: rows per Parquet row group: pyarrow's default, which ``files._write_arrow`` uses
ROW_GROUP_ROWS = 1024 * 1024


#: rows per CSV write when no Parquet file takes the stream (the CSV writer's own batch size)
CSV_GROUP_ROWS = 1 << 16


class _RowGroups:
    """Record batches regrouped into contiguous tables of ``rows`` rows (the last one shorter), cast to
    ``schema`` (the batches may carry more columns: the schema's are taken by name): what ``pq.write_table``
    cuts a whole table into, so a stream is written to the same bytes."""

    def __init__(self, schema: pa.Schema, rows: int | None = None) -> None:
        self.schema = schema
        self.rows = rows or ROW_GROUP_ROWS
        self.pending: list[pa.RecordBatch] = []
        self.held = 0
        self.written = False

    def add(self, batch: pa.RecordBatch) -> Iterator[pa.Table]:
        """The row groups ``batch`` completes."""
        if batch.schema.names != self.schema.names:
            batch = batch.select(self.schema.names)
        batch = batch.cast(self.schema) if batch.schema != self.schema else batch
        while batch.num_rows:
            take = min(batch.num_rows, self.rows - self.held)
            self.pending.append(batch.slice(0, take))
            self.held += take
            batch = batch.slice(take)
            if self.held == self.rows:
                yield self._group()

    def rest(self) -> Iterator[pa.Table]:
        """The last, shorter row group (an empty one when the stream held no rows)."""
        if self.held or not self.written:
            yield self._group()

    def _group(self) -> pa.Table:
        group = pa.Table.from_batches(self.pending, self.schema).combine_chunks()
        self.pending, self.held, self.written = [], 0, True
        return group


def row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.Table]:
    """``batches`` as the row groups ``pq.write_table`` cuts the whole table into (``_RowGroups``)."""
    groups = _RowGroups(schema)
    for batch in batches:
        yield from groups.add(batch)
    yield from groups.rest()


@dataclass(frozen=True)
class StreamTarget:
    """One table a stream is written to: the columns of ``schema`` as Parquet at ``path`` (``name``: its fields'
    descriptions, as ``files._write_arrow`` writes them) and/or as CSV at ``csv``."""

    schema: pa.Schema
    path: Path | None
    csv: Path | None = None
    name: str | None = None


class _HashedFile:
    """A file opened for writing that keeps the sha256 of what is written to it: the manifest's digest of a
    streamed file without reading it back (tens of GB at ten million stories, hashed where they are encoded)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("wb")
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.digest.update(data)
        self.size += memoryview(data).nbytes
        return self._file.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


class _TargetWriter:
    """A StreamTarget's open files, written to temporary names and renamed into place on ``commit``."""

    def __init__(self, target: StreamTarget) -> None:
        schema = target.schema.remove_metadata()
        self.schema = describe(schema, target.name) if target.name is not None else schema
        self.targets = [p for p in (target.path, target.csv) if p is not None]
        self.temps = {p: p.with_name(f".{p.name}.tmp-{os.getpid()}") for p in self.targets}
        # CSV alone is the same bytes however the rows are grouped: no million-row group held for it
        self.groups = _RowGroups(self.schema, None if target.path is not None else CSV_GROUP_ROWS)
        self.writer: pq.ParquetWriter | None = None
        self.handle: _HashedFile | None = None
        self.files: dict[Path, _HashedFile] = {}
        self.options = csv_options(self.schema)
        for path in self.targets:
            path.parent.mkdir(parents=True, exist_ok=True)
        if target.path is not None:
            self.files[target.path] = _HashedFile(self.temps[target.path])
            self.writer = pq.ParquetWriter(
                self.files[target.path], self.schema, **parquet_options(self.schema, target.name is not None)
            )
        if target.csv is not None:
            self.handle = self.files[target.csv] = _HashedFile(self.temps[target.csv])
            self.handle.write((",".join(self.schema.names) + "\n").encode("utf-8"))

    def write(self, groups: Iterable[pa.Table]) -> None:
        for group in groups:
            if self.writer is not None:
                self.writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
            if self.handle is not None and group.num_rows:
                pacsv.write_csv(group, self.handle, self.options)

    def commit(self) -> dict[Path, str]:
        """Each file renamed into place, with the sha256 of its bytes."""
        self.write(self.groups.rest())
        self.close()
        for path in self.targets:
            os.replace(self.temps[path], path)
        return {path: self.files[path].digest.hexdigest() for path in self.targets}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.handle = None
        for file in self.files.values():
            file.close()

    def discard(self) -> None:
        self.close()
        for temp in self.temps.values():
            if temp.exists():
                temp.unlink()


def write_streams(batches: Iterable[pa.RecordBatch], targets: Sequence[StreamTarget]) -> dict[Path, str]:
    """One stream of record batches written to several tables (each its columns of the batches), one row group
    per table in memory at a time; returns the files written, each with the sha256 of its bytes. The next
    batches are read ahead on a thread (``_read_ahead``) while these are encoded, so the engine producing the
    stream and the writers run on both cores."""
    writers: list[_TargetWriter] = []
    try:
        for target in targets:
            writers.append(_TargetWriter(target))
        for batch in _read_ahead(batches):
            for writer in writers:
                writer.write(writer.groups.add(batch))
        return {path: digest for writer in writers for path, digest in writer.commit().items()}
    finally:
        for writer in writers:
            writer.discard()


def write_stream(
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    path: Path | None,
    csv: Path | None,
    name: str | None = None,
) -> dict[Path, str]:
    """A stream of record batches as Parquet at ``path`` (byte for byte what ``files._write_arrow`` writes of the
    whole table, ``name`` as there) and/or as CSV at ``csv`` (what ``files._write_csv`` writes), each file with
    the sha256 of its bytes."""
    return write_streams(batches, [StreamTarget(schema, path, csv, name)])


#: record batches read ahead of the writers
READ_AHEAD = 2
_DONE = object()


def _read_ahead(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` read on a thread, at most READ_AHEAD ahead of the consumer (the engine's stream fills its
    record batches while the previous ones are written). Stops reading when the consumer stops."""
    ahead: queue.Queue[object] = queue.Queue(maxsize=READ_AHEAD)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for batch in batches:
                if not put(batch):
                    return
            put(_DONE)
        except BaseException as err:  # handed to the consumer, raised there
            put(err)

    reader = threading.Thread(target=read, name="stream-read-ahead", daemon=True)
    reader.start()
    try:
        while True:
            item = ahead.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        reader.join()


def csv_options(schema: pa.Schema) -> pacsv.WriteOptions:
    # Numbers never need quotes: the "none" style writes the same bytes for them, a third faster.
    numeric = all(pa.types.is_integer(f.type) for f in schema)
    # Batches of 64k rows rather than pyarrow's 1,024: the same bytes, a third less CPU on the link lists.
    return pacsv.WriteOptions(
        include_header=False, quoting_style="none" if numeric else "needed", batch_size=CSV_GROUP_ROWS
    )
