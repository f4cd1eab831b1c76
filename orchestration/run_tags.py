"""The project's tags of a run, read from what the run materializes and the partition it runs for.

Dagster records a run's steps (its execution plan) and partition tags; the project's run tags (assets/jobs.py
``run_tags``: topic, spider topic, stage, API) follow from them. Every path that creates a run uses this: `make
demo` and `topicmap topic run` (orchestration/runs.py), and the run coordinator for every run it queues
(orchestration/coordinator.py: the UI's materializations and backfills, sensors, schedules, retries).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import dagster as dg

from assets.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    RETRY_NUMBER_TAG,
    SCHEDULE_NAME_TAG,
    SENSOR_NAME_TAG,
    BaseAssetGraph,
    ExecutionPlanSnapshot,
)
from assets.jobs import run_tags
from assets.partitions import topic_weeks_partitions, topics_partitions
from topicmap.topics.calendar import topic_of_week_key

#: run tag saying who launched a run: ``manual`` (the UI, the command line, a re-execution by hand), ``retry``
#: (Dagster's run retries), ``sensor:<name>``, ``schedule:<name>`` or ``backfill:<id>`` (a run of a backfill, which
#: the UI or a sensor requested), in one tag to filter on, where Dagster's own are several (``dagster/sensor_name``,
#: ``dagster/schedule_name``, ``dagster/backfill``; a re-execution by hand carries none of the first two:
#: orchestration/instance.py).
LAUNCHED_BY_TAG = "topicmap/launched_by"
MANUAL = "manual"


def planned_asset_keys(plan: ExecutionPlanSnapshot) -> set[dg.AssetKey]:
    """The assets materialized by the plan's steps to execute (all of the job's, or the selected subset)."""
    to_execute = set(plan.step_keys_to_execute)
    return {
        output.properties.asset_key
        for step in plan.steps
        if step.key in to_execute
        for output in step.outputs
        if output.properties is not None and output.properties.asset_key is not None
    }


def _dynamic_set(partitions_def: dg.PartitionsDefinition | None) -> str | None:
    return partitions_def.name if isinstance(partitions_def, dg.DynamicPartitionsDefinition) else None


def _partition_keys(tags: Mapping[str, str]) -> list[str]:
    """The run's partition key, or the two ends of its partition range (a single-run backfill)."""
    if PARTITION_NAME_TAG in tags:
        return [tags[PARTITION_NAME_TAG]]
    ends = [tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)]
    return [end for end in ends if end]


def run_topic(
    asset_graph: BaseAssetGraph, asset_keys: Collection[dg.AssetKey], tags: Mapping[str, str]
) -> str | None:
    """The one topic a run works on: its partition of `topics` (or the topic of its `topic_weeks`), None for a run
    of no topic or of a range over several topics."""
    keys = _partition_keys(tags)
    for asset_key in asset_keys:
        if not asset_graph.has(asset_key):
            continue
        partition_set = _dynamic_set(asset_graph.get(asset_key).partitions_def)
        topics: set[str | None] = set()
        if partition_set == topics_partitions.name:
            topics = set(keys)
        elif partition_set == topic_weeks_partitions.name:
            topics = {topic_of_week_key(key) for key in keys}
        if len(topics) == 1 and None not in topics:
            return topics.pop()
    return None


def run_asset_keys(
    asset_selection: Collection[dg.AssetKey] | None, plan: ExecutionPlanSnapshot | None
) -> set[dg.AssetKey]:
    """What a run materializes: its asset selection, else what its plan's steps materialize (nothing known of a
    run stored without a plan)."""
    if asset_selection:
        return set(asset_selection)
    return planned_asset_keys(plan) if plan is not None else set()


def tags_for_run(
    asset_graph: BaseAssetGraph, asset_keys: Collection[dg.AssetKey], tags: Mapping[str, str]
) -> dict[str, str]:
    """The project's tags for a run that materializes ``asset_keys`` with these (partition) tags."""
    return run_tags([key.to_user_string() for key in asset_keys], run_topic(asset_graph, asset_keys, tags))


def launched_by(run: dg.DagsterRun) -> str:
    """Who launched ``run`` (``LAUNCHED_BY_TAG``'s value), from what Dagster records as it creates the run: a
    re-execution is Dagster's automatic retry when it carries a retry number, else one by hand (whatever sensor or
    schedule it inherited); a first run is its sensor's, schedule's or backfill's when it names one, else one
    launched by hand."""
    if run.parent_run_id is not None:
        return "retry" if RETRY_NUMBER_TAG in run.tags else MANUAL
    if SENSOR_NAME_TAG in run.tags:
        return f"sensor:{run.tags[SENSOR_NAME_TAG]}"
    if SCHEDULE_NAME_TAG in run.tags:
        return f"schedule:{run.tags[SCHEDULE_NAME_TAG]}"
    if BACKFILL_ID_TAG in run.tags:
        return f"backfill:{run.tags[BACKFILL_ID_TAG]}"
    return MANUAL
