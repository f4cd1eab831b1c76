"""The topic registry: keeps the `topics` dynamic partitions in step with the topics file."""

import json

import dagster as dg

from assets.jobs import TOPIC_TAG, seeds_job
from assets.partitions import topics_partitions
from resources.topics import TopicsFileResource
from sensors.settings import SENSOR_INTERVAL_SECONDS


@dg.sensor(
    name="topic_registry",
    target=seeds_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Adds a `topics` partition for each new topic in the topics file and requests its `seeds_job` run; re-seeds a "
        "topic whose declaration changed; reports removed or invalid topics (their data is kept)."
    ),
)
def topic_registry(context: dg.SensorEvaluationContext, topics_file: TopicsFileResource) -> dg.SensorResult:
    # the declarations and the query parser load with the tick, not with the code location
    from topicmap.topics.declarations import TopicConfigError, plan_topic_sync

    try:
        loaded = topics_file.load()
    except TopicConfigError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"topics file unusable: {exc}"))
    for error in loaded.errors:
        context.log.warning(f"rejected topic: {error}")
    declared = {topic.name: topic.config_hash for topic in loaded.topics}
    partitions = set(context.instance.get_dynamic_partitions(topics_partitions.name))
    last_state = json.loads(context.cursor) if context.cursor else {}
    plan = plan_topic_sync(declared, partitions, last_state)
    for name in plan.removed:
        context.log.warning(
            f"topic {name!r} is no longer in {topics_file.path}; its partition and data are kept"
        )
    run_requests = [
        dg.RunRequest(
            run_key=f"seeds:{name}:{declared[name][:12]}", partition_key=name, tags={TOPIC_TAG: name}
        )
        for name in plan.to_seed
    ]
    requests = [topics_partitions.build_add_request(list(plan.add))] if plan.add else []
    if not run_requests and not plan.removed and not loaded.errors:
        return dg.SensorResult(
            skip_reason=dg.SkipReason("topics file and partitions agree"), cursor=json.dumps(plan.state)
        )
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=requests,
        cursor=json.dumps(plan.state),
    )
