"""The spider sensor through Dagster's sensor context: next iteration, completion, failure after no progress."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import update

from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.spider import SpiderSensorConfig, spider_iterations
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, now_utc
from topicmap.topics.declarations import load_topics

TOPICS = """topics:
  - name: sensed
    query: climate
    start_date: 2026-01-01
    end_date: 2026-03-31
    max_iterations: 4
"""


@pytest.fixture
def setup(tmp_path: Path):
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    store = TopicStore.open(db)
    topic = load_topics(tmp_path / "topics.yaml").topics[0]
    topics_id = store.upsert_topic(topic)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["sensed"])
    resources = {
        "store": TopicStoreResource(database_url=db),
        "topics_file": TopicsFileResource(path=str(tmp_path / "topics.yaml")),
        "spider_sensor_config": SpiderSensorConfig(max_attempts=2, no_progress_seconds=600),
    }
    return store, topics_id, instance, resources


def add_fetch_rows(store: TopicStore, topics_id: int, iteration: int, states: list[str]) -> None:
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_fetch_urls,
            [
                {
                    "topics_id": topics_id,
                    "url": f"https://a.test/{iteration}/{i}",
                    "iteration": iteration,
                    "state": st,
                }
                for i, st in enumerate(states)
            ],
            ["topics_id", "url"],
        )
        store.upsert(
            conn,
            s.topic_spider_metrics,
            [
                {
                    "topics_id": topics_id,
                    "iteration": 0,
                    "links_processed": 0,
                    "stories_added": 0,
                    "links_added": 0,
                    "frontier_left": 0,
                    "elapsed_time": 0.0,
                    "throttle_wait_time": 0.0,
                    "states_json": "{}",
                    "processed_date": now_utc(),
                }
            ],
            ["topics_id", "iteration"],
            ["links_processed"],
        )


def evaluate(instance, resources, cursor=None):  # noqa: ANN001, ANN201
    return spider_iterations(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))


def test_a_new_topic_gets_iteration_zero_then_the_next_pending_iteration(setup) -> None:  # noqa: ANN001
    store, topics_id, instance, resources = setup
    first = evaluate(instance, resources)
    assert len(first.run_requests) == 1
    request = first.run_requests[0]
    assert request.partition_key == "sensed" and request.tags["topicmap/iteration"] == "0"
    # a named job, one at a time per topic (the deployment's tag limit on topicmap/spider_topic)
    assert request.job_name == "spider_iteration_job"
    assert request.tags["topicmap/spider_topic"] == "sensed"
    add_fetch_rows(store, topics_id, 1, ["pending", "pending", "story added"])
    second = evaluate(instance, resources, first.cursor)
    assert second.run_requests[0].tags["topicmap/iteration"] == "1"
    assert second.run_requests[0].run_key == "spider:sensed:seeds-0:iteration-1:processed-1:done-1:attempt-0"


def test_when_no_pending_url_is_left_the_post_spider_stages_are_requested(setup) -> None:  # noqa: ANN001
    store, topics_id, instance, resources = setup
    add_fetch_rows(store, topics_id, 1, ["story added", "content match failed"])
    result = evaluate(instance, resources)
    (request,) = result.run_requests
    assert request.run_key == "post-spider:sensed:seeds-0:iterations-1"
    assert request.job_name == "post_spider_job"
    assert "topicmap/spider_topic" not in request.tags  # only spider iterations are limited per topic


@pytest.mark.parametrize("status", [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE])
def test_a_request_already_launched_is_not_returned_and_the_tick_says_why(setup, status) -> None:  # noqa: ANN001
    """Dagster would skip it (its run key was launched) and list the tick as "0 runs requested" with no reason."""
    store, topics_id, instance, resources = setup
    add_fetch_rows(store, topics_id, 1, ["story added"])
    run_key = "post-spider:sensed:seeds-0:iterations-1"

    def launched(run_status: dg.DagsterRunStatus, key: str) -> dg.DagsterRun:
        tags = {"dagster/sensor_name": "spider_iterations", "dagster/run_key": key}
        return instance.add_run(dg.DagsterRun(job_name="post_spider_job", status=run_status, tags=tags))

    # created and never submitted (the daemon died in between): the request stands, the daemon submits that run
    launched(dg.DagsterRunStatus.NOT_STARTED, run_key)
    # another sensor's run, and this sensor's run under another key, are no answer either
    instance.add_run(
        dg.DagsterRun(
            job_name="post_spider_job", tags={"dagster/sensor_name": "other", "dagster/run_key": run_key}
        )
    )
    launched(dg.DagsterRunStatus.SUCCESS, "post-spider:sensed:seeds-0:iterations-0")
    assert [r.run_key for r in evaluate(instance, resources).run_requests] == [run_key]

    run = launched(status, run_key)
    settled = evaluate(instance, resources)
    assert settled.run_requests == [] and settled.skip_reason is not None
    assert settled.skip_reason.skip_message == (
        "sensed: post_spider: no pending URL left: spidering is done; post_spider_job sensed: already launched "
        f"under run key {run_key} (run {run.run_id[:8]}, {status.value})"
    )


def test_no_progress_for_too_long_fails_the_topic_and_records_why(setup) -> None:  # noqa: ANN001
    store, topics_id, instance, resources = setup
    add_fetch_rows(store, topics_id, 2, ["pending"])
    first = evaluate(instance, resources)
    assert first.run_requests  # iteration 2 requested
    state = json.loads(first.cursor)
    state["sensed"]["since"] = time.time() - 700  # the same progress token, seen 700 s ago
    stuck = evaluate(instance, resources, json.dumps(state))
    assert stuck.run_requests == []
    row = store.topic_row("sensed")
    assert row["state"] == "error" and "no progress for 700 s at iteration 2" in row["message"]
    # A failed topic is left alone afterwards.
    assert evaluate(instance, resources, stuck.cursor).run_requests == []


def test_out_of_bounds_iterations_are_never_requested(setup) -> None:  # noqa: ANN001
    store, topics_id, instance, resources = setup
    add_fetch_rows(store, topics_id, 5, ["pending"])  # beyond max_iterations=4: never spidered
    with store.engine.begin() as conn:
        conn.execute(update(s.topics).where(s.topics.c.topics_id == topics_id).values(state="running"))
    (request,) = evaluate(instance, resources).run_requests
    assert request.run_key.startswith("post-spider:sensed")
