"""A topic's versions across the stages: a new version judges its stories' dates as well as the query (narrowed
dates send stories out, widened dates bring them back, undated stories stay), and every stage (link mining,
clusters, the WARC export, dedup, Bit.ly clicks, Facebook) reads the stories of the current version only."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path

from sqlalchemy import select

from topicmap.archive.warc_export import export_topic_warc
from topicmap.archive.warc_stories import read_story_archive
from topicmap.clusters.store import topic_story_texts
from topicmap.dedup.store import (
    declare_duplicate_media,
    find_near_duplicates,
    merge_duplicate_media,
    merge_duplicate_stories,
)
from topicmap.snapshots.inputs import read_snapshot_inputs
from topicmap.snapshots.key import SnapshotOptions, snapshot_key
from topicmap.social.store import click_stories, stories_awaiting_statistics, stories_needing_statistics
from topicmap.spider.rejudge import RejudgeReport, rejudge_topic
from topicmap.spider.store import SpiderStore
from topicmap.store import schema as s
from topicmap.store.integrity import topic_stories_in_duplicate_media
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.store.version_stories import version_story_count
from topicmap.topics.declarations import TopicConfig
from topicmap.topics.versions import record_version

TOPIC = TopicConfig(
    name="weather", query="climate OR flood", start_date=date(2026, 1, 1), end_date=date(2026, 4, 30)
)
BODY = (
    "This paragraph is long enough to be the article body of a real news page, with more sentences after it."
)


def at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 9, tzinfo=UTC)


def story(url: str, title: str, text: str, published: datetime | None) -> NewStory:
    html = f"<html><head><title>{title}</title></head><body><article><p>{text} {BODY}</p></article></body></html>"
    return NewStory(
        url,
        title,
        f"{text} {BODY}",
        published,
        language="en",
        html=html.encode(),
        encoding="utf-8",
        http_status=200,
    )


def topic_with(store: TopicStore, stories: list[NewStory]) -> tuple[int, dict[str, int]]:
    """TOPIC at version 1 holding ``stories`` (by URL → stories_id)."""
    topics_id = store.upsert_topic(TOPIC)
    record_version(store, topics_id, TOPIC)
    ids = store.add_stories(stories, source="test").stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [{"topics_id": topics_id, "stories_id": i, "added_at": now_utc()} for i in ids],
            ["topics_id", "stories_id"],
        )
    return topics_id, {one.url: i for one, i in zip(stories, ids, strict=True)}


def new_version(store: TopicStore, topics_id: int, **changes: object) -> RejudgeReport:
    """The topic declared with ``changes``, as the seeds asset records it: a new version, judged."""
    topic = dataclasses.replace(TOPIC, **changes)
    store.upsert_topic(topic)
    version, new = record_version(store, topics_id, topic)
    assert new
    return rejudge_topic(store, version)


def left_versions(store: TopicStore, topics_id: int) -> dict[int, int | None]:
    ts = s.topic_stories
    with store.engine.connect() as conn:
        return dict(
            conn.execute(select(ts.c.stories_id, ts.c.left_version).where(ts.c.topics_id == topics_id)).all()
        )


# ----------------------------------------------------------------------------------------------- dates


JANUARY = "https://news.example.com/2026/01/10/climate-talks"
LATE_JANUARY = "https://news.example.com/2026/01/27/climate-week"  # within 7 days of 1 February
FEBRUARY = "https://news.example.com/2026/02/10/climate-plan"
UNDATED = "https://news.example.com/about/climate"
OLD = "https://archive.example.org/2019/05/01/climate-report"  # a page the spider found: no version reached 2019


def test_narrowed_dates_send_stories_out_and_widened_dates_bring_them_back(store: TopicStore) -> None:
    topics_id, ids = topic_with(
        store,
        [
            story(JANUARY, "Climate talks", "The climate talks opened.", at(2026, 1, 10)),
            story(LATE_JANUARY, "Climate week", "The climate week began.", at(2026, 1, 27)),
            story(FEBRUARY, "Climate plan", "The climate plan was announced.", at(2026, 2, 10)),
            story(UNDATED, "About climate", "A climate page without a date.", None),
            story(OLD, "Climate report", "An old climate report.", at(2019, 5, 1)),
        ],
    )

    narrowed = new_version(store, topics_id, start_date=date(2026, 2, 1), end_date=date(2026, 3, 31))
    assert (narrowed.left, narrowed.outside, narrowed.outside_dates) == (1, 1, 1)
    # out: the January story (its day more than 7 days before the new start); in: the undated page, the story of
    # 27 January (Media Cloud's 7 days), and the 2019 page that no version's dates ever covered
    assert left_versions(store, topics_id) == {
        ids[JANUARY]: 2,
        ids[LATE_JANUARY]: None,
        ids[FEBRUARY]: None,
        ids[UNDATED]: None,
        ids[OLD]: None,
    }

    # another query, the same dates: the January story stays out (its date still excludes it)
    requeried = new_version(
        store, topics_id, query="climate OR storm", start_date=date(2026, 2, 1), end_date=date(2026, 3, 31)
    )
    assert (requeried.back, requeried.outside_dates) == (0, 1)
    assert left_versions(store, topics_id)[ids[JANUARY]] == 2

    # the dates widened again: it matches the query, so it is back; the archive kept it all along
    widened = new_version(store, topics_id, query="climate OR storm")
    assert (widened.back, widened.outside, widened.outside_dates) == (1, 0, 0)
    assert set(left_versions(store, topics_id).values()) == {None}

    # a story outside both the query and the dates counts as not matching the query
    moved = new_version(
        store, topics_id, query="storm", start_date=date(2026, 2, 1), end_date=date(2026, 3, 31)
    )
    assert (moved.outside, moved.outside_dates) == (5, 0)


# ----------------------------------------------------------------------------------------------- stages


CLIMATE = [f"https://news.example.com/2026/02/{d:02d}/climate-{d}" for d in (3, 4, 5)]
FLOOD = "https://other.example.org/2026/02/10/river-flood"


def test_a_story_that_left_the_version_is_not_clustered_exported_or_measured(
    store: TopicStore, tmp_path: Path
) -> None:
    topics_id, ids = topic_with(
        store,
        [
            *(
                story(url, f"Climate {n}", f"Climate story {n}.", at(2026, 2, 3 + n))
                for n, url in enumerate(CLIMATE)
            ),
            story(FLOOD, "River flood", "The river flood reached the town.", at(2026, 2, 10)),
        ],
    )
    version = {ids[url] for url in CLIMATE}
    everyone = version | {ids[FLOOD]}
    # before the change every stage sees the flood story
    assert set(topic_story_texts(store, topics_id)["stories_id"]) == everyone
    assert new_version(store, topics_id, query="climate").left == 1

    assert version_story_count(store, topics_id) == 3
    # the spider mines the links of the version's stories only (none is mined yet here)
    assert {row.stories_id for row in SpiderStore(store, topics_id).unmined_stories()} == version
    # clusters, one-shot and week by week (the weeks read the stories of a date range)
    assert set(topic_story_texts(store, topics_id)["stories_id"]) == version
    february = topic_story_texts(store, topics_id, at(2026, 2, 1), at(2026, 3, 1))
    assert set(february["stories_id"]) == version
    # the WARC export
    export = export_topic_warc(store, "weather", tmp_path / "warc")
    exported = {record.url for path in export.files for record in read_story_archive(path)}
    assert (export.stories_written, exported) == (3, set(CLIMATE))
    # Bit.ly clicks and Facebook statistics are fetched for the version's stories only
    clicks = click_stories(store, date(2026, 2, 1), date(2026, 2, 28), now_utc())
    assert {one.stories_id for one in clicks} == version
    facebook = stories_needing_statistics(store, topics_id, now_utc())
    assert {row["stories_id"] for row in facebook} == version
    assert stories_awaiting_statistics(store, topics_id)[0] == 3


PLAN = "Council approves carbon plan for public buildings"
TEXT = "The regional council approved a climate plan to cut emissions from public buildings by forty percent."
DEBATE = "Council holds a long debate on the river flood defences"


def test_dedup_reads_the_version_and_a_survivor_joins_it(store: TopicStore) -> None:
    topics_id, ids = topic_with(
        store,
        [
            # two copies in one medium (same title, same day): merged
            story("https://news.example.com/2026/02/03/plan", PLAN, TEXT, at(2026, 2, 3)),
            story("https://news.example.com/2026/02/03/plan-copy", PLAN, TEXT + " More.", at(2026, 2, 3)),
            # the same title and day in another medium, about the flood only: it leaves the version
            story(
                "https://other.example.org/2026/02/05/council",
                DEBATE,
                "The flood.",
                at(2026, 2, 5),
            ),
            story(
                "https://other.example.org/2026/02/05/council-2",
                DEBATE,
                "A flood.",
                at(2026, 2, 5),
            ),
            # a mirror of other.example.org, whose copy of the debate matches the new query
            story(
                "https://mirror.example.net/2026/02/05/council",
                DEBATE,
                "The flood and the climate.",
                at(2026, 2, 5),
            ),
        ],
    )
    urls = {i: url for url, i in ids.items()}
    assert new_version(store, topics_id, query="climate").left == 2
    left = {urls[i] for i, v in left_versions(store, topics_id).items() if v is not None}
    assert left == {
        "https://other.example.org/2026/02/05/council",
        "https://other.example.org/2026/02/05/council-2",
    }

    # story dedup: the copies in the version merge; the two that left are not touched (nothing deleted)
    merged = merge_duplicate_stories(store, topics_id)
    assert [(urls[m["source_stories_id"]], urls[m["target_stories_id"]]) for m in merged.merges] == [
        ("https://news.example.com/2026/02/03/plan", "https://news.example.com/2026/02/03/plan-copy")
    ]
    assert {urls[i] for i in left_versions(store, topics_id)} >= left

    # media dedup: the mirror's story (in the version) merges into its copy in the final medium, which had left
    # the version: the survivor stands for it, so it is back in the version
    assert declare_duplicate_media(store, [("http://mirror.example.net/", "http://other.example.org/")]) == (
        1,
        [],
    )
    report = merge_duplicate_media(store, topics_id)
    assert len(report.merges) == 1
    source, target = report.merges[0]["source_stories_id"], report.merges[0]["target_stories_id"]
    assert urls[source] == "https://mirror.example.net/2026/02/05/council"
    assert urls[target] in left
    after = left_versions(store, topics_id)
    assert source not in after and after[target] is None
    assert topic_stories_in_duplicate_media(store, ["weather"]).problems == 0

    # near-duplicates are grouped among the version's stories: the copy that left is in no group
    groups = find_near_duplicates(store, topics_id)
    assert groups.stories == version_story_count(store, topics_id) == 2


# ----------------------------------------------------------------------------------------------- snapshot key


def test_a_topics_first_version_keeps_the_key_of_a_snapshot_built_before_it(store: TopicStore) -> None:
    """A topic from a store older than versions, snapshotted before its first seeding records version 1, is not
    snapshotted again for that alone; a later version is a snapshot of its own."""
    topic_with(store, [story(url, "Climate", "Climate story.", at(2026, 2, 3)) for url in CLIMATE])
    inputs = read_snapshot_inputs(store, "weather")
    assert inputs.topic_version == 1
    keys = {
        v: snapshot_key(dataclasses.replace(inputs, topic_version=v), SnapshotOptions()) for v in (None, 1, 2)
    }
    assert keys[None] == keys[1] != keys[2]
