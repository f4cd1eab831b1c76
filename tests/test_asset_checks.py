"""The asset checks of every stage (assets/checks.py) and what every asset declares about itself.

Each check passes on good data and fails, saying in its metadata what it found, on data broken the way its stage
can break it; every asset has owners and a code version, and the stages with a cadence a freshness policy."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import delete, insert, select, text, update

from assets import checks
from assets.freshness import CCNEWS_FRESHNESS, click_verdict, last_deadline, snapshot_verdict
from assets.metadata import CODE_VERSIONS, asset_owners
from assets.partitions import topics_partitions
from resources.archive import ArchiveDropsResource
from resources.commoncrawl import CommonCrawlResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from tests.social_fixtures import TOPIC, add_topic_stories, at
from topicmap.dedup.store import declare_duplicate_media, merge_duplicate_media, merge_duplicate_stories
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import load_topics

JAN10 = date(2024, 1, 10)


@pytest.fixture
def world(
    store: TopicStore, store_resource_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict]:
    """A fresh store (SQLite and PostgreSQL: conftest's, a copy of an upgraded one, not upgraded anew per test),
    the resource that opens it (set up after ``store``, so its stores are disposed of before the schema is
    emptied), and TOPICMAP_HOME under tmp_path."""
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    url, schema = store.engine.url.render_as_string(hide_password=False), ""
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:
            schema = conn.execute(text("SELECT current_schema()")).scalar_one()
    yield {"store": store, "resources": {"store": TopicStoreResource(database_url=url, schema_name=schema)}}


@functools.cache
def check_instance() -> dg.DagsterInstance:
    """One ephemeral instance for every check run alone: a check reads the store, never the instance."""
    return dg.DagsterInstance.ephemeral()


def run(check: dg.AssetChecksDefinition, world: dict, **resources: object) -> dg.AssetCheckResult:
    """The check executed on its own (as from the asset page): every topic is in scope."""
    context = dg.build_asset_check_context(
        resources={**world["resources"], **resources}, instance=check_instance()
    )
    return check(context)


def found(result: dg.AssetCheckResult, column: str) -> list[str]:
    return [record.data[column] for record in result.metadata["found"].records]


def stories(*urls: str, text: str = "climate text") -> list[NewStory]:
    return [NewStory(url, f"Story {i}", text, at(JAN10, 9 + i)) for i, url in enumerate(urls)]


# ---------------------------------------------------------------------------------------------- spider
def test_no_url_left_claimed(world: dict) -> None:
    store: TopicStore = world["store"]
    topics_id = store.upsert_topic(TOPIC)
    now = time.time()

    def fetch(url: str, state: str, holder: str | None, expires: float | None) -> dict:
        return {
            "topics_id": topics_id,
            "url": url,
            "iteration": 1,
            "state": state,
            "claimed_by": holder,
            "claim_expires_at": expires,
        }

    with store.engine.begin() as conn:
        conn.execute(
            insert(s.topic_fetch_urls),
            [
                fetch(
                    "https://a.test/working", "pending", "worker-1", now + 100
                ),  # a live claim, mid-iteration
                fetch(
                    "https://a.test/done", "story", "worker-1", now - 100
                ),  # done: its claim no longer matters
                fetch("https://a.test/open", "pending", None, None),
            ],
        )
    good = run(checks.CHECKS_BY_NAME["no_url_left_claimed"], world)
    assert good.passed and good.metadata["open_urls_claimed"].value == 1

    with store.engine.begin() as conn:  # a worker killed mid-fetch: its lease ran out
        conn.execute(
            insert(s.topic_fetch_urls).values(**fetch("https://a.test/lost", "pending", "worker-2", now - 5))
        )
    lost = run(checks.CHECKS_BY_NAME["no_url_left_claimed"], world)
    assert not lost.passed and lost.severity == dg.AssetCheckSeverity.ERROR
    assert found(lost, "url") == ["https://a.test/lost"] and "expired" in found(lost, "why")[0]

    with (
        store.engine.begin() as conn
    ):  # the iteration is recorded as done: the live-looking claim is left over
        conn.execute(
            insert(s.topic_spider_metrics).values(
                topics_id=topics_id,
                iteration=1,
                links_processed=4,
                stories_added=0,
                links_added=0,
                frontier_left=0,
                elapsed_time=1.0,
                throttle_wait_time=0.0,
                states_json="{}",
                processed_date=now_utc(),
            )
        )
    done = run(checks.CHECKS_BY_NAME["no_url_left_claimed"], world)
    assert done.metadata["problems_found"].value == 2 and "iteration is done" in " ".join(found(done, "why"))


def test_a_check_in_a_topic_run_looks_at_that_topic_only(world: dict) -> None:
    """In a run of one topic's partition the checks look at that topic; run alone, at every topic."""
    store: TopicStore = world["store"]
    topics_id = store.upsert_topic(TOPIC)
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.topic_fetch_urls).values(
                topics_id=topics_id,
                url="https://a.test/lost",
                iteration=1,
                state="pending",
                claimed_by="gone",
                claim_expires_at=time.time() - 5,
            )
        )

    @dg.asset(name="fetched_links", partitions_def=topics_partitions)
    def stand_in() -> None:  # the spider's asset, as the check's run materializes it
        return None

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC.name, "other"])
    results = {}
    for topic in (TOPIC.name, "other"):
        result = dg.materialize(
            [stand_in, checks.CHECKS_BY_NAME["no_url_left_claimed"]],
            partition_key=topic,
            instance=instance,
            resources=world["resources"],
        )
        (results[topic],) = result.get_asset_check_evaluations()
    assert not results[TOPIC.name].passed and results[TOPIC.name].metadata["topics"].value == TOPIC.name
    assert (
        results["other"].passed and "'other' is not in the store" in results["other"].metadata["notes"].value
    )
    assert not run(checks.CHECKS_BY_NAME["no_url_left_claimed"], world).passed  # alone: every topic


# ---------------------------------------------------------------------------------------------- dedup
def test_merges_name_final_survivors_and_merged_stories_leave_the_topic(world: dict) -> None:
    store: TopicStore = world["store"]
    survivor_url = "https://news.example.com/2024/01/10/summit"
    ids = add_topic_stories(store, stories(survivor_url, survivor_url.replace("https", "http")))
    ids |= add_topic_stories(store, stories("https://news.example.com/2024/01/10/other"))
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    merge_duplicate_stories(store, topics_id)  # the same lossy URL: one is merged into the other
    for check in (
        checks.CHECKS_BY_NAME["no_story_merged_into_a_merged_story"],
        checks.CHECKS_BY_NAME["no_merged_story_left_in_the_topic"],
    ):
        result = run(check, world)
        assert result.passed and result.metadata["merges"].value == 1, result.description
    with store.engine.connect() as conn:
        (source, target) = conn.execute(
            select(
                s.topic_merged_stories_map.c.source_stories_id, s.topic_merged_stories_map.c.target_stories_id
            )
        ).one()

    # the survivor merged later into a third story, recorded without re-pointing the first merge: a chain
    third = ids["https://news.example.com/2024/01/10/other"]
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.topic_merged_stories_map).values(
                topics_id=topics_id,
                source_stories_id=target,
                target_stories_id=third,
                reason="same title and day",
                merged_at=now_utc(),
            )
        )
        conn.execute(delete(s.topic_stories).where(s.topic_stories.c.stories_id == target))
    chain = run(checks.CHECKS_BY_NAME["no_story_merged_into_a_merged_story"], world)
    assert not chain.passed and chain.severity == dg.AssetCheckSeverity.WARN
    assert found(chain, "stories_id") == [str(source)] and found(chain, "which_was_merged_into") == [
        str(third)
    ]

    with store.engine.begin() as conn:  # a merged story back in the topic (a spider re-adding it, say)
        conn.execute(
            insert(s.topic_stories).values(
                topics_id=topics_id, stories_id=source, iteration=2, added_at=now_utc()
            )
        )
    left = run(checks.CHECKS_BY_NAME["no_merged_story_left_in_the_topic"], world)
    assert not left.passed and left.severity == dg.AssetCheckSeverity.ERROR
    assert found(left, "stories_id") == [str(source)] and found(left, "still_a_topic_story") == ["True"]


def test_duplicate_media_point_at_final_media_and_hold_no_topic_story(world: dict) -> None:
    store: TopicStore = world["store"]
    add_topic_stories(
        store,
        stories(
            "https://old.test/2024/01/10/a", "https://mid.test/2024/01/10/b", "https://new.test/2024/01/10/c"
        ),
    )
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    declare_duplicate_media(
        store, [("http://old.test/", "http://new.test/"), ("http://mid.test/", "http://new.test/")]
    )
    assert run(checks.CHECKS_BY_NAME["no_medium_points_to_a_duplicate"], world).passed
    waiting = run(checks.CHECKS_BY_NAME["no_topic_story_in_a_duplicate_medium"], world)
    assert not waiting.passed and sorted(found(waiting, "medium")) == ["mid.test", "old.test"]
    merge_duplicate_media(store, topics_id)
    merged = run(checks.CHECKS_BY_NAME["no_topic_story_in_a_duplicate_medium"], world)
    assert merged.passed and merged.metadata["topic_stories"].value >= 1

    with store.engine.begin() as conn:  # old.test now points at mid.test, itself a duplicate: a chain
        media = dict(conn.execute(select(s.media.c.name, s.media.c.media_id)).all())
        conn.execute(
            update(s.media).where(s.media.c.name == "old.test").values(dup_media_id=media["mid.test"])
        )
    chain = run(checks.CHECKS_BY_NAME["no_medium_points_to_a_duplicate"], world)
    assert not chain.passed and chain.severity == dg.AssetCheckSeverity.WARN
    assert found(chain, "medium") == ["old.test"] and found(chain, "points_to") == ["mid.test"]


def test_near_duplicate_groups_are_consistent(world: dict) -> None:
    store: TopicStore = world["store"]
    ids = list(
        add_topic_stories(store, stories(*(f"https://m{i}.test/2024/01/10/copy" for i in range(3)))).values()
    )
    topics_id = store.topic_row(TOPIC.name)["topics_id"]

    def group(members: list[int], size: int) -> list[dict]:
        return [
            {"topics_id": topics_id, "stories_id": sid, "group_stories_id": members[0], "group_size": size}
            for sid in members
        ]

    with store.engine.begin() as conn:
        conn.execute(insert(s.topic_near_dup_groups), group(ids[:2], 2))
    good = run(checks.CHECKS_BY_NAME["near_duplicate_groups_consistent"], world)
    assert good.passed and good.metadata["groups"].value == 1
    with store.engine.begin() as conn:  # a member lost: the recorded size says 3
        conn.execute(delete(s.topic_near_dup_groups))
        conn.execute(insert(s.topic_near_dup_groups), group(ids, 3)[:2])
    bad = run(checks.CHECKS_BY_NAME["near_duplicate_groups_consistent"], world)
    assert not bad.passed and "size recorded 3..3, 2 members" in found(bad, "problem")[0]


# ---------------------------------------------------------------------------------------------- clusters
def test_every_topic_story_has_a_listed_cluster(world: dict, tmp_path: Path) -> None:
    store: TopicStore = world["store"]
    ids = sorted(
        add_topic_stories(store, stories(*(f"https://m.test/2024/01/10/{i}" for i in range(4)))).values()
    )
    folder = tmp_path / "home" / "exports" / "clusters" / TOPIC.name / "overall"
    folder.mkdir(parents=True)

    def write(labelled: list[int], labels: list[int], listed: list[int]) -> None:
        pq.write_table(pa.table({"stories_id": labelled, "cluster": labels}), folder / "stories.parquet")
        pq.write_table(pa.table({"cluster": listed}), folder / "clusters.parquet")

    write(ids, [0, 0, 1, 1], [0, 1])
    good = run(checks.CHECKS_BY_NAME["every_topic_story_has_a_cluster"], world)
    assert good.passed and good.metadata["topic_stories_checked"].value == 4
    write(ids[:3], [0, 0, 1], [0, 1])  # clustered before the last story joined the topic
    stale = run(checks.CHECKS_BY_NAME["every_topic_story_has_a_cluster"], world)
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert found(stale, "stories_id") == [str(ids[3])]
    write(ids, [0, 0, 1, 7], [0, 1])  # a cluster the clusters table does not list: a broken file
    broken = run(checks.CHECKS_BY_NAME["every_topic_story_has_a_cluster"], world)
    assert not broken.passed and broken.severity == dg.AssetCheckSeverity.ERROR
    assert found(broken, "problem") == ["cluster 7 is not listed"]


# ---------------------------------------------------------------------------------------------- seeds
def test_every_seed_url_is_recorded(world: dict, tmp_path: Path) -> None:
    store: TopicStore = world["store"]
    (tmp_path / "seeds.csv").write_text(
        "url\nhttps://a.test/one\nhttps://a.test/two\nnot a url\n", encoding="utf-8"
    )
    (tmp_path / "topics.yaml").write_text(
        "topics:\n  - name: climate\n    query: climate\n    start_date: 2024-01-01\n"
        "    end_date: 2024-03-31\n    seed_urls: [seeds.csv]\n",
        encoding="utf-8",
    )
    topics_file = TopicsFileResource(path=str(tmp_path / "topics.yaml"))
    topic = load_topics(tmp_path / "topics.yaml").topics[0]
    topics_id = store.upsert_topic(topic)
    store.add_seed_urls(
        topics_id,
        [{"url": u, "source": "csv:seeds.csv"} for u in ("https://a.test/one", "https://a.test/two")],
    )
    good = run(checks.CHECKS_BY_NAME["every_seed_url_recorded"], world, topics_file=topics_file)
    assert good.passed and good.metadata["seeds_recorded"].value == 2  # the bad CSV row is the seeds asset's

    with store.engine.begin() as conn:
        conn.execute(delete(s.topic_seed_urls).where(s.topic_seed_urls.c.url == "https://a.test/two"))
        conn.execute(update(s.topic_seed_urls).values(processed=True))  # imported, but no spider URL was made
    bad = run(checks.CHECKS_BY_NAME["every_seed_url_recorded"], world, topics_file=topics_file)
    assert not bad.passed and sorted(found(bad, "problem")) == [
        "in seeds.csv, not recorded",
        "processed, but not a URL of the spider",
    ]


# ---------------------------------------------------------------------------------------------- snapshots
def test_timespan_counts_are_consistent_with_each_other_and_the_manifest(world: dict, tmp_path: Path) -> None:
    store: TopicStore = world["store"]
    topics_id = store.upsert_topic(TOPIC)
    timespans = [  # (period, start, end exclusive, stories, story links, media, medium links)
        ("overall", date(2024, 1, 1), date(2024, 4, 1), 10, 6, 4, 3),
        ("monthly", date(2024, 1, 1), date(2024, 2, 1), 6, 4, 3, 2),
        ("monthly", date(2024, 2, 1), date(2024, 4, 1), 4, 2, 2, 1),
        ("weekly", date(2024, 1, 1), date(2024, 1, 8), 6, 5, 3, 2),
        ("weekly", date(2024, 1, 8), date(2024, 4, 1), 3, 1, 2, 1),
    ]
    folder = tmp_path / "home" / "exports" / "snapshots" / TOPIC.name / "key"
    folder.mkdir(parents=True)
    manifest = {
        "snapshot_key": "key",
        "files": {},
        "timespans": [
            {
                "key": f"{period}_{start}",
                "period": period,
                "name": period,
                "start_date": start.isoformat(),
                "last_date": (end - timedelta(days=1)).isoformat(),
                "counts": dict(
                    zip(
                        ("story_count", "story_link_count", "medium_count", "medium_link_count"),
                        counts,
                        strict=True,
                    )
                ),
            }
            for period, start, end, *counts in timespans
        ],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with store.engine.begin() as conn:
        snapshots_id = conn.execute(
            insert(s.snapshots)
            .values(
                topics_id=topics_id,
                snapshot_key="key",
                snapshot_date=now_utc(),
                state="completed",
                iteration=1,
                provenance_json="{}",
                path=f"exports/snapshots/{TOPIC.name}/key",
            )
            .returning(s.snapshots.c.snapshots_id)
        ).scalar_one()
        conn.execute(
            insert(s.timespans),
            [
                dict(
                    zip(
                        (
                            "period",
                            "start_date",
                            "end_date",
                            "story_count",
                            "story_link_count",
                            "medium_count",
                            "medium_link_count",
                        ),
                        row,
                        strict=True,
                    ),
                    snapshots_id=snapshots_id,
                )
                for row in timespans
            ],
        )
    good = run(checks.CHECKS_BY_NAME["timespan_counts_consistent"], world)
    assert good.passed and good.metadata["timespans_checked"].value == 5, found(good, "problem")

    with store.engine.begin() as conn:  # a week's links counted twice in the store, not in the files
        conn.execute(
            update(s.timespans)
            .where(s.timespans.c.period == "weekly", s.timespans.c.start_date == date(2024, 1, 8))
            .values(story_link_count=2, medium_count=4)
        )
    bad = run(checks.CHECKS_BY_NAME["timespan_counts_consistent"], world)
    problems = found(bad, "problem")
    assert not bad.passed and bad.metadata["problems_found"].value == 4, problems
    assert "4 media but 3 stories" in problems[0]
    assert any("monthly timespans add up to 6, weekly to 7" in p for p in problems)
    assert any("exceed the overall 6" in p for p in problems)
    assert any(p.startswith("store {") and "!= files" in p for p in problems)


# ---------------------------------------------------------------------------------------------- archive
def test_no_drop_file_is_stuck(world: dict, tmp_path: Path) -> None:
    from assets.archive import archive_stories

    drops = tmp_path / "drops"
    drops.mkdir()
    row = "url,title,text,publish_date,medium\nhttps://www.herald.test/2026/01/10/a,Summit,Climate text.,2026-01-10,Herald\n"
    (drops / "drop.csv").write_text(row, encoding="utf-8")
    resources = {**world["resources"], "drops": ArchiveDropsResource(drops_dir=str(drops))}
    result = dg.materialize(
        [archive_stories, checks.CHECKS_BY_NAME["no_drop_file_stuck"]], resources=resources
    )
    (loaded,) = result.get_asset_check_evaluations()
    assert loaded.passed and loaded.metadata["files_checked"].value == 1
    (drops / "drop.csv").rename(drops / "renamed.csv")  # the same content under another name: still recorded
    assert run(checks.CHECKS_BY_NAME["no_drop_file_stuck"], world, drops=resources["drops"]).passed

    (drops / "unread.csv").write_text(
        row.replace("/a,", "/b,"), encoding="utf-8"
    )  # never loaded nor recorded
    stuck = run(checks.CHECKS_BY_NAME["no_drop_file_stuck"], world, drops=resources["drops"])
    assert not stuck.passed and found(stuck, "file") == [str(drops / "unread.csv")]


def test_no_ccnews_file_and_no_outlet_is_stuck(world: dict) -> None:
    store: TopicStore = world["store"]
    now = now_utc()
    long_ago = now - timedelta(hours=3)
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.cc_news_files),
            [
                {
                    "path": "CC-NEWS-20260105000000-00001.warc.gz",
                    "day": date(2026, 1, 5),
                    "state": "completed",
                    "updated_at": long_ago,
                },
                {
                    "path": "CC-NEWS-20260105010000-00002.warc.gz",
                    "day": date(2026, 1, 5),
                    "state": "loading",
                    "updated_at": now,
                },
            ],
        )
        conn.execute(
            insert(s.cc_outlet_queue).values(
                domain="herald.test", collection="CC-MAIN-2026-05", state="running", heartbeat_at=now
            )
        )
    commoncrawl = CommonCrawlResource(lease_seconds=900)
    assert run(checks.CHECKS_BY_NAME["no_ccnews_file_stuck"], world).passed
    assert run(checks.CHECKS_BY_NAME["no_outlet_stuck"], world, commoncrawl=commoncrawl).passed

    with store.engine.begin() as conn:  # the loader and the worker died: no progress for hours
        conn.execute(update(s.cc_news_files).values(updated_at=long_ago))
        conn.execute(update(s.cc_outlet_queue).values(heartbeat_at=long_ago))
    ccnews = run(checks.CHECKS_BY_NAME["no_ccnews_file_stuck"], world)
    assert not ccnews.passed and found(ccnews, "path") == ["CC-NEWS-20260105010000-00002.warc.gz"]
    outlets = run(checks.CHECKS_BY_NAME["no_outlet_stuck"], world, commoncrawl=commoncrawl)
    assert not outlets.passed and outlets.severity == dg.AssetCheckSeverity.WARN
    assert found(outlets, "domain") == ["herald.test"]


# ---------------------------------------------------------------------------------------------- the code location
def test_every_asset_has_owners_a_code_version_and_its_checks() -> None:
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert set(CODE_VERSIONS) == keys  # one version per asset, none left over
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.owners == asset_owners() and node.code_version == CODE_VERSIONS[key.to_user_string()], key
    registered = {check_key.name for check_key in graph.asset_check_keys}
    assert {check.check_key.name for check in checks.ASSET_CHECKS} <= registered
    # every stage has a check, but the WARC export, which reads its files back and fails the run itself
    checked_groups = {graph.get(check_key.asset_key).group_name for check_key in graph.asset_check_keys}
    groups = {graph.get(key).group_name for key in graph.get_all_asset_keys()}
    assert groups - checked_groups == {"exports"}
    assert graph.get(dg.AssetKey("ccnews_stories")).freshness_policy == CCNEWS_FRESHNESS


def test_owners_come_from_the_setting_or_the_default() -> None:
    assert asset_owners({}) == ["team:topicmap"]
    assert asset_owners({"TOPICMAP_ASSET_OWNERS": "team:data, ops@example.org"}) == [
        "team:data",
        "ops@example.org",
    ]
    with pytest.raises(ValueError, match="TOPICMAP_ASSET_OWNERS: 'data team'"):
        asset_owners({"TOPICMAP_ASSET_OWNERS": "data team"})


def test_freshness_applies_while_a_topic_has_a_cadence() -> None:
    spans = [(date(2026, 1, 1), date(2026, 4, 30))]

    def at(day: date, hour: int = 12) -> datetime:
        return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)

    # no 3-day stage due yet, and after the last 30-day stage: nothing can be late, whatever the asset did
    assert click_verdict(spans, at(date(2026, 1, 4)), None)[0]
    assert click_verdict(spans, at(date(2026, 6, 2)), None)[0]
    # the last day's 30-day stage is due on June 1: a click run two days old is an error, 30 hours a warning
    now = at(date(2026, 5, 31))
    passed, severity, why = click_verdict(spans, now, now - timedelta(hours=49))
    assert not passed and severity == dg.AssetCheckSeverity.ERROR and "over 48 h" in why
    passed, severity, _ = click_verdict(spans, now, now - timedelta(hours=30))
    assert not passed and severity == dg.AssetCheckSeverity.WARN
    assert click_verdict(spans, now, now - timedelta(hours=20))[0]
    assert not click_verdict(spans, now, None)[0]
    # snapshots: from the start to the end + 31 days, one written in the week before the last Monday 07:00
    assert snapshot_verdict(spans, at(date(2025, 12, 31)), None)[0]
    assert snapshot_verdict(spans, at(date(2026, 6, 2)), None)[0]
    assert snapshot_verdict([], at(date(2026, 5, 1)), None)[0]
    friday = at(date(2026, 5, 1))  # the last deadline: Monday April 27, 07:00
    assert snapshot_verdict(spans, friday, datetime(2026, 4, 20, 8, tzinfo=UTC))[0]
    passed, _, why = snapshot_verdict(spans, friday, datetime(2026, 4, 20, 6, tzinfo=UTC))
    assert not passed and "2026-04-20 07:00" in why
    assert last_deadline(datetime(2026, 4, 27, 6, tzinfo=UTC)) == datetime(2026, 4, 20, 7, tzinfo=UTC)
