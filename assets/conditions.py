"""Declarative automation conditions: rules Dagster's own automation sensor evaluates, where a hand-written sensor
would only restate them (README: which automation stays a sensor, and why)."""

import dagster as dg

AC = dg.AutomationCondition

#: A topic's week of clusters is requested when the week comes into being (the latest week only: older weeks are a
#: backfill's) and whenever the topic's deduplicated stories are rebuilt (every week of the topic: its clusters are
#: drawn from those stories, and the weeks are built in order from one another, so a rebuilt topic is rebuilt
#: whole; `cluster_weeks` runs a topic's range as one run). Never while the stories are missing or being rebuilt,
#: nor while the week is already being built. Dagster's `eager()` with every week of the topic, not only the
#: latest, following rebuilt stories.
CLUSTER_WEEKS_CONDITION = (
    (
        (AC.in_latest_time_window() & AC.newly_missing()).with_label("a new week")
        | AC.any_deps_updated().with_label("the topic's stories rebuilt")
    ).since_last_handled()
    & ~AC.any_deps_missing()
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
).with_label("new week or rebuilt stories")
