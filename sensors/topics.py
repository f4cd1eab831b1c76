"""The topic registry: keeps the `topics` dynamic partitions, and the days and weeks the topics span
(assets.partitions.apply_calendar), in step with the topics file.

A partition whose topic the file does not declare (removed from the file, or added in the launch dialog by
mistake) is deleted only when that loses nothing: no run ever used it, so no stage wrote anything for it. A
partition that runs used keeps its partition and its data (a topic dropped from the file by a bad edit comes back
whole); every run for it fails at once (assets.partitions.declared_topic), and the sensor reports it once, not on
every tick. The store marks such a topic removed from the topics file (``topics.removed_from_config``), so the
snapshot automation stops refreshing it, until it is declared again.
"""

import json
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from assets.freshness import freshness_evaluations
from assets.jobs import seeds_job
from assets.partitions import apply_calendar, topics_partitions
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.launched import drop_launched
from sensors.settings import SENSOR_INTERVAL_SECONDS
from sensors.topic_runs import topic_run_request
from topicmap.topics.declarations import TopicConfigError, plan_topic_sync

#: run tags naming a run's topic partition: a topic run's own, or the topic dimension of a topic x week run (the
#: partitions of `cluster_weeks` in earlier versions)
PARTITION_TAGS = ("dagster/partition", "dagster/partition/topic")


def partition_was_used(instance: dg.DagsterInstance, name: str) -> bool:
    """True when any run (whatever its status, queued ones too) was for the topic partition ``name``."""
    return any(
        instance.get_run_records(filters=dg.RunsFilter(tags={tag: name}), limit=1) for tag in PARTITION_TAGS
    )


def read_cursor(cursor: str | None) -> dict[str, Any]:
    """The registry's cursor: ``declared`` (topic → config hash at the last tick) and what it has already reported
    (``removed`` topics, topic ``errors``). An older cursor held only the declared map."""
    state = json.loads(cursor) if cursor else {}
    if not isinstance(state.get("declared"), dict):
        state = {"declared": state}
    return {
        "declared": state["declared"],
        "removed": state.get("removed", []),
        "errors": state.get("errors", []),
        "fresh_at": state.get("fresh_at", ""),
    }


#: the freshness checks are evaluated on the first tick of each hour (UTC)
FRESHNESS_EVERY = "%Y-%m-%dT%H"


#: the sensor's name, under which it looks for the runs it launched
SENSOR_NAME = "topic_registry"


@dg.sensor(
    name=SENSOR_NAME,
    target=seeds_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Adds a `topics` partition for each new topic in the topics file and requests its `seeds_job` run; "
        "re-seeds a topic whose declaration changed, and seeds a declared topic whose partition was added by hand. "
        "A partition of a topic the file does not declare is deleted if no run ever used it (added by mistake: "
        "nothing is lost); one that runs used is kept with its data and reported once (runs for it fail at once, "
        "and the snapshot automation leaves it alone until it is declared again). Invalid topics are reported "
        "once per change. Keeps the days and weeks the declared topics span (`click_days`, `weeks`, "
        "`ccnews_days` partitions) equal to the file's dates, an open-ended topic's growing day by day. "
        "Evaluates the freshness checks `clicks_fresh` and `snapshots_fresh` once an hour."
    ),
)
def topic_registry(
    context: dg.SensorEvaluationContext, topics_file: TopicsFileResource, store: TopicStoreResource
) -> dg.SensorResult:
    try:
        loaded = topics_file.load()
    except TopicConfigError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"topics file unusable: {exc}"))
    last = read_cursor(context.cursor)
    errors = sorted(str(error) for error in loaded.errors)
    for error in errors:
        if error not in last["errors"]:
            context.log.warning(f"rejected topic: {error}")
    # the days and weeks the declared topics span (click days, weeks, CC-NEWS days), written at once: an
    # open-ended topic's new day or week comes in on the first tick of it, a changed date range on the tick after
    # the edit
    calendar_notes = [f"partitions {note}" for note in apply_calendar(context.instance, loaded.topics)]
    for note in calendar_notes:
        context.log.info(note)
    declared = {topic.name: topic.config_hash for topic in loaded.topics}
    partitions = set(context.instance.get_dynamic_partitions(topics_partitions.name))
    # a partition added by hand (the launch dialog, `topicmap topic add`) for a declared topic is seeded too
    seeded = set(context.instance.get_materialized_partitions(dg.AssetKey("seeds")))
    plan = plan_topic_sync(declared, partitions, last["declared"], seeded)
    unused = [name for name in plan.removed if not partition_was_used(context.instance, name)]
    kept = [name for name in plan.removed if name not in unused]
    for name in unused:
        context.log.info(
            f"topic {name!r} is not in {topics_file.path} and no run used its partition: deleted"
        )
    for name in kept:
        if name not in last["removed"]:
            context.log.warning(
                f"topic {name!r} is no longer in {topics_file.path}; its partition and data are kept, and runs for "
                "it fail until it is declared again"
            )
    # the store's flag the snapshot automation reads: a kept topic is no longer refreshed, one declared again is
    for name in store.open().follow_topics_file(declared, kept):
        context.log.info(f"topic {name!r}: snapshot refreshes {'stopped' if name in kept else 'resumed'}")
    # the freshness checks (assets/freshness.py) read the topics file when evaluated: once an hour, stored as
    # the checks' evaluations without a run
    hour = datetime.now(UTC).strftime(FRESHNESS_EVERY)
    fresh = freshness_evaluations(context.instance) if last["fresh_at"] != hour else []
    state = {"declared": plan.state, "removed": kept, "errors": errors, "fresh_at": hour}
    run_requests, launched = drop_launched(
        context.instance,
        SENSOR_NAME,
        [topic_run_request(name, f"seeds:{name}:{declared[name][:12]}") for name in plan.to_seed],
    )
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if plan.add:
        requests.append(topics_partitions.build_add_request(list(plan.add)))
    if unused:
        requests.append(topics_partitions.build_delete_request(unused))
    news = set(kept) - set(last["removed"]) or set(errors) - set(last["errors"])
    if not run_requests and not requests and not news:
        kept_note = f"; kept with their data, not declared: {', '.join(kept)}" if kept else ""
        launched_note = "".join(f"; {note}" for note in launched)
        calendar_note = "".join(f"; {note}" for note in calendar_notes)
        return dg.SensorResult(
            skip_reason=dg.SkipReason(
                f"topics file and partitions agree{calendar_note}{kept_note}{launched_note}"
            ),
            cursor=json.dumps(state),
            asset_events=fresh,
        )
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=requests,
        cursor=json.dumps(state),
        asset_events=fresh,
    )
