"""Story clusters: groups recovered, determinism, a drifting story leaves a mutation chain, the asset's exports."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

from assets.clusters import clusters
from resources.store import TopicStoreResource
from topicmap.clusters.model import (
    _projection,
    cluster_stories,
    mutation_graph,
    render_cluster_timeline,
    stream_clusters,
)
from topicmap.clusters.store import cluster_count, topic_story_texts
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

VOCABULARIES = {
    "election": [
        "ballot",
        "voters",
        "senate",
        "candidate",
        "campaign",
        "polling",
        "governor",
        "primary",
        "turnout",
        "district",
    ],
    "flood": [
        "river",
        "flood",
        "rainfall",
        "levee",
        "evacuation",
        "storm",
        "water",
        "rescue",
        "dam",
        "overflow",
    ],
    "football": [
        "striker",
        "goal",
        "league",
        "match",
        "referee",
        "stadium",
        "penalty",
        "coach",
        "season",
        "midfielder",
    ],
    "vaccine": [
        "vaccine",
        "dose",
        "clinic",
        "immunity",
        "trial",
        "antibody",
        "booster",
        "pharmacy",
        "nurse",
        "outbreak",
    ],
    "markets": [
        "stocks",
        "bond",
        "investors",
        "inflation",
        "yields",
        "index",
        "traders",
        "earnings",
        "dividend",
        "nasdaq",
    ],
}


def text_from(
    rng: random.Random, words: list[str], other: list[str] | None = None, share: float = 0.0
) -> str:
    """Thirty words of one vocabulary, ``share`` of them from ``other``, plus common filler."""
    chosen = [rng.choice(other) if other and rng.random() < share else rng.choice(words) for _ in range(30)]
    filler = rng.sample(
        ["said", "today", "report", "people", "officials", "week", "local", "news", "city"], 3
    )
    return " ".join(chosen + filler)


def three_groups(per_group: int = 30, seed: int = 1) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    texts, truth = [], []
    for group, name in enumerate(["election", "flood", "football"]):
        for _ in range(per_group):
            texts.append(text_from(rng, VOCABULARIES[name]))
            truth.append(group)
    order = list(range(len(texts)))
    rng.shuffle(order)
    return [texts[i] for i in order], [truth[i] for i in order]


def test_clusters_recover_three_vocabularies_with_their_words() -> None:
    texts, truth = three_groups()
    result = cluster_stories(texts, 3, seed=0)
    assert adjusted_rand_score(truth, result.labels) >= 0.9
    assert sorted(result.sizes.values()) == [30, 30, 30]
    for cluster, terms in result.top_terms.items():
        members = {truth[i] for i in np.flatnonzero(result.labels == cluster)}
        (group,) = members
        vocabulary = VOCABULARIES[["election", "flood", "football"][group]]
        assert len(terms) == 5 and set(terms) <= set(vocabulary)


def test_clustering_is_deterministic_for_a_seed() -> None:
    texts, _ = three_groups(per_group=15, seed=7)
    first = cluster_stories(texts, 4, seed=0)
    _projection.cache_clear()  # the random-indexing signatures must be drawn again, identically
    again = cluster_stories(texts, 4, seed=0)
    assert np.array_equal(first.labels, again.labels)
    assert first.top_terms == again.top_terms
    batches = [("w1", texts[:20]), ("w2", texts[20:])]
    a, b = stream_clusters(batches, 3, seed=0), stream_clusters(batches, 3, seed=0)
    assert all(np.array_equal(x.labels, y.labels) for x, y in zip(a.batches, b.batches, strict=True))
    pd.testing.assert_frame_equal(mutation_graph(a), mutation_graph(b))


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="larger than the number of texts"):
        cluster_stories(["a b", "c d"], 3)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        cluster_stories(["a b", None], 1)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="half_life_batches"):
        stream_clusters([("w", ["a"])], 1, half_life_batches=0)
    with pytest.raises(ValueError, match="unique"):
        stream_clusters([("w", ["a"]), ("w", ["b"])], 1)
    with pytest.raises(ValueError, match="min_similarity"):
        mutation_graph(stream_clusters([("w", ["a"])], 1), min_similarity=2)


def drifting_batches(n_batches: int = 6, per_batch: int = 12) -> list[tuple[str, list[str]]]:
    """A story drifting from vaccine words to market words, next to a stable football story."""
    rng = random.Random(11)
    batches = []
    for t in range(n_batches):
        share = t / (n_batches - 1)
        texts = [
            text_from(rng, VOCABULARIES["vaccine"], VOCABULARIES["markets"], share) for _ in range(per_batch)
        ]
        texts += [text_from(rng, VOCABULARIES["football"]) for _ in range(per_batch)]
        batches.append((f"batch-{t}", texts))
    return batches


def test_a_drifting_story_leaves_a_mutation_chain(tmp_path: Path) -> None:
    batches = drifting_batches()
    stream = stream_clusters(batches, 2, half_life_batches=2.0, seed=0)
    edges = mutation_graph(stream, min_similarity=0.5)
    per_batch = len(batches[0][1]) // 2
    # the drifting story is one cluster in every batch
    drift_cluster = [int(np.bincount(b.labels[:per_batch]).argmax()) for b in stream.batches]
    for batch, cluster in zip(stream.batches, drift_cluster, strict=True):
        assert (batch.labels[:per_batch] == cluster).all()
        assert (batch.labels[per_batch:] != cluster).all()
    # and consecutive batches are linked, first to last, by the edges
    for t in range(len(batches) - 1):
        link = edges[
            (edges.from_batch == f"batch-{t}")
            & (edges.from_cluster == drift_cluster[t])
            & (edges.to_batch == f"batch-{t + 1}")
            & (edges.to_cluster == drift_cluster[t + 1])
        ]
        assert len(link) == 1 and link.shared_stories.iloc[0] == per_batch
    # the story mutated: its first and last centres are far apart, its words changed
    first, last = stream.batches[0], stream.batches[-1]
    a, b = first.centroids[drift_cluster[0]], last.centroids[drift_cluster[-1]]
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) < 0.5
    assert set(first.top_terms[drift_cluster[0]]) <= set(VOCABULARIES["vaccine"])
    assert set(last.top_terms[drift_cluster[-1]]) <= set(VOCABULARIES["markets"])
    # no edge between the drifting story and the football story
    football = {(f"batch-{t}", 1 - c) for t, c in enumerate(drift_cluster)}
    crossing = [
        ((r.from_batch, r.from_cluster) in football) != ((r.to_batch, r.to_cluster) in football)
        for r in edges.itertuples()
    ]
    assert not any(crossing)
    png = render_cluster_timeline(stream, edges, tmp_path / "out" / "timeline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_streaming_weights_decay_with_the_half_life() -> None:
    batches = [("w1", ["vaccine dose clinic"] * 4), ("w2", []), ("w3", [])]
    stream = stream_clusters(batches, 1, half_life_batches=2.0)
    assert stream.batches[0].weights[0] == pytest.approx(4)
    assert stream.batches[2].weights[0] == pytest.approx(2)  # two batches = one half-life
    assert stream.batches[1].sizes == {0: 0} and len(stream.batches[1].labels) == 0


def test_cluster_count_rule() -> None:
    assert [cluster_count(n) for n in (10, 79, 80, 200, 5000)] == [2, 2, 2, 5, 8]


# --------------------------------------------------------------------------------------------- asset

TOPIC = "drift"


def build_store(tmp_path: Path, stories_per_group: int) -> TopicStore:
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    topics_id = store.upsert_topic(
        TopicConfig(name=TOPIC, query="news", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    )
    rng = random.Random(3)
    stories = []
    for group, name in enumerate(["flood", "election"]):
        for i in range(stories_per_group):
            published = datetime(2026, 2, 2, 9, tzinfo=UTC) + timedelta(days=(i * 3) % 21)
            stories.append(
                NewStory(
                    f"https://site{group}.test/2026/{name}-{i}",
                    f"{name} report {i}",
                    text_from(rng, VOCABULARIES[name]),
                    published,
                )
            )
    ids = store.add_stories(stories, source="test").stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [{"topics_id": topics_id, "stories_id": i, "iteration": 0, "added_at": now_utc()} for i in ids],
            ["topics_id", "stories_id"],
        )
    return store


def materialize_clusters(store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    result = dg.materialize(
        [clusters],
        partition_key=TOPIC,
        instance=instance,
        resources={"store": TopicStoreResource(database_url=str(store.engine.url))},
    )
    return result.asset_materializations_for_node("clusters")[0].metadata


def test_clusters_asset_writes_parquet_and_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = build_store(tmp_path, stories_per_group=15)
    metadata = materialize_clusters(store, tmp_path, monkeypatch)
    assert metadata["dagster/row_count"].value == 30
    assert "| 0 | 15 |" in metadata["clusters"].value and "| 1 | 15 |" in metadata["clusters"].value
    folder = tmp_path / "home" / "exports" / "clusters" / TOPIC
    assert Path(metadata["timeline_png"].value) == folder / "timeline.png"
    assert (folder / "timeline.png").stat().st_size > 5000
    frame = pd.read_parquet(folder / "stories.parquet")
    assert list(frame.columns[:3]) == ["stories_id", "cluster", "week"]
    stories = topic_story_texts(store, store.topic_row(TOPIC)["topics_id"]).merge(frame, on="stories_id")
    truth = stories["text"].str.contains("flood report").astype(int)
    assert adjusted_rand_score(truth, stories["cluster"]) == 1.0
    assert sorted(frame["week"].unique()) == ["2026-02-02", "2026-02-09", "2026-02-16"]
    assert metadata["weeks"].value == 3
    store.dispose()


def test_clusters_asset_skips_small_topics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = build_store(tmp_path, stories_per_group=4)
    metadata = materialize_clusters(store, tmp_path, monkeypatch)
    assert metadata["dagster/row_count"].value == 0 and "fewer than 10" in metadata["skipped"].value
    assert not (tmp_path / "home" / "exports" / "clusters").exists()
    store.dispose()
