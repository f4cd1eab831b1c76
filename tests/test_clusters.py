"""Story clusters: k from the SSE curve, groups recovered with readable labels, the chapter's story mutation
(re-prediction edges, GEXF), state carried week to week by the cluster_weeks partitions, and the pictures."""

from __future__ import annotations

import functools
import random
import shutil
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.metrics import adjusted_rand_score

from assets.clusters import ClusterWeeksConfig, cluster_weeks, clusters
from assets.dagster_internals import ASSET_PARTITION_RANGE_END_TAG as RANGE_END
from assets.dagster_internals import ASSET_PARTITION_RANGE_START_TAG as RANGE_START
from assets.partitions import apply_calendar, declared_calendar, topic_weeks_partitions
from resources.store import TopicStoreResource
from tests.conftest import FreshInstance, copy_sqlite_store
from topicmap.clusters.model import (
    _projection,
    choose_k,
    hashed_bucket,
    rule_of_thumb_k,
    story_vectors,
    term_counts,
    tokenize,
    top_terms,
)
from topicmap.clusters.mutation import StreamConfig, StreamState, advance, mutation_graph, stream_batches
from topicmap.clusters.oneshot import cluster_stories
from topicmap.clusters.pictures import draw_mutation_graph, draw_stream_graph
from topicmap.clusters.store import READ_WEEKS, _WeeklyStories, topic_story_texts, topic_weeks
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig, load_topics

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
    rng: random.Random, words: list[str], other: list[str] | None = None, share: float = 0.0, n: int = 30
) -> str:
    """``n`` words of one vocabulary, ``share`` of them from ``other``, plus newswire filler."""
    chosen = [rng.choice(other) if other and rng.random() < share else rng.choice(words) for _ in range(n)]
    filler = rng.sample(["said", "today", "report", "people", "officials", "week", "told", "news", "city"], 3)
    return " ".join(chosen + filler)


def groups(names: list[str], per_group: int = 30, seed: int = 1) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    texts, truth = [], []
    for group, name in enumerate(names):
        for _ in range(per_group):
            texts.append(text_from(rng, VOCABULARIES[name]))
            truth.append(group)
    order = list(range(len(texts)))
    rng.shuffle(order)
    return [texts[i] for i in order], [truth[i] for i in order]


def test_k_is_read_from_the_sse_curve_and_groups_come_back_with_their_words() -> None:
    names = ["election", "flood", "football", "vaccine"]
    texts, truth = groups(names)
    result = cluster_stories(texts, seed=0, k_min=2, k_max=12)
    assert result.choice.method == "kneedle" and result.choice.k == 4
    assert result.choice.ks == list(range(1, 13)) and len(result.choice.sse) == 12
    assert result.choice.sse == sorted(result.choice.sse, reverse=True)  # the curve falls with k
    assert "k=4" in result.choice.reason
    assert adjusted_rand_score(truth, result.labels) == 1.0
    for cluster, terms in result.top_terms.items():
        (group,) = {truth[i] for i in np.flatnonzero(result.labels == cluster)}
        assert len(terms) == 5 and set(terms) <= set(VOCABULARIES[names[group]])  # never "said" or "told"
        assert len(result.titles[cluster]) == 3


def test_k_bounds_and_the_chapters_rule() -> None:
    texts, _ = groups(["election", "flood", "football", "vaccine", "markets"], per_group=12)
    vectors = story_vectors(tokenize(texts))
    bounded = choose_k(vectors, 2, 3)
    assert bounded.k <= 3 and bounded.ks == [1, 2, 3]
    assert rule_of_thumb_k(15000) == 87  # the chapter: about 100 clusters for 15,000 articles
    with pytest.raises(ValueError, match="k_min <= k_max"):
        choose_k(vectors, 5, 2)
    only = choose_k(story_vectors(tokenize(["same words here"] * 5)), 2, 10)
    assert only.k == 1 and only.method == "only"


def test_labels_skip_stop_words_of_the_stories_languages() -> None:
    rng = random.Random(4)
    french = ["le", "la", "les", "des", "une", "dans", "pour", "est", "sont", "avec"]
    texts = [
        " ".join(rng.choice(french) for _ in range(20)) + " inondation barrage rivière" for _ in range(10)
    ]
    texts += [
        " ".join(rng.choice(french) for _ in range(20)) + " élection scrutin candidat" for _ in range(10)
    ]
    texts += [text_from(rng, VOCABULARIES["football"]) for _ in range(30)]  # French words in 40 % of stories
    labels = np.array([0] * 10 + [1] * 10 + [2] * 30)
    tokens = tokenize(texts)
    languages = ["fr"] * 20 + ["en"] * 30
    named = top_terms(term_counts(tokens), tokens, labels, [0, 1, 2], languages=languages)
    assert set(named[0]) == {"inondation", "barrage", "rivière"}
    assert set(named[1]) == {"élection", "scrutin", "candidat"}
    assert set(named[2]) <= set(VOCABULARIES["football"])  # not "said", "told", "officials"
    unnamed = top_terms(term_counts(tokens), tokens, labels, [0, 1, 2], languages=["en"] * 50)
    assert set(unnamed[0]) & set(french)  # without the stories' language, French stop words name the cluster
    # stories whose language is unknown (None from the store, NaN through pandas) are clustered all the same
    unknown = top_terms(
        term_counts(tokens),
        tokens,
        labels,
        [0, 1, 2],
        languages=["fr"] * 19 + [None, float("nan")] + ["en"] * 29,
    )
    assert set(unknown[0]) == {"inondation", "barrage", "rivière"}


def test_label_words_are_found_in_the_hashed_counts_they_were_counted_in() -> None:
    words = ["flood", "rivière", "日本語", "levee", "scrutin"]
    counts = term_counts([[word] for word in words])
    assert [hashed_bucket(word) for word in words] == counts.indices.tolist()


def test_clustering_is_deterministic_for_a_seed() -> None:
    texts, _ = groups(["election", "flood", "football"], per_group=15, seed=7)
    first = cluster_stories(texts, seed=0)
    _projection.cache_clear()  # the random-indexing signatures must be drawn again, identically
    again = cluster_stories(texts, seed=0)
    assert np.array_equal(first.labels, again.labels) and first.top_terms == again.top_terms
    batches = [("w1", range(20), texts[:20], texts[:20]), ("w2", range(20, 45), texts[20:], texts[20:])]
    a, b = stream_batches(batches), stream_batches(batches)
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x.stories, y.stories)
        assert x.state.fingerprint() == y.state.fingerprint()


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="larger than the number of texts"):
        cluster_stories(["a b", "c d"], 3)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        cluster_stories(["a b", None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="half_life"):
        StreamConfig(half_life=0)
    with pytest.raises(ValueError, match="1 stories_id, 2 titles"):
        advance(StreamState(), "w", [1], ["a", "b"], ["a", "b"])
    state = advance(StreamState(), "2026-01-05", [], [], []).state
    with pytest.raises(ValueError, match="does not come after"):
        advance(state, "2026-01-05", [], [], [])


# --------------------------------------------------------------------------------------------- mutation


def drifting_batches(n_batches: int = 8, per_batch: int = 15, seed: int = 11) -> list[tuple]:
    """A story drifting from vaccine words to market words (its own names stay), beside stable stories."""
    rng = random.Random(seed)
    own = ["kessler", "harbourview", "meridian"]
    batches, next_id = [], 1
    for t in range(n_batches):
        share = t / (n_batches - 1)
        texts = [
            text_from(rng, VOCABULARIES["vaccine"], VOCABULARIES["markets"], share, n=24)
            + " "
            + " ".join(own)
            for _ in range(per_batch)
        ]
        for name in ("football", "election", "flood"):
            texts += [text_from(rng, VOCABULARIES[name]) for _ in range(per_batch)]
        ids = list(range(next_id, next_id + len(texts)))
        next_id += len(texts)
        batches.append(
            (f"2026-01-{5 + 7 * t:02d}" if t < 4 else f"2026-02-{2 + 7 * (t - 4):02d}", ids, texts, texts)
        )
    return batches


def test_a_drifting_story_is_followed_by_one_cluster_and_leaves_mutation_edges(tmp_path: Path) -> None:
    batches = drifting_batches()
    steps = stream_batches(batches, StreamConfig(k_min=2, k_max=8, half_life=2.0))
    per_batch = 15
    assert steps[0].state.choice.k == 4
    drift = {int(np.bincount(step.stories.cluster[:per_batch]).argmax()) for step in steps}
    assert len(drift) == 1  # one cluster follows the story from its first week to its last
    (cluster,) = drift
    for step in steps:
        assert (step.stories.cluster[:per_batch] == cluster).all()
        assert (step.stories.cluster[per_batch:] != cluster).all()
    first_terms = set(steps[0].nodes.set_index("cluster").top_terms[cluster])
    last_terms = set(steps[-1].nodes.set_index("cluster").top_terms[cluster])
    assert first_terms & set(VOCABULARIES["vaccine"]) and last_terms & set(VOCABULARIES["markets"])
    # the chain of the story: in every later week its stories stay with it (the chapter's straight line)
    for step in steps[1:]:
        stayed = step.transitions[
            (step.transitions.from_cluster == cluster) & (step.transitions.to_cluster == cluster)
        ]
        assert stayed.stories.sum() >= per_batch
    edges = pd.concat([step.edges for step in steps], ignore_index=True)
    assert list(edges.columns) == ["batch", "from_cluster", "to_cluster", "stories"]
    assert (edges.from_cluster != edges.to_cluster).all() and (edges.stories > 0).all()
    # GEXF: batch x cluster nodes with size, top terms and central titles; stayed and moved edges
    nodes = pd.concat([step.nodes for step in steps], ignore_index=True)
    transitions = pd.concat([step.transitions for step in steps], ignore_index=True)
    graph = mutation_graph(nodes, transitions)
    node = graph.nodes[f"{batches[-1][0]}:{cluster}"]
    assert node["stories"] == per_batch and node["top_terms"] and node["titles"].count(" | ") == 2
    assert {d["kind"] for _, _, d in graph.edges(data=True)} <= {"stayed", "moved"}
    picture = draw_mutation_graph(nodes, transitions, tmp_path / "m.png", "drift")
    stream = draw_stream_graph(nodes, tmp_path / "s.png", "drift")
    for path in (picture, stream):
        with Image.open(path) as image:
            assert image.width == 1600


def test_a_dying_cluster_is_reborn_from_the_largest_and_the_move_is_an_edge() -> None:
    rng = random.Random(5)
    first = [text_from(rng, VOCABULARIES["election"]) for _ in range(20)]
    first += [text_from(rng, VOCABULARIES["flood"]) for _ in range(20)]
    config = StreamConfig(k_min=2, k_max=2, half_life=0.02, min_stories=10)  # weights vanish within a batch
    state = advance(StreamState(), "w0", range(40), first, first, config=config)
    flood = int(np.bincount(state.stories.cluster[20:]).argmax())
    # the next weeks bring election stories only: the flood cluster starves, dies, and is re-seeded as a
    # copy (+-1e-14) of the election cluster, which the following week's stories then share
    steps = [state]
    for t in range(1, 4):
        texts = [text_from(rng, VOCABULARIES["election"]) for _ in range(30)]
        window = [s.window_batch() for s in steps]
        steps.append(
            advance(steps[-1].state, f"w{t}", range(100 * t, 100 * t + 30), texts, texts, window, config)
        )
    weights = steps[1].state.model.weights
    assert weights[0] == weights[1]  # the split shares the weight equally
    moved = pd.concat([s.edges for s in steps[1:]], ignore_index=True)
    assert ((moved.from_cluster == 1 - flood) & (moved.to_cluster == flood)).any() or (
        (moved.from_cluster == flood) & (moved.to_cluster == 1 - flood)
    ).any()


# --------------------------------------------------------------------------------------------- asset


TOPIC = "drift"
WEEKS = ["2026-02-02", "2026-02-09", "2026-02-16"]


def build_store(tmp_path: Path, stories_per_group: int) -> TopicStore:
    """Flood and election stories over three weeks (from Monday 2026-02-02, the topic's start), in a store of the
    test's own: a copy of the one built for this size once per test process (upgrading and filling it is most of
    what building it costs)."""
    path = tmp_path / "store.sqlite3"
    copy_sqlite_store(_built_store(tmp_path.parent, stories_per_group), path)
    return TopicStore.open(f"sqlite:///{path}")


@functools.cache
def _built_store(folder: Path, stories_per_group: int) -> Path:
    """The store ``build_store`` copies, built in ``folder`` (which outlives the test: its tmp_path's parent),
    from a copy of the upgraded store holding the topic alone."""
    path = folder / f"clusters_store_{stories_per_group}" / "store.sqlite3"
    path.parent.mkdir()
    if stories_per_group:
        copy_sqlite_store(_built_store(folder, 0), path)
    store = TopicStore.open(f"sqlite:///{path}")
    if not stories_per_group:
        store.upsert_topic(
            TopicConfig(name=TOPIC, query="news", start_date=date(2026, 2, 2), end_date=date(2026, 3, 31))
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
    add_stories(store, stories)
    store.dispose()
    return path


def blank_pictures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weeks' pictures drawn blank, for a test that reads none of them: matplotlib's drawing is most of a
    week's time. Which pictures a week draws, and where, is unchanged."""
    from topicmap.clusters import store as cluster_store

    def blank(path: Path) -> Path:
        Image.new("RGB", (1, 1)).save(path)
        return path

    monkeypatch.setattr(cluster_store, "draw_sse_curve", lambda choice, path, title: blank(path))
    monkeypatch.setattr(cluster_store, "draw_stream_graph", lambda table, path, title: blank(path))
    monkeypatch.setattr(
        cluster_store, "draw_mutation_graph", lambda nodes, transitions, path, title: blank(path)
    )


#: a story of the first week that arrives after the weeks were built
LATE_STORY = NewStory(
    "https://late.test/1", "late flood", "river flood levee rescue dam", datetime(2026, 2, 3, tzinfo=UTC)
)


def add_stories(store: TopicStore, stories: list[NewStory], topic: str = TOPIC) -> None:
    topics_id = store.topic_row(topic)["topics_id"]
    ids = store.add_stories(stories, source="test").stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [{"topics_id": topics_id, "stories_id": i, "iteration": 0, "added_at": now_utc()} for i in ids],
            ["topics_id", "stories_id"],
        )


def resources(store: TopicStore) -> dict:
    return {"store": TopicStoreResource(database_url=str(store.engine.url))}


def materialize_clusters(store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    result = dg.materialize([clusters], partition_key=TOPIC, instance=instance, resources=resources(store))
    return result.asset_materializations_for_node("clusters")[0].metadata


def test_clusters_asset_writes_clusters_curve_and_timeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = build_store(tmp_path, stories_per_group=15)
    metadata = materialize_clusters(store, tmp_path, monkeypatch)
    assert metadata["dagster/row_count"].value == 30
    assert metadata["k"].value == 2 and metadata["k_method"].value in {"kneedle", "rule", "only"}
    assert "k=" in metadata["k_reason"].value or "k =" in metadata["k_reason"].value
    folder = tmp_path / "home" / "exports" / "clusters" / TOPIC / "overall"
    for name in ("timeline", "sse_curve"):
        assert Path(metadata[f"{name}_png"].value) == folder / f"{name}.png"
        assert metadata[name].value.startswith("![") and "data:image/png;base64," in metadata[name].value
        with Image.open(folder / f"{name}.png") as image:
            assert image.width == 1600
    assert "said" not in metadata["clusters"].value
    frame = pd.read_parquet(folder / "stories.parquet")
    stories = topic_story_texts(store, store.topic_row(TOPIC)["topics_id"]).merge(frame, on="stories_id")
    truth = stories["text"].str.contains("flood report").astype(int)
    assert adjusted_rand_score(truth, stories["cluster"]) == 1.0
    assert sorted(frame["week"].unique()) == WEEKS
    curve = pd.read_parquet(folder / "sse_curve.parquet")
    assert list(curve.columns) == ["k", "sse"] and len(curve) >= 2
    store.dispose()


def test_clusters_asset_skips_small_topics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = build_store(tmp_path, stories_per_group=4)
    metadata = materialize_clusters(store, tmp_path, monkeypatch)
    assert metadata["dagster/row_count"].value == 0 and "fewer than 10" in metadata["skipped"].value
    assert not (tmp_path / "home" / "exports" / "clusters").exists()
    store.dispose()


def week_key(week: str) -> str:
    return f"{TOPIC}|{week}"


def materialize_weeks(
    store: TopicStore, instance: dg.DagsterInstance, first: str, last: str | None = None
) -> dg.ExecuteInProcessResult:
    """One run over the weeks ``first`` to ``last`` (one week without ``last``), as a single-run backfill or
    ``dagster asset materialize --partition-range`` launches it."""
    if last is None:
        target: dict = {"partition_key": week_key(first)}
    else:
        target = {"tags": {RANGE_START: week_key(first), RANGE_END: week_key(last)}}
    return dg.materialize(
        [cluster_weeks],
        run_config=dg.RunConfig(ops={"cluster_weeks": ClusterWeeksConfig(min_stories=10)}),
        instance=instance,
        resources=resources(store),
        raise_on_error=False,
        **target,
    )


def week_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, object]]:
    """Each materialized week's metadata values, by week."""
    return {
        m.partition.split("|")[1]: {k: v.value for k, v in m.metadata.items()}
        for m in result.asset_materializations_for_node("cluster_weeks")
    }


def check_passed(result: dg.ExecuteInProcessResult) -> bool:
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation.passed


def stale_listed(result: dg.ExecuteInProcessResult) -> dict[str, list[str]]:
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation.metadata["stale_weeks"].value


@pytest.fixture
def weeks_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dg.DagsterInstance:
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    # as the topic registry adds the weeks of a topic
    instance.add_dynamic_partitions("topic_weeks", [week_key(week) for week in WEEKS])
    return instance


def weeks_folder(tmp_path: Path) -> Path:
    return tmp_path / "home" / "exports" / "clusters" / TOPIC / "weeks"


def test_a_range_of_weeks_is_built_in_one_run_in_order(
    tmp_path: Path, weeks_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = build_store(tmp_path, stories_per_group=24)
    result = materialize_weeks(store, weeks_instance, WEEKS[0], WEEKS[-1])
    assert result.success
    metadata = week_metadata(result)
    assert sorted(metadata) == WEEKS  # one run, a materialization per week with the week's own figures
    figures = [metadata[week] for week in WEEKS]
    assert [f["batches_so_far"] for f in figures] == [1, 2, 3]
    assert [f["dagster/row_count"] for f in figures] == [24, 12, 12]  # the stories of each week
    assert figures[0]["started_fresh"] and figures[0]["started_from"].startswith("its own fit")
    # each week starts from exactly the state the week before left
    for before, week, after in zip(figures, WEEKS, figures[1:], strict=False):
        assert after["started_from"] == week and after["previous_state"] == before["state"]
    assert figures[0]["k"] == 2 and "k=2" in figures[0]["k_reason"]
    # the cumulative pictures are drawn once, for the run's last week
    assert (
        "data:image/png;base64," in figures[2]["stream"]
        and "data:image/png;base64," in figures[2]["mutations"]
    )
    assert "stream" not in figures[1] and "mutations" not in figures[1]
    folder = weeks_folder(tmp_path) / WEEKS[2]
    stories = pd.read_parquet(folder / "stories.parquet")
    assert list(stories.columns) == ["stories_id", "title", "cluster_before", "cluster", "distance"]
    assert (stories.cluster_before >= 0).all() and stories.cluster.isin([0, 1]).all()
    edges = pd.read_parquet(folder / "edges.parquet")
    assert list(edges.columns) == ["batch", "from_cluster", "to_cluster", "stories"]
    gexf = ET.parse(folder / "mutations.gexf").getroot()
    node_ids = {n.get("id") for n in gexf.iter() if n.tag.endswith("node")}
    assert {f"{week}:0" for week in WEEKS} <= node_ids
    assert check_passed(result)
    # the same range built again from the same stories leaves the same states (its pictures go unread)
    blank_pictures(monkeypatch)
    again = week_metadata(materialize_weeks(store, weeks_instance, WEEKS[0], WEEKS[-1]))
    assert [again[week]["state"] for week in WEEKS] == [f["state"] for f in figures]
    store.dispose()


def test_a_week_starts_from_the_nearest_built_week_or_from_its_own_fit(
    tmp_path: Path, weeks_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    blank_pictures(monkeypatch)
    store = build_store(tmp_path, stories_per_group=24)
    # no earlier week built: the stream starts from this week's own fit, and says so
    alone = materialize_weeks(store, weeks_instance, WEEKS[1])
    assert alone.success and check_passed(alone)
    first = week_metadata(alone)[WEEKS[1]]
    assert first["started_fresh"] and first["previous_state"] == "" and first["batches_so_far"] == 1
    # an earlier week built afterwards: the later week no longer follows the chain, the check names it
    earlier = materialize_weeks(store, weeks_instance, WEEKS[0])
    assert not check_passed(earlier) and stale_listed(earlier) == {TOPIC: [WEEKS[1]]}
    # with a gap, a week continues the nearest built week before it
    shutil.rmtree(weeks_folder(tmp_path) / WEEKS[1])
    jump = materialize_weeks(store, weeks_instance, WEEKS[2])
    built = week_metadata(jump)[WEEKS[2]]
    assert built["started_from"] == WEEKS[0] and built["batches_so_far"] == 2
    assert built["previous_state"] == week_metadata(earlier)[WEEKS[0]]["state"]
    assert check_passed(jump)
    store.dispose()


def test_a_rebuilt_week_marks_every_later_week_stale_until_a_range_rebuild(
    tmp_path: Path, weeks_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    blank_pictures(monkeypatch)
    store = build_store(tmp_path, stories_per_group=24)
    built = week_metadata(materialize_weeks(store, weeks_instance, WEEKS[0], WEEKS[-1]))
    # the first week built again from the same stories: the same state, the later weeks stay sound
    same = materialize_weeks(store, weeks_instance, WEEKS[0])
    assert week_metadata(same)[WEEKS[0]]["state"] == built[WEEKS[0]]["state"] and check_passed(same)
    # a story added to the first week changes its state: every later week is stale, not only the next
    add_stories(store, [LATE_STORY])
    rebuilt = materialize_weeks(store, weeks_instance, WEEKS[0])
    assert week_metadata(rebuilt)[WEEKS[0]]["state"] != built[WEEKS[0]]["state"]
    assert not check_passed(rebuilt) and stale_listed(rebuilt) == {TOPIC: WEEKS[1:]}
    (evaluation,) = rebuilt.get_asset_check_evaluations()
    assert evaluation.metadata["rebuild_from"].value == {TOPIC: WEEKS[1]}
    # one run over the rest rebuilds them in order from the new state, and the check passes again
    repaired = materialize_weeks(store, weeks_instance, WEEKS[1], WEEKS[-1])
    assert check_passed(repaired)
    assert week_metadata(repaired)[WEEKS[1]]["previous_state"] == week_metadata(rebuilt)[WEEKS[0]]["state"]
    store.dispose()


def test_a_change_of_configuration_mid_stream_is_refused(
    tmp_path: Path, weeks_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    blank_pictures(monkeypatch)
    store = build_store(tmp_path, stories_per_group=24)
    assert materialize_weeks(store, weeks_instance, WEEKS[0]).success
    changed = dg.materialize(
        [cluster_weeks],
        partition_key=week_key(WEEKS[1]),
        run_config=dg.RunConfig(ops={"cluster_weeks": ClusterWeeksConfig(min_stories=10, half_life=4.0)}),
        instance=weeks_instance,
        resources=resources(store),
        raise_on_error=False,
    )
    assert not changed.success
    assert "which it starts from, was built with" in str(changed.all_events)
    assert not (weeks_folder(tmp_path) / WEEKS[1]).exists()
    store.dispose()


def test_stories_read_by_the_half_year_are_each_weeks_stories(tmp_path: Path) -> None:
    store = build_store(tmp_path, stories_per_group=0)
    # a story every five days for 60 weeks: more than two reads of READ_WEEKS weeks, weeks with one or two stories
    start = datetime(2026, 2, 2, 9, tzinfo=UTC)
    add_stories(
        store,
        [
            NewStory(f"https://site.test/{i}", f"s{i}", "flood", start + timedelta(days=5 * i))
            for i in range(84)
        ],
    )
    topics_id = store.topic_row(TOPIC)["topics_id"]
    weeks = topic_weeks(date(2026, 2, 2), date(2027, 3, 28))
    assert len(weeks) == 60 > 2 * READ_WEEKS
    reader = _WeeklyStories(store, topics_id, date.fromisoformat(weeks[-1]))
    for week in weeks:
        monday = datetime.fromisoformat(week).replace(tzinfo=UTC)
        expected = topic_story_texts(store, topics_id, monday, monday + timedelta(days=7))
        pd.testing.assert_frame_equal(reader.of(date.fromisoformat(week)).reset_index(drop=True), expected)
    store.dispose()


def test_weeks_are_backfilled_in_one_run_per_topic() -> None:
    assert cluster_weeks.backfill_policy == dg.BackfillPolicy.single_run()
    # the chain of states is kept in the week folders: no self-dependency, whose provenance a range run would blur
    deps = cluster_weeks.specs_by_key[cluster_weeks.key].deps
    assert [d.asset_key for d in deps] == [dg.AssetKey("deduped_stories")]


def test_the_topic_weeks_are_each_declared_topics_weeks_once_over(tmp_path: Path) -> None:
    topics = tmp_path / "topics.yaml"
    topics.write_text(
        "topics:\n  - {name: long, query: a, start_date: 2009-01-01, end_date: 2024-12-31}\n"
        "  - {name: short, query: a, start_date: 2019-10-28, end_date: 2020-03-02}\n"
        "  - {name: running, query: a, start_date: 2026-11-04, end_date: open}\n",
        encoding="utf-8",
    )
    declared = load_topics(topics, date(2026, 11, 26)).topics
    keys = declared_calendar(declared, date(2026, 11, 26), {})["topic_weeks"]
    weeks: dict[str, list[str]] = {}
    for key in keys:
        topic, week = key.split("|")
        weeks.setdefault(topic, []).append(week)
    # each topic's own weeks, one range in date order: from the Monday of its start to the week of its end; the
    # running topic's weeks that are over (not the current one, which begins on the 23rd); no topic has another's
    assert list(weeks) == ["long", "running", "short"]
    assert (weeks["long"][0], weeks["long"][-1], len(weeks["long"])) == ("2008-12-29", "2024-12-30", 836)
    assert weeks["short"] == topic_weeks(date(2019, 10, 28), date(2020, 3, 2))
    assert weeks["running"] == ["2026-11-02", "2026-11-09", "2026-11-16"]
    assert len(keys) == len(weeks["long"]) + len(weeks["short"]) + 3
    # the setting is a floor (its Monday); a bad one is refused by name
    floored = declared_calendar(declared, date(2026, 11, 26), {"TOPICMAP_WEEKS_START": "2019-10-30"})[
        "topic_weeks"
    ]
    assert floored[0] == "long|2019-10-28" and "short|2019-10-28" in floored
    with pytest.raises(ValueError, match="TOPICMAP_WEEKS_START must be an ISO day"):
        declared_calendar(declared, date(2026, 11, 26), {"TOPICMAP_WEEKS_START": "June"})
    # the asset's partitions are that set, kept by the topic registry
    assert cluster_weeks.partitions_def == topic_weeks_partitions


def test_topic_weeks_are_the_mondays_the_topic_spans() -> None:
    weeks = topic_weeks(date(2026, 1, 1), date(2026, 4, 30))
    assert weeks[0] == "2025-12-29" and weeks[-1] == "2026-04-27" and len(weeks) == 18
    assert all(date.fromisoformat(w).weekday() == 0 for w in weeks)


@pytest.mark.usefixtures("store_resource_cache")  # the code location opens this test's store
def test_the_demo_builds_a_topics_weeks_in_one_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_instance: FreshInstance,
) -> None:
    """`make demo` builds a topic's weeks as a backfill does: one cluster_weeks_job run over their range, the weeks
    in order, each from the one before (not a run per week, each starting over from a folder)."""
    from orchestration.definitions import defs
    from orchestration.demo import build_cluster_weeks

    blank_pictures(monkeypatch)
    store = build_store(tmp_path, stories_per_group=24)
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TOPICMAP_DATABASE_URL", str(store.engine.url))
    topic = TopicConfig(name=TOPIC, query="news", start_date=date(2026, 2, 2), end_date=date(2026, 2, 22))
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", [TOPIC])
        apply_calendar(instance, [topic], date(2026, 11, 26))
        finished = build_cluster_weeks(defs, instance, topic)
        (run,) = instance.get_runs()
        assert finished is not None and run.run_id == finished.run_id and run.job_name == "cluster_weeks_job"
        assert (run.tags[RANGE_START], run.tags[RANGE_END]) == (f"{TOPIC}|{WEEKS[0]}", f"{TOPIC}|{WEEKS[-1]}")
        built = [
            (m.partition, {k: v.value for k, v in m.metadata.items()})
            for m in finished.materializations("cluster_weeks")
        ]
    assert [partition for partition, _ in built] == [f"{TOPIC}|{week}" for week in WEEKS]
    figures = [metadata for _, metadata in built]
    for week, before, after in zip(WEEKS, figures, figures[1:], strict=False):
        assert after["started_from"] == week and after["previous_state"] == before["state"]
    store.dispose()
