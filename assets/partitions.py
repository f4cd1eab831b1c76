"""Partitions shared by the asset groups, and where the publication-day partitions start."""

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


def clicks_start_day(environ: dict[str, str] | None = None, today: date | None = None) -> date:
    """First publication-day partition of `click_totals`: ``TOPICMAP_CLICKS_START_DATE`` if set, else the earliest
    topic start in the topics file (``TOPICMAP_TOPICS_FILE``, default topics.yaml), else ``RECENT_DAYS`` ago.

    Media Cloud's own partitions began in 2008, which gives some 7,000 days and a launch dialog whose default
    window shows none of the days that matter; the first day a declared topic can have stories is where clicks
    can start. A topic declared later with an earlier start needs the code location reloaded (or the setting)."""
    environ = dict(os.environ) if environ is None else environ
    today = today or datetime.now(UTC).date()
    setting = (environ.get(CLICKS_START_ENV) or "").strip()
    if setting:
        try:
            return max(date.fromisoformat(setting), EARLIEST_CLICKS_DAY)
        except ValueError as exc:
            raise ValueError(
                f"{CLICKS_START_ENV} must be an ISO day like 2026-01-01, got {setting!r}"
            ) from exc
    earliest = earliest_topic_start(environ.get("TOPICMAP_TOPICS_FILE") or "topics.yaml")
    if earliest is not None:
        return max(min(earliest, today - timedelta(days=1)), EARLIEST_CLICKS_DAY)
    return today - timedelta(days=RECENT_DAYS)
