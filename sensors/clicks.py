"""The click refetch sensors: one run per publication day when its 3-day, then its 30-day click stage is due.

The decisions are in topicmap.social.refetch (see its docstring); a tick only reads the store's per-day counts and the
instance's in-progress runs, and requests runs with stable run keys, so replaying a tick requests nothing new.
"""

import dagster as dg

from assets.social import ClickStageConfig, click_totals
from resources.store import TopicStoreResource
from sensors.settings import RUNS_IN_PROGRESS, SENSOR_INTERVAL_SECONDS
from topicmap.social import refetch
from topicmap.social.clicks import STAGE_3D, STAGE_30D
from topicmap.social.store import days_lacking_stage

#: runs requested per tick at most (the rest on the next tick); module-level so tests can lower it
MAX_DAYS_PER_TICK = refetch.MAX_DAYS_PER_TICK


def _click_runs_in_progress(instance: dg.DagsterInstance) -> list[dict[str, str]]:
    """Tags of the queued or running runs that materialize click_totals."""
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=RUNS_IN_PROGRESS), limit=1000)
    return [
        dict(record.dagster_run.tags)
        for record in records
        if record.dagster_run.asset_selection and click_totals.key in record.dagster_run.asset_selection
    ]


def evaluate_click_refetch(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, stage: str
) -> dg.SensorResult:
    """One tick of the ``stage`` sensor."""
    now = refetch.current_time()
    span = refetch.stage_day_range(stage, now)
    if span is None:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no publication day has its {stage} stage due yet"))
    busy = refetch.busy_days(_click_runs_in_progress(context.instance), stage)
    candidates = days_lacking_stage(
        store.open(), stage, span[0], span[1], now, MAX_DAYS_PER_TICK + len(busy) + 1
    )
    plan = refetch.plan_refetch(stage, candidates, context.cursor, now, busy, MAX_DAYS_PER_TICK)
    context.log.info(plan.describe(stage))
    if not plan.requests:
        return dg.SensorResult(skip_reason=dg.SkipReason(plan.describe(stage)), cursor=plan.cursor)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=request.run_key,
                partition_key=request.day.isoformat(),
                run_config=dg.RunConfig(ops={click_totals.op.name: ClickStageConfig(stage=stage)}),
                tags={refetch.STAGE_TAG: stage},
            )
            for request in plan.requests
        ],
        cursor=plan.cursor,
    )


def _description(stage: str, delay: str) -> str:
    return (
        f"Requests one click_totals run per publication day once its {delay} stage is due (the day's end + {delay}), "
        f"run key clicks:<day>:{stage}, oldest first, at most {MAX_DAYS_PER_TICK} per tick; catches up after "
        "downtime, re-requests a day once for stories that arrive late (key suffix late-<stories_id>), and leaves "
        "days with a click run in progress alone. Cursor: the last day requested."
    )


@dg.sensor(
    name="click_refetch_3d",
    target=dg.AssetSelection.assets(click_totals),
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=_description(STAGE_3D, "3 days")
    + " Days whose 30-day stage is due are left to click_refetch_30d.",
)
def click_refetch_3d(context: dg.SensorEvaluationContext, store: TopicStoreResource) -> dg.SensorResult:
    return evaluate_click_refetch(context, store, STAGE_3D)


@dg.sensor(
    name="click_refetch_30d",
    target=dg.AssetSelection.assets(click_totals),
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=_description(STAGE_30D, "30 days") + " The 30-day fetch also fills a missing 3-day figure.",
)
def click_refetch_30d(context: dg.SensorEvaluationContext, store: TopicStoreResource) -> dg.SensorResult:
    return evaluate_click_refetch(context, store, STAGE_30D)
