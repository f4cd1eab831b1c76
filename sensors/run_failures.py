"""Dead holders release at once: the URL claims of a run that ended failed or canceled are freed by the next tick.

A spider step claims the URLs it fetches under its run's id (topicmap.spider.claims.run_holder) with a lease it
renews while it works. A run that failed (its worker died and run monitoring or its code server marked it, or a
step failed) or was canceled renews nothing more, but without this its claims would hold their URLs until the
leases ran out (120 s): the retry or the next iteration would find the URLs taken and wait. These sensors react to
each run that reaches FAILURE or CANCELED and release exactly that run's claims. Releasing is idempotent (a run
whose claims are already free releases nothing) and costs one read of the small table of live holders when the
run held none. What was done is written to the tick's log and, when the run held claims, to the run's own log.
"""

import dagster as dg

from resources.store import TopicStoreResource
from sensors.settings import SENSOR_INTERVAL_SECONDS

#: a tick that finds no ended run reads one index of the event log; run monitoring itself polls every 30 s
RELEASE_INTERVAL_SECONDS = min(SENSOR_INTERVAL_SECONDS, 10)


def release_claims_of(context: dg.RunStatusSensorContext, store: TopicStoreResource) -> None:
    """Release the claims of the run ``context`` reacts to; say what was freed in the tick and the run's logs."""
    from topicmap.spider.claims import release_run_claims  # SQLAlchemy loads with the tick

    run = context.dagster_run
    ended = "failed" if run.status == dg.DagsterRunStatus.FAILURE else "was canceled"
    released = release_run_claims(store.open(), run.run_id)
    if not released.holders:
        context.log.info(f"run {run.run_id} ({run.job_name}) {ended}: it held no URL claims")
        return
    message = (
        f"Released {released.urls} URL claim(s) this run held when it {ended}, at once rather than when their "
        f"leases run out (holders {', '.join(released.holders)})"
    )
    context.instance.report_engine_event(message, run)
    context.log.info(f"run {run.run_id} ({run.job_name}) {ended}: {message}")


@dg.run_failure_sensor(
    name="release_claims_of_failed_runs",
    minimum_interval_seconds=RELEASE_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "When a run fails (its worker died, a step failed), frees the URLs its spider steps had claimed, so the "
        "retry or the next iteration fetches them at once instead of after the claims' 120 s leases. Launches "
        "nothing; the tick's log and the run's log say what was freed."
    ),
)
def release_claims_of_failed_runs(context: dg.RunFailureSensorContext, store: TopicStoreResource) -> None:
    release_claims_of(context, store)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.CANCELED,
    name="release_claims_of_canceled_runs",
    minimum_interval_seconds=RELEASE_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "When a run is canceled, frees the URLs its spider steps had claimed and not released (a step killed "
        "before it could), so the next iteration fetches them at once. Launches nothing; the tick's log and the "
        "run's log say what was freed."
    ),
)
def release_claims_of_canceled_runs(context: dg.RunStatusSensorContext, store: TopicStoreResource) -> None:
    release_claims_of(context, store)
