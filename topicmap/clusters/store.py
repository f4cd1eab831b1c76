"""Story clusters of one topic: read its stories from the store, cluster them, write the exports.

Two ways, under ``TOPICMAP_HOME/exports/clusters/<topic>/``:

- one-shot (``build_topic_clusters``): every story of the topic, k from the SSE curve; ``stories.parquet``
  (stories_id, cluster, week), ``clusters.parquet`` (size, top terms, titles), ``sse_curve.parquet``, and
  ``sse_curve.png`` / ``timeline.png`` (the clusters as a stream graph over the weeks);
- week by week (``build_topic_week``): the streaming model carried from week to week. Each week's folder
  ``weeks/<monday>/`` holds the state the next week starts from (``state.npz``, ``state.json``), the week's
  stories with their clusters (``stories.parquet``) and vectors (``vectors.npy``, re-read by the next three
  weeks' mutation step), the mutation edges (``edges.parquet``; ``transitions.parquet`` also has the stories
  that stayed), the nodes (``nodes.parquet``), and the mutation graph so far (``mutations.gexf``,
  ``mutations.png``) and the stream graph so far (``stream.png``).

A week's folder is written whole into a temporary folder and then renamed into place, so a killed run leaves
the previous version or none, never half of one; writing a week again replaces it. No table is added to the
store: the state is a file per week that a re-materialization replaces as a unit, and Dagster's partition
status and data versions say which later weeks were built from an older state (they show as stale).
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import select

from topicmap.clusters.model import ClusterResult, cluster_label, cluster_stories
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
from topicmap.clusters.pictures import draw_mutation_graph, draw_sse_curve, draw_stream_graph
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, topicmap_home, utc

#: below this many stories a topic is not clustered (KMeans on a handful of texts says nothing)


class ClusterStateError(RuntimeError):
    """A week cannot be built: the state it starts from is missing or unreadable."""


def topic_story_texts(
    store: TopicStore, topics_id: int, start: datetime | None = None, end: datetime | None = None
) -> pd.DataFrame:
    """The topic's stories (published in [start, end) when given): stories_id, title, text (title + body),
    language, publish_date (UTC, may be NaT), ordered by stories_id."""
    ts, st = s.topic_stories, s.stories
    query = (
        select(st.c.stories_id, st.c.title, st.c.text, st.c.language, st.c.publish_date)
        .join(ts, ts.c.stories_id == st.c.stories_id)
        .where(ts.c.topics_id == topics_id)
        .order_by(st.c.stories_id)
    )
    if start is not None:
        query = query.where(st.c.publish_date >= start)
    if end is not None:
        query = query.where(st.c.publish_date < end)
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


def _write_folder_atomically(target: Path, write) -> None:  # noqa: ANN001  (write: Callable[[Path], None])
    """``write`` fills a fresh temporary folder, which then replaces ``target`` (a rename, not a merge)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        write(scratch)
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        if target.exists():
            target.rename(old)
        scratch.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --------------------------------------------------------------------------------------------- one-shot


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
    """Every story of the topic clustered at once, k from the SSE curve; None below MIN_STORIES stories."""
    topics_id = store.topic_row(topic_name)["topics_id"]
    frame = topic_story_texts(store, topics_id)
    if len(frame) < MIN_STORIES:
        return None
    result = cluster_stories(
        frame["text"].tolist(),
        titles=frame["title"].tolist(),
        languages=frame["language"].tolist(),
        k_min=k_min,
        k_max=k_max,
        seed=seed,
    )
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


def state_fingerprint(folder: Path) -> str:
    """A digest of a week's state: equal fingerprints mean the next week starts the same."""
    return json.loads((folder / "lineage.json").read_text())["state"]


def stale_weeks(topic_name: str, home: Path | None = None) -> list[str]:
    """Built weeks that no longer follow from the week before: the first week whose recorded starting state is
    not its predecessor's current state (that week was built again since, differently), and every week after
    it, whose start depends on it. Empty when the chain of weeks is consistent."""
    weeks_dir = clusters_dir(topic_name, home) / "weeks"
    if not weeks_dir.exists():
        return []
    folders = sorted(
        f for f in weeks_dir.iterdir() if not f.name.startswith(".") and (f / "lineage.json").exists()
    )
    current = {f.name: json.loads((f / "lineage.json").read_text()) for f in folders}
    for index, folder in enumerate(folders):
        lineage = current[folder.name]
        before = current.get(lineage["previous_week"])
        expected = before["state"] if before else None
        if lineage["previous_state"] != expected:
            return [f.name for f in folders[index:]]
    return []


@dataclass
class TopicWeek:
    week: str
    folder: Path
    step: BatchStep
    started_fresh: bool
    previous_fingerprint: str | None
    fingerprint: str
    nodes_so_far: pd.DataFrame
    transitions_so_far: pd.DataFrame


def _previous_state(
    topic_name: str, monday: date, topic_start: date, home: Path | None
) -> tuple[StreamState, str | None, bool]:
    previous = monday - timedelta(days=7)
    folder = week_folder(topic_name, previous.isoformat(), home)
    if (folder / "state.json").exists():
        try:
            return StreamState.load(folder), state_fingerprint(folder), False
        except (OSError, ValueError, KeyError) as error:
            raise ClusterStateError(
                f"{folder}: the previous week's state cannot be read ({error})"
            ) from error
    if previous + timedelta(days=7) <= topic_start:  # the previous week ended before the topic starts
        return StreamState(), None, True
    raise ClusterStateError(
        f"topic {topic_name!r}: week {monday.isoformat()} starts from week {previous.isoformat()}'s clusters, "
        "which were never built: materialize the weeks in order (a backfill over the range does)"
    )


def _window(topic_name: str, monday: date, weeks: int, home: Path | None) -> list[WindowBatch]:
    batches = []
    for back in range(weeks - 1, 0, -1):
        week = (monday - timedelta(days=7 * back)).isoformat()
        folder = week_folder(topic_name, week, home)
        if (folder / "vectors.npy").exists():
            ids = pd.read_parquet(folder / "stories.parquet", columns=["stories_id"])["stories_id"].to_numpy()
            batches.append(WindowBatch(week, ids, np.load(folder / "vectors.npy").astype(np.float64)))
    return batches


def _so_far(
    topic_name: str, monday: date, step: BatchStep, home: Path | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes and transitions of every built week up to this one (the mutation graph so far)."""
    weeks_dir = clusters_dir(topic_name, home) / "weeks"
    nodes, transitions = [], []
    if weeks_dir.exists():
        for folder in sorted(weeks_dir.iterdir()):
            if folder.name.startswith(".") or folder.name >= monday.isoformat():
                continue
            if (folder / "nodes.parquet").exists():
                nodes.append(pd.read_parquet(folder / "nodes.parquet"))
                transitions.append(pd.read_parquet(folder / "transitions.parquet"))
    nodes.append(step.nodes)
    transitions.append(step.transitions)
    non_empty = [n for n in nodes if len(n)] or [step.nodes]
    non_empty_t = [t for t in transitions if len(t)] or [step.transitions]
    return (
        pd.concat(non_empty, ignore_index=True)[NODE_COLUMNS],
        pd.concat(non_empty_t, ignore_index=True)[TRANSITION_COLUMNS],
    )


def build_topic_week(
    store: TopicStore,
    topic_name: str,
    week: str,
    config: StreamConfig | None = None,
    home: Path | None = None,
) -> TopicWeek:
    """One week of a topic's streaming clusters, from the state the previous week left (see module doc)."""
    config = config or StreamConfig()
    monday = parse_week(week)
    topic = store.topic_row(topic_name)
    state, previous_fingerprint, fresh = _previous_state(topic_name, monday, topic["start_date"], home)
    if state.config and state.config != config.as_dict():
        raise ClusterStateError(
            f"topic {topic_name!r}: week {week} is configured {config.as_dict()} but the weeks before it were "
            f"built with {state.config}; rebuild from the first week (a backfill) to change the configuration"
        )
    start = datetime.combine(monday, time(), tzinfo=UTC)
    frame = topic_story_texts(store, topic["topics_id"], start, start + timedelta(days=7))
    step = advance(
        state,
        week,
        frame["stories_id"].tolist(),
        frame["title"].tolist(),
        frame["text"].tolist(),
        _window(topic_name, monday, config.window, home),
        config,
        languages=frame["language"].tolist(),
    )
    nodes_so_far, transitions_so_far = _so_far(topic_name, monday, step, home)
    target = week_folder(topic_name, week, home)

    def write(scratch: Path) -> None:
        step.state.save(scratch)
        step.stories.to_parquet(scratch / "stories.parquet", index=False)
        np.save(scratch / "vectors.npy", step.vectors)
        step.transitions.to_parquet(scratch / "transitions.parquet", index=False)
        step.edges[EDGE_COLUMNS].to_parquet(scratch / "edges.parquet", index=False)
        step.nodes.to_parquet(scratch / "nodes.parquet", index=False)
        write_gexf(nodes_so_far, transitions_so_far, scratch / "mutations.gexf")
        draw_mutation_graph(
            nodes_so_far,
            transitions_so_far,
            scratch / "mutations.png",
            f"{topic_name}: story mutation to {week}",
        )
        draw_stream_graph(
            nodes_so_far, scratch / "stream.png", f"{topic_name}: streaming clusters week by week, to {week}"
        )
        if state.choice is None and step.state.choice is not None and step.state.choice.ks:  # k chosen now
            draw_sse_curve(
                step.state.choice, scratch / "sse_curve.png", f"{topic_name}: SSE curve, week {week}"
            )

        (scratch / "lineage.json").write_text(
            json.dumps(
                {
                    "week": week,
                    "previous_week": (monday - timedelta(days=7)).isoformat(),
                    "previous_state": previous_fingerprint,
                    "state": step.state.fingerprint(),
                }
            )
        )

    _write_folder_atomically(target, write)
    return TopicWeek(
        week=week,
        folder=target,
        step=step,
        started_fresh=fresh,
        previous_fingerprint=previous_fingerprint,
        fingerprint=state_fingerprint(target),
        nodes_so_far=nodes_so_far,
        transitions_so_far=transitions_so_far,
    )
