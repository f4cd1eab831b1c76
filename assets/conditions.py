"""Declarative automation conditions: rules Dagster's own automation sensor evaluates, where a hand-written sensor
would only restate them (docs/dagster.md: which automation stays a sensor, and why)."""

import json
from collections import defaultdict
from datetime import date
from typing import ClassVar

import dagster as dg

from assets.partitions import (
    declared_topic_weeks,
    topic_weeks_partitions,
    topics_file_path,
    topics_partitions,
)
from topicmap.topics.calendar import parse_topic_week, split_topic_week, topic_of_week_key

AC = dg.AutomationCondition

#: the asset a topic's weeks are clustered from, one partition per topic
TOPIC_STORIES = dg.AssetKey("deduped_stories")


def _keys_by_topic(context: dg.AutomationContext) -> dict[str, set[str]]:
    """The candidate topic weeks (``topic|monday``) by topic; an error naming the asset if it is not partitioned by
    topic weeks."""
    partitions_def = context.partitions_def
    if not (
        isinstance(partitions_def, dg.DynamicPartitionsDefinition)
        and partitions_def.name == topic_weeks_partitions.name
    ):
        raise dg.DagsterInvariantViolationError(
            f"a condition on the topic weeks (`{topic_weeks_partitions.name}` partitions); "
            f"{context.key.to_user_string()} has "
            f"{type(partitions_def).__name__ if partitions_def else 'no partitions'}"
        )
    keys: dict[str, set[str]] = defaultdict(set)
    for key in context.candidate_subset.expensively_compute_partition_keys():
        topic = topic_of_week_key(key)
        if (
            topic is not None
        ):  # a key added by hand that is no topic week is never requested (its run would fail)
            keys[topic].add(key)
    return keys


class _TopicWeeksCondition(dg.AutomationCondition):
    """A Python condition on the topic weeks (``topic|monday``): true for the candidate weeks :meth:`true_keys`
    picks, by default every week of the topics :meth:`topics` picks. Evaluated in the code server (the
    `cluster_weeks_automation` sensor has ``use_user_code_server``): the daemon evaluates only Dagster's own."""

    label: ClassVar[str]
    text: ClassVar[str]

    @property
    def name(self) -> str:
        return self.label

    @property
    def description(self) -> str:
        return self.text

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        keys = _keys_by_topic(context)
        return dg.AutomationResult(
            context=context,
            true_subset=context.candidate_subset.compute_intersection_with_partition_keys(
                self.true_keys(context, keys) if keys else set()
            ),
        )

    def true_keys(self, context: dg.AutomationContext, keys: dict[str, set[str]]) -> set[str]:
        return {key for topic in self.topics(context, set(keys)) for key in keys[topic]}

    def topics(self, context: dg.AutomationContext, topics: set[str]) -> set[str]:
        raise NotImplementedError


class InDeclaredTopicWeeks(_TopicWeeksCondition):
    """True for the topic weeks that lie within the topic's own dates in the topics file (read at each evaluation):
    from the week of its ``start_date`` to the week of its ``end_date`` (an open-ended topic's: to the current
    week). False for a week the registry keeps only because it holds data (the topic was shortened, or the file no
    longer declares it)."""

    label = "in_declared_topic_weeks"
    text = "The week lies within the topic's dates in the topics file"

    def true_keys(self, context: dg.AutomationContext, keys: dict[str, set[str]]) -> set[str]:
        weeks = declared_topic_weeks(topics_file_path(), context.evaluation_time.date())
        return {
            key
            for topic, topic_keys in keys.items()
            if topic in weeks
            for key in topic_keys
            if weeks[topic][0] <= date.fromisoformat(split_topic_week(key)[1]) <= weeks[topic][1]
        }


class TopicWeekAppeared(_TopicWeeksCondition):
    """True for the topic weeks that came in since the previous evaluation: weeks of a topic before its first or
    after its last week then (an open-ended topic's week once it is over, a topic extended or declared); false on
    the first evaluation. Read from each topic's first and last week, kept in the condition's cursor, over every
    key: Dagster's ``newly_missing()`` compares with the previous evaluation's keys, which it stores as ranges of
    the set's order, and a topic's new week is inserted inside such a range (before the next topic's weeks)."""

    label = "topic_week_appeared"
    text = "The topic's week came in since the previous evaluation"

    @property
    def requires_cursor(self) -> bool:
        return True

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        spans: dict[str, list[str]] = {}
        for key in context.asset_graph_view.get_full_subset(
            key=context.key
        ).expensively_compute_partition_keys():
            parsed = parse_topic_week(key)
            if parsed is not None:
                topic, week = parsed
                first, last = spans.get(topic, (week, week))
                spans[topic] = [min(first, week), max(last, week)]
        before: dict[str, list[str]] | None = json.loads(context.cursor) if context.cursor else None
        new: set[str] = set()
        if before is not None:
            for topic, topic_keys in _keys_by_topic(context).items():
                first, last = before.get(topic, ("", ""))
                new |= {key for key in topic_keys if not first <= split_topic_week(key)[1] <= last}
        return dg.AutomationResult(
            context=context,
            true_subset=context.candidate_subset.compute_intersection_with_partition_keys(new),
            cursor=json.dumps(spans, sort_keys=True),
        )


def _stories_built(
    context: dg.AutomationContext, topics: set[str], after: int | None = None
) -> dict[str, int]:
    """``{topic: storage id of its latest stories}`` for the ``topics`` whose `deduped_stories` were materialized
    (after the storage id ``after``, if given)."""
    return dict(
        context.asset_graph_view.instance.get_latest_storage_id_by_partition(
            TOPIC_STORIES, dg.DagsterEventType.ASSET_MATERIALIZATION, partitions=topics, after_cursor=after
        )
    )


class TopicStoriesUpdated(_TopicWeeksCondition):
    """True for every week of a topic whose `deduped_stories` partition was materialized since the previous
    evaluation (false on the first). Dagster's ``any_deps_updated()`` for one topic: `cluster_weeks` depends on the
    stories with ``AllPartitionMapping`` (Dagster has no built-in mapping from a ``topic|week`` set to its topic), so
    Dagster's own would take any topic's stories for every topic's."""

    label = "topic_stories_updated"
    text = "The topic's deduplicated stories were rebuilt since the previous evaluation"

    def topics(self, context: dg.AutomationContext, topics: set[str]) -> set[str]:
        if context.previous_evaluation_time is None:  # the first evaluation: nothing is "since"
            return set()
        # previous_max_storage_id is None when no event was stored by the previous evaluation
        latest = _stories_built(context, topics, after=context.previous_max_storage_id)
        bound = context.max_storage_id  # a later event is the next evaluation's
        return {topic for topic, storage_id in latest.items() if bound is None or storage_id <= bound}


class TopicStoriesMissing(_TopicWeeksCondition):
    """True for every week of a topic whose `deduped_stories` partition was never materialized (Dagster's
    ``any_deps_missing()`` for one topic)."""

    label = "topic_stories_missing"
    text = "The topic's deduplicated stories were never built"

    def topics(self, context: dg.AutomationContext, topics: set[str]) -> set[str]:
        return topics - set(_stories_built(context, topics))


class TopicStoriesInProgress(_TopicWeeksCondition):
    """True for every week of a topic whose `deduped_stories` partition is being built by a run (Dagster's
    ``any_deps_in_progress()`` for one topic)."""

    label = "topic_stories_in_progress"
    text = "The topic's deduplicated stories are being built"

    def topics(self, context: dg.AutomationContext, topics: set[str]) -> set[str]:
        status = context.asset_graph_view.instance.get_status_by_partition(
            TOPIC_STORIES, sorted(topics), topics_partitions
        )
        return {
            topic for topic, state in (status or {}).items() if state == dg.AssetPartitionStatus.IN_PROGRESS
        }


#: A topic's week of clusters is requested when the week comes in (the topic registry adds the topic's week once it
#: is over, or a topic extended or declared brings its weeks) and whenever the topic's deduplicated stories are
#: rebuilt (every week of the topic: its clusters are drawn from those stories, and the weeks are built in order from
#: one another, so a rebuilt topic is rebuilt whole; `cluster_weeks` runs a topic's range as one run). Never while
#: the topic's stories are missing or being rebuilt, nor while the week is already being built, and never a week
#: outside the topic's own dates (one the registry keeps because it holds data). A week that comes in while its
#: topic's stories are missing or being built is built with them: they are then rebuilt. Dagster's `eager()` with
#: every week of the topic following its rebuilt stories, the dependency read per topic.
CLUSTER_WEEKS_CONDITION = (
    (TopicWeekAppeared() | TopicStoriesUpdated().since_last_handled())
    & ~TopicStoriesMissing()
    & ~TopicStoriesInProgress()
    & ~AC.in_progress()
    & InDeclaredTopicWeeks()
).with_label("new week or rebuilt stories")
