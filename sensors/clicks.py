"""The click refetch sensors: one run per publication day when its 3-day, then its 30-day click stage is due.

The decisions are in topicmap.social.refetch (see its docstring); a tick only reads the store's per-day counts and the
instance's in-progress runs, and requests runs with stable run keys, so replaying a tick requests nothing new.
"""

from datetime import date

import dagster as dg

from assets.jobs import click_totals_job
from assets.social import ClickStageConfig, click_totals, publication_days
from resources.social import BitlyResource
from resources.store import TopicStoreResource
from sensors.launched import drop_launched
from sensors.settings import RUNS_IN_PROGRESS, SENSOR_INTERVAL_SECONDS
from topicmap import settings
from topicmap.social import refetch
from topicmap.social.clicks import STAGE_3D, STAGE_30D

#: runs requested per tick at most (the rest on the next tick); module-level so tests can lower it
MAX_DAYS_PER_TICK = refetch.MAX_DAYS_PER_TICK


def click_runs_in_progress(instance: dg.DagsterInstance) -> list[dict[str, str]]:
    """Tags of the queued or running runs that materialize click_totals (the job's, or any run selecting it)."""
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=RUNS_IN_PROGRESS), limit=1000)
    return [
        dict(record.dagster_run.tags)
        for record in records
        if record.dagster_run.job_name == click_totals_job.name
        or (record.dagster_run.asset_selection and click_totals.key in record.dagster_run.asset_selection)
    ]


def click_days(instance: dg.DagsterInstance) -> list[date]:
    """The publication-day partitions, oldest first: the days the declared topics span (the topic registry keeps
    them), so no run is requested for a day the asset has no partition for (it would fail the tick)."""
    return sorted(date.fromisoformat(key) for key in instance.get_dynamic_partitions(publication_days.name))


NO_CLICK_DAYS = (
    "no publication-day partition: no declared topic spans a past day (the topic registry adds them)"
)


def bitly_not_configured(bitly: BitlyResource) -> dg.SkipReason | None:
    """A visible reason to request nothing when Bit.ly has no token: every such run would fail."""
    if bitly.configured:
        return None
    return dg.SkipReason(
        f"Bit.ly is not configured ({settings.BITLY_TOKEN.name} is not set): no click_totals run requested; due days stay "
        "due and are requested once a token is set"
    )


def refetch_sensor_name(stage: str) -> str:
    """The name of the ``stage`` refetch sensor, under which it looks for the runs it launched."""
    return f"click_refetch_{stage}"


def evaluate_click_refetch(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, bitly: BitlyResource, stage: str
) -> dg.SensorResult:
    """One tick of the ``stage`` sensor."""
    skip = bitly_not_configured(bitly)
    if skip is not None:
        return dg.SensorResult(skip_reason=skip)
    now = refetch.current_time()
    days = click_days(context.instance)
    if not days:
        return dg.SensorResult(skip_reason=dg.SkipReason(NO_CLICK_DAYS))
    earliest = days[0]
    span = refetch.stage_day_range(stage, now, earliest)
    if span is None:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no publication day has its {stage} stage due yet"))
    # the store's reads (SQLAlchemy) load with the tick, not with the code location
    from topicmap.social.store import days_lacking_stage

    busy = refetch.busy_days(click_runs_in_progress(context.instance), stage)
    candidates = days_lacking_stage(
        store.open(), stage, span[0], span[1], now, MAX_DAYS_PER_TICK + len(busy) + 1
    )
    partitions = set(days)  # a story dated outside every topic's dates has no partition (docs/dagster.md)
    candidates = [c for c in candidates if c.day in partitions]
    plan = refetch.plan_refetch(stage, candidates, context.cursor, now, busy, MAX_DAYS_PER_TICK, earliest)
    requests, launched = drop_launched(
        context.instance,
        refetch_sensor_name(stage),
        [
            dg.RunRequest(
                run_key=request.run_key,
                partition_key=request.day.isoformat(),
                run_config=dg.RunConfig(ops={click_totals.op.name: ClickStageConfig(stage=stage)}),
                tags={refetch.STAGE_TAG: stage},
                job_name=click_totals_job.name,
            )
            for request in plan.requests
        ],
    )
    summary = "; ".join([plan.describe(stage), *launched])
    context.log.info(summary)
    if not requests:
        return dg.SensorResult(skip_reason=dg.SkipReason(summary), cursor=plan.cursor)
    return dg.SensorResult(run_requests=requests, cursor=plan.cursor)


def _description(stage: str, delay: str) -> str:
    return (
        f"Requests one `click_totals_job` run per publication day once its {delay} stage is due (the day's end + {delay}), "
        f"run key `clicks:{{day}}:{stage}`, oldest first, at most {MAX_DAYS_PER_TICK} per tick; catches up after "
        "downtime, re-requests a day once for stories that arrive late (key suffix `late-{stories_id}`) and once per "
        "merge into a story whose figures predate it (`late-{stories_id}-merge-{id}`: the merged story's URLs count "
        "towards its survivor), and leaves "
        "days with a click run in progress alone. Requests nothing (and says why) while Bit.ly has no token. "
        "Cursor: the last day requested."
    )


@dg.sensor(
    name=refetch_sensor_name(STAGE_3D),
    target=click_totals_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=_description(STAGE_3D, "3 days")
    + " Days whose 30-day stage is due are left to click_refetch_30d.",
)
def click_refetch_3d(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, bitly: BitlyResource
) -> dg.SensorResult:
    return evaluate_click_refetch(context, store, bitly, STAGE_3D)


@dg.sensor(
    name=refetch_sensor_name(STAGE_30D),
    target=click_totals_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=_description(STAGE_30D, "30 days") + " The 30-day fetch also fills a missing 3-day figure.",
)
def click_refetch_30d(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, bitly: BitlyResource
) -> dg.SensorResult:
    return evaluate_click_refetch(context, store, bitly, STAGE_30D)
