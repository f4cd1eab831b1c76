"""Weekly clusters follow new weeks and rebuilt stories through Dagster's declarative automation: evaluated as the
`cluster_weeks_automation` sensor evaluates them (dg.evaluate_automation_conditions, tick after tick)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg

from assets.clusters import TOPIC_OF_WEEK, weeks_partitions
from assets.conditions import CLUSTER_WEEKS_CONDITION
from orchestration.definitions import defs

CLUSTER_WEEKS = dg.AssetSelection.assets("cluster_weeks")


def _stories_rebuilt(instance: dg.DagsterInstance, topic: str) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization("deduped_stories", partition=topic))


def test_a_topics_weeks_are_built_once_its_stories_land_and_again_when_rebuilt() -> None:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "other"])
        # no deduplicated stories yet: nothing to cluster
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS
        )
        assert result.total_requested == 0
        _stories_rebuilt(instance, "climate")
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        requested = result.get_requested_partitions(dg.AssetKey("cluster_weeks"))
        weeks = weeks_partitions.get_partition_keys()
        # every week of that topic (built in order in one run), none of the topic whose stories are missing
        assert requested == {f"climate|{week}" for week in weeks}
        # the next tick: handled, nothing new
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        assert result.total_requested == 0
        # the stories are rebuilt (a new spider pass, a merge): the weeks follow
        _stories_rebuilt(instance, "climate")
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        assert result.get_requested_partitions(dg.AssetKey("cluster_weeks")) == requested


def test_a_new_week_is_requested_when_it_begins() -> None:
    """With weeks that run on (a topic without an end), the week that begins is requested for each topic whose
    stories are there, and only that week."""
    open_weeks = dg.WeeklyPartitionsDefinition(start_date="2026-01-05", day_offset=1)
    topic_weeks = dg.MultiPartitionsDefinition(
        {"topic": dg.DynamicPartitionsDefinition(name="topics"), "week": open_weeks}
    )
    stories = dg.AssetSpec("deduped_stories", partitions_def=dg.DynamicPartitionsDefinition(name="topics"))
    weeks = dg.AssetSpec(
        "cluster_weeks",
        partitions_def=topic_weeks,
        automation_condition=CLUSTER_WEEKS_CONDITION,
        deps=[dg.AssetDep(stories, partition_mapping=TOPIC_OF_WEEK)],
    )
    monday = datetime(2026, 2, 2, 12, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "other"])
        before = dg.evaluate_automation_conditions(
            defs=[stories, weeks], instance=instance, evaluation_time=monday
        )
        assert before.total_requested == 0  # no stories yet
        _stories_rebuilt(instance, "climate")
        first = dg.evaluate_automation_conditions(
            defs=[stories, weeks], instance=instance, evaluation_time=monday, cursor=before.cursor
        )
        assert first.total_requested > 0  # the stories landed: the topic's weeks so far
        same_week = dg.evaluate_automation_conditions(
            defs=[stories, weeks],
            instance=instance,
            evaluation_time=monday + timedelta(days=3),
            cursor=first.cursor,
        )
        assert same_week.total_requested == 0
        next_week = dg.evaluate_automation_conditions(
            defs=[stories, weeks],
            instance=instance,
            evaluation_time=monday + timedelta(days=7),
            cursor=same_week.cursor,
        )
        assert next_week.get_requested_partitions(dg.AssetKey("cluster_weeks")) == {"climate|2026-02-02"}
