"""Story clusters of one topic: read its stories from the store, cluster them, write the exports.

Writes ``TOPICMAP_HOME/exports/clusters/<topic>/stories.parquet`` (stories_id, cluster, week, stream_cluster)
and ``timeline.png`` (the streaming clusters per week and their mutations).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sqlalchemy import select

from topicmap.clusters.model import (
    ClusterResult,
    StreamResult,
    cluster_stories,
    mutation_graph,
    render_cluster_timeline,
    stream_clusters,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, topicmap_home, utc

#: below this many stories a topic is not clustered (KMeans on a handful of texts says nothing)
MIN_STORIES = 10
MAX_CLUSTERS = 8
STORIES_PER_CLUSTER = 40


@dataclass
class TopicClusters:
    stories: int
    clusters: ClusterResult
    stream: StreamResult
    mutations: pd.DataFrame
    parquet_path: Path
    png_path: Path


def topic_story_texts(store: TopicStore, topics_id: int) -> pd.DataFrame:
    """The topic's live stories: stories_id, title + text as one ``text``, publish_date (UTC, may be NaT)."""
    ts, st = s.topic_stories, s.stories
    query = (
        select(st.c.stories_id, st.c.title, st.c.text, st.c.publish_date)
        .join(ts, ts.c.stories_id == st.c.stories_id)
        .where(ts.c.topics_id == topics_id)
        .order_by(st.c.stories_id)
    )
    with store.engine.connect() as conn:
        frame = pd.DataFrame(
            conn.execute(query).all(), columns=["stories_id", "title", "text", "publish_date"]
        )
    frame["text"] = (frame["title"].fillna("") + "\n" + frame["text"].fillna("")).str.strip()
    frame["publish_date"] = pd.to_datetime(frame["publish_date"].map(utc), utc=True)
    return frame.drop(columns="title")


def cluster_count(stories: int) -> int:
    """k = min(8, max(2, n // 40)): about forty stories per cluster, at least two, at most eight."""
    return min(MAX_CLUSTERS, max(2, stories // STORIES_PER_CLUSTER))


def week_of(dates: pd.Series) -> pd.Series:
    """The Monday (ISO week start) of each date as YYYY-MM-DD; None where the date is unknown."""
    monday = dates.dt.tz_convert("UTC").dt.tz_localize(None).dt.to_period("W-SUN").dt.start_time
    return monday.dt.strftime("%Y-%m-%d").where(dates.notna(), None)


def clusters_dir(topic_name: str, home: Path | None = None) -> Path:
    return (home or topicmap_home()) / "exports" / "clusters" / topic_name


def build_topic_clusters(
    store: TopicStore, topic_name: str, seed: int = 0, home: Path | None = None
) -> TopicClusters | None:
    """Overall clusters and weekly streaming clusters of a topic; None when it has fewer than MIN_STORIES.

    Weekly batches are the weeks that have dated stories (undated stories join the overall clusters only), so
    the half-life counts weeks with news, not calendar gaps a mis-dated story could stretch to decades."""
    topics_id = store.topic_row(topic_name)["topics_id"]
    frame = topic_story_texts(store, topics_id)
    if len(frame) < MIN_STORIES:
        return None
    k = cluster_count(len(frame))
    clusters = cluster_stories(frame["text"].tolist(), k, seed=seed)
    frame["cluster"] = clusters.labels
    frame["week"] = week_of(frame["publish_date"])
    dated = frame[frame["week"].notna()].sort_values(["week", "stories_id"])
    batches = [(week, group["text"].tolist()) for week, group in dated.groupby("week", sort=True)]
    stream = stream_clusters(batches, k, half_life_batches=2.0, seed=seed)
    frame["stream_cluster"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    for (_, group), batch in zip(dated.groupby("week", sort=True), stream.batches, strict=True):
        frame.loc[group.index, "stream_cluster"] = batch.labels
    mutations = mutation_graph(stream)
    folder = clusters_dir(topic_name, home)
    folder.mkdir(parents=True, exist_ok=True)
    parquet_path = folder / "stories.parquet"
    export = frame[["stories_id", "cluster", "week", "stream_cluster"]].astype({"cluster": "int64"})
    export.to_parquet(parquet_path, index=False)
    png_path = render_cluster_timeline(stream, mutations, folder / "timeline.png")
    return TopicClusters(len(frame), clusters, stream, mutations, parquet_path, png_path)
