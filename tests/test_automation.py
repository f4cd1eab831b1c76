"""The code location as a data engineer meets it: named jobs, pools and run tags, the lineage, honest descriptions,
the automation (running by default, each requesting only what is missing or stale), and Bit.ly without a token."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import insert, update

from assets.partitions import apply_calendar, declared_calendar
from assets.social import click_totals
from orchestration.definitions import defs
from resources.social import BitlyResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.automation import click_totals_catch_up, snapshot_refresh, weekly_snapshots
from sensors.clicks import click_refetch_3d, click_refetch_30d
from sensors.topics import topic_registry
from tests.social_fixtures import TOPIC, add_topic_stories, at, week_of_stories
from topicmap import settings
from topicmap.social import refetch
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import load_topics

JAN10 = date(2024, 1, 10)
NOW = at(date(2024, 3, 15), 6)


def test_every_stage_runs_as_a_named_job_with_its_tags() -> None:
    jobs = {
        name: {k.to_user_string() for k in defs.resolve_job_def(name).asset_layer.executable_asset_keys}
        for name in ("spider_iteration_job", "post_spider_job", "click_totals_job", "snapshot_job")
    }
    assert jobs["spider_iteration_job"] == {"fetched_links", "relevant_stories", "topic_links"}
    assert jobs["post_spider_job"] == {
        "deduped_media",
        "media_tags",
        "deduped_stories",
        "near_duplicates",
        "story_statistics",
        "story_warc_archive",
        "clusters",
        "snapshots",
    }
    assert jobs["click_totals_job"] == {"click_totals"} and jobs["snapshot_job"] == {"snapshots"}
    assert defs.resolve_job_def("click_totals_job").tags["topicmap/api"] == "bitly"
    assert defs.resolve_job_def("post_spider_job").tags["topicmap/api"] == "facebook"
    # every sensor launches named jobs, never an anonymous asset selection
    targets = {
        name: {job.name for job in defs.resolve_sensor_def(name).jobs}
        for name in ("topic_registry", "spider_iterations", "click_refetch_3d", "click_refetch_30d")
    }
    assert targets == {
        "topic_registry": {"seeds_job"},
        "spider_iterations": {"spider_iteration_job", "post_spider_job"},
        "click_refetch_3d": {"click_totals_job"},
        "click_refetch_30d": {"click_totals_job"},
    }


def test_pools_retries_and_stage_tags() -> None:
    graph = defs.resolve_asset_graph()
    pools = {
        key.to_user_string(): graph.get(key).pools
        for key in graph.get_all_asset_keys()
        if graph.get(key).pools
    }
    assert pools["fetched_links"] == {"spider"}
    assert pools["click_totals"] == pools["story_statistics"] == {"social_api"}
    assert pools["snapshots"] == pools["clusters"] == pools["deduped_media"] == {"analysis"}
    assert pools["archive_stories"] == pools["story_warc_archive"] == {"archive"}
    for key in ("fetched_links", "click_totals", "story_statistics"):
        policy = graph.get(dg.AssetKey(key)).assets_def.op.retry_policy
        assert policy is not None and policy.backoff == dg.Backoff.EXPONENTIAL and policy.delay > 0, key
    stages = {graph.get(key).tags.get("topicmap/stage") for key in graph.get_all_asset_keys()}
    assert {"spider", "social", "dedup", "snapshots", "clusters", "exports", "archive", "topics"} <= stages


def test_lineage_is_whole_and_partition_mappings_explicit() -> None:
    graph = defs.resolve_asset_graph()
    clicks = graph.get(dg.AssetKey("click_totals"))
    assert dg.AssetKey("relevant_stories") in clicks.parent_keys
    mapping = clicks.partition_mappings[dg.AssetKey("relevant_stories")]
    assert isinstance(mapping, dg.AllPartitionMapping)
    snapshot = graph.get(dg.AssetKey("snapshots"))
    assert {dg.AssetKey("click_totals"), dg.AssetKey("story_statistics")} <= snapshot.parent_keys
    assert isinstance(snapshot.partition_mappings[dg.AssetKey("click_totals")], dg.AllPartitionMapping)
    assert isinstance(
        snapshot.partition_mappings[dg.AssetKey("deduped_stories")], dg.IdentityPartitionMapping
    )
    warc = graph.get(dg.AssetKey("story_warc_archive"))
    assert warc.group_name == "exports" and warc.parent_keys == {dg.AssetKey("deduped_stories")}


def test_descriptions_render_as_written() -> None:
    """The UI renders descriptions as markdown with HTML: a bare <topic> would vanish."""
    texts = [spec.description or "" for spec in defs.resolve_all_asset_specs()]
    texts += [defs.resolve_sensor_def(sensor.name).description or "" for sensor in defs.sensors or []]
    texts += [schedule.description or "" for schedule in defs.schedules or []]
    texts += [job.description or "" for job in defs.jobs or []]
    hidden = [t for t in texts if re.search(r"<[A-Za-z_][^>]*>", t)]
    assert hidden == []
    assert any("`TOPICMAP_HOME/exports/snapshots/{topic}/{key}/`" in t for t in texts)


def test_scheduled_backfills_run_by_default_and_are_described() -> None:
    # none needs a credential to decide: each skips with its reason when there is nothing to do or no token
    for sensor in (click_totals_catch_up, snapshot_refresh):
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and sensor.description
        assert "Stopped" not in sensor.description
    assert weekly_snapshots.default_status == dg.DefaultScheduleStatus.RUNNING
    assert weekly_snapshots.cron_schedule == "0 5 * * 1" and weekly_snapshots.description
    assert {"weekly_snapshots"} <= {s.name for s in defs.schedules or []}
    # the daily CC-NEWS load downloads several GB of the public web a day: a deployment turns it on
    ccnews = defs.resolve_schedule_def("ccnews_yesterday")
    assert ccnews.default_status == dg.DefaultScheduleStatus.STOPPED


def test_click_days_are_the_declared_topics_days(tmp_path: Path) -> None:
    topics = tmp_path / "topics.yaml"
    topics.write_text(
        "topics:\n  - {name: a, query: x, start_date: 2026-02-01, end_date: 2026-03-01}\n"
        "  - {name: b, query: y, start_date: 2025-11-15, end_date: 2026-01-01}\n  - broken\n",
        encoding="utf-8",
    )
    declared = load_topics(topics).topics
    days = declared_calendar(declared, date(2026, 11, 26), {})["click_days"]
    # each topic's days, no day between them (January 2 to 31) and none after the last end
    assert days[0] == "2025-11-15" and days[-1] == "2026-03-01"
    assert "2026-01-01" in days and "2026-01-15" not in days and "2026-02-01" in days
    assert len(days) == 48 + 29
    # the setting is a floor; a bad one is refused by name
    floored = declared_calendar(declared, date(2026, 11, 26), {settings.CLICKS_START_DATE.name: "2025-12-31"})
    assert floored["click_days"][0] == "2025-12-31"
    with pytest.raises(ValueError, match=settings.CLICKS_START_DATE.name):
        declared_calendar(declared, date(2026, 11, 26), {settings.CLICKS_START_DATE.name: "last tuesday"})
    # an open-ended topic's days run to yesterday; its first days only, before its start is over
    topics.write_text(
        "topics:\n  - {name: a, query: x, start_date: 2026-02-01, end_date: open}\n", encoding="utf-8"
    )
    open_ended = load_topics(topics, date(2026, 2, 10)).topics
    assert declared_calendar(open_ended, date(2026, 2, 10), {})["click_days"][-1] == "2026-02-09"


@pytest.fixture(scope="module")
def calendar_home(dagster_home_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The instance ``store_world`` starts from, made once for the module (each test's is a copy): the topic's
    partition and its days, as the topic registry adds them."""
    home = shutil.copytree(dagster_home_template, tmp_path_factory.mktemp("automation") / "dagster_home")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions("topics", [TOPIC.name])
        apply_calendar(instance, [TOPIC], NOW.date())
    return home


@pytest.fixture
def store_world(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_sqlite_store: Callable[[Path], str],
    calendar_home: Path,
) -> Iterator[dict]:
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    db_url = fresh_sqlite_store(tmp_path / "store.sqlite3")
    store = TopicStore.open(db_url)
    add_topic_stories(store, week_of_stories(JAN10, 3, 2))
    monkeypatch.setattr(refetch, "current_time", lambda: NOW)
    home = shutil.copytree(calendar_home, tmp_path / "dagster_home")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield {"store": store, "db_url": db_url, "instance": instance, "tmp": tmp_path}
    store.dispose()


def _resources(world: dict, token: str = "") -> dict:
    return {
        "store": TopicStoreResource(database_url=world["db_url"]),
        "bitly": BitlyResource(token=token, base_url="http://127.0.0.1:9/bitly"),
    }


def test_without_a_bitly_token_no_click_run_is_requested_and_the_reason_shows(store_world: dict) -> None:
    for sensor in (click_refetch_3d, click_refetch_30d, click_totals_catch_up):
        result = sensor(
            dg.build_sensor_context(instance=store_world["instance"], resources=_resources(store_world))
        )
        assert not result.run_requests
        assert "Bit.ly is not configured" in result.skip_reason.skip_message, sensor.name


def test_click_totals_without_a_token_succeeds_materializing_nothing(store_world: dict) -> None:
    result = dg.materialize(
        [click_totals],
        instance=store_world["instance"],
        resources=_resources(store_world),
        partition_key=JAN10.isoformat(),
    )
    assert result.success
    assert result.asset_materializations_for_node("click_totals") == []  # the day stays missing
    (observation,) = [
        e.asset_observation_data.asset_observation for e in result.get_asset_observation_events()
    ]
    assert observation.partition == JAN10.isoformat()
    assert "skipped: Bit.ly is not configured" in observation.metadata["skipped"].value


def test_catch_up_launches_one_backfill_over_the_due_days_once_a_day(store_world: dict) -> None:
    context = dg.build_sensor_context(
        instance=store_world["instance"], resources=_resources(store_world, "token"), definitions=defs
    )
    # evaluate_tick validates the request as the daemon does (a backfill needs a sensor targeting assets)
    (request,) = click_totals_catch_up.evaluate_tick(context).run_requests
    result = click_totals_catch_up(context)
    assert result.run_requests[0].asset_graph_subset == request.asset_graph_subset
    assert request.requires_backfill_daemon()
    partitions = {p.partition_key for p in request.asset_graph_subset.iterate_asset_partitions()}
    assert partitions == {"2024-01-10", "2024-01-11", "2024-01-12"}
    assert request.tags["topicmap/api"] == "bitly" and result.cursor == "2024-03-15"
    # the same day again: nothing; clicks stored for one day: that day is no longer due
    again = click_totals_catch_up(
        dg.build_sensor_context(
            instance=store_world["instance"],
            resources=_resources(store_world, "token"),
            definitions=defs,
            cursor=result.cursor,
        )
    )
    assert not again.run_requests and "already caught up" in again.skip_reason.skip_message
    store: TopicStore = store_world["store"]
    with store.engine.begin() as conn:
        ids = [r.stories_id for r in conn.execute(s.stories.select()) if r.publish_date.day == 10]
        conn.execute(
            insert(s.bitly_clicks_total),
            [
                {
                    "stories_id": sid,
                    "publish_day": JAN10,
                    "clicks_3d": 1,
                    "clicks_30d": 2,
                    "fetched_3d_at": NOW,
                    "fetched_30d_at": NOW,
                }
                for sid in ids
            ],
        )
    later = click_totals_catch_up(
        dg.build_sensor_context(
            instance=store_world["instance"],
            resources=_resources(store_world, "token"),
            definitions=defs,
            cursor="2024-03-14",
        )
    )
    (request,) = later.run_requests
    assert {p.partition_key for p in request.asset_graph_subset.iterate_asset_partitions()} == {
        "2024-01-11",
        "2024-01-12",
    }


def test_no_click_run_is_requested_for_a_day_that_is_no_partition(store_world: dict) -> None:
    """Stories dated outside every topic's dates (no partition of the day) are not requested."""
    store_world["instance"].delete_dynamic_partition("click_days", "2024-01-12")
    context = dg.build_sensor_context(
        instance=store_world["instance"], resources=_resources(store_world, "token"), definitions=defs
    )
    (request,) = click_totals_catch_up(context).run_requests
    days = {p.partition_key for p in request.asset_graph_subset.iterate_asset_partitions()}
    assert days == {"2024-01-10", "2024-01-11"}  # the 12th is no partition
    refetches = click_refetch_30d(
        dg.build_sensor_context(instance=store_world["instance"], resources=_resources(store_world, "token"))
    ).run_requests
    assert [r.partition_key for r in refetches] == ["2024-01-10", "2024-01-11"]


def _snapshot_row(store: TopicStore, when: datetime) -> None:
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.snapshots).values(
                topics_id=topics_id,
                snapshot_key=f"k{when.timestamp()}",
                snapshot_date=when,
                state="completed",
                iteration=1,
                provenance_json="{}",
                path="/nowhere",
            )
        )


def test_snapshots_are_requested_only_for_spidered_topics_missing_or_stale(store_world: dict) -> None:
    store: TopicStore = store_world["store"]
    instance = store_world["instance"]
    resources = {"store": TopicStoreResource(database_url=store_world["db_url"])}

    def weekly_answer() -> dg.SkipReason | list[dg.RunRequest]:
        # as a context manager: the schedule context opens its own instance from the ref and must close it
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            return weekly_snapshots(context)

    def weekly() -> list[dg.RunRequest]:
        answer = weekly_answer()
        return [] if isinstance(answer, dg.SkipReason) else list(answer)

    def late() -> dg.SensorResult:
        return snapshot_refresh(dg.build_sensor_context(instance=instance, resources=resources))

    assert weekly() == []  # still spidering
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    store.set_topic_state(topics_id, "spidering completed", "done")
    (missing,) = weekly()  # spidered, no snapshot yet
    assert missing.partition_key == TOPIC.name and missing.tags["topicmap/snapshot_reason"] == "weekly"
    assert not late().run_requests  # no snapshot yet is the weekly schedule's (and post_spider_job's) work
    _snapshot_row(store, datetime.now(UTC) + timedelta(minutes=1))
    assert weekly() == [] and not late().run_requests  # up to date
    # Facebook statistics arrive after the snapshot: the late-metrics sensor asks for a new one, once
    with store.engine.begin() as conn:
        sid = conn.execute(s.topic_stories.select()).first().stories_id
        conn.execute(
            insert(s.story_statistics).values(
                stories_id=sid,
                facebook_share_count=3,
                facebook_api_collect_date=datetime.now(UTC) + timedelta(hours=1),
            )
        )
    (request,) = late().run_requests
    assert request.partition_key == TOPIC.name and request.run_key.startswith(f"snapshot:{TOPIC.name}:late")
    assert late().run_requests[0].run_key == request.run_key  # replayed tick: same key, deduplicated
    # a topic whose run is in progress is left alone
    with store.engine.begin() as conn:
        conn.execute(update(s.topics).values(state="spidering completed"))
    instance.create_run_for_job(
        defs.resolve_job_def("snapshot_job"),
        status=dg.DagsterRunStatus.STARTED,
        tags={"topicmap/topic": TOPIC.name, "dagster/partition": TOPIC.name},
    )
    assert not late().run_requests
    # a topic removed from the topics file keeps its data but is no longer refreshed
    with store.engine.begin() as conn:
        conn.execute(update(s.topics).values(removed_from_config=True))
    skipped = weekly_answer()
    assert isinstance(skipped, dg.SkipReason) and "removed from the topics file" in skipped.skip_message


def test_a_topic_removed_from_the_topics_file_gets_no_snapshot_run_until_declared_again(
    store_world: dict,
) -> None:
    store: TopicStore = store_world["store"]
    instance = store_world["instance"]
    topics = store_world["tmp"] / "topics.yaml"
    declaration = (
        f"topics:\n  - {{name: {TOPIC.name}, query: {TOPIC.query}, start_date: {TOPIC.start_date}, "
        f"end_date: {TOPIC.end_date}}}\n"
    )
    topics.write_text(declaration, encoding="utf-8")
    resources = {
        "store": TopicStoreResource(database_url=store_world["db_url"]),
        "topics_file": TopicsFileResource(path=str(topics)),
    }
    # the topic was seeded and spidered (a run used its partition), snapshotted, then got Facebook statistics
    instance.report_runless_asset_event(dg.AssetMaterialization("seeds", partition=TOPIC.name))
    instance.create_run_for_job(
        defs.resolve_job_def("snapshot_job"),
        status=dg.DagsterRunStatus.SUCCESS,
        tags={"topicmap/topic": TOPIC.name, "dagster/partition": TOPIC.name},
    )
    store.set_topic_state(store.topic_row(TOPIC.name)["topics_id"], "spidering completed", "done")
    _snapshot_row(store, datetime.now(UTC) - timedelta(hours=1))
    with store.engine.begin() as conn:
        sid = conn.execute(s.topic_stories.select()).first().stories_id
        conn.execute(
            insert(s.story_statistics).values(
                stories_id=sid, facebook_share_count=3, facebook_api_collect_date=datetime.now(UTC)
            )
        )

    def registry(cursor: str | None) -> dg.SensorResult:
        return topic_registry(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))

    def weekly() -> dg.SkipReason | list[dg.RunRequest]:
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            return weekly_snapshots(context)

    def late() -> dg.SensorResult:
        return snapshot_refresh(dg.build_sensor_context(instance=instance, resources=resources))

    declared = registry(None)
    assert [r.partition_key for r in late().run_requests] == [TOPIC.name]
    # dropped from the file: its partition and data are kept, and neither the schedule nor the sensor asks for a
    # snapshot run (which would fail at once), each saying why
    topics.write_text("topics: []\n", encoding="utf-8")
    removed = registry(declared.cursor)
    refresh = late()
    assert not refresh.run_requests
    assert f"{TOPIC.name}: removed from the topics file" in refresh.skip_reason.skip_message
    skipped = weekly()
    assert isinstance(skipped, dg.SkipReason)
    assert f"{TOPIC.name}: removed from the topics file" in skipped.skip_message
    # declared again, unchanged: not seeded again, yet refreshed again now that it is stale
    topics.write_text(declaration, encoding="utf-8")
    again = registry(removed.cursor)
    assert not again.run_requests
    assert [r.partition_key for r in late().run_requests] == [TOPIC.name]
    assert [r.partition_key for r in weekly()] == [TOPIC.name]
