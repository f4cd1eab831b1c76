"""Facebook figures as stories join: a ``statistics_job`` run per topic whose stories joined without a figure
(the decision: ``topicmap.social.joining``)."""

import dagster as dg

from assets.jobs import STAGE_TAG, STATISTICS_ASSETS, STATISTICS_STAGE, TOPIC_TAG, run_tags, statistics_job
from assets.partitions import topics_partitions
from resources.social import FacebookResource
from resources.store import TopicStoreResource
from sensors.launched import drop_launched
from sensors.settings import RUNS_IN_PROGRESS, SENSOR_INTERVAL_SECONDS
from topicmap import settings

#: the sensor's name: its runs carry it (dagster/sensor_name), and it looks for its own run keys under it
SENSOR_NAME = "statistics_as_stories_join"


def _runs_in_progress(instance: dg.DagsterInstance, topic: str) -> int:
    """The topic's statistics runs and post-spider runs (whose story_statistics fetches the same stories)."""
    return sum(
        len(
            instance.get_run_records(
                filters=dg.RunsFilter(tags={TOPIC_TAG: topic, STAGE_TAG: stage}, statuses=RUNS_IN_PROGRESS),
                limit=10,
            )
        )
        for stage in (STATISTICS_STAGE, "post-spider")
    )


@dg.sensor(
    name=SENSOR_NAME,
    jobs=[statistics_job],
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Facebook figures as stories join, as Media Cloud fetched them: for each topic whose stories joined without "
        "a figure, a `statistics_job` run (run key = topic + newest such story + how many), one at a time per topic "
        "and never beside its post-spider run, which fetches the rest before the snapshot. Nothing while Facebook is "
        "not configured (the tick says why)."
    ),
)
def statistics_as_stories_join(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, facebook: FacebookResource
) -> dg.SensorResult:
    # the store's reads (SQLAlchemy) load with the tick, not with the code location
    from topicmap.social.joining import JoiningFacts, decide_statistics_run
    from topicmap.social.store import stories_awaiting_statistics
    from topicmap.store.names import StoreError

    if not facebook.configured:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(
                f"Facebook is not configured ({settings.FACEBOOK_APP_ID.name}, "
                f"{settings.FACEBOOK_APP_SECRET.name}): no statistics to fetch"
            )
        )
    topic_store = store.open()
    run_requests: list[dg.RunRequest] = []
    reasons: list[str] = []
    for topic in sorted(context.instance.get_dynamic_partitions(topics_partitions.name)):
        try:
            topics_id = int(topic_store.topic_row(topic)["topics_id"])
        except StoreError:
            continue  # not seeded yet
        awaiting, newest = stories_awaiting_statistics(topic_store, topics_id)
        decision = decide_statistics_run(
            JoiningFacts(topic, awaiting, newest, _runs_in_progress(context.instance, topic))
        )
        reasons.append(decision.reason)
        if decision.run_key:
            run_requests.append(
                dg.RunRequest(
                    run_key=decision.run_key,
                    partition_key=topic,
                    job_name=statistics_job.name,
                    tags=run_tags(STATISTICS_ASSETS, topic),
                )
            )
    run_requests, launched = drop_launched(context.instance, SENSOR_NAME, run_requests)
    reasons += launched
    if not run_requests:
        return dg.SensorResult(skip_reason=dg.SkipReason("; ".join(reasons) or "no topics"))
    return dg.SensorResult(run_requests=run_requests)
