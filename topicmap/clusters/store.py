"""Story clusters of one topic: read the stories of its current version from the store, cluster them, write the
exports.

Two ways, under ``TOPICMAP_HOME/exports/clusters/<topic>/``:

- one-shot (``build_topic_clusters``): every story of the topic, k from the SSE curve; ``stories.parquet``
  (stories_id, cluster, week), ``clusters.parquet`` (size, top terms, titles), ``sse_curve.parquet``, and
  ``sse_curve.png`` / ``timeline.png`` (the clusters as a stream graph over the weeks, on a date axis);
- week by week (``build_topic_weeks``): the streaming model carried from week to week, any range of weeks in
  one pass. Each week's folder ``weeks/<monday>/`` holds the state a later week starts from (``state.npz``,
  ``state.json``), where its own start came from (``lineage.json``), the week's stories with their clusters
  (``stories.parquet``) and vectors (``vectors.npy``, re-read by the next three weeks' mutation step), the
  mutation edges (``edges.parquet``; ``transitions.parquet`` also has the stories that stayed) and the nodes
  (``nodes.parquet``). The last week of a pass also holds the mutation graph so far (``mutations.gexf``,
  ``mutations.png``) and the stream graph so far (``stream.png``).

A week's folder is written whole into a temporary folder and then renamed into place, so a killed run leaves
the previous version or none, never half of one; writing a week again replaces it. No table is added to the
store: the state is a file per week that a rebuild replaces as a unit, and ``stale_weeks`` reads the lineage
files to say which later weeks were built from an older state.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import select

from topicmap.clusters.model import ClusterResult, cluster_label
from topicmap.clusters.mutation import (
    EDGE_COLUMNS,
    NODE_COLUMNS,
    TRANSITION_COLUMNS,
    BatchStep,
    StreamConfig,
    StreamState,
    WindowBatch,
    advance,
    write_gexf,
)
from topicmap.clusters.names import MIN_STORIES
from topicmap.clusters.oneshot import StoryBatch, cluster_story_batches
from topicmap.clusters.pictures import draw_mutation_graph, draw_sse_curve, draw_stream_graph
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, topicmap_home, utc
from topicmap.store.version_stories import in_current_version, version_story_count

T = TypeVar("T")


class ClusterStateError(RuntimeError):
    """A week cannot be built: the state it starts from is unreadable or was built with another configuration."""


def topic_story_texts(
    store: TopicStore,
    topics_id: int,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    after_id: int | None = None,
    limit: int | None = None,
    ids: Sequence[int] | None = None,
) -> pd.DataFrame:
    """The stories of the topic's current version (published in [start, end) when given; with stories_id above ``after_id``, the first
    ``limit``, among ``ids``, when given): stories_id, title, text (title + body), language, publish_date (UTC,
    may be NaT), ordered by stories_id."""
    ts, st = s.topic_stories, s.stories
    query = (
        select(st.c.stories_id, st.c.title, st.c.text, st.c.language, st.c.publish_date)
        .join(ts, ts.c.stories_id == st.c.stories_id)
        .where(in_current_version(topics_id))
        .order_by(st.c.stories_id)
    )
    if start is not None:
        query = query.where(st.c.publish_date >= start)
    if end is not None:
        query = query.where(st.c.publish_date < end)
    if after_id is not None:
        query = query.where(st.c.stories_id > after_id)
    if ids is not None:
        query = query.where(st.c.stories_id.in_([int(i) for i in ids]))
    if limit is not None:
        query = query.limit(limit)
    with store.engine.connect() as conn:
        frame = pd.DataFrame(
            conn.execute(query).all(), columns=["stories_id", "title", "text", "language", "publish_date"]
        )
    frame["title"] = frame["title"].fillna("").astype(str)
    frame["text"] = (frame["title"] + "\n" + frame["text"].fillna("")).str.strip()
    frame["publish_date"] = pd.to_datetime(frame["publish_date"].map(utc), utc=True)
    return frame


def week_of(dates: pd.Series) -> pd.Series:
    """The Monday (ISO week start) of each date as YYYY-MM-DD; None where the date is unknown."""
    monday = dates.dt.tz_convert("UTC").dt.tz_localize(None).dt.to_period("W-SUN").dt.start_time
    return monday.dt.strftime("%Y-%m-%d").where(dates.notna(), None)


def clusters_dir(topic_name: str, home: Path | None = None) -> Path:
    return (home or topicmap_home()) / "exports" / "clusters" / topic_name


def _write_folder_atomically(target: Path, write: Callable[[Path], T]) -> T:
    """``write`` fills a fresh temporary folder, which then replaces ``target`` (a rename, not a merge); what
    ``write`` returns."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        written = write(scratch)
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        if target.exists():
            target.rename(old)
        scratch.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return written


# --------------------------------------------------------------------------------------------- one-shot


#: stories whose texts are read in one query by the one-shot clustering (a few MB of text for most topics)
READ_STORIES = 5000
#: stories read by id in one query (the words naming the clusters): well below SQLite's bound parameters
READ_BY_ID = 500


@dataclass
class TopicClusters:
    stories: int
    clusters: ClusterResult
    folder: Path
    parquet_path: Path
    sse_png: Path
    timeline_png: Path


def build_topic_clusters(
    store: TopicStore,
    topic_name: str,
    *,
    k_min: int = 2,
    k_max: int = 30,
    seed: int = 0,
    home: Path | None = None,
) -> TopicClusters | None:
    """Every story of the topic clustered at once, k from the SSE curve; None below MIN_STORIES stories. The
    texts are read READ_STORIES at a time, never all at once."""
    topics_id = store.topic_row(topic_name)["topics_id"]
    parts: list[pd.DataFrame] = []  # stories_id and publish_date of the stories read so far

    def batches() -> Iterator[StoryBatch]:
        after: int | None = None
        while True:
            batch = topic_story_texts(store, topics_id, after_id=after, limit=READ_STORIES)
            if batch.empty:
                return
            parts.append(batch[["stories_id", "publish_date"]])
            after = int(batch["stories_id"].iloc[-1])
            yield StoryBatch(batch["text"].tolist(), batch["title"].tolist(), batch["language"].tolist())

    def texts_of(positions: np.ndarray) -> list[str]:
        wanted = np.concatenate([p["stories_id"].to_numpy() for p in parts])[positions]
        if not len(wanted):
            return []
        found = pd.concat(
            [
                topic_story_texts(store, topics_id, ids=wanted[start : start + READ_BY_ID])
                for start in range(0, len(wanted), READ_BY_ID)
            ]
        ).set_index("stories_id")["text"]
        return found.reindex(wanted).fillna("").tolist()

    if version_story_count(store, topics_id) < MIN_STORIES:
        return None
    result = cluster_story_batches(batches(), texts_of, k_min=k_min, k_max=k_max, seed=seed)
    frame = pd.concat(parts, ignore_index=True)
    frame["cluster"] = result.labels
    frame["week"] = week_of(frame["publish_date"])
    labels = {c: cluster_label(result.top_terms[c], result.titles[c]) for c in result.sizes}
    weekly = frame[frame["week"].notna()].groupby(["week", "cluster"]).size().rename("stories").reset_index()
    weekly = weekly.rename(columns={"week": "batch"})
    weekly["label"] = weekly["cluster"].map(labels)
    clusters_table = pd.DataFrame(
        {
            "cluster": list(result.sizes),
            "stories": list(result.sizes.values()),
            "label": [labels[c] for c in result.sizes],
            "top_terms": [result.top_terms[c] for c in result.sizes],
            "titles": [result.titles[c] for c in result.sizes],
        }
    )
    folder = clusters_dir(topic_name, home)

    def write(scratch: Path) -> None:
        frame[["stories_id", "cluster", "week"]].astype({"cluster": "int64"}).to_parquet(
            scratch / "stories.parquet", index=False
        )
        clusters_table.to_parquet(scratch / "clusters.parquet", index=False)
        pd.DataFrame({"k": result.choice.ks, "sse": result.choice.sse}).to_parquet(
            scratch / "sse_curve.parquet", index=False
        )
        draw_sse_curve(result.choice, scratch / "sse_curve.png", f"{topic_name}: SSE curve of KMeans over k")
        draw_stream_graph(
            weekly,
            scratch / "timeline.png",
            f"{topic_name}: {result.choice.k} clusters of stories, week by week",
        )

    # the one-shot files live beside weeks/ (which the weekly partitions own): keep that folder when replacing
    _write_folder_atomically(folder / "overall", write)
    return TopicClusters(
        stories=len(frame),
        clusters=result,
        folder=folder / "overall",
        parquet_path=folder / "overall" / "stories.parquet",
        sse_png=folder / "overall" / "sse_curve.png",
        timeline_png=folder / "overall" / "timeline.png",
    )


# --------------------------------------------------------------------------------------------- weekly

#: written into every week's folder: which week's state it continued from, and the state it left
LINEAGE_FILE = "lineage.json"
#: weeks of stories read in one query (a half-year: a few MB of text for most topics)
READ_WEEKS = 26


def week_folder(topic_name: str, week: str, home: Path | None = None) -> Path:
    return clusters_dir(topic_name, home) / "weeks" / week


def parse_week(week: str) -> date:
    try:
        monday = date.fromisoformat(week)
    except ValueError as error:
        raise ValueError(f"week must be a date YYYY-MM-DD, got {week!r}") from error
    if monday.weekday() != 0:
        raise ValueError(f"week {week!r} does not start on a Monday")
    return monday


def topic_weeks(start: date, end: date) -> list[str]:
    """The Mondays of the weeks from ``start`` to ``end`` (both included), as cluster_weeks' week keys."""
    monday = start - timedelta(days=start.weekday())
    weeks = []
    while monday <= end:
        weeks.append(monday.isoformat())
        monday += timedelta(days=7)
    return weeks


def built_weeks(topic_name: str, home: Path | None = None) -> list[str]:
    """The topic's built weeks, oldest first (a folder is renamed into place whole, so each one is complete)."""
    weeks_dir = clusters_dir(topic_name, home) / "weeks"
    if not weeks_dir.exists():
        return []
    return sorted(
        f.name for f in weeks_dir.iterdir() if not f.name.startswith(".") and (f / LINEAGE_FILE).exists()
    )


@dataclass(frozen=True)
class WeekLineage:
    """Where a built week's stream came from: the built week it continued (None: it started from its own fit,
    no earlier week being built) and that week's state then, and the state it left."""

    week: str
    started_from: str | None
    previous_state: str | None
    state: str

    @classmethod
    def read(cls, folder: Path) -> WeekLineage:
        raw = json.loads((folder / LINEAGE_FILE).read_text())
        # a week that started from its own fit has no previous state, whatever previous_week says
        started_from = raw["previous_week"] if raw["previous_state"] else None
        return cls(raw["week"], started_from, raw["previous_state"], raw["state"])

    def write(self, folder: Path) -> None:
        (folder / LINEAGE_FILE).write_text(
            json.dumps(
                {
                    "week": self.week,
                    "previous_week": self.started_from,
                    "previous_state": self.previous_state,
                    "state": self.state,
                }
            )
        )


def stale_weeks(topic_name: str, home: Path | None = None) -> list[str]:
    """Built weeks that no longer follow from the week before them: the first built week that did not start from
    the current state of the nearest built week before it (that week was built again since, differently, or was
    built after it), and every built week after it, whose start depends on it. Empty when the chain is whole."""
    weeks = built_weeks(topic_name, home)
    before: WeekLineage | None = None
    for index, week in enumerate(weeks):
        lineage = WeekLineage.read(week_folder(topic_name, week, home))
        expected = (before.week, before.state) if before else (None, None)
        if (lineage.started_from, lineage.previous_state) != expected:
            return weeks[index:]
        before = lineage
    return []


@dataclass
class TopicWeek:
    """One built week: its step through the stream, where it started from, and the pictures drawn with it."""

    week: str
    folder: Path
    step: BatchStep
    started_from: str | None
    previous_fingerprint: str | None
    fingerprint: str
    pictures: list[Path]
    #: what building this week took, by phase (reading, the stream step, writing, pictures)
    seconds: dict[str, float]

    @property
    def started_fresh(self) -> bool:
        return self.started_from is None


@contextmanager
def _timed(seconds: dict[str, float], phase: str) -> Iterator[None]:
    started = perf_counter()
    try:
        yield
    finally:
        seconds[phase] = seconds.get(phase, 0.0) + perf_counter() - started


@contextmanager
def _topic_lock(topic_name: str, home: Path | None) -> Iterator[None]:
    """One pass over a topic's weeks at a time: a second run of the same topic waits, and then starts from the
    weeks the first one left (released by the kernel if the process dies)."""
    weeks_dir = clusters_dir(topic_name, home) / "weeks"
    weeks_dir.mkdir(parents=True, exist_ok=True)
    with (weeks_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class _WeeklyStories:
    """The topic's stories week by week, read READ_WEEKS weeks at a time: a query per week went through all the
    topic's stories each time (SQLite joins from the topic's stories, not from the publish dates), which over
    800 weeks of 100,000 stories took longer than clustering them."""

    def __init__(self, store: TopicStore, topics_id: int, last_monday: date) -> None:
        self.store, self.topics_id, self.end = store, topics_id, last_monday + timedelta(weeks=1)
        self.first = self.stop = last_monday  # the weeks [first, stop) read so far (none yet)
        self.weeks: dict[str, pd.DataFrame] = {}
        self.empty = pd.DataFrame()

    def of(self, monday: date) -> pd.DataFrame:
        """The stories published in the week of ``monday`` (UTC), ordered by stories_id."""
        if not self.first <= monday < self.stop:
            self.first, self.stop = monday, min(monday + timedelta(weeks=READ_WEEKS), self.end)
            start = datetime.combine(self.first, time(), tzinfo=UTC)
            frame = topic_story_texts(
                self.store, self.topics_id, start, datetime.combine(self.stop, time(), tzinfo=UTC)
            )
            self.weeks = dict(tuple(frame.groupby(week_of(frame["publish_date"]), sort=False)))
            self.empty = frame.iloc[0:0]
        return self.weeks.get(monday.isoformat(), self.empty)


def _load_state(topic_name: str, week: str, home: Path | None) -> tuple[StreamState, str]:
    folder = week_folder(topic_name, week, home)
    try:
        return StreamState.load(folder), WeekLineage.read(folder).state
    except (OSError, ValueError, KeyError) as error:
        raise ClusterStateError(f"{folder}: the state of week {week} cannot be read ({error})") from error


def _window_batch(topic_name: str, week: str, home: Path | None) -> WindowBatch:
    folder = week_folder(topic_name, week, home)
    ids = pd.read_parquet(folder / "stories.parquet", columns=["stories_id"])["stories_id"].to_numpy()
    return WindowBatch(week, ids, np.load(folder / "vectors.npy").astype(np.float64))


def _graph_so_far(
    topic_name: str,
    up_to: str,
    built: list[str],
    in_pass: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
    home: Path | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes and transitions of every built week up to ``up_to`` (the mutation graph so far): the weeks of this
    pass from memory, the others from their folders."""
    nodes, transitions = [], []
    for week in built:
        if week > up_to:
            break
        if week in in_pass:
            week_nodes, week_transitions = in_pass[week]
        else:
            folder = week_folder(topic_name, week, home)
            week_nodes = pd.read_parquet(folder / "nodes.parquet")
            week_transitions = pd.read_parquet(folder / "transitions.parquet")
        nodes.append(week_nodes)
        transitions.append(week_transitions)
    empty_nodes, empty_transitions = in_pass[up_to]
    return (
        pd.concat([n for n in nodes if len(n)] or [empty_nodes], ignore_index=True)[NODE_COLUMNS],
        pd.concat([t for t in transitions if len(t)] or [empty_transitions], ignore_index=True)[
            TRANSITION_COLUMNS
        ],
    )


def build_topic_weeks(
    store: TopicStore,
    topic_name: str,
    weeks: Sequence[str],
    config: StreamConfig | None = None,
    home: Path | None = None,
) -> Iterator[TopicWeek]:
    """Build the topic's ``weeks`` in date order, in one pass, each from the state the week before left; each
    week is yielded once its folder is in place (``stale_weeks`` then tells whether later weeks need a rebuild).

    A week starts from the nearest built week before it (the week just built, kept in memory, or a folder read
    once), or from its own fit when no earlier week is built: any week can start a stream. After each update the
    stories of the last ``config.window`` built weeks are predicted again (the mutation step). Each week's folder
    is written whole before the next week starts, so a pass that dies leaves whole weeks to start from. The
    cumulative mutation graph (``mutations.gexf``, ``mutations.png``) and stream graph (``stream.png``) are drawn
    once, into the last week's folder: drawn for every week of a long topic they would cost more than the stream.
    One pass over a topic at a time: a second waits for the first (a lock file in the topic's ``weeks/``)."""
    config = config or StreamConfig()
    mondays = sorted({parse_week(week) for week in weeks})
    if not mondays:
        raise ValueError(f"topic {topic_name!r}: no week to build")
    topic = store.topic_row(topic_name)
    built_now: list[str] = []
    in_pass: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}  # nodes and transitions of this pass's weeks
    recent: dict[str, WindowBatch] = {}  # the last weeks of this pass, as a later week's window re-reads them
    carried: tuple[str, StreamState, str] | None = None  # the week just built: its state and fingerprint
    stories = _WeeklyStories(store, topic["topics_id"], mondays[-1])
    with _topic_lock(topic_name, home):
        built = built_weeks(topic_name, home)
        for index, monday in enumerate(mondays):
            week = monday.isoformat()
            earlier = built[: bisect.bisect_left(built, week)]
            started_from = earlier[-1] if earlier else None
            seconds: dict[str, float] = {}
            with _timed(seconds, "read states and windows"):
                if started_from is None:
                    state, previous_fingerprint = StreamState(), None
                elif carried is not None and carried[0] == started_from:
                    _, state, previous_fingerprint = carried
                else:
                    state, previous_fingerprint = _load_state(topic_name, started_from, home)
                if state.config and state.config != config.as_dict():
                    raise ClusterStateError(
                        f"topic {topic_name!r}: week {week} is configured {config.as_dict()} but week "
                        f"{started_from}, which it starts from, was built with {state.config}; build the "
                        "topic's weeks from its first week to change the configuration"
                    )
                window_weeks = earlier[-(config.window - 1) :] if config.window > 1 else []
                window = [
                    recent[w] if w in recent else _window_batch(topic_name, w, home) for w in window_weeks
                ]
            with _timed(seconds, "read stories"):
                frame = stories.of(monday)
            with _timed(seconds, "stream step (embed, update, re-predict, labels)"):
                step = advance(
                    state,
                    week,
                    frame["stories_id"].tolist(),
                    frame["title"].tolist(),
                    frame["text"].tolist(),
                    window,
                    config,
                    languages=frame["language"].tolist(),
                )
            in_pass[week] = (step.nodes, step.transitions)
            if week not in built:
                bisect.insort(built, week)
            last = index == len(mondays) - 1
            graph = _graph_so_far(topic_name, week, built, in_pass, home) if last else None
            target = week_folder(topic_name, week, home)
            lineage = WeekLineage(week, started_from, previous_fingerprint, step.state.fingerprint())
            pictures = _write_folder_atomically(
                target, partial(_write_week, topic_name, state, step, lineage, graph, seconds)
            )
            carried = (week, step.state, lineage.state)
            built_now.append(week)
            recent[week] = step.window_batch()
            for old in built_now[: -config.window]:  # no later week of the pass re-reads these
                recent.pop(old, None)
            yield TopicWeek(
                week=week,
                folder=target,
                step=step,
                started_from=started_from,
                previous_fingerprint=previous_fingerprint,
                fingerprint=lineage.state,
                pictures=[target / p for p in pictures],
                seconds=seconds,
            )


def _write_week(
    topic_name: str,
    before: StreamState,
    step: BatchStep,
    lineage: WeekLineage,
    graph: tuple[pd.DataFrame, pd.DataFrame] | None,
    seconds: dict[str, float],
    scratch: Path,
) -> list[Path]:
    """A week's files into ``scratch``; the pictures drawn, by name."""
    with _timed(seconds, "write week folders"):
        step.state.save(scratch)
        step.stories.to_parquet(scratch / "stories.parquet", index=False)
        np.save(scratch / "vectors.npy", step.vectors)
        step.transitions.to_parquet(scratch / "transitions.parquet", index=False)
        step.edges[EDGE_COLUMNS].to_parquet(scratch / "edges.parquet", index=False)
        step.nodes.to_parquet(scratch / "nodes.parquet", index=False)
        lineage.write(scratch)
    with _timed(seconds, "pictures and GEXF"):
        return [Path(p.name) for p in _draw_week(topic_name, lineage.week, before, step, graph, scratch)]


def _draw_week(
    topic_name: str,
    week: str,
    before: StreamState,
    step: BatchStep,
    graph: tuple[pd.DataFrame, pd.DataFrame] | None,
    scratch: Path,
) -> list[Path]:
    """The pictures of a week: the SSE curve when k was chosen this week; with ``graph`` (the last week of a
    pass), the mutation graph (GEXF and picture) and the stream graph so far."""
    drawn = []
    if before.choice is None and step.state.choice is not None and step.state.choice.ks:
        drawn.append(
            draw_sse_curve(
                step.state.choice, scratch / "sse_curve.png", f"{topic_name}: SSE curve, week {week}"
            )
        )
    if graph is not None:
        nodes, transitions = graph
        write_gexf(nodes, transitions, scratch / "mutations.gexf")
        drawn.append(
            draw_mutation_graph(
                nodes, transitions, scratch / "mutations.png", f"{topic_name}: story mutation to {week}"
            )
        )
        drawn.append(
            draw_stream_graph(
                nodes, scratch / "stream.png", f"{topic_name}: streaming clusters week by week, to {week}"
            )
        )
    return drawn
