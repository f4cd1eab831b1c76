"""Facebook figures as stories join: the statistics sensor asks for a run whenever stories joined without a figure,
never beside another statistics or post-spider run of the topic, and the spider sensor's post-spider run waits for
it (the snapshot so still waits for every story's figure or soft failure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

import dagster as dg
from sqlalchemy import select

from assets.jobs import STAGE_TAG, STATISTICS_STAGE, run_tags
from assets.social import story_statistics
from resources.social import FacebookResource
from resources.store import TopicStoreResource
from sensors.statistics import statistics_as_stories_join
from tests import test_social_assets
from tests.social_fixtures import TOPIC, add_topic_stories, dataset_for, social_resources, week_of_stories
from topicmap.demo.standins import run_standin_server
from topicmap.social.joining import JoiningFacts, decide_statistics_run
from topicmap.spider.plan import SpiderFacts, decide
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

JAN10 = date(2024, 1, 10)
#: the fixture: a SQLite store and its URL
sqlite_store = test_social_assets.sqlite_store


def _tick(instance: dg.DagsterInstance, resources: dict) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance,
        resources={"store": resources["store"], "facebook": resources["facebook"]},
    )
    return statistics_as_stories_join(context)


def test_stories_that_join_are_measured_by_a_run_of_their_own_while_the_topic_is_spidered(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path
) -> None:
    store, db_url = sqlite_store
    first, later = week_of_stories(JAN10, 1, 3), week_of_stories(date(2024, 1, 11), 1, 2)
    ids = add_topic_stories(store, first)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC.name])
    with run_standin_server(dataset_for(first + later)) as server:
        resources = social_resources(server, db_url, tmp_path)
        tick = _tick(instance, resources)
        [request] = tick.run_requests
        assert request.job_name == "statistics_job" and request.partition_key == TOPIC.name
        assert request.run_key == f"statistics:{TOPIC.name}:through-{max(ids.values())}:awaiting-3"
        assert request.tags[STAGE_TAG] == STATISTICS_STAGE and request.tags["topicmap/api"] == "facebook"
        dg.materialize([story_statistics], instance=instance, resources=resources, partition_key=TOPIC.name)
        with store.engine.connect() as conn:
            measured = set(conn.execute(select(s.story_statistics.c.stories_id)).scalars())
        assert measured == set(ids.values())
        quiet = _tick(instance, resources)
        assert not quiet.run_requests
        assert "every story has its Facebook figure or soft failure" in str(quiet.skip_reason)
        # two more stories join: a run for them alone, under a key of its own
        more = add_topic_stories(store, later)
        [again] = _tick(instance, resources).run_requests
        assert again.run_key == f"statistics:{TOPIC.name}:through-{max(more.values())}:awaiting-2"


def test_nothing_is_requested_while_facebook_is_not_configured(
    sqlite_store: tuple[TopicStore, str],
) -> None:
    store, db_url = sqlite_store
    add_topic_stories(store, week_of_stories(JAN10, 1, 2))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC.name])
    resources = {"store": TopicStoreResource(database_url=db_url), "facebook": FacebookResource()}
    tick = _tick(instance, resources)
    assert not tick.run_requests and "Facebook is not configured" in str(tick.skip_reason)


def test_one_statistics_run_at_a_time_and_the_post_spider_run_waits_for_it() -> None:
    awaiting = JoiningFacts("climate", awaiting=4, newest_awaiting=17, runs_in_progress=0)
    assert decide_statistics_run(awaiting).run_key == "statistics:climate:through-17:awaiting-4"
    busy = decide_statistics_run(replace(awaiting, runs_in_progress=1))
    assert busy.run_key is None and "in progress" in busy.reason
    # spidering is done: the post-spider run (whose story_statistics fetches the rest) waits for the statistics run
    done = SpiderFacts("climate", True, "running", None, 3, 0, runs_in_progress=0, failed_attempts=0)
    assert decide(done, None, now=0.0).action == "post_spider"
    waiting = decide(replace(done, statistics_runs=1), None, now=0.0)
    assert waiting.action == "wait" and "Facebook statistics run" in waiting.reason
    # iterations go on beside it
    spidering = replace(done, pending_iteration=3, statistics_runs=1)
    assert decide(spidering, None, now=0.0).action == "run_iteration"


def test_a_run_of_story_statistics_alone_is_tagged_with_the_statistics_stage() -> None:
    assert run_tags(["story_statistics"], "climate")[STAGE_TAG] == STATISTICS_STAGE
    assert run_tags(["story_statistics", "snapshots"], "climate")[STAGE_TAG] == "post-spider"
