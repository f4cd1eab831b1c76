"""One-shot clustering read in bounded batches: the same clusters whatever the batch size, counts read back as
written, a sampled KMeans fit refined over every story, and the store read a bounded batch at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import topicmap.clusters.oneshot as oneshot
import topicmap.clusters.store as cluster_store
from tests.test_clusters import TOPIC, build_store, groups
from topicmap.clusters.model import term_counts, tokenize
from topicmap.clusters.oneshot import _CountSpill, cluster_stories, fit_clusters


def test_counts_come_back_from_the_temporary_files_as_written(tmp_path: Path) -> None:
    texts, _ = groups(["election", "flood", "football"], per_group=20, seed=5)
    counts = term_counts(tokenize(texts))
    spill = _CountSpill(tmp_path)
    for start in range(0, len(texts), 7):  # batches of 7 stories, as a reader would hand them over
        spill.append(counts[start : start + 7])
    assert spill.finish() == len(texts)
    assert (spill.rows(0, len(texts)) != counts).nnz == 0
    positions = np.array([0, 6, 7, 33, 59])
    assert (spill.take(positions) != counts[positions]).nnz == 0
    spill.close()


def test_batch_size_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    texts, truth = groups(["election", "flood", "football", "vaccine"], per_group=25, seed=2)
    whole = cluster_stories(texts, seed=0, k_min=2, k_max=10)
    monkeypatch.setattr(oneshot, "BATCH_STORIES", 9)
    batched = cluster_stories(texts, seed=0, k_min=2, k_max=10)
    assert np.array_equal(whole.labels, batched.labels) and whole.choice.k == batched.choice.k == 4
    assert whole.top_terms == batched.top_terms and whole.titles == batched.titles
    assert whole.vectors.dtype == np.float32 and adjusted_rand_score(truth, whole.labels) == 1.0


def test_a_sampled_fit_is_refined_over_every_story(monkeypatch: pytest.MonkeyPatch) -> None:
    texts, truth = groups(["election", "flood", "football", "vaccine", "markets"], per_group=40, seed=3)
    full = cluster_stories(texts, seed=0, k_min=2, k_max=10)
    monkeypatch.setattr(oneshot, "FIT_SAMPLE", 60)  # 60 of the 200 stories start KMeans
    monkeypatch.setattr(oneshot, "ASSIGN_CHUNK", 32)  # and every pass goes over several chunks
    sampled = cluster_stories(texts, seed=0, k_min=2, k_max=10)
    assert sampled.choice.k == full.choice.k == 5
    assert adjusted_rand_score(truth, sampled.labels) == 1.0
    # the centres are the means of their members over all the stories, not of the sample
    for cluster in range(5):
        members = sampled.vectors[sampled.labels == cluster].astype(np.float64)
        assert np.allclose(sampled.centroids[cluster], members.mean(axis=0), atol=1e-12)
    labels, _, steps = fit_clusters(sampled.vectors, 5, 0)
    assert steps >= 1 and np.array_equal(labels, sampled.labels)


def test_the_store_is_read_a_bounded_batch_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = build_store(tmp_path, stories_per_group=15)
    whole = cluster_store.build_topic_clusters(store, TOPIC, home=tmp_path / "whole")
    read: list[int] = []
    reader = cluster_store.topic_story_texts

    def counted(*args: object, **kwargs: object):  # noqa: ANN202
        frame = reader(*args, **kwargs)  # type: ignore[arg-type]
        read.append(len(frame))
        return frame

    monkeypatch.setattr(cluster_store, "topic_story_texts", counted)
    monkeypatch.setattr(cluster_store, "READ_STORIES", 4)
    monkeypatch.setattr(cluster_store, "READ_BY_ID", 3)
    batched = cluster_store.build_topic_clusters(store, TOPIC, home=tmp_path / "batched")
    assert whole is not None and batched is not None and batched.stories == whole.stories == 30
    assert max(read) <= 4 and sum(read) > 30  # 30 stories in batches of 4, then the label stories by id
    assert np.array_equal(whole.clusters.labels, batched.clusters.labels)
    assert whole.clusters.top_terms == batched.clusters.top_terms
    store.dispose()
