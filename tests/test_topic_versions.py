"""Topic versions: a changed query starts a new version whose stories are judged again; the earlier snapshot stays
readable with its version, the new one leaves out the stories only the old query matched, the archive intact."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sqlalchemy import func, select

from tests.test_spider import DictSource, page
from topicmap.snapshots.cli import format_snapshot_list, list_snapshots
from topicmap.snapshots.folder import verify_snapshot_files
from topicmap.snapshots.store import build_snapshot
from topicmap.spider.iteration import Spider
from topicmap.spider.rejudge import rejudge_topic
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig, load_topics
from topicmap.topics.versions import record_version, topic_versions

TOPICS = """
topics:
  - name: weather
    query: climate OR flood
    start_date: 2026-01-01
    end_date: 2026-04-30
    seed_urls:
      - {path: seeds.csv, assume_match: false}
"""
CLIMATE = "https://news.example.com/2026/02/10/climate-plan"
FLOOD = "https://other.example.org/2026/02/10/river-flood"
SHORT, OTHER_SHORT = "https://short.example.net/f1", "https://short.example.net/f2"


def _members(store: TopicStore, topics_id: int) -> dict[str, int | None]:
    ts, st = s.topic_stories, s.stories
    with store.engine.connect() as conn:
        return dict(
            conn.execute(
                select(st.c.url, ts.c.left_version)
                .join(ts, ts.c.stories_id == st.c.stories_id)
                .where(ts.c.topics_id == topics_id)
            ).all()
        )


def _declared(store: TopicStore, tmp_path: Path) -> tuple[TopicConfig, int]:
    """The topic, its two seed URLs stored (judged by the query: the list does not assume they match)."""
    (tmp_path / "seeds.csv").write_text(f"url\n{CLIMATE}\n{FLOOD}\n", encoding="utf-8")
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    topic = load_topics(tmp_path / "topics.yaml").topics[0]
    topics_id = store.upsert_topic(topic)
    store.add_seed_urls(topics_id, [{"url": CLIMATE, "source": "csv"}, {"url": FLOOD, "source": "csv"}])
    return topic, topics_id


def _snapshot_urls(folder: Path) -> set[str]:
    import pyarrow.parquet as pq

    return set(
        pq.read_table(folder / "overall" / "stories.parquet", columns=["url"]).column("url").to_pylist()
    )


def test_a_changed_query_starts_a_version_and_both_snapshots_stay_readable(
    store: TopicStore, tmp_path: Path
) -> None:
    first, topics_id = _declared(store, tmp_path)
    v1, new = record_version(store, topics_id, first)
    assert (v1.version, new, v1.judged_at is not None) == (1, True, True)
    assert record_version(store, topics_id, first) == (v1, False)  # same settings: same version

    web = {
        CLIMATE: page("Climate plan", "The climate plan was announced."),
        FLOOD: page("River flood", "The river flood reached the town."),
    }
    Spider(store, first, DictSource(web), log=lambda _: None).run_iteration()
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: None}
    one = build_snapshot(store, "weather", home=tmp_path / "home")
    assert one.inputs.topic_version == 1
    assert _snapshot_urls(one.folder) == {CLIMATE, FLOOD}

    # the query changes: version 2, its stories judged again; the flood story leaves it, nothing is deleted
    second = dataclasses.replace(first, query="climate")
    store.upsert_topic(second)
    v2, new = record_version(store, topics_id, second)
    assert (v2.version, new, v2.judged_at) == (2, True, None)
    report = rejudge_topic(store, v2)
    assert (report.judged, report.left, report.back, report.outside) == (2, 1, 0, 1)
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: 2}
    assert [
        (v.version, v.stories_left, v.judged_at is not None) for v in topic_versions(store, topics_id)
    ] == [
        (1, 0, True),
        (2, 1, True),
    ]
    two = build_snapshot(store, "weather", home=tmp_path / "home")
    assert two.snapshot_key != one.snapshot_key
    assert two.inputs.topic_version == 2
    assert _snapshot_urls(two.folder) == {CLIMATE}

    # both snapshots readable, each with its version: store rows, manifests, provenance, README
    with store.engine.connect() as conn:
        rows = dict(
            conn.execute(
                select(s.snapshots.c.snapshots_id, s.snapshots.c.topic_version).where(
                    s.snapshots.c.topics_id == topics_id
                )
            ).all()
        )
        archived = conn.execute(select(func.count()).select_from(s.stories)).scalar_one()
    assert rows == {one.snapshots_id: 1, two.snapshots_id: 2}
    assert archived == 2  # the archive keeps the story that left
    for built, version in ((one, 1), (two, 2)):
        assert verify_snapshot_files(built.folder) == []
        assert json.loads((built.folder / "manifest.json").read_text())["topic_version"] == version
        assert json.loads((built.folder / "provenance.json").read_text())["topic_version"] == version
        assert f"version {version}" in (built.folder / "README.md").read_text()
    assert _snapshot_urls(one.folder) == {CLIMATE, FLOOD}
    listed = list_snapshots(store, "weather", tmp_path / "home")
    assert [(snap["topic_version"], snap["stories"], snap["intact"]) for snap in listed] == [
        (1, 2, True),
        (2, 1, True),
    ]
    assert "version 2  dates" in format_snapshot_list("weather", listed)

    # the old query again: a third version, where the flood story is back
    third = dataclasses.replace(first)
    store.upsert_topic(third)
    v3, new = record_version(store, topics_id, third)
    assert (v3.version, new) == (3, True)
    assert rejudge_topic(store, v3).back == 1
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: None}


def test_a_story_that_left_is_judged_again_when_the_spider_meets_it(
    store: TopicStore, tmp_path: Path
) -> None:
    first, topics_id = _declared(store, tmp_path)
    record_version(store, topics_id, first)
    web = {
        # the climate story links to another URL of the flood story: followed at iteration 1
        CLIMATE: page("Climate plan", "The climate plan was announced.", [SHORT]),
        FLOOD: page("River flood", "The river flood reached the town."),
        SHORT: (301, FLOOD),
        OTHER_SHORT: (301, FLOOD),
    }
    Spider(store, first, DictSource(web), log=lambda _: None).run_iteration()  # iteration 0 only
    second = dataclasses.replace(first, query="climate OR town")
    store.upsert_topic(second)
    v2, _ = record_version(store, topics_id, second)
    assert rejudge_topic(store, v2).left == 0  # "town" is in the flood story's text
    third = dataclasses.replace(first, query="climate")
    store.upsert_topic(third)
    v3, _ = record_version(store, topics_id, third)
    assert rejudge_topic(store, v3).left == 1
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: 3}
    # iteration 1 meets the flood story by the link: it is judged, not taken as a topic story
    Spider(store, third, DictSource(web), log=lambda _: None).run_iteration()
    assert _fetch_states(store, topics_id)[SHORT] == "content match failed"  # judged by the query
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: 3}
    # under a query it matches, the spider takes it back into the version
    fourth = dataclasses.replace(first, query="climate OR river")
    store.upsert_topic(fourth)
    store.add_seed_urls(topics_id, [{"url": OTHER_SHORT, "source": "csv"}])
    Spider(store, fourth, DictSource(web), log=lambda _: None).run_iteration()
    assert _members(store, topics_id) == {CLIMATE: None, FLOOD: None}


def _fetch_states(store: TopicStore, topics_id: int) -> dict[str, str]:
    fu = s.topic_fetch_urls
    with store.engine.connect() as conn:
        return dict(conn.execute(select(fu.c.url, fu.c.state).where(fu.c.topics_id == topics_id)).all())


def test_the_seeds_asset_starts_a_version_when_the_query_changes(tmp_path: Path) -> None:
    import dagster as dg

    from assets.seeds import seeds
    from resources.store import TopicStoreResource
    from resources.topics import TopicsFileResource
    from tests.test_living_topics import load_day

    db = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    store = TopicStore.open(db)
    load_day(
        store,
        tmp_path / "drops",
        "day.csv",
        [
            ("https://a.test/2026/02/10/plan", "Climate plan", "The climate plan.", "2026-02-10"),
            ("https://b.test/2026/02/11/flood", "River flood", "The river flood.", "2026-02-11"),
        ],
    )
    topics = tmp_path / "topics.yaml"
    declared = "topics:\n  - {name: weather, query: QUERY, start_date: 2026-02-01, end_date: 2026-02-28}\n"
    resources = {
        "store": TopicStoreResource(database_url=db),
        "topics_file": TopicsFileResource(path=str(topics)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["weather"])

    def seed(query: str) -> dict:
        topics.write_text(declared.replace("QUERY", query), encoding="utf-8")
        result = dg.materialize([seeds], instance=instance, resources=resources, partition_key="weather")
        topic = load_topics(topics).topics[0]
        Spider(store, topic, DictSource({}), log=lambda _: None).run_iteration()  # the seeds join the topic
        return {k: v.value for k, v in result.asset_materializations_for_node("seeds")[0].metadata.items()}

    first = seed("climate OR flood")
    assert (first["topic_version"], first["topic_version_new"]) == (1, True)
    topics_id = int(store.topic_row("weather")["topics_id"])
    assert set(_members(store, topics_id).values()) == {None}
    assert len(_members(store, topics_id)) == 2
    again = seed("climate OR flood")
    assert (again["topic_version"], again["topic_version_new"]) == (1, False)
    assert "stories_left_version" not in again
    changed = seed("climate")
    assert (changed["topic_version"], changed["topic_version_new"]) == (2, True)
    assert (changed["stories_left_version"], changed["stories_back_in_version"]) == (1, 0)
    assert _members(store, topics_id) == {
        "https://a.test/2026/02/10/plan": None,
        "https://b.test/2026/02/11/flood": 2,
    }
