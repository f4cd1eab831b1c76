"""Scheduled catch-up work, all listed under Automation and running by default: none needs a credential to decide,
and each skips with its reason in the tick when there is nothing to do or a credential it needs is missing:

* ``click_totals_catch_up`` — once a day (after 04:00 UTC): one asset backfill (Backfills tab) over every
  publication day whose 3-day or 30-day click stage is due and still lacking, i.e. days missed by the refetch
  sensors (downtime, a token set late, failed runs). Days with a click run in progress are left out.
* ``weekly_snapshots`` — Mondays 05:00 UTC: a `snapshot_job` run for every topic whose spidering is complete and
  whose snapshot is missing or older than its data.
* ``snapshot_refresh`` — hourly: a `snapshot_job` run for a topic as soon as clicks or Facebook statistics of its
  stories arrived after its newest snapshot (Media Cloud re-queued such stories to Solr; here the snapshot is redone).

Each launches only what is missing or stale: run keys carry the data's newest timestamp, so an unchanged topic or
day is never requested twice.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import dagster as dg

from assets.beta import beta_api
from assets.jobs import API_TAG, snapshot_job
from assets.partitions import topics_partitions
from assets.social import click_totals
from resources.social import BitlyResource
from resources.store import TopicStoreResource
from sensors.clicks import NO_CLICK_DAYS, bitly_not_configured, click_days, click_runs_in_progress
from sensors.launched import drop_launched
from sensors.topic_runs import topic_run_in_progress, topic_run_request
from topicmap.social import refetch

if TYPE_CHECKING:
    from topicmap.snapshots.freshness import TopicFreshness
    from topicmap.store.topic_store import TopicStore

#: the daily catch-up fires on the first tick at or after this hour (UTC) of each day
CATCH_UP_HOUR_UTC = 4
#: publication days one catch-up backfill covers at most (the rest the next day)
CATCH_UP_MAX_DAYS = 366
#: a topic's spidering is over (the post-spider stages have run or are due): its snapshot can be refreshed
SPIDERED_STATE = "spidering completed"


def catch_up_days(store: TopicStore, now: datetime, partitions: list[date], busy: set[date]) -> list[date]:
    """Publication days of ``partitions`` (oldest first, at most CATCH_UP_MAX_DAYS) with topic stories lacking a
    stage that is due."""
    earliest = partitions[0]
    # the store's reads (SQLAlchemy) load with the tick, not with the code location
    from topicmap.social.store import days_lacking_stage

    days: set[date] = set()
    for stage in refetch.STAGES:
        span = refetch.stage_day_range(stage, now, earliest)
        if span is None:
            continue
        limit = CATCH_UP_MAX_DAYS + len(busy)
        days.update(
            c.day for c in days_lacking_stage(store, stage, span[0], span[1], now, limit) if c.stories
        )
    return sorted(day for day in (days - busy) & set(partitions))[:CATCH_UP_MAX_DAYS]


@dg.sensor(
    name="click_totals_catch_up",
    # asset_selection, not a job (nor target=): only a sensor declared with an asset selection may request a
    # backfill (its runs are the backfill daemon's, tagged with the backfill and, here, with topicmap/api=bitly)
    asset_selection=dg.AssetSelection.assets(click_totals),
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        f"Daily click catch-up (first tick after {CATCH_UP_HOUR_UTC:02d}:00 UTC): launches ONE asset backfill of "
        "`click_totals` over every publication day whose 3-day or 30-day stage is due and still lacking for some "
        f"topic story (at most {CATCH_UP_MAX_DAYS} days; 31 days per run), visible in the Backfills tab. Days with "
        "a click run in progress are left out; while Bit.ly has no token, each tick says so and launches nothing. "
        "The refetch sensors do the regular work; this one repairs what they missed. Cursor: the last day (UTC) "
        "it ran."
    ),
)
def click_totals_catch_up(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, bitly: BitlyResource
) -> dg.SensorResult:
    now = refetch.current_time()
    today = now.date().isoformat()
    if context.cursor == today:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"already caught up today ({today})"))
    if now.hour < CATCH_UP_HOUR_UTC:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"waiting for {CATCH_UP_HOUR_UTC:02d}:00 UTC"))
    skip = bitly_not_configured(bitly)
    if skip is not None:
        return dg.SensorResult(skip_reason=skip)
    busy: set[date] = set()
    for stage in refetch.STAGES:
        busy |= refetch.busy_days(click_runs_in_progress(context.instance), stage)
    partitions = click_days(context.instance)
    if not partitions:
        return dg.SensorResult(skip_reason=dg.SkipReason(NO_CLICK_DAYS))
    days = catch_up_days(store.open(), now, partitions, busy)
    if not days:
        return dg.SensorResult(
            skip_reason=dg.SkipReason("no publication day has a due click stage lacking"), cursor=today
        )
    context.log.info(f"backfilling click_totals over {len(days)} days {days[0]}..{days[-1]}")
    return dg.SensorResult(
        run_requests=[click_backfill_request(context.repository_def, days)],
        cursor=today,
    )


def click_backfill_request(repository_def: dg.RepositoryDefinition | None, days: list[date]) -> dg.RunRequest:
    """A run request the sensor daemon turns into an asset backfill over ``days`` of `click_totals` (stage auto)."""
    # AssetGraphSubset is how Dagster's own automation asks for a backfill; no public constructor exists in 1.13.
    from assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey

    if repository_def is None:
        raise dg.DagsterInvariantViolationError("the catch-up needs the code location's asset graph")
    subset = AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(click_totals.key, day.isoformat()) for day in days},
        repository_def.asset_graph,
    )
    return dg.RunRequest.for_asset_graph_subset(
        subset, tags={API_TAG: "bitly", "topicmap/catch_up": days[-1].isoformat()}
    )


def snapshot_request(freshness: TopicFreshness, metrics_only: bool, reason: str) -> dg.RunRequest:
    """The snapshot_job run of a stale topic, its run key the newest change it follows (``metrics_only``: of its
    clicks and statistics), so one state of the data is requested once."""
    marker = (freshness.metrics_at if metrics_only else freshness.data_at) or datetime.min.replace(tzinfo=UTC)
    return topic_run_request(
        freshness.topic,
        f"snapshot:{freshness.topic}:{reason}:{marker.isoformat()}",
        {"topicmap/snapshot_reason": reason},
    )


def _snapshot_requests(
    context: dg.SensorEvaluationContext | dg.ScheduleEvaluationContext,
    store: TopicStoreResource,
    metrics_only: bool,
    reason: str,
) -> tuple[list[dg.RunRequest], list[str]]:
    """snapshot_job runs for spidered topics whose snapshot is missing or older than their data (or, with
    ``metrics_only``, than their clicks and statistics), skipping topics with a run in progress."""
    from topicmap.snapshots.freshness import (
        topic_freshness,
    )  # SQLAlchemy loads with the tick, not the code location

    topic_store = store.open()
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    for topic in sorted(context.instance.get_dynamic_partitions(topics_partitions.name)):
        freshness = topic_freshness(topic_store, topic)
        if freshness is None or freshness.state != SPIDERED_STATE:
            notes.append(f"{topic}: not spidered yet")
            continue
        if freshness.removed:  # no longer declared: its data is kept, but it is not refreshed
            notes.append(f"{topic}: removed from the topics file")
            continue
        if not freshness.stale(metrics_only):
            notes.append(f"{topic}: snapshot up to date")
            continue
        if topic_run_in_progress(context.instance, topic):
            notes.append(f"{topic}: a run of this topic is in progress")
            continue
        requests.append(snapshot_request(freshness, metrics_only, reason))
        notes.append(f"{topic}: snapshot requested ({reason})")
    return requests, notes


@dg.schedule(
    name="weekly_snapshots",
    cron_schedule="0 5 * * 1",
    execution_timezone="UTC",
    target=snapshot_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Mondays 05:00 UTC: a `snapshot_job` run for each declared topic whose spidering is complete and whose snapshot is "
        "missing or older than its stories, merges, clicks or Facebook statistics. Up-to-date topics get nothing; "
        "a snapshot whose inputs did not change in content keeps its files."
    ),
)
def weekly_snapshots(
    context: dg.ScheduleEvaluationContext, store: TopicStoreResource
) -> dg.SkipReason | list:
    requests, notes = _snapshot_requests(context, store, metrics_only=False, reason="weekly")
    return requests or dg.SkipReason("; ".join(notes) or "no topics")


#: the snapshot refresh sensor's name, under which it looks for the runs it launched
SNAPSHOT_REFRESH = "snapshot_refresh"


@dg.sensor(
    name=SNAPSHOT_REFRESH,
    target=snapshot_job,
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Hourly: a `snapshot_job` run for each spidered topic still in the topics file as soon as Bit.ly clicks "
        "(3-day or 30-day) or Facebook statistics of its stories arrived after its newest snapshot, so late "
        "figures reach the snapshot without waiting for the week. Run key: topic + the newest figure's time (one run per arrival)."
    ),
)
def snapshot_refresh(context: dg.SensorEvaluationContext, store: TopicStoreResource) -> dg.SensorResult:
    requests, notes = _snapshot_requests(context, store, metrics_only=True, reason="late-metrics")
    requests, launched = drop_launched(context.instance, SNAPSHOT_REFRESH, requests)
    if not requests:
        return dg.SensorResult(skip_reason=dg.SkipReason("; ".join(notes + launched) or "no topics"))
    return dg.SensorResult(run_requests=requests)


#: Dagster's automation sensor for the assets whose rule is an automation condition (assets/conditions.py): it
#: evaluates `cluster_weeks`' condition every 30 seconds and launches what it requests as one backfill, so a
#: topic's weeks follow new weeks and rebuilt stories like the spider follows its topics: running by default.
#: Evaluated in the code server (``use_user_code_server``, a beta parameter): the condition keeps each topic to its
#: own weeks with Python that reads the topics file, which the daemon cannot run.
cluster_weeks_automation = beta_api(
    dg.AutomationConditionSensorDefinition,
    "cluster_weeks_automation",
    target=dg.AssetSelection.assets("cluster_weeks"),
    use_user_code_server=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description=(
        "Builds a topic's weeks of clusters (`cluster_weeks`, one backfill, one run per topic) when a week comes "
        "into the week dimension (the topic registry adds each week once it is over) and whenever the topic's "
        "deduplicated stories are rebuilt (the topic's weeks, from the week of its "
        "start_date to the week of its end_date in the topics file: the week dimension, shared by all topics, "
        "holds weeks of other topics too), never while the stories are missing or being rebuilt. Evaluates the "
        "asset's automation condition in the code server; each evaluation shows on the asset's Automation tab."
    ),
)

AUTOMATION_SENSORS = [click_totals_catch_up, snapshot_refresh, cluster_weeks_automation]
AUTOMATION_SCHEDULES = [weekly_snapshots]
