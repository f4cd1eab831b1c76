"""Partitions shared by the asset groups, and where the publication-day and weekly partitions start."""

import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import yaml

#: One partition per declared topic, kept in step with topics.yaml by the topic registry sensor.
topics_partitions = dg.DynamicPartitionsDefinition(name="topics")

CLICKS_START_ENV = "TOPICMAP_CLICKS_START_DATE"
#: without a setting and without a dated topic, click partitions cover this many recent days
RECENT_DAYS = 90
#: Media Cloud's earliest trusted publish date: no click partition before it
EARLIEST_CLICKS_DAY = date(2008, 1, 1)


def earliest_topic_start(path: str | Path) -> date | None:
    """The earliest ``start_date`` in a topics file, or None (no file, no dated topic). Read with plain YAML: a
    broken topic is the topic registry's to report, here it is only left out."""
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    declared = loaded.get("topics") if isinstance(loaded, dict) else None
    starts = []
    for topic in declared if isinstance(declared, list) else []:
        value = topic.get("start_date") if isinstance(topic, dict) else None
        try:
            starts.append(value if isinstance(value, date) else date.fromisoformat(str(value)))
        except ValueError:
            continue
    return min(starts, default=None)


def _start_setting(environ: dict[str, str], name: str) -> tuple[date | None, date | None]:
    """(the ISO day set in ``name``, else None; the earliest topic start of the topics file, else None)."""
    setting = (environ.get(name) or "").strip()
    if setting:
        try:
            return date.fromisoformat(setting), None
        except ValueError as exc:
            raise ValueError(f"{name} must be an ISO day like 2026-01-05, got {setting!r}") from exc
    return None, earliest_topic_start(environ.get("TOPICMAP_TOPICS_FILE") or "topics.yaml")


def clicks_start_day(environ: dict[str, str] | None = None, today: date | None = None) -> date:
    """First publication-day partition of `click_totals`: ``TOPICMAP_CLICKS_START_DATE`` if set, else the earliest
    topic start in the topics file (``TOPICMAP_TOPICS_FILE``, default topics.yaml), else ``RECENT_DAYS`` ago.

    Media Cloud's own partitions began in 2008, which gives some 7,000 days and a launch dialog whose default
    window shows none of the days that matter; the first day a declared topic can have stories is where clicks
    can start. A topic declared later with an earlier start needs the code location reloaded (or the setting)."""
    today = today or datetime.now(UTC).date()
    setting, earliest = _start_setting(dict(os.environ) if environ is None else environ, CLICKS_START_ENV)
    if setting is not None:
        return max(setting, EARLIEST_CLICKS_DAY)
    if earliest is not None:
        return max(min(earliest, today - timedelta(days=1)), EARLIEST_CLICKS_DAY)
    return today - timedelta(days=RECENT_DAYS)


WEEKS_START_ENV = "TOPICMAP_WEEKS_START"
#: without a setting and without a dated topic, the weekly partitions cover this many recent weeks
RECENT_WEEKS = 26


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def weeks_start_day(environ: dict[str, str] | None = None, today: date | None = None) -> date:
    """First week (a Monday) of `cluster_weeks`: the Monday of ``TOPICMAP_WEEKS_START`` if set, else of the earliest
    topic start in the topics file, else of ``RECENT_WEEKS`` weeks ago.

    Dagster computes staleness along a self-dependency only while the asset has fewer than 100 partitions in all
    (topics x weeks; ``SKIP_PARTITION_DATA_VERSION_SELF_DEPENDENCY_THRESHOLD`` in 1.13), so weeks start where a
    declared topic can first have stories, not years before. A topic declared later with an earlier start needs
    the code location reloaded (or the setting): its weeks before the first partition cannot be built."""
    today = today or datetime.now(UTC).date()
    setting, earliest = _start_setting(dict(os.environ) if environ is None else environ, WEEKS_START_ENV)
    if setting is not None:
        return monday_of(setting)
    if earliest is not None:
        return monday_of(min(earliest, today))
    return monday_of(today - timedelta(weeks=RECENT_WEEKS))
