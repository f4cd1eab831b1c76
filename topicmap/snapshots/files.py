"""A snapshot's files: each timespan's tables as Parquet and CSV, the snapshot's own tables, the manifest.

Per timespan with stories (``timespan_folder``: ``<key>`` for the whole topic, ``foci/<focal set>/<focus>/<key>``
for a focus): ``story_links``, ``story_link_counts``, ``medium_links``, ``medium_link_counts`` as Parquet and,
with ``csv``, Media Cloud style lists (``stories.csv``, ``media.csv``, ``story_links.csv``,
``medium_links.csv``). The snapshot's own tables (timespans, foci, the summary tables) and ``manifest.json``
(sizes and sha256 of every file) sit at the top. Files are written atomically, by a few threads, and
byte-identical for identical inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from topicmap.snapshots.foci import Focus
from topicmap.snapshots.ids import IdIndex, positions
from topicmap.snapshots.results import (
    COUNT_COLUMNS,
    STAT_COLUMNS,
    TIMESPAN_TABLES,
    SnapshotResult,
    TimespanSnapshot,
)
from topicmap.snapshots.summaries import summary_tables
from topicmap.snapshots.timespans import Timespan

# Column names of Media Cloud's stories and media lists (web-tools topic stories.csv / media.csv), with our
# Bit.ly split into the 3-day and 30-day totals instead of the single bitly_click_count, and Media Cloud's
# publish_date (a time without a zone) split in two that say what they are: the UTC instant, written with its
# zone, and the publisher's calendar day (the day the timespans count). "2019-11-19T00:05:00Z" and
# "2019-11-18" for a story of 19:05 EST on 18 November.
STORY_DATE_COLUMNS: tuple[str, ...] = ("publish_date_utc", "publish_day_local")
STORY_CSV_COLUMNS: tuple[str, ...] = (
    "stories_id",
    *STORY_DATE_COLUMNS,
    "title",
    "url",
    "media_id",
    "media_name",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)
MEDIA_CSV_COLUMNS: tuple[str, ...] = (
    "media_id",
    "name",
    "url",
    "story_count",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "sum_media_inlink_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)

_NULLABLE_INT = pa.int64()
_SCHEMAS: dict[str, pa.Schema] = {
    "story_links": pa.schema([("source_stories_id", pa.int64()), ("ref_stories_id", pa.int64())]),
    "story_link_counts": pa.schema(
        [
            ("stories_id", pa.int64()),
            ("media_id", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            ("media_inlink_count", pa.int64()),
            *((column, _NULLABLE_INT) for column in STAT_COLUMNS),
            # the stories.csv dates, typed: the instant with its zone in the schema, the publisher's day
            ("publish_date_utc", pa.timestamp("s", tz="UTC")),
            ("publish_day_local", pa.date32()),
        ]
    ),
    "medium_links": pa.schema(
        [("source_media_id", pa.int64()), ("ref_media_id", pa.int64()), ("link_count", pa.int64())]
    ),
    "medium_link_counts": pa.schema(
        [
            ("media_id", pa.int64()),
            ("name", pa.string()),
            ("url", pa.string()),
            ("story_count", pa.int64()),
            ("media_inlink_count", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            ("sum_media_inlink_count", pa.int64()),
            *((column, _NULLABLE_INT) for column in STAT_COLUMNS),
        ]
    ),
    "timespans": pa.schema(
        [
            ("focus", pa.string()),
            ("key", pa.string()),
            ("period", pa.string()),
            ("name", pa.string()),
            ("start_date", pa.date32()),
            ("end_date", pa.date32()),
            ("last_date", pa.date32()),
            *((column, pa.int64()) for column in COUNT_COLUMNS),
            ("words_sampled", pa.int64()),
        ]
    ),
    "foci": pa.schema(
        [
            ("focus", pa.string()),
            ("focal_set", pa.string()),
            ("name", pa.string()),
            ("kind", pa.string()),
            ("definition", pa.string()),
            ("description", pa.string()),
            ("story_count", pa.int64()),
        ]
    ),
}

#: the columns of each timespan table's file
TIMESPAN_SCHEMAS: dict[str, pa.Schema] = {name: _SCHEMAS[name] for name in TIMESPAN_TABLES}


def _atomic_write(path: Path, write: Any) -> Path:
    """Write through ``write(tmp_path)`` to a temporary sibling, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _write_parquet(
    frame: pd.DataFrame, schema: pa.Schema, path: Path, joined: pa.Table | None = None
) -> Path:
    """``frame``'s columns of ``schema``, plus the columns of ``joined`` (row-aligned with ``frame``)."""
    # An explicit schema and no pandas metadata keep the bytes a function of the data alone (the pandas
    # metadata would embed library versions); nullable integers read back as Int64 with
    # pd.read_parquet(..., dtype_backend="numpy_nullable"). Integer columns are delta-encoded without a
    # dictionary: ids and counts rarely repeat enough for one, and delta encoding of the sorted ids is about
    # twice as fast to write and half the size (every Parquet reader supports it); text keeps its dictionary.
    extra = joined.column_names if joined is not None else []
    own = pa.schema([f for f in schema if f.name not in extra])
    table = pa.Table.from_pandas(frame[own.names], schema=own, preserve_index=False)
    for name in extra:
        table = table.append_column(schema.field(name), joined.column(name))
    return _write_arrow(table.select(schema.names), path)


def _parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Integers delta-encoded, text with its dictionary, no schema metadata."""
    integers = [f.name for f in schema if pa.types.is_integer(f.type)]
    others = [f.name for f in schema if f.name not in integers]
    return {
        "compression": "snappy",
        "store_schema": False,
        "use_dictionary": others or False,
        "column_encoding": dict.fromkeys(integers, "DELTA_BINARY_PACKED"),
    }


def _write_arrow(table: pa.Table, path: Path) -> Path:
    """An Arrow table as Parquet, integers delta-encoded, text with its dictionary, no schema metadata."""
    table = table.replace_schema_metadata(None)
    return _atomic_write(path, lambda tmp: pq.write_table(table, tmp, **_parquet_options(table.schema)))


#: rows per Parquet row group: pyarrow's default, which ``_write_arrow`` uses
ROW_GROUP_ROWS = 1024 * 1024


def _row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.Table]:
    """Record batches regrouped into contiguous tables of ROW_GROUP_ROWS rows (the last one shorter), cast to
    ``schema``: what ``pq.write_table`` cuts a whole table into, so a stream is written to the same bytes."""
    pending: list[pa.RecordBatch] = []
    held, written = 0, False
    for batch in batches:
        batch = batch.cast(schema) if batch.schema != schema else batch
        while batch.num_rows:
            take = min(batch.num_rows, ROW_GROUP_ROWS - held)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == ROW_GROUP_ROWS:
                yield pa.Table.from_batches(pending, schema).combine_chunks()
                pending, held, written = [], 0, True
    if held or not written:
        yield pa.Table.from_batches(pending, schema).combine_chunks()


def _write_stream(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, path: Path | None, csv: Path | None
) -> list[Path]:
    """A stream of record batches as Parquet at ``path`` (byte for byte what ``_write_arrow`` writes of the
    whole table) and/or as CSV at ``csv`` (what ``_write_csv`` writes); one row group in memory at a time."""
    schema = schema.remove_metadata()
    targets = [p for p in (path, csv) if p is not None]
    temps = {p: p.with_name(f".{p.name}.tmp-{os.getpid()}") for p in targets}
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(temps[path], schema, **_parquet_options(schema)) if path is not None else None
    handle = temps[csv].open("wb") if csv is not None else None
    try:
        if handle is not None:
            handle.write((",".join(schema.names) + "\n").encode("utf-8"))
        options = _csv_options(schema)
        for group in _row_groups(batches, schema):
            if writer is not None:
                writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
            if handle is not None and group.num_rows:
                pacsv.write_csv(group, handle, options)
        if writer is not None:
            writer.close()
            writer = None
        if handle is not None:
            handle.close()
            handle = None
        for target in targets:
            os.replace(temps[target], target)
    finally:
        if writer is not None:
            writer.close()
        if handle is not None:
            handle.close()
        for temp in temps.values():
            if temp.exists():
                temp.unlink()
    return targets


def _csv_options(schema: pa.Schema) -> pacsv.WriteOptions:
    # Numbers never need quotes: the "none" style writes the same bytes for them, a third faster.
    numeric = all(pa.types.is_integer(f.type) for f in schema)
    # Batches of 64k rows rather than pyarrow's 1,024: the same bytes, a third less CPU on the link lists.
    return pacsv.WriteOptions(
        include_header=False, quoting_style="none" if numeric else "needed", batch_size=1 << 16
    )


def _write_csv(frame: pd.DataFrame | pa.Table, path: Path) -> Path:
    """CSV via pyarrow (several times faster than DataFrame.to_csv): an unquoted header, nulls as empty
    fields, values quoted where pyarrow's "needed" style quotes them; every CSV reader reads it the same."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    header = (",".join(table.column_names) + "\n").encode("utf-8")
    options = _csv_options(table.schema)

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            handle.write(header)
            pacsv.write_csv(table, handle, options)

    return _atomic_write(path, write)


def _story_dates(stories: pd.DataFrame) -> pa.Table:
    """Every story's ``publish_date_utc`` (timestamp, seconds, zone UTC) and ``publish_day_local`` (date), in
    the order of ``stories``; null for undated stories."""
    return pa.table(
        {
            "publish_date_utc": pa.array(
                stories["publish_date"].dt.tz_convert(None).to_numpy(dtype="datetime64[s]"),
                type=pa.timestamp("s", tz="UTC"),
                from_pandas=True,
            ),
            "publish_day_local": pa.array(
                stories["publish_day_local"].to_numpy(dtype="datetime64[D]"),
                type=pa.date32(),
                from_pandas=True,
            ),
        }
    )


def _date_strings(dates: pa.Table) -> pa.Table:
    """The story dates as CSV text: ISO 8601 with its zone ("2019-11-19T00:05:00Z") and the day
    ("2019-11-18"). Arrow's cast of a zone-less timestamp to text ("2019-11-19 00:05:00") and two string
    kernels make the first, some fifteen times cheaper than its strftime or its cast of a zoned timestamp."""
    wall = dates["publish_date_utc"].cast(pa.timestamp("s")).cast(pa.string())
    instant = pc.binary_join_element_wise(
        pc.replace_substring(wall, " ", "T", max_replacements=1), pa.scalar("Z"), ""
    )
    return pa.table(
        {"publish_date_utc": instant, "publish_day_local": dates["publish_day_local"].cast(pa.string())}
    )


#: threads writing a snapshot's files: pyarrow encodes and hashlib hashes without holding the GIL
WRITE_THREADS = min(4, os.cpu_count() or 1)


def write_snapshot_files(
    result: SnapshotResult, folder: str | os.PathLike[str], csv: bool = True
) -> dict[str, list[Path]]:
    """Write each non-empty timespan's tables under ``folder/<timespan folder>/`` and return the paths per
    timespan folder (``timespan_folder``: ``<key>`` for the whole topic, ``foci/<focal set>/<focus>/<key>`` for
    a focus; an empty list for a timespan without stories: it is listed in ``timespans.parquet`` and the
    manifest, marked ``"empty": true``, and gets no folder).

    Per timespan: ``story_links``, ``story_link_counts``, ``medium_links``, ``medium_link_counts`` as Parquet
    and, with ``csv``, Media Cloud style ``stories.csv`` / ``media.csv`` lists (sorted by media inlinks, as
    the web tools list them) plus ``story_links.csv`` / ``medium_links.csv``. A story's dates, in
    ``story_link_counts.parquet`` and ``stories.csv`` alike, are ``publish_date_utc`` (the instant, zone
    UTC: a zoned timestamp, "2019-11-19T00:05:00Z" in CSV) and ``publish_day_local`` (the publisher's
    calendar day, the one its timespans count: "2019-11-18"); both empty for an undated story. The key
    ``"snapshot"`` lists the snapshot's own tables (``timespans``, ``foci``, and the summary tables ``top_words``,
    ``stories_per_day``, ``media_stories_per_day``, ``top_media``, ``top_stories``, each keyed by focus and
    timespan; Parquet + CSV) and ``manifest.json`` (sizes and sha256 of every file).
    Files are written atomically, by a few threads, and byte-identical for identical inputs; existing files
    are replaced, so the caller gives every snapshot its own folder.
    """
    with SnapshotFilesWriter(folder, csv) as files:
        return files.finish(result)


class SnapshotFilesWriter:
    """Writes a snapshot's files on a few threads (pyarrow and hashlib release the GIL), each timespan's as
    soon as it is computed: ``compute_snapshot(..., files=writer)`` hands over the whole topic's timespans
    while the foci are still being computed, so the second core writes while the first computes.
    ``finish`` writes whatever was not handed over yet, then the snapshot's tables and the manifest. Use it as a
    context manager: on an error the pending writes are cancelled and the running ones waited for.

    While the computation runs, one thread writes (a big timespan's files take a few hundred MB on their way to
    disk, and the computation is at its peak too); ``finish`` moves what is still waiting to WRITE_THREADS
    threads."""

    def __init__(self, folder: str | os.PathLike[str], csv: bool = True) -> None:
        self.root = Path(folder)
        self.csv = csv
        self._early = ThreadPoolExecutor(max_workers=1)
        self._pool = ThreadPoolExecutor(max_workers=WRITE_THREADS)
        self._jobs: dict[str, Future[dict[Path, dict[str, Any]]]] = {}
        self._args: dict[str, tuple[Any, ...]] = {}
        self._context: tuple[pa.Table, pa.Table | None, IdIndex] | None = None

    def __enter__(self) -> SnapshotFilesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        for pool in (self._early, self._pool):
            pool.shutdown(wait=True, cancel_futures=True)

    def start(self, stories: pd.DataFrame, media: pd.DataFrame) -> None:
        """The per-story columns every timespan's files take rows of (``SnapshotResult.stories`` / ``media``)."""
        story_dates = _story_dates(stories)
        story_info: pa.Table | None = None
        if self.csv:
            text_dates = _date_strings(story_dates)
            story_info = pa.table(
                {
                    **{name: text_dates.column(name) for name in STORY_DATE_COLUMNS},
                    "title": pa.array(stories["title"], type=pa.string(), from_pandas=True),
                    "url": pa.array(stories["url"], type=pa.string(), from_pandas=True),
                    "media_name": pa.array(
                        media["name"].to_numpy()[
                            positions(media["media_id"].to_numpy(), stories["media_id"].to_numpy())
                        ],
                        type=pa.string(),
                        from_pandas=True,
                    ),
                }
            )
        self._context = (story_dates, story_info, IdIndex(stories["stories_id"].to_numpy()))

    def start_streamed(self) -> None:
        """Start a snapshot whose timespans come through ``write_streamed`` (computed out of core)."""
        self._context = (pa.table({}), None, IdIndex(np.zeros(0, dtype=np.int64)))

    def write_streamed(
        self,
        focus: Focus | None,
        snap: TimespanSnapshot,
        story_links: Callable[[], Iterable[pa.RecordBatch]],
        story_link_counts: pa.Table,
        stories_list: Callable[[], Iterable[pa.RecordBatch]] | None,
    ) -> None:
        """The files of one timespan computed out of core (``topicmap.snapshots.engine``): the same bytes as
        ``submit`` writes from frames. ``story_links`` and ``stories_list`` (the rows of ``stories.csv``, in
        its order) are streams read here, now, as ``story_link_counts`` (ordered by id, with ``utc_s`` and
        ``local_day``: seconds and days since the epoch) and the media tables are: written before the next
        timespan is computed, so no more than one timespan's tables are ever held."""
        out = self.root / timespan_folder(focus, snap.timespan)
        paths = _write_stream(
            story_links(),
            _SCHEMAS["story_links"],
            out / "story_links.parquet",
            out / "story_links.csv" if self.csv else None,
        )
        if stories_list is not None:
            schema = _stories_list_schema()
            paths += _write_stream(stories_list(), schema, None, out / "stories.csv")
        entries = {path: file_entry(path) for path in paths}
        done: Future[dict[Path, dict[str, Any]]] = Future()
        done.set_result(_write_streamed_rest(snap, out, story_link_counts, entries, self.csv))
        self._jobs[timespan_folder(focus, snap.timespan)] = done

    def submit(self, focus: Focus | None, snaps: Sequence[TimespanSnapshot]) -> None:
        """Start writing the files of these timespans (of the whole topic, or of ``focus``)."""
        if self._context is None:
            raise RuntimeError("SnapshotFilesWriter.start must be called before submit")
        story_dates, story_info, story_index = self._context
        # Biggest first, so the threads finish together.
        busy = sorted(
            (snap for snap in snaps if not snap.empty),
            key=lambda snap: -(snap.counts.story_link_count + snap.counts.story_count),
        )
        for snap in busy:
            name = timespan_folder(focus, snap.timespan)
            if name not in self._jobs:
                self._args[name] = (snap, self.root / name, story_dates, story_info, story_index)
                self._jobs[name] = self._early.submit(_write_timespan, *self._args[name])

    def finish(self, result: SnapshotResult) -> dict[str, list[Path]]:
        """Write what is left, wait for every file, then the snapshot's tables and the manifest."""
        if self._context is None:
            self.start(result.stories, result.media)
        self.submit(None, result.timespans)
        for found in result.foci:
            self.submit(found.focus, found.timespans)
        for name, job in self._jobs.items():
            if job.cancel():  # not started yet: to the pool of WRITE_THREADS
                self._jobs[name] = self._pool.submit(_write_timespan, *self._args[name])
        root = self.root
        written: dict[str, list[Path]] = {
            timespan_folder(focus, snap.timespan): [] for focus, snap in result.all_timespans()
        }
        top_job = self._pool.submit(_write_snapshot_tables, result, root, self.csv)
        entries: dict[str, dict[str, Any]] = {}
        for name, job in self._jobs.items():
            files = job.result()
            written[name] = list(files)
            entries.update({path.relative_to(root).as_posix(): entry for path, entry in files.items()})
        top = top_job.result()
        entries.update({path.relative_to(root).as_posix(): file_entry(path) for path in top})
        manifest = _manifest(result, entries)
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        top.append(_atomic_write(root / "manifest.json", lambda tmp: tmp.write_text(text, encoding="utf-8")))
        written["snapshot"] = top
        return written


def _manifest(result: SnapshotResult, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "count_syndicated_once": result.count_syndicated_once,
        "dropped_links": result.dropped_links,
        "timespans": [
            {
                "key": snap.timespan.key,
                "period": snap.timespan.period,
                "name": snap.timespan.name,
                "start_date": snap.timespan.start_date.isoformat(),
                "last_date": snap.timespan.last_date.isoformat(),
                "counts": asdict(snap.counts),
                "empty": snap.empty,
            }
            for snap in result.timespans
        ],
        "foci": [
            {
                "key": found.focus.key,
                **found.focus.definition(),
                "story_count": found.story_count,
                "timespans": [
                    {
                        "key": snap.timespan.key,
                        "folder": timespan_folder(found.focus, snap.timespan),
                        "counts": asdict(snap.counts),
                        "empty": snap.empty,
                    }
                    for snap in found.timespans
                ],
            }
            for found in result.foci
        ],
        "word_sample": result.word_sample,
        "files": dict(sorted(entries.items())),
    }


#: "topicmap-snapshot/2": a timespan without stories is in the manifest ("empty": true) but has no files.
#: "topicmap-snapshot/3": foci (their timespans under "foci", folders under foci/) and the summary tables.
MANIFEST_FORMAT = "topicmap-snapshot/3"
#: the snapshot's folder of foci: foci/<focal set>/<focus>/<timespan key>/
FOCI_FOLDER = "foci"


def timespan_folder(focus: Focus | None, timespan: Timespan) -> str:
    """A timespan's folder, relative to the snapshot's: ``<timespan key>`` for the whole topic,
    ``foci/<focal set>/<focus>/<timespan key>`` for a focus."""
    return timespan.key if focus is None else f"{FOCI_FOLDER}/{focus.key}/{timespan.key}"


def _write_snapshot_tables(result: SnapshotResult, root: Path, csv: bool) -> list[Path]:
    """The tables of the whole snapshot: timespans (every one, the foci's too), foci, and the summary tables
    (top words, stories per day, top media and stories) of every timespan with stories, if any."""
    tables: dict[str, pa.Table] = {
        "timespans": pa.Table.from_pandas(
            result.timespan_table(), schema=_SCHEMAS["timespans"], preserve_index=False
        )
    }
    if result.foci:
        tables["foci"] = pa.Table.from_pandas(
            result.foci_table(), schema=_SCHEMAS["foci"], preserve_index=False
        )
    summaries = [
        (focus.key if focus is not None else None, snap.timespan.key, snap.summary)
        for focus, snap in result.all_timespans()
        if not snap.empty and snap.summary is not None
    ]
    if summaries:  # a topic without any story has nothing to sum up (and no file but its timespans)
        tables.update(summary_tables(summaries))
    written = []
    for name, table in tables.items():
        written.append(_write_arrow(table, root / f"{name}.parquet"))
        if csv:
            written.append(_write_csv(table, root / f"{name}.csv"))
    return written


def file_entry(path: Path) -> dict[str, Any]:
    """A file's manifest entry: its size and sha256."""
    return {"bytes": path.stat().st_size, "sha256": sha256_of(path)}


def _write_timespan(
    snap: TimespanSnapshot,
    out: Path,
    story_dates: pa.Table,
    story_info: pa.Table | None,
    story_index: IdIndex,
) -> dict[Path, dict[str, Any]]:
    """One timespan's Parquet (and, with ``story_info``, CSV) files in ``out``, each with its manifest entry."""
    positions = snap.story_positions
    if positions is None:
        positions = story_index.positions(snap.story_link_counts["stories_id"].to_numpy())
    dates = story_dates.take(pa.array(positions))
    paths = [
        _write_parquet(
            getattr(snap, table),
            _SCHEMAS[table],
            out / f"{table}.parquet",
            joined=dates if table == "story_link_counts" else None,
        )
        for table in TIMESPAN_TABLES
    ]
    if story_info is not None:
        counts = snap.story_link_counts
        # Media Cloud's web tools list stories by media inlinks, then inlinks, most first.
        order = np.lexsort(
            (
                counts["stories_id"].to_numpy(),
                -counts["inlink_count"].to_numpy(),
                -counts["media_inlink_count"].to_numpy(),
            )
        )
        info = story_info.take(pa.array(positions[order]))
        ordered = pa.Table.from_pandas(counts.iloc[order], preserve_index=False)
        columns = {name: ordered.column(name) for name in ordered.column_names}
        columns.update({name: info.column(name) for name in info.column_names})
        stories_list = pa.table({name: columns[name] for name in STORY_CSV_COLUMNS})
        paths += [
            _write_csv(stories_list, out / "stories.csv"),
            _write_csv(_media_list(snap.medium_link_counts), out / "media.csv"),
            _write_csv(snap.story_links, out / "story_links.csv"),
            _write_csv(snap.medium_links, out / "medium_links.csv"),
        ]
    return {path: file_entry(path) for path in paths}


def _stories_list_schema() -> pa.Schema:
    """The columns of ``stories.csv`` as ``_write_timespan`` types them."""
    types = {name: pa.string() for name in ("title", "url", "media_name", *STORY_DATE_COLUMNS)}
    return pa.schema([(name, types.get(name, pa.int64())) for name in STORY_CSV_COLUMNS])


def _write_streamed_rest(
    snap: TimespanSnapshot, out: Path, counts: pa.Table, entries: dict[Path, dict[str, Any]], csv: bool
) -> dict[Path, dict[str, Any]]:
    """The files of an out-of-core timespan other than its streams: story_link_counts (from the engine's
    columns) and the media tables."""
    schema = _SCHEMAS["story_link_counts"]
    dates = {
        "publish_date_utc": counts.column("utc_s").cast(pa.timestamp("s", tz="UTC")),
        "publish_day_local": counts.column("local_day").cast(pa.int32()).cast(pa.date32()),
    }
    table = pa.table(
        {f.name: dates[f.name] if f.name in dates else counts.column(f.name) for f in schema}, schema=schema
    )
    paths = _write_stream(table.to_batches(), schema, out / "story_link_counts.parquet", None)
    paths += [
        _write_parquet(getattr(snap, name), _SCHEMAS[name], out / f"{name}.parquet")
        for name in ("medium_links", "medium_link_counts")
    ]
    if csv:
        paths += [
            _write_csv(_media_list(snap.medium_link_counts), out / "media.csv"),
            _write_csv(snap.medium_links, out / "medium_links.csv"),
        ]
    return {**entries, **{path: file_entry(path) for path in paths}}


def _media_list(medium_link_counts: pd.DataFrame) -> pd.DataFrame:
    """Media Cloud's media.csv: most media inlinks first."""
    ordered = medium_link_counts.sort_values(
        ["media_inlink_count", "inlink_count", "media_id"], ascending=[False, False, True], kind="mergesort"
    )
    return ordered[list(MEDIA_CSV_COLUMNS)]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
