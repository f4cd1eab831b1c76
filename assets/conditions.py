"""Declarative automation conditions: rules Dagster's own automation sensor evaluates, where a hand-written sensor
would only restate them (docs/dagster.md: which automation stays a sensor, and why)."""

from datetime import date

import dagster as dg

from assets.partitions import declared_topic_weeks, topics_file_path

AC = dg.AutomationCondition


class InDeclaredTopicWeeks(dg.AutomationCondition):
    """True for the topic x week partitions whose week lies within the topic's own dates in the topics file (read
    at each evaluation): from the week of its ``start_date`` to the week of its ``end_date`` (an open-ended
    topic's: to the current week). False for every week of a topic the file does not declare (any longer).

    The week dimension is shared by all topics: it holds the weeks of them all (the topic registry keeps it), so
    with several topics most have weeks in it that are not theirs. A Python condition, evaluated in the code server (the
    `cluster_weeks_automation` sensor has ``use_user_code_server``): the daemon evaluates only Dagster's own."""

    @property
    def name(self) -> str:
        return "in_declared_topic_weeks"

    @property
    def description(self) -> str:
        return "The week lies within the topic's dates in the topics file"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        partitions_def = context.partitions_def
        if not isinstance(partitions_def, dg.MultiPartitionsDefinition):
            raise dg.DagsterInvariantViolationError(
                f"{self.name} is a condition on topic x week partitions; {context.key.to_user_string()} has "
                f"{type(partitions_def).__name__ if partitions_def else 'no partitions'}"
            )
        weeks = declared_topic_weeks(topics_file_path(), context.evaluation_time.date())
        inside: set[str] = set()
        for key in context.candidate_subset.expensively_compute_partition_keys():
            dimensions = partitions_def.get_partition_key_from_str(key).keys_by_dimension
            span = weeks.get(dimensions["topic"])
            if span is not None and span[0] <= date.fromisoformat(dimensions["week"]) <= span[1]:
                inside.add(key)
        return dg.AutomationResult(
            context=context,
            true_subset=context.candidate_subset.compute_intersection_with_partition_keys(inside),
        )


#: A topic's week of clusters is requested when the week comes into being (the topic registry adds it to the week
#: dimension once it is over, or a new topic brings its weeks) and whenever the topic's deduplicated stories are
#: rebuilt (every week of the topic: its clusters are drawn from those stories, and the weeks are built in order
#: from one another, so a rebuilt topic is rebuilt whole; `cluster_weeks` runs a topic's range as one run). Never
#: while the stories are missing or being rebuilt, nor while the week is already being built, and never a week
#: outside the topic's own dates (the week dimension is shared by all topics: a week of one topic past its end can
#: be a week of another). Dagster's `eager()` with every week of the topic following rebuilt stories.
CLUSTER_WEEKS_CONDITION = (
    (
        AC.newly_missing().with_label("a new week")
        | AC.any_deps_updated().with_label("the topic's stories rebuilt")
    ).since_last_handled()
    & ~AC.any_deps_missing()
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
    & InDeclaredTopicWeeks()
).with_label("new week or rebuilt stories")
