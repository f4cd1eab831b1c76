"""The click refetch sensors under a frozen clock: due / not yet due, catch-up after downtime in bounded ticks, late
stories, busy days, and no duplicate requests — with the requested runs really executed against the stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import delete, func, insert, select

import sensors.clicks as click_sensors
from assets.partitions import apply_calendar
from assets.social import click_totals
from resources.store import TopicStoreResource
from sensors.clicks import click_refetch_3d, click_refetch_30d
from tests.social_fixtures import (
    TOPIC,
    add_topic_stories,
    at,
    click_table,
    dataset_for,
    social_resources,
    week_of_stories,
)
from topicmap.demo.standins import StandinServer, run_standin_server
from topicmap.social import refetch
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc

JAN10 = date(2024, 1, 10)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_store_url: str) -> Iterator[dict]:
    """A store with topic stories on Jan 10 (2), 11, 13 and 14 (none on the 12th), the stand-in, an instance."""
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    db_url = sqlite_store_url
    store = TopicStore.open(db_url)
    stories = [st for st in week_of_stories(JAN10, 5, 2) if st.publish_date.day != 12]
    stories = [st for st in stories if st.publish_date.day == 10 or st.url.endswith("-0")]
    add_topic_stories(store, stories)
    instance = dg.DagsterInstance.ephemeral()
    apply_calendar(instance, [TOPIC], date(2024, 12, 31))  # the topic's days, as the topic registry adds them
    with run_standin_server(dataset_for(stories, seed=9)) as server:
        yield {
            "store": store,
            "db_url": db_url,
            "server": server,
            "tmp": tmp_path,
            "stories": stories,
            "instance": instance,
        }
    store.dispose()


def _tick(world: dict, sensor: dg.SensorDefinition, now: datetime, cursor: str | None) -> dg.SensorResult:
    clock = lambda: now  # noqa: E731
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refetch, "current_time", clock)
        context = dg.build_sensor_context(
            instance=world["instance"],
            cursor=cursor,
            resources={
                "store": TopicStoreResource(database_url=world["db_url"]),
                "bitly": social_resources(world["server"], world["db_url"], world["tmp"])["bitly"],
            },
        )
        return sensor(context)


def _execute(world: dict, request: dg.RunRequest, now: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a requested run the way the daemon would: same partition, run config and tags."""
    monkeypatch.setattr(refetch, "current_time", lambda: now)
    server: StandinServer = world["server"]
    result = dg.materialize(
        [click_totals],
        instance=world["instance"],
        resources=social_resources(server, world["db_url"], world["tmp"]),
        partition_key=request.partition_key,
        run_config=request.run_config,
        tags=request.tags,
    )
    assert result.success


def _keys(result: dg.SensorResult) -> list[str]:
    return [request.run_key for request in result.run_requests or []]


def test_a_day_is_requested_once_its_stage_is_due_for_every_story(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    just_before = at(date(2024, 1, 13), 23, 59)
    early = _tick(world, click_refetch_3d, just_before, None)
    assert not early.run_requests and early.skip_reason and early.cursor is None

    due_at = at(date(2024, 1, 14))  # Jan 10 ended at Jan 11 00:00; + 3 days
    due = _tick(world, click_refetch_3d, due_at, None)
    (request,) = due.run_requests
    assert request.run_key == "clicks:2024-01-10:3d" and request.partition_key == "2024-01-10"
    assert request.run_config["ops"]["click_totals"]["config"] == {"stage": "3d"}
    assert request.tags[refetch.STAGE_TAG] == "3d"
    assert due.cursor == "2024-01-10"  # the cursor is one ISO day
    assert not _tick(world, click_refetch_30d, due_at, None).run_requests
    _execute(world, request, due_at, monkeypatch)
    table = click_table(world["store"])
    assert len(table) == 2 and all(
        r["clicks_3d"] is not None and r["clicks_30d"] is None for r in table.values()
    )

    # a day later only Jan 11 is new; Jan 10 is done and not asked for again
    next_day = _tick(world, click_refetch_3d, at(date(2024, 1, 15)), due.cursor)
    assert _keys(next_day) == ["clicks:2024-01-11:3d"] and next_day.cursor == "2024-01-11"


def test_catch_up_after_downtime_in_bounded_ticks_without_duplicates(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(click_sensors, "MAX_DAYS_PER_TICK", 2)
    later = at(date(2024, 3, 15), 9)  # every day's 30-day stage is due; the 3-day sensor leaves them to it
    assert not _tick(world, click_refetch_3d, later, None).run_requests
    requested: list[str] = []

    first = _tick(world, click_refetch_30d, later, None)
    assert _keys(first) == ["clicks:2024-01-10:30d", "clicks:2024-01-11:30d"] and first.cursor == "2024-01-11"
    assert _keys(_tick(world, click_refetch_30d, later, None)) == _keys(
        first
    )  # replay: same keys, deduplicated
    for request in first.run_requests:
        _execute(world, request, later, monkeypatch)
    requested += _keys(first)

    second = _tick(world, click_refetch_30d, later, first.cursor)
    assert _keys(second) == ["clicks:2024-01-13:30d", "clicks:2024-01-14:30d"]  # the 12th has no story
    for request in second.run_requests:
        _execute(world, request, later, monkeypatch)
    requested += _keys(second)

    third = _tick(world, click_refetch_30d, later, second.cursor)
    assert not third.run_requests and third.cursor == "2024-01-14"
    assert not _tick(world, click_refetch_30d, later, None).run_requests  # a replayed old cursor asks nothing
    assert len(requested) == len(set(requested)) == 4
    table = click_table(world["store"])
    assert len(table) == len(world["stories"])
    assert all(row["clicks_30d"] is not None and row["clicks_3d"] is not None for row in table.values())

    # a story published on Jan 11 that the spider finds only now: one late request for its day, stable on replay
    late_story = NewStory(
        "https://news.example.com/2024/01/11/found-late", "late", "x", at(date(2024, 1, 11), 7)
    )
    late_id = add_topic_stories(world["store"], [late_story])[late_story.url]
    world["server"].dataset.stories.update(dataset_for([late_story], seed=9).stories)
    late = _tick(world, click_refetch_30d, later, third.cursor)
    assert _keys(late) == [f"clicks:2024-01-11:30d:late-{late_id}"] and late.cursor == "2024-01-14"
    assert _keys(_tick(world, click_refetch_30d, later, third.cursor)) == _keys(late)
    _execute(world, late.run_requests[0], later, monkeypatch)
    assert click_table(world["store"])[late_id]["clicks_30d"] is not None
    assert not _tick(world, click_refetch_30d, later, late.cursor).run_requests


def test_days_with_a_click_run_in_progress_are_left_alone(world: dict) -> None:
    defs = dg.Definitions(
        assets=[click_totals],
        jobs=[dg.define_asset_job("click_job", selection=[click_totals])],
        resources=social_resources(world["server"], world["db_url"], world["tmp"]),
    )
    world["instance"].create_run_for_job(
        defs.resolve_job_def("click_job"),
        status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": "2024-01-10", refetch.STAGE_TAG: "30d"},
        asset_selection={click_totals.key},
    )
    result = _tick(world, click_refetch_30d, at(date(2024, 3, 15)), None)
    assert _keys(result)[0] == "clicks:2024-01-11:30d" and "clicks:2024-01-10:30d" not in _keys(result)
    # the cursor passed the busy day; if its run fails, it comes back once as a late request
    assert result.cursor == "2024-01-14"


def _merge(store: TopicStore, survivor_url: str, merged_url: str) -> tuple[int, int]:
    """Merge one topic story into another as dedup records it; (survivor's stories_id, the merge's id)."""
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    with store.engine.begin() as conn:
        ids = dict(conn.execute(select(s.stories.c.url, s.stories.c.stories_id)).all())
        survivor, merged = ids[survivor_url], ids[merged_url]
        conn.execute(
            insert(s.topic_merged_stories_map).values(
                topics_id=topics_id,
                source_stories_id=merged,
                target_stories_id=survivor,
                reason="same title and day",
                merged_at=now_utc(),
            )
        )
        conn.execute(delete(s.topic_stories).where(s.topic_stories.c.stories_id == merged))
        merge_id = conn.execute(
            select(func.max(s.topic_merged_stories_map.c.topic_merged_stories_map_id))
        ).scalar()
    return survivor, merge_id


def test_a_survivor_is_fetched_again_after_a_story_is_merged_into_it(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = at(date(2024, 3, 15), 9)
    first = _tick(world, click_refetch_30d, later, None)
    for request in first.run_requests:
        _execute(world, request, later, monkeypatch)
    assert not _tick(world, click_refetch_30d, later, first.cursor).run_requests
    store: TopicStore = world["store"]
    survivor_story, merged_story = world["stories"][:2]  # both published Jan 10
    before = {row_id: dict(row) for row_id, row in click_table(store).items()}
    survivor, merge_id = _merge(store, survivor_story.url, merged_story.url)
    before = before[survivor]

    again = _tick(world, click_refetch_30d, later, first.cursor)
    assert _keys(again) == [f"clicks:2024-01-10:30d:late-{survivor}-merge-{merge_id}"]
    assert _keys(_tick(world, click_refetch_30d, later, first.cursor)) == _keys(again)  # stable on replay
    _execute(world, again.run_requests[0], later, monkeypatch)
    after = click_table(store)[survivor]
    dataset = world["server"].dataset
    both = set(dataset.stories[survivor_story.url].distinct_bitlinks()) | set(
        dataset.stories[merged_story.url].distinct_bitlinks()
    )
    # the survivor's own URL has no bitlink in this dataset; the merged story's does, and now counts
    assert before["bitlinks_found"] < after["bitlinks_found"] == len(both)
    assert after["clicks_30d"] > before["clicks_30d"]
    assert not _tick(world, click_refetch_30d, later, again.cursor).run_requests


def test_a_merge_that_adds_no_clicks_settles_after_one_refetch(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refetch after a merge finds no more clicks than stored (Bit.ly knows none of the merged story's URLs):
    the figure and its fetch time stay, and the day is not requested again, tick after tick."""
    later = at(date(2024, 3, 15), 9)
    first = _tick(world, click_refetch_30d, later, None)
    for request in first.run_requests:
        _execute(world, request, later, monkeypatch)
    store: TopicStore = world["store"]
    survivor_story, merged_story = world["stories"][:2]
    del world["server"].dataset.stories[merged_story.url]  # no bitlink for the merged story's URLs
    survivor, merge_id = _merge(store, survivor_story.url, merged_story.url)
    before = dict(click_table(store)[survivor])

    again = _tick(world, click_refetch_30d, later, first.cursor)
    assert _keys(again) == [f"clicks:2024-01-10:30d:late-{survivor}-merge-{merge_id}"]
    _execute(world, again.run_requests[0], later, monkeypatch)
    after = click_table(store)[survivor]
    assert (after["clicks_30d"], after["fetched_30d_at"]) == (before["clicks_30d"], before["fetched_30d_at"])
    settled = _tick(world, click_refetch_30d, later, again.cursor)
    assert not settled.run_requests and settled.skip_reason is not None
