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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from topicmap.snapshots.dictionary import describe, write_data_package
from topicmap.snapshots.foci import Focus
from topicmap.snapshots.ids import IdIndex, positions
from topicmap.snapshots.post_counts import POST_COLUMNS, PostShares, add_post_counts
from topicmap.snapshots.results import (
    COUNT_COLUMNS,
    STAT_COLUMNS,
    STORY_COUNT_PARTS,
    TIMESPAN_TABLES,
    SnapshotResult,
    TimespanSnapshot,
)
from topicmap.snapshots.streams import StreamTarget, csv_options, parquet_options, write_stream, write_streams
from topicmap.snapshots.summaries import SUMMARY_SCHEMAS, summary_tables
from topicmap.snapshots.timespans import Timespan

# Column names of Media Cloud's stories and media lists (web-tools topic stories.csv / media.csv), with our
# Bit.ly split into the 3-day and 30-day totals instead of the single bitly_click_count, and Media Cloud's
# publish_date (a time without a zone) split in two that say what they are: the UTC instant, written with its
# zone, and the publisher's calendar day (the day the timespans count). "2019-11-19T00:05:00Z" and
# "2019-11-18" for a story of 19:05 EST on 18 November.
STORY_DATE_COLUMNS: tuple[str, ...] = ("publish_date_utc", "publish_day_local")
#: the stories table of a timespan (stories.parquet by id, stories.csv by media inlinks): Media Cloud's list plus
#: how each date was found, the language and why the story is in the timespan (dictionary.COLUMNS)
STORY_CSV_COLUMNS: tuple[str, ...] = (
    "stories_id",
    *STORY_DATE_COLUMNS,
    "date_method",
    "time_known",
    "zone_known",
    "day_basis",
    "in_timespan",
    "title",
    "url",
    "language",
    "media_id",
    "media_name",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
    *POST_COLUMNS,
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
    *POST_COLUMNS,
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
            *((column, _NULLABLE_INT) for column in POST_COLUMNS),
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
            *((column, _NULLABLE_INT) for column in POST_COLUMNS),
        ]
    ),
    "stories": pa.schema(
        [
            ("stories_id", pa.int64()),
            ("publish_date_utc", pa.timestamp("s", tz="UTC")),
            ("publish_day_local", pa.date32()),
            ("date_method", pa.string()),
            ("time_known", pa.bool_()),
            ("zone_known", pa.bool_()),
            ("day_basis", pa.string()),
            ("in_timespan", pa.string()),
            ("title", pa.string()),
            ("url", pa.string()),
            ("language", pa.string()),
            ("media_id", pa.int64()),
            ("media_name", pa.string()),
            ("media_inlink_count", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            *((column, _NULLABLE_INT) for column in STAT_COLUMNS),
            *((column, _NULLABLE_INT) for column in POST_COLUMNS),
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
            ("partial", pa.bool_()),
            ("day_count", pa.int64()),
            *((column, pa.int64()) for column in COUNT_COLUMNS),
            *((column, pa.int64()) for column in STORY_COUNT_PARTS),
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

#: the columns of a timespan's stories table (stories.parquet)
STORIES_SCHEMA: pa.Schema = _SCHEMAS["stories"]
#: the columns of each timespan table's file
TIMESPAN_SCHEMAS: dict[str, pa.Schema] = {name: _SCHEMAS[name] for name in TIMESPAN_TABLES}


_SCHEMAS["media"] = pa.schema([_SCHEMAS["medium_link_counts"].field(name) for name in MEDIA_CSV_COLUMNS])
#: every data file of a snapshot (by its name) -> (its table in topicmap.snapshots.dictionary, its schema)
_FILE_TABLES: dict[str, tuple[str, pa.Schema]] = {
    **{
        f"{table}.{fmt}": (table, _SCHEMAS[table])
        for table in ("story_links", "medium_links", "stories")
        for fmt in ("parquet", "csv")
    },
    "story_link_counts.parquet": ("story_link_counts", _SCHEMAS["story_link_counts"]),
    "medium_link_counts.parquet": ("medium_link_counts", _SCHEMAS["medium_link_counts"]),
    "media.csv": ("media", _SCHEMAS["media"]),
    **{
        f"{table}.{fmt}": (table, schema)
        for table, schema in (
            ("timespans", _SCHEMAS["timespans"]),
            ("foci", _SCHEMAS["foci"]),
            *SUMMARY_SCHEMAS.items(),
        )
        for fmt in ("parquet", "csv")
    },
}
#: what a researcher must know before reading the numbers (README.md, datapackage.json's description)
README_NOTES: tuple[str, ...] = (
    "A timespan's story_count is Media Cloud's: the stories published in it PLUS the stories they link to; "
    "timespans.published_story_count is the number published in it (the sum of its stories_per_day), "
    "linked_story_count and undated_story_count the rest; the three add up to story_count, and each story's "
    "in_timespan column in stories.parquet/.csv says which it is.",
    "end_date is exclusive (the day after the last day); last_date is inclusive.",
    "publish_date_utc is the instant in UTC; publish_day_local the publisher's calendar day the timespans "
    "count; date_method says how the date was found ('url (month)': the day is the 15th), time_known and "
    "zone_known whether the page gave a time and a zone (a day only: publish_date_utc is empty), day_basis "
    "which day publish_day_local is (the publisher's, the UTC day, or unknown for stories stored before this "
    "was recorded).",
    "medium_link_count counts directed medium links (A->B and B->A twice); the link map's media pairs count "
    "each pair once.",
    "top_words ranks words by the sampled stories using them (stories); share is stories / words_sampled, a "
    "share of the sample, not of every story.",
    "top_media and top_stories list only values above zero: a timespan without links (or with the social "
    "metrics not fetched) has no rows for that metric, and a header-only file means none ranked.",
    "The first and last week or month of a topic are clipped to its dates, so they can be partial: "
    "timespans.partial says so and day_count gives the days covered (a partial week has fewer than 7); compare "
    "their counts with whole ones per day (the attention charts draw partial weeks and months lighter and name "
    "them).",
    "Folders: <timespan key>/ for the whole topic, foci/<focal set>/<focus>/<timespan key>/ for a focus; a "
    "timespan without stories has no folder (its row in timespans says so). link_map.gexf/.png and "
    "attention.png are the pictures.",
)


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


def _write_arrow(table: pa.Table, path: Path, name: str | None = None) -> Path:
    """An Arrow table as Parquet, integers delta-encoded, text with its dictionary, no schema metadata; with
    ``name`` (a table of ``topicmap.snapshots.dictionary``), each field carries its description."""
    # Tables converted from pandas with an explicit schema and no pandas metadata keep the bytes a function of
    # the data alone (the pandas metadata would embed library versions); nullable integers read back as Int64
    # with pd.read_parquet(..., dtype_backend="numpy_nullable").
    # Integer columns are delta-encoded without a dictionary: ids and counts rarely repeat enough for one, and
    # delta encoding of the sorted ids is about twice as fast to write and half the size (every Parquet reader
    # supports it); text keeps its dictionary.
    table = table.replace_schema_metadata(None)
    if name is not None:
        table = pa.Table.from_arrays(table.columns, schema=describe(table.schema, name))
    options = parquet_options(table.schema, store_schema=name is not None)
    return _atomic_write(path, lambda tmp: pq.write_table(table, tmp, **options))


def _write_csv(frame: pd.DataFrame | pa.Table, path: Path) -> Path:
    """CSV via pyarrow (several times faster than DataFrame.to_csv): an unquoted header, nulls as empty
    fields, values quoted where pyarrow's "needed" style quotes them; every CSV reader reads it the same."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    header = (",".join(table.column_names) + "\n").encode("utf-8")
    options = csv_options(table.schema)

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            handle.write(header)
            pacsv.write_csv(table, handle, options)

    return _atomic_write(path, write)


def _story_dates(stories: pd.DataFrame) -> pa.Table:
    """Every story's ``publish_date_utc`` (timestamp, seconds, zone UTC) and ``publish_day_local`` (date), in
    the order of ``stories``; null for undated stories, and the instant null for a page that gave a day without
    a time of day (``time_known`` False): its midnight is not an instant of publication."""
    instants = stories["publish_date"].dt.tz_convert(None).to_numpy(dtype="datetime64[s]")
    if "time_known" in stories.columns:
        instants = np.where(_flags(stories, "time_known") == 0, np.datetime64("NaT", "s"), instants)
    return pa.table(
        {
            "publish_date_utc": pa.array(instants, type=pa.timestamp("s", tz="UTC"), from_pandas=True),
            "publish_day_local": pa.array(
                stories["publish_day_local"].to_numpy(dtype="datetime64[D]"),
                type=pa.date32(),
                from_pandas=True,
            ),
        }
    )


def _flags(stories: pd.DataFrame, column: str) -> np.ndarray:
    """A nullable yes/no column as int8: 1 yes, 0 no, -1 unknown (or absent)."""
    if column not in stories.columns:
        return np.full(len(stories), -1, dtype=np.int8)
    values = stories[column].to_numpy(dtype=object)
    known = pd.notna(values)
    return np.where(known, np.where(known, values, False).astype(bool).astype(np.int8), -1).astype(np.int8)


def _yes_no(stories: pd.DataFrame, column: str) -> pa.Array:
    """A nullable yes/no column as Arrow booleans, null where unknown."""
    flags = _flags(stories, column)
    return pa.array(flags == 1, type=pa.bool_(), mask=flags < 0)


def _day_basis(stories: pd.DataFrame) -> pa.Array:
    """Which day each story's publish_day_local is: the publisher's (a time with the page's own offset, or the
    day the page states without a time), the UTC day (the page gave its time in UTC, or no zone), or unknown."""
    time_known, zone_known = _flags(stories, "time_known"), _flags(stories, "zone_known")
    offset = stories["utc_offset"].to_numpy() if "utc_offset" in stories.columns else np.zeros(len(stories))
    undated = stories["publish_date"].isna().to_numpy()
    basis = np.select(
        [undated, time_known == 0, (zone_known == 1) & (offset != 0), zone_known == 1, time_known == 1],
        [None, "page day", "page offset", "utc stated", "utc assumed"],
        default="unknown",
    )
    return pa.array(basis.astype(object), type=pa.string())


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


@dataclass(frozen=True)
class _StoryColumns:
    """Every story's columns as the timespans' files take them, built once per snapshot (a timespan's rows are
    ``take``n from them by position rather than converted again for each timespan)."""

    #: publish_date_utc and publish_day_local, typed (``_story_dates``)
    dates: pa.Table
    #: the same as CSV text (``_date_strings``)
    text_dates: pa.Table
    #: publish_day_local as numpy days (NaT when undated): what ``in_timespan`` compares
    days: np.ndarray
    #: the stories table's columns from the story and its medium (date method, title, url, media name, ...)
    info: pa.Table
    #: stories_id -> row of the columns above
    index: IdIndex


class SnapshotFilesWriter:
    """Writes a snapshot's files on a few threads (pyarrow and hashlib release the GIL), each timespan's as
    soon as it is computed: ``compute_snapshot(..., files=writer)`` hands over the whole topic's timespans
    while the foci are still being computed, so the second core writes while the first computes.
    ``finish`` writes whatever was not handed over yet, then the snapshot's tables and the manifest. Use it as a
    context manager: on an error the pending writes are cancelled and the running ones waited for.

    While the computation runs, one thread writes (a big timespan's files take a few hundred MB on their way to
    disk, and the computation is at its peak too); ``finish`` moves what is still waiting to WRITE_THREADS
    threads."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        csv: bool = True,
        posts: PostShares | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.root = Path(folder)
        self.csv = csv
        #: the posts whose counts each timespan's tables take (``topicmap.snapshots.post_counts``)
        self.posts = posts
        #: what the README and the data package say first (the topic and its version), before README_NOTES
        self.notes = tuple(notes)
        self._early = ThreadPoolExecutor(max_workers=1)
        self._pool = ThreadPoolExecutor(max_workers=WRITE_THREADS)
        self._jobs: dict[str, Future[dict[Path, dict[str, Any]]]] = {}
        self._args: dict[str, tuple[Any, ...]] = {}
        self._context: _StoryColumns | None = None

    def __enter__(self) -> SnapshotFilesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        for pool in (self._early, self._pool):
            pool.shutdown(wait=True, cancel_futures=True)

    def start(self, stories: pd.DataFrame, media: pd.DataFrame) -> None:
        """The per-story columns every timespan's files take rows of (``SnapshotResult.stories`` / ``media``)."""
        story_dates = _story_dates(stories)

        def text(column: str) -> pa.Array:
            values = stories[column] if column in stories.columns else pd.Series([None] * len(stories))
            return pa.array(values, type=pa.string(), from_pandas=True)

        story_info = pa.table(
            {
                "date_method": text("date_method"),
                "time_known": _yes_no(stories, "time_known"),
                "zone_known": _yes_no(stories, "zone_known"),
                "day_basis": _day_basis(stories),
                "language": text("language"),
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
        self._context = _StoryColumns(
            dates=story_dates,
            text_dates=_date_strings(story_dates),
            days=story_dates.column("publish_day_local")
            .to_numpy(zero_copy_only=False)
            .astype("datetime64[D]"),
            info=story_info,
            index=IdIndex(stories["stories_id"].to_numpy()),
        )

    def start_streamed(self) -> None:
        """Start a snapshot whose timespans come through ``write_streamed`` (computed out of core)."""
        self._context = _StoryColumns(
            pa.table({}),
            pa.table({}),
            np.zeros(0, dtype="datetime64[D]"),
            pa.table({}),
            IdIndex(np.zeros(0, np.int64)),
        )

    def write_streamed(
        self,
        focus: Focus | None,
        snap: TimespanSnapshot,
        story_links: Callable[[], Iterable[pa.RecordBatch]],
        stories: Callable[[], Iterable[pa.RecordBatch]],
        stories_list: Callable[[], Iterable[pa.RecordBatch]] | None,
    ) -> None:
        """The files of one timespan computed out of core (``topicmap.snapshots.engine``): the same bytes as
        ``submit`` writes from frames. ``story_links`` and ``stories`` (by id, as their files hold them; the
        story_link_counts file takes its columns of ``stories``) and ``stories_list`` (the rows of stories.csv,
        in its order, dates as text, read alongside the others: each stream on a connection of its own) are
        streams read here, now, as the media tables are: written before the
        next timespan is computed, so no more than a row group of a timespan's story tables is ever held."""
        out = self.root / timespan_folder(focus, snap.timespan)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="stories-csv") as beside:
            # stories.csv (its own order) is sorted and written alongside the tables by id: both cores busy
            listed = (
                beside.submit(write_stream, stories_list(), _stories_list_schema(), None, out / "stories.csv")
                if stories_list is not None
                else None
            )
            digests = write_stream(
                story_links(),
                _SCHEMAS["story_links"],
                out / "story_links.parquet",
                out / "story_links.csv" if self.csv else None,
                "story_links",
            )
            digests |= write_streams(
                stories(),
                [
                    StreamTarget(
                        _SCHEMAS["story_link_counts"],
                        out / "story_link_counts.parquet",
                        name="story_link_counts",
                    ),
                    StreamTarget(STORIES_SCHEMA, out / "stories.parquet", name="stories"),
                ],
            )
            if listed is not None:
                digests |= listed.result()
        entries = {path: file_entry(path, digest) for path, digest in digests.items()}
        done: Future[dict[Path, dict[str, Any]]] = Future()
        done.set_result(_write_streamed_rest(snap, out, entries, self.csv))
        self._jobs[timespan_folder(focus, snap.timespan)] = done

    def submit(self, focus: Focus | None, snaps: Sequence[TimespanSnapshot]) -> None:
        """Start writing the files of these timespans (of the whole topic, or of ``focus``)."""
        if self._context is None:
            raise RuntimeError("SnapshotFilesWriter.start must be called before submit")
        # Biggest first, so the threads finish together.
        busy = sorted(
            (snap for snap in snaps if not snap.empty),
            key=lambda snap: -(snap.counts.story_link_count + snap.counts.story_count),
        )
        for snap in busy:
            name = timespan_folder(focus, snap.timespan)
            if name not in self._jobs:
                add_post_counts(snap, self.posts)
                self._args[name] = (snap, self.root / name, self._context, self.csv)
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
        top += write_data_package(
            root,
            [(name, *_FILE_TABLES[name.rsplit("/", 1)[-1]]) for name in entries],
            "topicmap snapshot",
            (*self.notes, *README_NOTES),
            _write_text,
        )
        entries.update({path.relative_to(root).as_posix(): file_entry(path) for path in top})
        manifest = _manifest(result, entries)
        top.append(_write_text(root / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n"))
        written["snapshot"] = top
        return written


def _write_text(path: Path, text: str) -> Path:
    return _atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


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
        written.append(_write_arrow(table, root / f"{name}.parquet", name))
        if csv:
            written.append(_write_csv(table, root / f"{name}.csv"))
    return written


def file_entry(path: Path, sha256: str | None = None) -> dict[str, Any]:
    """A file's manifest entry: its size and sha256 (read from the file unless given, as the streams hash what
    they write)."""
    return {"bytes": path.stat().st_size, "sha256": sha256 or sha256_of(path)}


def _write_timespan(
    snap: TimespanSnapshot, out: Path, stories: _StoryColumns, csv: bool
) -> dict[Path, dict[str, Any]]:
    """One timespan's Parquet (and, with ``csv``, CSV) files in ``out``, each with its manifest entry."""
    positions = snap.story_positions
    if positions is None:
        positions = stories.index.positions(snap.story_link_counts["stories_id"].to_numpy())
    taken = pa.array(positions)
    dates = stories.dates.take(taken)
    # story_link_counts' columns, converted from pandas once: its file and the stories table both take them
    counts_schema = pa.schema([f for f in _SCHEMAS["story_link_counts"] if f.name not in STORY_DATE_COLUMNS])
    counts = pa.Table.from_pandas(
        snap.story_link_counts[counts_schema.names], schema=counts_schema, preserve_index=False
    )
    for name in STORY_DATE_COLUMNS:
        counts = counts.append_column(_SCHEMAS["story_link_counts"].field(name), dates.column(name))
    # the story links' Parquet and CSV files take the same Arrow table
    links = pa.Table.from_pandas(snap.story_links, schema=_SCHEMAS["story_links"], preserve_index=False)
    paths = [
        _write_arrow(links, out / "story_links.parquet", "story_links"),
        _write_arrow(counts, out / "story_link_counts.parquet", "story_link_counts"),
        *_write_media_files(snap, out, csv),
    ]
    in_timespan = _in_timespan(stories.days[positions], snap.timespan)
    table = _stories_table(counts, in_timespan, stories.info.take(taken))
    paths.append(_write_arrow(table, out / "stories.parquet", "stories"))
    if csv:
        frame = snap.story_link_counts
        # Media Cloud's web tools list stories by media inlinks, then inlinks, most first.
        order = np.lexsort(
            (
                frame["stories_id"].to_numpy(),
                -frame["inlink_count"].to_numpy(),
                -frame["media_inlink_count"].to_numpy(),
            )
        )
        # the dates as text, taken from the snapshot's (converted once) rather than converted again here
        text_dates = stories.text_dates.take(pa.array(positions[order]))
        listed = table.drop_columns(list(STORY_DATE_COLUMNS)).take(pa.array(order))
        for name in STORY_DATE_COLUMNS:
            listed = listed.add_column(STORIES_SCHEMA.get_field_index(name), name, text_dates.column(name))
        paths += [
            _write_csv(listed, out / "stories.csv"),
            _write_csv(links, out / "story_links.csv"),
        ]
    return {path: file_entry(path) for path in paths}


#: in_timespan's values, by the code ``_in_timespan`` computes
_WHY_IN_TIMESPAN = pa.array(["published", "linked", "undated"], type=pa.string())


def _in_timespan(days: np.ndarray, timespan: Timespan) -> pa.Array:
    """Why each story (its publisher's day, NaT when undated) is in the timespan: published, linked or
    undated."""
    inside = (days >= np.datetime64(timespan.start_date, "D")) & (
        days < np.datetime64(timespan.end_date, "D")
    )
    code = np.where(np.isnat(days), 2, np.where(inside, 0, 1)).astype(np.int8)
    return _WHY_IN_TIMESPAN.take(pa.array(code))


def _stories_table(counts: pa.Table, in_timespan: pa.Array, info: pa.Table) -> pa.Table:
    """The timespan's stories table (``_SCHEMAS["stories"]``), by story id, from its story_link_counts (with
    the dates) and ``in_timespan`` and ``info`` row-aligned with them."""
    columns = {name: counts.column(name) for name in counts.column_names}
    columns["in_timespan"] = in_timespan
    columns.update({name: info.column(name) for name in info.column_names})
    schema = _SCHEMAS["stories"]
    return pa.table([columns[field.name] for field in schema], schema=schema)


def _stories_list_schema() -> pa.Schema:
    """The columns of ``stories.csv`` as ``_write_timespan`` types them: the stories table's, dates as text."""
    return pa.schema([(f.name, pa.string()) if f.name in STORY_DATE_COLUMNS else f for f in STORIES_SCHEMA])


def _write_streamed_rest(
    snap: TimespanSnapshot, out: Path, entries: dict[Path, dict[str, Any]], csv: bool
) -> dict[Path, dict[str, Any]]:
    """The files of an out-of-core timespan other than its streams: the media tables."""
    return {**entries, **{path: file_entry(path) for path in _write_media_files(snap, out, csv)}}


def _write_media_files(snap: TimespanSnapshot, out: Path, csv: bool) -> list[Path]:
    """A timespan's medium_links and medium_link_counts as Parquet and, with ``csv``, medium_links.csv and
    Media Cloud's media.csv (most media inlinks first); each table converted from pandas once for both."""
    links = pa.Table.from_pandas(snap.medium_links, schema=_SCHEMAS["medium_links"], preserve_index=False)
    counts = pa.Table.from_pandas(
        snap.medium_link_counts, schema=_SCHEMAS["medium_link_counts"], preserve_index=False
    )
    paths = [
        _write_arrow(links, out / "medium_links.parquet", "medium_links"),
        _write_arrow(counts, out / "medium_link_counts.parquet", "medium_link_counts"),
    ]
    if csv:
        media = counts.sort_by(
            [("media_inlink_count", "descending"), ("inlink_count", "descending"), ("media_id", "ascending")]
        )
        paths += [
            _write_csv(media.select(list(MEDIA_CSV_COLUMNS)), out / "media.csv"),
            _write_csv(links, out / "medium_links.csv"),
        ]
    return paths


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
