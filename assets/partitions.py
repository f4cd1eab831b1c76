"""Partitions shared by the asset groups, and where the publication-day and weekly partitions start."""

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from topicmap import settings
from topicmap.store.names import StoreError
from topicmap.topics.declarations import TopicConfig, TopicConfigError, load_topics

if TYPE_CHECKING:
    from resources.topics import TopicsFileResource
    from topicmap.store.topic_store import TopicStore

#: One partition per declared topic, kept in step with topics.yaml by the topic registry sensor.
topics_partitions = dg.DynamicPartitionsDefinition(name="topics")

#: without a setting and without a dated topic, click partitions cover this many recent days
RECENT_DAYS = 90
#: Media Cloud's earliest trusted publish date: no click partition before it
EARLIEST_CLICKS_DAY = date(2008, 1, 1)


def _declared_topics(path: str | Path, today: date | None = None) -> list[TopicConfig]:
    """The valid topics of a topics file, as the topic registry reads them (none without a readable file): a
    rejected topic is the registry's to report, and has no partition, so it has no days or weeks either."""
    try:
        return load_topics(path, today).topics
    except TopicConfigError:
        return []


def earliest_topic_start(path: str | Path) -> date | None:
    """The earliest ``start_date`` in a topics file, or None (no file, no valid topic)."""
    return min((topic.start_date for topic in _declared_topics(path)), default=None)


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


def _start_setting(
    environ: Mapping[str, str] | None, start: settings.Setting
) -> tuple[date | None, date | None]:
    """(the ISO day set in ``start``, else None; the earliest topic start of the topics file, else None)."""
    setting = start.value(environ).strip()
    if setting:
        try:
            return date.fromisoformat(setting), None
        except ValueError as exc:
            raise ValueError(f"{start.name} must be an ISO day like 2026-01-05, got {setting!r}") from exc
    return None, earliest_topic_start(topics_file_path(environ))


def clicks_start_day(environ: dict[str, str] | None = None, today: date | None = None) -> date:
    """First publication-day partition of `click_totals`: ``TOPICMAP_CLICKS_START_DATE`` if set, else the earliest
    topic start in the topics file (``TOPICMAP_TOPICS_FILE``, default topics.yaml), else ``RECENT_DAYS`` ago.

    Media Cloud's own partitions began in 2008, which gives some 7,000 days and a launch dialog whose default
    window shows none of the days that matter; the first day a declared topic can have stories is where clicks
    can start. A topic declared later with an earlier start needs the code location reloaded (or the setting)."""
    today = today or datetime.now(UTC).date()
    setting, earliest = _start_setting(environ, settings.CLICKS_START_DATE)
    if setting is not None:
        return max(setting, EARLIEST_CLICKS_DAY)
    if earliest is not None:
        return max(min(earliest, today - timedelta(days=1)), EARLIEST_CLICKS_DAY)
    return today - timedelta(days=RECENT_DAYS)


def latest_topic_end(environ: Mapping[str, str] | None = None) -> date | None:
    """The latest ``end_date`` of the topics file the code location reads, or None: no file, no valid topic, or
    an open-ended topic (whose days run on to the current one)."""
    topics = _declared_topics(topics_file_path(environ))
    if any(topic.open_ended for topic in topics):
        return None
    return max((topic.end_date for topic in topics if topic.end_date is not None), default=None)


#: days of click partitions after the latest topic end: the 30-day refetch's window
CLICKS_DAYS_AFTER_END = 30


def clicks_end_day(first_day: date, environ: Mapping[str, str] | None = None) -> date | None:
    """The end (exclusive: the day after the last) of `click_totals`' publication-day partitions: the latest topic
    ``end_date`` plus ``CLICKS_DAYS_AFTER_END`` days, or None (up to yesterday) when no topic declares an end or
    one is open-ended.

    Topic stories are not all dated inside the topic's dates: the spider keeps relevant stories whatever their date
    (and mines those up to a week past the end), and a story without a trustworthy publish date is counted on the
    day it was collected, during spidering after the end. Days beyond these can never hold a topic story, so they
    are not offered: they would stay "missing" forever, and the launch dialog, which defaults to the last days of
    the partitions, would open on them instead of on the topics' days. A topic declared later with a later end
    needs the code location reloaded."""
    latest_end = latest_topic_end(environ)
    if latest_end is None:
        return None
    end = latest_end + timedelta(days=CLICKS_DAYS_AFTER_END + 1)
    if end <= first_day:
        raise ValueError(
            f"the click partitions would start on {first_day} ({settings.CLICKS_START_DATE.name} or the earliest topic start), "
            f"after the last declared topic ends ({latest_end}) and its {CLICKS_DAYS_AFTER_END} days of refetch: "
            f"set {settings.CLICKS_START_DATE.name} to a day before {end}"
        )
    return end


#: without a setting and without a dated topic, the weekly partitions cover this many recent weeks
RECENT_WEEKS = 26


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def weeks_start_day(environ: dict[str, str] | None = None, today: date | None = None) -> date:
    """First week (a Monday) of `cluster_weeks`: the Monday of ``TOPICMAP_WEEKS_START`` if set, else of the earliest
    topic start in the topics file, else of ``RECENT_WEEKS`` weeks ago.

    Weeks start where a declared topic can first have stories, not years before, so the launch dialog shows the
    weeks that matter. A topic declared later with an earlier start needs the code location reloaded (or the
    setting): its weeks before the first partition cannot be built."""
    today = today or datetime.now(UTC).date()
    setting, earliest = _start_setting(environ, settings.WEEKS_START)
    if setting is not None:
        return monday_of(setting)
    if earliest is not None:
        return monday_of(min(earliest, today))
    return monday_of(today - timedelta(weeks=RECENT_WEEKS))


def weeks_end_day(first_week: date, environ: Mapping[str, str] | None = None) -> date | None:
    """The end (exclusive: the Monday after the last week) of `cluster_weeks`' weekly partitions: the week holding
    the latest ``end_date`` of the topics file is the last one, so no week runs on past every topic's end (nor
    past the current week, which Dagster's time partitions never pass). None, weeks up to the current one, when
    no topic declares an end or one is open-ended (it keeps running: each new week is its week). A topic
    declared later with a later end needs the code location reloaded."""
    latest = latest_topic_end(environ)
    if latest is None:
        return None
    end = monday_of(latest) + timedelta(weeks=1)
    if end <= first_week:
        raise ValueError(
            f"the weekly partitions would start on {first_week} ({settings.WEEKS_START.name} or the earliest topic start), "
            f"after the last declared topic ends ({latest}): set {settings.WEEKS_START.name} to a day before that end"
        )
    return end


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
