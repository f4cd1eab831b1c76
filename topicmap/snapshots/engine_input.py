"""The topic as the out-of-core engine reads it: per input (stories, media, links, statistics, near-duplicate
groups) a source of bounded Arrow record batches with named, typed columns, from DataFrames or Parquet files
(``frame_batches``, ``parquet_batches``) or from the store (``topicmap.snapshots.store_stream``), each batch cast
to the input's schema (``INPUT_SCHEMAS``) before DuckDB sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from topicmap.snapshots.results import STAT_COLUMNS

#: rows per Arrow record batch read from a source into DuckDB (the most any reader holds at once)
BATCH_ROWS = 1 << 17
NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S

#: the columns DuckDB is given of each input (a record batch of a source is cast to these)
INPUT_SCHEMAS: dict[str, pa.Schema] = {
    "stories": pa.schema(
        [
            ("stories_id", pa.int64()),
            ("media_id", pa.int64()),
            ("utc_ns", pa.int64()),  # the instant, ns since the epoch (null: undated)
            ("offset_min", pa.int64()),  # the page's own UTC offset in minutes (null: unknown, counts as UTC)
            ("url", pa.string()),
            ("title", pa.string()),
            ("text", pa.string()),
            ("language", pa.string()),
            ("date_method", pa.string()),  # how the date was found (stories.date_guess_method)
            ("time_known", pa.int64()),  # did the page give a time of day: 1 yes, 0 no, null unknown
            ("zone_known", pa.int64()),  # did it give a zone: 1 yes, 0 no, null unknown
        ]
    ),
    "media": pa.schema([("media_id", pa.int64()), ("name", pa.string()), ("url", pa.string())]),
    "links": pa.schema([("stories_id", pa.int64()), ("ref_stories_id", pa.int64())]),
    "story_stats": pa.schema([("stories_id", pa.int64()), *((c, pa.int64()) for c in STAT_COLUMNS)]),
    "near_dup_groups": pa.schema([("stories_id", pa.int64()), ("group_id", pa.int64())]),
}

BatchSource = Callable[[], Iterator[pa.RecordBatch]]


@dataclass
class TopicSource:
    """Where the engine reads a topic from: per input, a function that yields its record batches (each at most
    ``BATCH_ROWS`` rows, any column order; missing optional columns are null). ``near_dup_groups`` and
    ``story_stats`` may be None (no syndication groups, no statistics)."""

    stories: BatchSource
    media: BatchSource
    links: BatchSource
    story_stats: BatchSource | None = None
    near_dup_groups: BatchSource | None = None

    def inputs(self) -> Iterator[tuple[str, BatchSource | None]]:
        yield "stories", self.stories
        yield "media", self.media
        yield "links", self.links
        yield "story_stats", self.story_stats
        yield "near_dup_groups", self.near_dup_groups


def _utc_ns_column(values: pd.Series) -> pa.Array:
    """A publish_date column (datetimes, naive = UTC, or ISO 8601 strings) as int64 ns, null when undated."""
    try:
        iso = {} if pd.api.types.is_datetime64_any_dtype(values) else {"format": "ISO8601"}
        dates = pd.to_datetime(values, utc=True, **iso).astype("datetime64[ns, UTC]")
    except (TypeError, ValueError) as err:
        raise ValueError(f"stories.publish_date is not a date/time column: {err}") from None
    ns = dates.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]").view(np.int64)
    return pa.array(ns, type=pa.int64(), mask=dates.isna().to_numpy())


def _int_column(values: pd.Series, what: str) -> pa.Array:
    try:
        array = pa.array(values, from_pandas=True)
        if pa.types.is_floating(array.type):
            array = array.cast(pa.int64())  # raises on a fractional value
        return array.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as err:
        raise ValueError(f"{what} must be integer ids: {err}") from None


def _flag_column(values: pd.Series | None, rows: int) -> pa.Array:
    """A nullable yes/no column as int64: 1 yes, 0 no, null unknown (or absent)."""
    if values is None:
        return pa.nulls(rows, pa.int64())
    raw = values.to_numpy(dtype=object)
    known = pd.notna(raw)
    flags = np.where(known, raw, False).astype(bool).astype(np.int64)
    return pa.array(flags, type=pa.int64(), mask=~known)


def frame_batches(frame: pd.DataFrame, name: str, batch_rows: int = BATCH_ROWS) -> BatchSource:
    """A DataFrame of ``SnapshotInputs`` as record batches of ``INPUT_SCHEMAS[name]`` (``stories``: its
    ``publish_date`` and ``publish_utc_offset`` become ``utc_ns`` and ``offset_min``)."""
    schema = INPUT_SCHEMAS[name]

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, max(len(frame), 1), batch_rows):
            part = frame.iloc[start : start + batch_rows]
            columns: dict[str, pa.Array] = {}
            for f in schema:
                if name == "stories" and f.name == "utc_ns":
                    columns[f.name] = _utc_ns_column(part["publish_date"])
                elif name == "stories" and f.name == "offset_min":
                    offsets = part.get("publish_utc_offset")
                    numeric = None if offsets is None else pd.to_numeric(offsets, errors="coerce")
                    columns[f.name] = (
                        pa.nulls(len(part), pa.int64())
                        if numeric is None
                        else pa.array(numeric.fillna(0).to_numpy(np.int64), type=pa.int64())
                    )
                elif name == "stories" and f.name in ("time_known", "zone_known"):
                    columns[f.name] = _flag_column(part.get(f.name), len(part))
                elif f.name not in part.columns:
                    if f.name in ("stories_id", "media_id", "ref_stories_id", "group_id", "url", "title"):
                        raise ValueError(f"{name}: missing column {f.name!r}; has {list(part.columns)}")
                    columns[f.name] = pa.nulls(len(part), f.type)
                elif pa.types.is_integer(f.type):
                    if f.name in STAT_COLUMNS:
                        try:
                            stat = pd.array(part[f.name], dtype="Int64")
                        except (TypeError, ValueError) as err:
                            raise ValueError(f"{name}.{f.name} must hold whole numbers: {err}") from None
                        columns[f.name] = pa.array(stat, type=pa.int64())
                    else:
                        if part[f.name].isna().any():
                            raise ValueError(
                                f"{name}.{f.name} has {int(part[f.name].isna().sum())} missing value(s)"
                            )
                        columns[f.name] = _int_column(part[f.name], f"{name}.{f.name}")
                else:
                    values = part[f.name].to_numpy(dtype=object)
                    columns[f.name] = pa.array(
                        [v if isinstance(v, str) else None for v in values], type=pa.string()
                    )
            yield pa.record_batch(columns, schema=schema)

    return batches


def parquet_batches(path: str | Path, name: str, batch_rows: int = BATCH_ROWS) -> BatchSource:
    """A Parquet file with the columns of ``INPUT_SCHEMAS[name]``, read ``batch_rows`` rows at a time."""
    import pyarrow.parquet as pq

    def batches() -> Iterator[pa.RecordBatch]:
        with pq.ParquetFile(path) as handle:
            yield from handle.iter_batches(batch_size=batch_rows)

    return batches


_OPTIONAL_STORY_COLUMNS = (
    "url",
    "title",
    "text",
    "language",
    "offset_min",
    "date_method",
    "time_known",
    "zone_known",
)


def conform(batch: pa.RecordBatch, schema: pa.Schema, name: str) -> pa.RecordBatch:
    """A source's batch with exactly the columns of ``schema`` (missing optional ones null)."""
    columns = []
    for f in schema:
        if f.name in batch.schema.names:
            columns.append(batch.column(f.name).cast(f.type))
        elif f.name in (*_OPTIONAL_STORY_COLUMNS, *STAT_COLUMNS):
            columns.append(pa.nulls(batch.num_rows, f.type))
        else:
            raise ValueError(f"{name}: missing column {f.name!r}; has {batch.schema.names}")
    return pa.record_batch(columns, schema=schema)
