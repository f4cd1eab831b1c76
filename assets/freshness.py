"""Freshness of the stages that run on a cadence: the asset checks `clicks_fresh` and `snapshots_fresh`.

A stage is late only while it has a cadence: click refetches run while a declared topic's publication days still
have a 3-day or 30-day stage to come, snapshots are refreshed while a topic is running or its clicks are still
arriving. The checks read the topics file each time they are evaluated (an open-ended or newly declared topic
needs no reload of the code location), and pass, saying why, while no topic has a cadence. The topic registry
sensor evaluates them once an hour (:func:`freshness_evaluations`, stored without a run); "Execute" on the asset's
Checks tab evaluates them at once. CC-NEWS is loaded day by day by the ``ccnews_yesterday`` schedule whenever it
is used: a freshness policy that does not depend on the topics.
"""

from datetime import UTC, date, datetime, timedelta

import dagster as dg

from assets.partitions import declared_topic_dates, topics_file_path
from topicmap.topics.calendar import click_cadence, snapshot_cadence

#: the refetch sensors request each day's runs as they fall due, every day: a day without a click run is late
CLICKS_WARN_AFTER = timedelta(hours=26)
CLICKS_FAIL_AFTER = timedelta(hours=48)
#: the weekly_snapshots schedule runs Mondays at 05:00 UTC; its snapshots are written by 07:00
WEEKLY_SNAPSHOT_DEADLINE_HOUR = 7
#: the ccnews_yesterday schedule loads the day before at 06:00 UTC (a day is a few GB): done by noon
CCNEWS_DEADLINE = "0 12 * * *"

#: a CC-NEWS day must have been loaded in the 24 hours before each noon (UTC)
CCNEWS_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron=CCNEWS_DEADLINE, lower_bound_delta=timedelta(hours=24)
)

CLICKS_FRESH = "clicks_fresh"
SNAPSHOTS_FRESH = "snapshots_fresh"
CLICK_TOTALS = dg.AssetKey("click_totals")
SNAPSHOTS = dg.AssetKey("snapshots")


def last_deadline(now: datetime) -> datetime:
    """The latest Monday 07:00 UTC at or before ``now``: the weekly snapshots' deadline."""
    monday = (now - timedelta(days=now.weekday())).replace(
        hour=WEEKLY_SNAPSHOT_DEADLINE_HOUR, minute=0, second=0, microsecond=0
    )
    return monday if monday <= now else monday - timedelta(weeks=1)


def click_verdict(
    spans: list[tuple[date, date]], now: datetime, last: datetime | None
) -> tuple[bool, dg.AssetCheckSeverity, str]:
    """(passed, severity, why) of `clicks_fresh`: while some declared topic's days have a click stage due (its
    start + 4 days to its end + 31 days), click_totals must have materialized within 26 hours (else a warning)
    and 48 hours (else an error)."""
    if not click_cadence(spans, now.date()):
        return (
            True,
            dg.AssetCheckSeverity.WARN,
            "no declared topic has a click stage due: nothing can be late",
        )
    if last is None:
        return (
            False,
            dg.AssetCheckSeverity.ERROR,
            "a declared topic has click stages due; click_totals never materialized",
        )
    age = now - last
    hours = f"{age.total_seconds() / 3600:.1f} h"
    if age > CLICKS_FAIL_AFTER:
        return (
            False,
            dg.AssetCheckSeverity.ERROR,
            f"last click_totals materialization {hours} ago (over 48 h)",
        )
    if age > CLICKS_WARN_AFTER:
        return False, dg.AssetCheckSeverity.WARN, f"last click_totals materialization {hours} ago (over 26 h)"
    return True, dg.AssetCheckSeverity.WARN, f"last click_totals materialization {hours} ago"


def snapshot_verdict(
    spans: list[tuple[date, date]], now: datetime, last: datetime | None
) -> tuple[bool, dg.AssetCheckSeverity, str]:
    """(passed, severity, why) of `snapshots_fresh`: while some declared topic is running or still gets clicks
    (its start to its end + 31 days), a snapshot must have been written in the week before the last Monday
    07:00 UTC."""
    if not snapshot_cadence(spans, now.date()):
        return (
            True,
            dg.AssetCheckSeverity.WARN,
            "no declared topic is running or getting clicks: nothing can be late",
        )
    deadline = last_deadline(now)
    since = deadline - timedelta(weeks=1)
    if last is None or last < since:
        when = "never" if last is None else last.isoformat(timespec="minutes")
        return (
            False,
            dg.AssetCheckSeverity.ERROR,
            f"no snapshot between {since:%Y-%m-%d %H:%M} and {deadline:%Y-%m-%d %H:%M} UTC (last: {when})",
        )
    return True, dg.AssetCheckSeverity.WARN, f"last snapshot {last.isoformat(timespec='minutes')}"


def _last_materialized(instance: dg.DagsterInstance, key: dg.AssetKey) -> datetime | None:
    records = instance.fetch_materializations(key, limit=1).records
    return datetime.fromtimestamp(records[0].timestamp, UTC) if records else None


def _result(
    asset: dg.AssetKey, name: str, verdict: tuple[bool, dg.AssetCheckSeverity, str]
) -> dg.AssetCheckResult:
    passed, severity, why = verdict
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=name,
        passed=passed,
        severity=severity,
        description=why,
        metadata={"why": why, "topics_file": topics_file_path()},
    )


def freshness_results(instance: dg.DagsterInstance, now: datetime | None = None) -> list[dg.AssetCheckResult]:
    """Both checks as of ``now``, from the topics file read now."""
    now = now or datetime.now(UTC)
    spans = declared_topic_dates(topics_file_path(), now.date())
    return [
        _result(
            CLICK_TOTALS, CLICKS_FRESH, click_verdict(spans, now, _last_materialized(instance, CLICK_TOTALS))
        ),
        _result(
            SNAPSHOTS, SNAPSHOTS_FRESH, snapshot_verdict(spans, now, _last_materialized(instance, SNAPSHOTS))
        ),
    ]


def freshness_evaluations(
    instance: dg.DagsterInstance, now: datetime | None = None
) -> list[dg.AssetCheckEvaluation]:
    """The checks' evaluations, as a sensor stores them (``SensorResult.asset_events``)."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=result.asset_key,
            check_name=result.check_name,
            passed=result.passed,
            severity=result.severity,
            description=result.description,
            metadata=result.metadata,
        )
        for result in freshness_results(instance, now)
    ]


def _freshness_check(asset: dg.AssetKey, name: str, description: str) -> dg.AssetChecksDefinition:
    """The asset check ``name``: its result of :func:`freshness_results`, evaluated when executed."""

    @dg.asset_check(asset=asset, name=name, description=description)
    def freshness_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return next(result for result in freshness_results(context.instance) if result.check_name == name)

    return freshness_check


FRESHNESS_CHECKS = [
    _freshness_check(
        CLICK_TOTALS,
        CLICKS_FRESH,
        "While a declared topic's publication days have a 3-day or 30-day click stage due, click_totals "
        "materialized within 26 hours (a warning past that) and 48 hours (an error). Passes while no topic has a "
        "stage due. Reads the topics file when evaluated (hourly, by the topic_registry sensor).",
    ),
    _freshness_check(
        SNAPSHOTS,
        SNAPSHOTS_FRESH,
        "While a declared topic is running or still gets clicks, a snapshot was written in the week before the "
        "last Monday 07:00 UTC (weekly_snapshots runs Mondays at 05:00). Passes while no topic is. Reads the "
        "topics file when evaluated (hourly, by the topic_registry sensor).",
    ),
]
