"""Partitions shared by the asset groups: the topics, and the days and topic weeks they span (the rules in
topicmap.topics.calendar), kept in step with the topics file by the topic registry sensor."""

from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from topicmap import settings
from topicmap.store.names import StoreError
from topicmap.topics import calendar
from topicmap.topics.calendar import monday_of
from topicmap.topics.declarations import TopicConfig, TopicConfigError, load_topics

if TYPE_CHECKING:
    from resources.topics import TopicsFileResource
    from topicmap.store.topic_store import TopicStore

#: One partition per declared topic, kept in step with topics.yaml by the topic registry sensor.
topics_partitions = dg.DynamicPartitionsDefinition(name="topics")

#: One partition per publication day a declared topic spans (`click_totals`), per week of each declared topic
#: (`cluster_weeks`, keys ``topic|monday``) and per CC-NEWS day a topic spans (`ccnews_stories`): the sets of
#: topicmap.topics.calendar, kept equal to the topics file by the topic registry sensor (:func:`apply_calendar`),
#: so no day or topic x week pair that cannot hold data is offered, and an open-ended topic's days come in without
#: a reload. The topic weeks are one set of pairs, not a topic x week product: a product would offer every topic
#: the weeks of every other.
click_days_partitions = dg.DynamicPartitionsDefinition(name="click_days")
topic_weeks_partitions = dg.DynamicPartitionsDefinition(name="topic_weeks")
ccnews_days_partitions = dg.DynamicPartitionsDefinition(name="ccnews_days")

#: the asset whose materialized keys each calendar set keeps (they hold data) when the topics file no longer
#: declares them
CALENDAR_ASSETS = {
    click_days_partitions.name: "click_totals",
    topic_weeks_partitions.name: "cluster_weeks",
    ccnews_days_partitions.name: "ccnews_stories",
}


def _declared_topics(path: str | Path, today: date | None = None) -> list[TopicConfig]:
    """The valid topics of a topics file, as the topic registry reads them (none without a readable file): a
    rejected topic is the registry's to report, and has no partition, so it has no days or weeks either."""
    try:
        return load_topics(path, today).topics
    except TopicConfigError:
        return []


def _today() -> date:
    return datetime.now(UTC).date()


def declared_topic_dates(path: str | Path, today: date | None = None) -> list[tuple[date, date]]:
    """``(start_date, last day)`` of each topic of a topics file, in file order; an open-ended topic's dates run
    to ``today`` (default: the current UTC day), as its seeds do (``TopicConfig.last_day``)."""
    return [(topic.start_date, topic.last_day(today)) for topic in _declared_topics(path, today)]


def declared_topic_weeks(path: str | Path, today: date | None = None) -> dict[str, tuple[date, date]]:
    """``{name: (first Monday, last Monday)}``: the weeks each topic of a topics file spans, from the week of its
    start to the week of its last day (an open-ended topic's: to the week of ``today``). A topic declared twice
    keeps its first declaration, as the topic registry does."""
    return {
        topic.name: (monday_of(topic.start_date), monday_of(topic.last_day(today)))
        for topic in _declared_topics(path, today)
    }


def topics_file_path(environ: Mapping[str, str] | None = None) -> str:
    """The topics file the code location reads (``TOPICMAP_TOPICS_FILE``, default topics.yaml)."""
    return settings.TOPICS_FILE.value(environ)


def declared_calendar(
    topics: list[TopicConfig], today: date | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, list[str]]:
    """``{partition set name: its keys}`` for the declared ``topics`` as of ``today``: the click days, the topic
    weeks and the CC-NEWS days (topicmap.topics.calendar), with the settings that bound them."""
    today = today or _today()
    clicks_start = calendar.parse_day(
        settings.CLICKS_START_DATE.name, settings.CLICKS_START_DATE.value(environ)
    )
    weeks_start = calendar.parse_day(settings.WEEKS_START.name, settings.WEEKS_START.value(environ))
    ccnews_start = calendar.parse_day(settings.CCNEWS_START.name, settings.CCNEWS_START.value(environ))
    return {
        click_days_partitions.name: calendar.click_days(topics, today, clicks_start),
        topic_weeks_partitions.name: calendar.topic_week_pairs(topics, today, weeks_start),
        ccnews_days_partitions.name: calendar.ccnews_days(topics, today, ccnews_start),
    }


def apply_calendar(
    instance: dg.DagsterInstance, topics: list[TopicConfig], today: date | None = None
) -> list[str]:
    """Bring the click days, topic weeks and CC-NEWS days of ``instance`` in step with ``topics`` (as of
    ``today``), in order (a topic's weeks in date order); one note per set changed. A key its asset holds a
    materialization for is kept, declared or not (its data stays readable).

    Written to the instance at once, in bulk (the topic registry on each tick, `make demo`, `topicmap topic
    add/run`): a sensor's dynamic partition requests are applied by the daemon one key at a time, a lookup per key,
    which takes minutes for the first tick of a topic of years."""
    notes: list[str] = []
    for name, wanted in declared_calendar(topics, today).items():
        current = instance.get_dynamic_partitions(name)
        # keys that hold data stay offered (materializations under the partitions of earlier versions too: time
        # windows, and topic x week products, whose keys are the same ``topic|monday``)
        held = set(instance.get_materialized_partitions(dg.AssetKey(CALENDAR_ASSETS[name])))
        plan = calendar.plan_key_sync(current, sorted(set(wanted) | held), held)
        for key in (*plan.move, *plan.delete):
            instance.delete_dynamic_partition(name, key)
        if plan.add:
            instance.add_dynamic_partitions(name, list(plan.add))
        if plan:
            notes.append(_sync_note(name, plan, len(wanted)))
    return notes


def _sync_note(name: str, plan: calendar.KeySync, wanted: int) -> str:
    parts = [
        f"+{len(plan.add) - len(plan.move)}" if plan.add else "",
        f"-{len(plan.delete)}" if plan.delete else "",
    ]
    span = f" ({plan.add[0]}..{plan.add[-1]} added)" if plan.add else ""
    moved = f", {len(plan.move)} moved after the new ones (date order)" if plan.move else ""
    return f"{name}: {' '.join(p for p in parts if p)} keys of {wanted}{span}{moved}"


def apply_declared_calendar(instance: dg.DagsterInstance, today: date | None = None) -> list[str]:
    """:func:`apply_calendar` for the topics of the code location's topics file."""
    return apply_calendar(instance, _declared_topics(topics_file_path(), today), today)


def undeclared_topic_failure(name: str, detail: str, path: str) -> dg.Failure:
    """The failure of a run for a topic the topics file ``path`` does not declare: at once, not retried (a retry
    cannot declare it), naming the topic, the file and what to do."""
    return dg.Failure(
        description=(
            f"topic {name!r} {detail} in {path}: runs are refused for topics it does not declare. "
            "Declare it there (the topic_registry sensor then adds its partition and seeds it), or delete the "
            "partition if it was added by mistake."
        ),
        allow_retries=False,
    )


def declared_topic(topics_file: "TopicsFileResource", name: str) -> TopicConfig:
    """The declaration of the run's topic; a topic the file does not declare (or declares wrongly) fails the run at
    once with :func:`undeclared_topic_failure`."""
    try:
        topics = topics_file.load()
    except TopicConfigError as exc:
        raise dg.Failure(description=f"the topics file is unusable: {exc}", allow_retries=False) from exc
    found = topics.by_name().get(name)
    if found is None:
        problems = [str(e) for e in topics.errors if e.topic == name]
        detail = f"is invalid ({problems[0]})" if problems else "is not declared"
        raise undeclared_topic_failure(name, detail, topics_file.path)
    return found


def stored_topic_id(topic_store: "TopicStore", name: str) -> int:
    """The topics_id of the run's topic; a topic the store does not know (never declared and seeded) fails the run
    at once with :func:`undeclared_topic_failure` (naming the code location's topics file: these assets read only
    the store)."""
    try:
        return int(topic_store.topic_row(name)["topics_id"])
    except StoreError:
        raise undeclared_topic_failure(name, "was never declared and seeded", topics_file_path()) from None
