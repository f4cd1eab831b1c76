"""Snapshots out of core: the same tables as ``topicmap.snapshots.compute``, computed by DuckDB.

A topic too big for memory (tens of millions of stories, hundreds of millions of links) is loaded into a DuckDB
database file in the run's own folder, one bounded Arrow record batch at a time (``TopicSource``: from the store,
Parquet files or DataFrames), and every timespan's tables are SQL over named columns. DuckDB keeps what does not
fit in ``memory_limit`` on disk (``temp_directory`` under the same folder), sorts and joins on every core
(``threads``), and hands each result back as a stream of Arrow record batches, which the pyarrow writers of
``topicmap.snapshots.files`` turn into the very bytes the in-memory path writes (the same row groups, encodings
and CSV text). So the two paths write byte-identical files; ``compute_snapshot_ooc`` is chosen for topics above
``OUT_OF_CORE_ROWS`` stories + links (``topicmap.snapshots.folder``), where numpy's in-memory arrays would
outgrow the machine.

Only small results come back into Python: each timespan's media tables (a few hundred media), its counted
stories' columns for the summary (one timespan at a time, dropped once summed up), the word samples and the
consistency checks' facts, taken from the rows as they stream to the files (``stream_facts``); and each story's
columns that do not depend on the timespan (title, url, dates as text: ``_story_rows``), which the stories
streams gather into their sorted batches by position. The rules are
``compute``'s (its docstring): a timespan's links are the cross-media links whose source was published in it,
its stories those plus every story such a link points to, syndicated copies linking one story counted once
when asked, a focus its stories and the links among them. Only ``mode: web`` topics: a ``url_sharing`` one
(timespans of the stories its posts share) is refused, and computed in memory (``topicmap.snapshots.folder``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from topicmap.snapshots.compute import check_compute_arguments
from topicmap.snapshots.engine_frames import arrow_frame, counted_stories
from topicmap.snapshots.engine_input import (
    BATCH_ROWS,
    INPUT_SCHEMAS,
    NS_PER_DAY,
    NS_PER_S,
    BatchSource,
    TopicSource,
    conform,
)
from topicmap.snapshots.engine_sql import (
    COUNTS_SELECT,
    MEDIUM_LINK_COUNTS_SELECT,
    STORY_LINKS_SELECT,
    STORY_ROWS_SELECT,
    stories_select,
    story_row_columns,
)
from topicmap.snapshots.foci import Focus, StoryTexts, TextChunk, focus_story_masks
from topicmap.snapshots.ids import IdIndex
from topicmap.snapshots.post_counts import PostShares, add_post_counts
from topicmap.snapshots.results import (
    STAT_COLUMNS,
    FocusSnapshot,
    SnapshotResult,
    TimespanCounts,
    TimespanSnapshot,
)
from topicmap.snapshots.stream_facts import LinkTally, StoryTally, streamed_facts, tapped
from topicmap.snapshots.summaries import StoryInfo, empty_summary, summarize_timespan
from topicmap.snapshots.timespans import Timespan
from topicmap.snapshots.words import (
    DEFAULT_WORD_SAMPLE,
    count_words,
    sample_order,
    sample_positions,
    top_words,
)

if TYPE_CHECKING:
    import duckdb

    from topicmap.snapshots.files import SnapshotFilesWriter

#: stories + links above which a snapshot is computed out of core. Below, numpy in memory is faster (at 1M stories
#: / 10M links it took 55 CPU s where DuckDB took 118) and fits: about 4.3 GB per million stories with the stories
#: tables, so 1.5 million stories with their 15 million links stay near 6.5 GB, under 8 GB with room for the
#: pictures (``benchmarks/RESULTS.md``, ``bench_snapshot.py``).
OUT_OF_CORE_ROWS = 16_500_000
_SORT_LAST = np.iinfo(np.int64).max


@dataclass
class EngineSettings:
    """DuckDB's resources: ``memory_limit`` (e.g. "4GB": above it DuckDB spills to ``temp_directory``) and
    ``threads`` (None: every core)."""

    memory_limit: str = "4GB"
    threads: int | None = None


def connect(folder: Path, settings: EngineSettings) -> duckdb.DuckDBPyConnection:
    """A DuckDB database file in ``folder``, spilling to ``folder/spill``."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(folder / "topic.duckdb"))
    con.execute(f"SET memory_limit = '{settings.memory_limit}'")
    con.execute(f"SET temp_directory = '{(folder / 'spill').as_posix()}'")
    con.execute("SET preserve_insertion_order = false")  # every output has its ORDER BY
    if settings.threads:
        con.execute(f"SET threads = {int(settings.threads)}")
    # Each timespan's tables live in an in-memory database (spilling like the rest) rather than as temporary
    # tables: those only their own connection sees, and a timespan's files are read on several at once.
    con.execute(f"ATTACH ':memory:' AS {SCRATCH}")
    _session(con)
    return con


#: the in-memory database of each timespan's tables (``connect``)
SCRATCH = "scratch"


def _session(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """What each connection (the engine's, and each cursor reading a stream) sets for itself."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET search_path = 'main,{SCRATCH}'")
    return con


def _load(con: duckdb.DuckDBPyConnection, source: TopicSource) -> None:
    """Every input into its ``raw_<name>`` table, a bounded batch at a time.

    Each input is one INSERT reading a record batch reader: DuckDB pulls the batches as it goes, converts and
    compresses them on every core and writes the table straight to the database file (an INSERT per batch ran on
    one core and went through the write-ahead log: 2.2x the wall time at ten million stories, 2.8x at one)."""
    import duckdb

    for name, batches in source.inputs():
        schema = INPUT_SCHEMAS[name]
        con.execute(f"DROP TABLE IF EXISTS raw_{name}")
        con.execute(
            f"CREATE TABLE raw_{name} ({', '.join(f'{f.name} {_SQL_TYPES[str(f.type)]}' for f in schema)})"
        )
        if batches is None:
            continue
        failed: list[BaseException] = []
        reader = pa.RecordBatchReader.from_batches(  # noqa: F841 (read by DuckDB's replacement scan)
            schema, _conformed(batches, schema, name, failed)
        )
        try:
            con.execute(f"INSERT INTO raw_{name} SELECT * FROM reader")
        except duckdb.Error:
            if failed:  # the source's own error (a missing column, a bad value), not DuckDB's wrapping of it
                raise failed[0] from None
            raise


def _conformed(
    batches: BatchSource, schema: pa.Schema, name: str, failed: list[BaseException]
) -> Iterator[pa.RecordBatch]:
    """The source's non-empty batches conformed to ``schema``; an error is also kept in ``failed``."""
    try:
        for batch in batches():
            if batch.num_rows:
                yield conform(batch, schema, name)
    except BaseException as err:
        failed.append(err)
        raise


_SQL_TYPES = {"int64": "BIGINT", "string": "VARCHAR"}


def _fail_on(con: duckdb.DuckDBPyConnection, sql: str, message: str) -> None:
    """Raise ``ValueError(message + the first ids)`` when ``sql`` (a list of ids) finds any."""
    found = [row[0] for row in con.execute(sql + " LIMIT 10").fetchall()]
    if found:
        raise ValueError(f"{message}: {found}")


def _prepare(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The validated topic: ``media``, ``stories`` (with position, dates, statistics, group) and the distinct
    cross-media links ``cross_links``; returns the dropped links by reason."""
    _fail_on(
        con,
        "SELECT media_id FROM raw_media GROUP BY media_id HAVING count(*) > 1 ORDER BY media_id",
        "media.media_id repeats (merge duplicate media first)",
    )
    _fail_on(
        con,
        "SELECT stories_id FROM raw_stories GROUP BY stories_id HAVING count(*) > 1 ORDER BY stories_id",
        "stories.stories_id repeats (merge duplicate stories first)",
    )
    _fail_on(
        con,
        "SELECT DISTINCT media_id FROM raw_stories ANTI JOIN raw_media USING (media_id) ORDER BY media_id",
        "stories refer to media_id(s) not in media",
    )
    _fail_on(
        con,
        "SELECT stories_id FROM raw_story_stats GROUP BY stories_id HAVING count(*) > 1",
        "story_stats.stories_id repeats: one statistics row per story",
    )
    _fail_on(
        con,
        "SELECT stories_id FROM raw_near_dup_groups GROUP BY stories_id HAVING count(*) > 1",
        "near_dup_groups.stories_id repeats: a story belongs to one group at most",
    )
    con.execute(
        "CREATE OR REPLACE TABLE media AS SELECT media_id, name, url FROM raw_media ORDER BY media_id"
    )
    # local_ns: the publisher's clock (the instant moved by the page's UTC offset), which places a story in its
    # timespans; sort_key orders the stories by it, undated last; the files floor both to seconds and days.
    con.execute(
        f"""
        CREATE OR REPLACE TABLE stories AS
        SELECT row_number() OVER (ORDER BY s.stories_id) - 1 AS pos, s.stories_id, s.media_id,
               s.utc_ns + coalesce(s.offset_min, 0) * 60000000000 AS local_ns,
               coalesce(s.utc_ns + coalesce(s.offset_min, 0) * 60000000000, {_SORT_LAST}) AS sort_key,
               {_floor_div("s.utc_ns", NS_PER_S)} AS utc_s,
               {_floor_div("s.utc_ns + coalesce(s.offset_min, 0) * 60000000000", NS_PER_DAY)} AS local_day,
               {", ".join(f"st.{c}" for c in STAT_COLUMNS)},
               s.time_known, s.zone_known, coalesce(s.offset_min, 0) AS offset_min,
               g.group_id AS grp
        FROM raw_stories s
        LEFT JOIN raw_story_stats st USING (stories_id)
        LEFT JOIN raw_near_dup_groups g USING (stories_id)
        ORDER BY s.stories_id
        """
    )
    con.execute(
        "CREATE OR REPLACE VIEW story_text AS "  # a view: the texts are not copied
        "SELECT stories_id, title, url, text, language, date_method FROM raw_stories"
    )
    dropped = con.execute(
        """
        SELECT count(*) FILTER (WHERE s.stories_id IS NULL),
               count(*) FILTER (WHERE s.stories_id IS NOT NULL AND r.stories_id IS NULL),
               count(*) FILTER (WHERE s.media_id = r.media_id),
               count(*) FILTER (WHERE s.media_id <> r.media_id)
        FROM raw_links l
        LEFT JOIN stories s ON s.stories_id = l.stories_id
        LEFT JOIN stories r ON r.stories_id = l.ref_stories_id
        """
    ).fetchall()[0]
    assert dropped is not None
    # Stored in the story links' order: every timespan's links are a filter of these, and the sort of its links
    # file, its counts' aggregations and the checks' joins all run faster on rows that arrive nearly in order.
    # ``shared``: another link of the topic joins the same medium to the same story. A story's distinct linking
    # media in a timespan are then its unshared links there plus the distinct media of its shared ones, counted
    # without grouping every (story, medium) pair of every timespan again (``_compute_timespan``); it holds for
    # any subset of the links, so a focus's links keep the topic's flag.
    _stored_in_order(
        con,
        """
        CREATE OR REPLACE TABLE cross_links AS
        WITH distinct_links AS (
            SELECT DISTINCT l.stories_id AS source, l.ref_stories_id AS ref,
                   s.media_id AS source_media, r.media_id AS ref_media
            FROM raw_links l
            JOIN stories s ON s.stories_id = l.stories_id
            JOIN stories r ON r.stories_id = l.ref_stories_id
            WHERE s.media_id <> r.media_id
        ),
        shared_pairs AS (SELECT ref, source_media FROM distinct_links GROUP BY ALL HAVING count(*) > 1)
        SELECT l.source, l.ref, l.source_media, l.ref_media, p.ref IS NOT NULL AS shared
        FROM distinct_links l LEFT JOIN shared_pairs p USING (ref, source_media)
        ORDER BY l.source, l.ref
        """,
    )
    con.execute("DROP TABLE raw_links")
    distinct = con.execute("SELECT count(*) FROM cross_links").fetchall()[0]
    assert distinct is not None
    return {
        "source_not_in_topic": int(dropped[0]),
        "ref_not_in_topic": int(dropped[1]),
        "same_medium": int(dropped[2]),
        "duplicate": int(dropped[3]) - int(distinct[0]),
    }


def _stored_in_order(con: duckdb.DuckDBPyConnection, create: str) -> None:
    """Run ``create`` (a CREATE TABLE ... AS ... ORDER BY) so that the table is stored in that order.

    The streams sort a timespan's rows by story id and its links by (source, ref): rows that arrive nearly in
    order (scanned from a table stored so) sort, join and aggregate faster: at a million stories a fifth off the
    stories' streams, a quarter off the overall timespan's links, counts and checks. Insertion order is kept for
    this statement only, on the engine's own connection while no stream reads (the setting is the database's,
    not the connection's)."""
    con.execute("SET preserve_insertion_order = true")
    try:
        con.execute(create)
    finally:
        con.execute("SET preserve_insertion_order = false")


def _floor_div(expr: str, unit: int) -> str:
    """SQL for floor(expr / unit) on integers (numpy's rounding of datetimes to a coarser unit)."""
    return f"CASE WHEN ({expr}) >= 0 THEN ({expr}) // {unit} ELSE -((-({expr}) - 1) // {unit}) - 1 END"


# --------------------------------------------------------------------------------------------- per timespan


def _use_scope(con: duckdb.DuckDBPyConnection, focus_ids: np.ndarray | None) -> None:
    """Point ``scope_stories`` and ``scope_links`` at the whole topic (``focus_ids`` None) or at a focus: its
    stories and the links among them, copied once for its timespans."""
    if focus_ids is None:
        con.execute("CREATE OR REPLACE VIEW scope_stories AS SELECT * FROM stories")
        con.execute("CREATE OR REPLACE VIEW scope_links AS SELECT * FROM cross_links")
        return
    ids = pa.table({"stories_id": pa.array(focus_ids, type=pa.int64())})  # noqa: F841 (DuckDB reads it)
    con.execute("CREATE OR REPLACE TABLE focus_ids AS SELECT stories_id FROM ids")
    con.execute(
        "CREATE OR REPLACE TABLE scope_stories_t AS "
        "SELECT * FROM stories SEMI JOIN focus_ids USING (stories_id)"
    )
    _stored_in_order(
        con,
        """
        CREATE OR REPLACE TABLE scope_links_t AS
        SELECT * FROM cross_links c
        WHERE c.source IN (SELECT stories_id FROM focus_ids) AND c.ref IN (SELECT stories_id FROM focus_ids)
        ORDER BY c.source, c.ref
        """,
    )
    con.execute("CREATE OR REPLACE VIEW scope_stories AS SELECT * FROM scope_stories_t")
    con.execute("CREATE OR REPLACE VIEW scope_links AS SELECT * FROM scope_links_t")


def _compute_timespan(
    con: duckdb.DuckDBPyConnection, ts: Timespan, has_groups: bool, syndicated_once: bool
) -> tuple[int, int]:
    """The timespan's ``window``, ``period_links``, ``period``, ``period_medium_links`` tables; returns (window
    stories, syndicated repeat links)."""
    lo, hi = ts.window_ns()
    undated = " OR local_ns IS NULL" if ts.period == "overall" else ""
    window = f"((local_ns >= {int(lo)} AND local_ns < {int(hi)}){undated})"
    con.execute(
        f"CREATE OR REPLACE TABLE scratch.in_window AS SELECT stories_id FROM scope_stories WHERE {window}"
    )
    found = con.execute("SELECT count(*) FROM in_window").fetchall()[0]
    assert found is not None
    if found[0] == 0:
        return 0, 0
    con.execute(
        "CREATE OR REPLACE TABLE scratch.period_links AS SELECT c.* FROM scope_links c "
        "WHERE c.source IN (SELECT stories_id FROM in_window)"
    )
    repeats = 0
    if has_groups:
        # Copies of one syndicated story linking the same ref: the earliest copy (publish date, then id) stands
        # for the group; the others' links are repeats (reported; dropped with count_syndicated_once).
        con.execute(
            """
            CREATE OR REPLACE TABLE scratch.repeats AS
            SELECT source, ref FROM (
                SELECT l.source, l.ref,
                       row_number() OVER (PARTITION BY s.grp, l.ref ORDER BY s.sort_key, l.source) AS nth
                FROM period_links l JOIN scope_stories s ON s.stories_id = l.source
                WHERE s.grp IS NOT NULL
            ) WHERE nth > 1
            """
        )
        counted = con.execute("SELECT count(*) FROM repeats").fetchall()[0]
        assert counted is not None
        repeats = int(counted[0])
        if syndicated_once and repeats:
            con.execute(
                "DELETE FROM period_links USING repeats r "
                "WHERE period_links.source = r.source AND period_links.ref = r.ref"
            )
    # The counted stories: those published in the window and those its links point to. A story's linking media:
    # one per unshared link, plus the distinct media of its shared links (``cross_links.shared``), a small part.
    con.execute(
        f"""
        CREATE OR REPLACE TABLE scratch.period AS
        WITH inl AS (SELECT ref AS stories_id, count(*) AS inlink_count,
                            count(*) FILTER (WHERE NOT shared) AS unshared_count
                     FROM period_links GROUP BY ref),
             shared_media AS (SELECT ref AS stories_id, count(DISTINCT source_media) AS media_count
                              FROM period_links WHERE shared GROUP BY ref),
             outl AS (SELECT source AS stories_id, count(*) AS outlink_count FROM period_links GROUP BY source)
        SELECT s.pos, s.stories_id, s.media_id,
               coalesce(inl.inlink_count, 0) AS inlink_count, coalesce(outl.outlink_count, 0) AS outlink_count,
               coalesce(inl.unshared_count + coalesce(sm.media_count, 0), 0) AS media_inlink_count,
               {", ".join(f"s.{c}" for c in STAT_COLUMNS)}, s.utc_s, s.local_day
        FROM scope_stories s
        LEFT JOIN inl USING (stories_id) LEFT JOIN outl USING (stories_id) LEFT JOIN shared_media sm USING (stories_id)
        WHERE {window} OR inl.stories_id IS NOT NULL
        """
    )
    con.execute(
        """
        CREATE OR REPLACE TABLE scratch.period_medium_links AS
        SELECT source_media AS source_media_id, ref_media AS ref_media_id, count(*) AS link_count
        FROM period_links GROUP BY ALL
        """
    )
    return int(found[0]), repeats


def _sizes(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int]:
    """The timespan's counted stories, its story links and its medium links' link counts summed."""
    sizes = con.execute(
        "SELECT (SELECT count(*) FROM period), (SELECT count(*) FROM period_links), "
        "(SELECT coalesce(sum(link_count), 0) FROM period_medium_links)"
    ).fetchall()[0]
    assert sizes is not None
    return int(sizes[0]), int(sizes[1]), int(sizes[2])


def _arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.sql(sql).to_arrow_table()


def _reader(con: duckdb.DuckDBPyConnection, sql: str) -> Iterator[pa.RecordBatch]:
    """The batches of ``sql`` on a connection of their own, so the files' streams can be read side by side."""
    cursor = _session(con.cursor())
    try:
        yield from cursor.sql(sql).to_arrow_reader(BATCH_ROWS)
    finally:
        cursor.close()


#: story row columns of few distinct values (days, methods, languages, media): held dictionary-encoded
_FEW_VALUES = ("publish_day_local_text", "date_method", "day_basis", "language", "media_name")


def _story_rows(con: duckdb.DuckDBPyConnection, stories: int) -> pa.Table:
    """Each story's columns that do not depend on the timespan (``STORY_ROWS_SELECT``), row ``pos`` for the story
    at position ``pos``: about 110 bytes a story, the columns of few values dictionary-encoded. Built a record
    batch at a time and one column at a time, so that no more than the rows' own size and one column's copy is
    ever held (pyarrow's allocator keeps what it once held: ``topicmap/__init__.py``)."""
    parts: dict[str, list[pa.Array]] = {}
    for batch in _reader(con, STORY_ROWS_SELECT):
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            parts.setdefault(name, []).append(column.dictionary_encode() if name in _FEW_VALUES else column)
    if not parts:  # no stories: the columns, empty
        return _arrow(con, STORY_ROWS_SELECT)
    rows = sum(len(part) for part in next(iter(parts.values())))
    if rows != stories:
        raise RuntimeError(f"story rows: {rows} rows for {stories} stories")
    # one column's parts joined (a dictionary's in the order its values first appear) and dropped before the next
    return pa.table({name: pa.concat_arrays(parts.pop(name)) for name in list(parts)})


def _gathered(
    con: duckdb.DuckDBPyConnection, sql: str, rows: pa.Table, csv: bool
) -> Iterator[pa.RecordBatch]:
    """The stories table of a timespan: the batches of ``sql`` (``stories_select``, ``pos`` first), each with its
    stories' ``story_row_columns`` gathered from ``rows`` (``_story_rows``) by position. Joining each timespan's
    stories to every story's wide rows in SQL and sorting them wide cost twice the CPU of sorting the narrow rows
    and gathering the wide columns of the rows sorted."""
    from topicmap.snapshots.files import STORIES_SCHEMA

    taken = story_row_columns(csv)
    names = STORIES_SCHEMA.names
    for batch in _reader(con, sql):
        story = rows.take(batch.column("pos"))
        yield pa.RecordBatch.from_arrays(
            [
                story.column(taken[name]).combine_chunks() if name in taken else batch.column(name)
                for name in names
            ],
            names=names,
        )


#: stories whose title and text the engine hands to the query foci and word counts at once
TEXT_BATCH_ROWS = 50_000


class DuckTexts:
    """The stories' titles, texts and languages as loaded into the engine, read ``chunk`` stories at a time."""

    def __init__(self, con: duckdb.DuckDBPyConnection, chunk: int) -> None:
        self.con = con
        self.chunk = chunk

    def chunks(self, stories_ids: np.ndarray) -> Iterator[TextChunk]:
        # One scan and one sort for all the stories asked for: a join per chunk would scan every loaded text
        # again for each chunk (stories are loaded in the source's order: a chunk's ids need not prune the scan).
        ids = pa.table({"stories_id": pa.array(stories_ids, type=pa.int64())})  # noqa: F841 (DuckDB reads it)
        cursor = _session(self.con.cursor())
        try:
            rows = cursor.sql(
                "SELECT t.stories_id, t.title, t.text, t.language FROM story_text t "
                "SEMI JOIN ids USING (stories_id) ORDER BY t.stories_id"
            ).to_arrow_reader(self.chunk)
            for batch in rows:
                yield TextChunk(
                    stories_id=batch.column(0).to_numpy().astype(np.int64),
                    title=batch.column(1).to_pylist(),
                    text=batch.column(2).to_pylist(),
                    language=batch.column(3).to_pylist(),
                )
        finally:
            cursor.close()


class _TitlesLater:
    """``StoryInfo.title`` / ``url`` left empty while the timespans are summed up, filled in by ``_fill_titles``
    for every summary at once: a lookup per timespan would scan every story's text columns again."""

    def __getitem__(self, positions: np.ndarray) -> np.ndarray:
        return np.full(len(positions), None, dtype=object)


def _fill_titles(con: duckdb.DuckDBPyConnection, snaps: Sequence[TimespanSnapshot]) -> None:
    """The titles and urls of the summaries' top stories, looked up in one pass over the stories."""
    listed = [snap.summary.top_stories for snap in snaps if snap.summary is not None]
    listed = [table for table in listed if len(table)]
    if not listed:
        return
    wanted = np.unique(np.concatenate([table["stories_id"].to_numpy(dtype=np.int64) for table in listed]))
    ids = pa.table({"stories_id": pa.array(wanted)})  # noqa: F841 (DuckDB reads it)
    rows = con.execute(
        "SELECT stories_id, title, url FROM story_text SEMI JOIN ids USING (stories_id)"
    ).fetchall()
    found = {story_id: (title, url) for story_id, title, url in rows}
    for table in listed:
        pairs = [found.get(story_id, (None, None)) for story_id in table["stories_id"].tolist()]
        table["title"] = np.array([title for title, _ in pairs], dtype=object)
        table["url"] = np.array([url for _, url in pairs], dtype=object)


@dataclass
class _Work:
    """What one out-of-core computation carries from timespan to timespan."""

    con: duckdb.DuckDBPyConnection
    info: StoryInfo
    #: the topic's stories (``info.story_ids``) and each one's medium: the checks' facts (``stream_facts``)
    index: IdIndex
    story_media: np.ndarray
    #: each story's columns that do not depend on the timespan, by position (``_story_rows``)
    story_rows: pa.Table
    sample_keys: np.ndarray
    word_sample: int
    has_groups: bool
    syndicated_once: bool
    files: SnapshotFilesWriter | None
    posts: PostShares | None = None
    samples: list[tuple[TimespanSnapshot, np.ndarray]] = field(default_factory=list)


def _timespans(
    work: _Work, timespans: Sequence[Timespan], focus: Focus | None, focus_index: IdIndex | None = None
) -> list[TimespanSnapshot]:
    from topicmap.snapshots.files import TIMESPAN_SCHEMAS

    con = work.con
    snaps: list[TimespanSnapshot] = []
    empty_tables = {
        name: pd.DataFrame({f.name: [] for f in schema}) for name, schema in TIMESPAN_SCHEMAS.items()
    }
    shared_empty = empty_summary()
    for ts in timespans:
        window, repeats = _compute_timespan(con, ts, work.has_groups, work.syndicated_once)
        if window == 0:
            empty = TimespanSnapshot(
                ts,
                *(empty_tables[name] for name in empty_tables),
                TimespanCounts(0, 0, 0, 0, 0),
                summary=shared_empty,
            )
            add_post_counts(empty, work.posts)
            snaps.append(empty)
            continue
        medium_links = arrow_frame(_arrow(con, "SELECT * FROM period_medium_links ORDER BY 1, 2"))
        medium_link_counts = arrow_frame(_arrow(con, MEDIUM_LINK_COUNTS_SELECT))
        story_count, link_count, medium_link_sum = _sizes(con)
        counts = TimespanCounts(
            story_count=story_count,
            story_link_count=link_count,
            medium_count=len(medium_link_counts),
            medium_link_count=len(medium_links),
            syndicated_repeat_link_count=repeats,
        )
        positions, period_frame = counted_stories(
            _reader(con, COUNTS_SELECT + " ORDER BY p.stories_id"), story_count
        )
        snap = TimespanSnapshot(
            ts,
            empty_tables["story_links"],
            empty_tables["story_link_counts"],
            medium_links,
            medium_link_counts,
            counts,
        )
        snap.summary = summarize_timespan(
            ts, period_frame, medium_link_counts, positions, work.info, shared_empty.top_words
        )
        work.samples.append((snap, sample_positions(positions, work.sample_keys, work.word_sample)))
        # the post columns of the media and the timespan's post_count, as the in-memory path adds them
        snap.story_link_counts = period_frame
        add_post_counts(snap, work.posts)
        snap.story_link_counts = empty_tables["story_link_counts"]
        del period_frame
        post_counts = (work.posts or PostShares()).story_counts(ts)  # noqa: F841 (DuckDB reads it)
        con.execute("CREATE OR REPLACE TABLE scratch.period_posts AS SELECT * FROM post_counts")
        # the checks' facts are taken from the rows of the two streams the in-memory checks would read
        links_seen, stories_seen = (
            LinkTally(work.index, work.story_media),
            StoryTally(work.index, focus_index),
        )
        story_links = tapped(partial(_reader, con, STORY_LINKS_SELECT), links_seen)
        stories = tapped(
            partial(_gathered, con, stories_select(ts, False), work.story_rows, False), stories_seen
        )
        if work.files is not None:
            csv = work.files.csv
            work.files.write_streamed(
                focus,
                snap,
                story_links=story_links,
                stories=stories,
                stories_list=(
                    partial(_gathered, con, stories_select(ts, True), work.story_rows, True) if csv else None
                ),
            )
        else:  # no files: the streams are read for their facts alone
            for stream in (story_links, stories):
                for _ in stream():
                    pass
        snap.streamed = streamed_facts(links_seen, stories_seen, medium_link_sum)
        snaps.append(snap)
    return snaps


def compute_snapshot_ooc(
    source: TopicSource,
    timespans: Sequence[Timespan],
    folder: Path | None = None,
    count_syndicated_once: bool = False,
    foci: Sequence[Focus] = (),
    media_tags: pd.DataFrame | None = None,
    texts: StoryTexts | None = None,
    word_sample: int = DEFAULT_WORD_SAMPLE,
    files: SnapshotFilesWriter | None = None,
    settings: EngineSettings | None = None,
    posts: PostShares | None = None,
    mode: str = "web",
) -> SnapshotResult:
    """``compute_snapshot`` out of core: the same timespans, foci and summaries from a ``TopicSource``, the
    per-timespan tables streamed to ``files`` (which writes them as the in-memory path would) while they are
    computed. ``folder`` holds DuckDB's database and spill files for the run (a temporary folder when None; it
    is removed afterwards). The result holds each timespan's media tables, counts, summary and the checks'
    facts (``TimespanSnapshot.streamed``); its ``story_links`` / ``story_link_counts`` frames are empty: those
    went to the files."""
    if mode != "web":
        raise ValueError(
            f"the out-of-core engine computes only mode 'web' topics, not mode {mode!r}: its timespans take "
            "the stories published in them (compute a url_sharing topic in memory)"
        )
    check_compute_arguments(timespans, foci, word_sample)
    if count_syndicated_once and source.near_dup_groups is None:
        raise ValueError("count_syndicated_once needs near_dup_groups")
    own = folder is None
    work_folder = Path(tempfile.mkdtemp(prefix="snapshot-engine-")) if own else Path(folder)
    con = connect(work_folder, settings or EngineSettings())
    try:
        _load(con, source)
        has_groups = source.near_dup_groups is not None
        dropped = _prepare(con)
        return _compute(
            con,
            timespans,
            dropped,
            has_groups,
            count_syndicated_once,
            foci,
            media_tags,
            texts,
            word_sample,
            files,
            posts,
        )
    finally:
        con.close()
        if own:
            shutil.rmtree(work_folder, ignore_errors=True)


def _compute(
    con: duckdb.DuckDBPyConnection,
    timespans: Sequence[Timespan],
    dropped: dict[str, int],
    has_groups: bool,
    syndicated_once: bool,
    foci: Sequence[Focus],
    media_tags: pd.DataFrame | None,
    texts: StoryTexts | None,
    word_sample: int,
    files: SnapshotFilesWriter | None,
    posts: PostShares | None = None,
) -> SnapshotResult:
    ids = _arrow(con, "SELECT stories_id, media_id, local_day FROM stories ORDER BY pos")
    story_ids = ids.column(0).to_numpy().astype(np.int64)
    day_ns = ids.column(2).cast(pa.int64()).fill_null(np.iinfo(np.int64).min).to_numpy()
    days = np.where(day_ns == np.iinfo(np.int64).min, day_ns, day_ns * NS_PER_DAY)
    story_media = ids.column(1).to_numpy().astype(np.int64)
    del ids
    media = arrow_frame(_arrow(con, "SELECT media_id, name, url FROM media ORDER BY media_id"))
    info = StoryInfo(
        story_ids=story_ids,
        story_days=days,
        title=_TitlesLater(),  # type: ignore[arg-type]
        url=_TitlesLater(),  # type: ignore[arg-type]
        publish_day_local=days.view("datetime64[ns]"),
        media_ids=media["media_id"].to_numpy(dtype=np.int64),
        media_names=media["name"].to_numpy(dtype=object),
    )
    texts = texts if texts is not None else DuckTexts(con, TEXT_BATCH_ROWS)
    work = _Work(
        con,
        info,
        IdIndex(story_ids),
        story_media,
        _story_rows(con, len(story_ids)),
        sample_order(story_ids),
        word_sample,
        has_groups,
        syndicated_once,
        files,
        posts,
    )
    if files is not None:
        files.start_streamed()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="foci") as beside:
        # The foci's stories are found beside the topic's timespans (a query focus reads every text and tries
        # its query on each in Python), whose SQL and writers leave part of the second core idle.
        finding = (
            beside.submit(focus_story_masks, foci, story_ids, story_media, media_tags, texts)
            if foci
            else None
        )
        _use_scope(con, None)
        snaps = _timespans(work, timespans, None)
        masks = finding.result() if finding is not None else []
    focus_snaps = []
    if foci:
        for focus, mask in zip(foci, masks, strict=True):
            focus_ids = story_ids[mask]
            _use_scope(con, focus_ids)
            focus_snaps.append(
                FocusSnapshot(
                    focus=focus,
                    stories_id=focus_ids,
                    timespans=_timespans(work, timespans, focus, IdIndex(focus_ids)),
                )
            )
    _fill_titles(con, [*snaps, *(snap for found in focus_snaps for snap in found.timespans)])
    result = SnapshotResult(
        timespans=snaps,
        stories=pd.DataFrame({"stories_id": story_ids, "media_id": story_media}),
        media=media,
        count_syndicated_once=syndicated_once,
        dropped_links=dropped,
        foci=focus_snaps,
        word_sample=word_sample,
    )
    if work.samples:
        union = np.unique(np.concatenate([sample for _, sample in work.samples]))
        words = count_words(texts, story_ids[union])
        stop_cache: dict[tuple[str, ...], np.ndarray] = {}
        for snap, sample in work.samples:
            assert snap.summary is not None
            snap.summary = replace(
                snap.summary,
                top_words=top_words(words, story_ids[sample], stop_cache=stop_cache),
                words_sampled=len(sample),
            )
    return result
