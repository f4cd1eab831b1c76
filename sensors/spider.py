"""The spider sensor: starts each topic's next iteration, then its post-spider stages, or fails it."""

import json
import time
from dataclasses import replace

import dagster as dg

from assets.jobs import (
    STAGE_TAG,
    STATISTICS_STAGE,
    TOPIC_TAG,
    post_spider_job,
    spider_iteration_job,
    topic_run_tags,
)
from assets.partitions import topics_partitions
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.launched import drop_launched
from sensors.settings import RUNS_IN_PROGRESS, SENSOR_INTERVAL_SECONDS

#: the run each launching decision requests: its job and its stage tag
_RUN_OF_ACTION = {
    "run_iteration": (spider_iteration_job, "spider"),
    "post_spider": (post_spider_job, "post-spider"),
}


class SpiderSensorConfig(dg.ConfigurableResource):
    """How patient the spider sensor is before it fails a topic."""

    max_attempts: int = 3
    no_progress_seconds: float = 3600.0


def _runs(instance: dg.DagsterInstance, tags: dict[str, str], statuses: list[dg.DagsterRunStatus]) -> int:
    return len(instance.get_run_records(filters=dg.RunsFilter(tags=tags, statuses=statuses), limit=100))


def retries_pending(instance: dg.DagsterInstance, topic: str) -> int:
    """Failed runs of the topic that Dagster's run retries will re-launch (tag dagster/will_retry=true) and
    have not yet: the sensor waits for them instead of launching the same work a second time."""
    failed = instance.get_run_records(
        filters=dg.RunsFilter(
            tags={TOPIC_TAG: topic, "dagster/will_retry": "true"},
            statuses=[dg.DagsterRunStatus.FAILURE],
        ),
        limit=20,
    )
    return sum(
        1
        for record in failed
        if not instance.get_run_records(
            filters=dg.RunsFilter(tags={"dagster/parent_run_id": record.dagster_run.run_id}), limit=1
        )
    )


#: the sensor's name: its runs carry it (dagster/sensor_name), and it looks for its own run keys under it
SENSOR_NAME = "spider_iterations"


@dg.sensor(
    name=SENSOR_NAME,
    jobs=[spider_iteration_job, post_spider_job],
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "For each topic: requests the next `spider_iteration_job` run (run key = topic + iteration + progress), "
        "the `post_spider_job` once no pending link is left, or marks the topic failed when an iteration fails "
        "repeatedly or no progress is made for too long (the reason is recorded on the topic). Never two runs of "
        "one topic at once."
    ),
)
def spider_iterations(
    context: dg.SensorEvaluationContext,
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
    spider_sensor_config: SpiderSensorConfig,
) -> dg.SensorResult:
    # the store's reads (SQLAlchemy) load with the tick, not with the code location
    from topicmap.spider.plan import ProgressMark, decide, read_spider_facts

    cursor = json.loads(context.cursor) if context.cursor else {}
    declared = topics_file.load().by_name()
    partitions = context.instance.get_dynamic_partitions(topics_partitions.name)
    topic_store = store.open()
    now = time.time()
    run_requests: list[dg.RunRequest] = []
    reasons: list[str] = []
    new_cursor: dict[str, dict] = {}
    for topic_name in sorted(partitions):
        topic = declared.get(topic_name)
        if topic is None:
            continue
        facts = read_spider_facts(topic_store, topic_name, topic.max_iterations)
        iteration = facts.pending_iteration if facts.pending_iteration is not None else facts.iterations_done
        statistics_runs = _runs(
            context.instance, {TOPIC_TAG: topic_name, STAGE_TAG: STATISTICS_STAGE}, RUNS_IN_PROGRESS
        )
        facts = replace(
            facts,
            # the Facebook runs as stories join go on beside the iterations; the post-spider run waits for them
            runs_in_progress=_runs(context.instance, {TOPIC_TAG: topic_name}, RUNS_IN_PROGRESS)
            - statistics_runs
            + retries_pending(context.instance, topic_name),
            statistics_runs=statistics_runs,
            failed_attempts=_runs(
                context.instance,
                {TOPIC_TAG: topic_name, "topicmap/iteration": str(iteration), STAGE_TAG: "spider"},
                [dg.DagsterRunStatus.FAILURE],
            ),
        )
        last = cursor.get(topic_name)
        mark = ProgressMark(last["token"], last["since"]) if last else None
        decision = decide(
            facts,
            mark,
            now,
            max_attempts=spider_sensor_config.max_attempts,
            no_progress_seconds=spider_sensor_config.no_progress_seconds,
        )
        if decision.progress:
            new_cursor[topic_name] = {"token": decision.progress.token, "since": decision.progress.since}
        reasons.append(f"{topic_name}: {decision.action}: {decision.reason}")
        if decision.action in _RUN_OF_ACTION:
            job, stage = _RUN_OF_ACTION[decision.action]
            run_requests.append(
                dg.RunRequest(
                    run_key=decision.run_key,
                    partition_key=topic_name,
                    job_name=job.name,
                    tags=topic_run_tags(topic_name, decision.iteration, stage),
                )
            )
        elif decision.action == "fail":
            topics_id = topic_store.topic_row(topic_name)["topics_id"]
            topic_store.set_topic_state(topics_id, "error", decision.reason)
            context.log.error(f"topic {topic_name!r} failed: {decision.reason}")
    run_requests, launched = drop_launched(context.instance, SENSOR_NAME, run_requests)
    reasons += launched
    for line in reasons:
        context.log.info(line)
    if not run_requests:
        return dg.SensorResult(
            skip_reason=dg.SkipReason("; ".join(reasons) or "no topics"), cursor=json.dumps(new_cursor)
        )
    return dg.SensorResult(run_requests=run_requests, cursor=json.dumps(new_cursor))
