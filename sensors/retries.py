"""Dagster's run retries, as the project uses them: a re-execution by hand gets its own retries, and a failed run says
in its log whether it will be retried and why (not).

Dagster's run retries (the instance's ``run_retries``, deploy/dagster.yaml) re-execute a failed run from its failure
while its run group (the first run and every re-execution of it) holds no more than ``dagster/max_retries`` (default:
the instance's ``max_retries``) re-executions: the re-executions by hand count too. A killed re-execution of a run
that had failed a few times before was therefore never retried, and Dagster only tags such a run
``dagster/will_retry=false``, logging nothing. Here:

* the run queue (orchestration/coordinator.py) gives a re-execution by hand the instance's ``max_retries`` afresh: its
  ``dagster/max_retries`` is the re-executions its group already holds plus that number (its automatic retries
  inherit the tag, so they count from it);
* the ``retry_decisions`` sensor writes into each failed run's log whether it will be retried, and why not: a step
  failed (retries are for crashes), the limit is reached (with the group's re-executions counted), retries are off.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from assets.dagster_internals import (
    MAX_RETRIES_TAG,
    RETRY_NUMBER_TAG,
    RETRY_ON_ASSET_OR_OP_FAILURE_TAG,
    RUN_FAILURE_REASON_TAG,
    WILL_RETRY_TAG,
)
from sensors.run_failures import RELEASE_INTERVAL_SECONDS

#: RUN_FAILURE_REASON_TAG's value for a run that failed because a step raised (Dagster's RunFailureReason)
STEP_FAILURE = "STEP_FAILURE"


def run_group(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[dg.DagsterRun]:
    """The run's group: its root run and every re-execution of it (automatic retries and those by hand)."""
    found = instance.get_run_group(run.run_id)
    return list(found[1]) if found is not None else [run]


def fresh_retry_budget(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dict[str, str]:
    """The ``dagster/max_retries`` tag that gives ``run``, a re-execution by hand, the instance's ``max_retries``
    automatic retries of its own: Dagster counts every re-execution its group already holds against the limit."""
    if not instance.run_retries_enabled:
        return {}
    group = run_group(instance, run)
    earlier = sum(1 for r in group if r.parent_run_id is not None and r.run_id != run.run_id)
    # a retry is launched while the group holds no more re-executions than the limit: this one, then its own
    return {MAX_RETRIES_TAG: str(earlier + 1 + instance.run_retries_max_retries)}


@dataclass(frozen=True)
class RetryDecision:
    """Whether Dagster's run retries re-execute a failed run, and why (not), as its log says it."""

    will_retry: bool
    reason: str


def retry_decision(instance: dg.DagsterInstance, run: dg.DagsterRun) -> RetryDecision:
    """Dagster's decision on the failed ``run`` (its ``dagster/will_retry`` tag, or the same rule when the tag is not
    written yet), with the reason read from the run's tags and its group."""
    if not instance.run_retries_enabled:
        return RetryDecision(
            False, "Not retried: run retries are disabled in this instance (run_retries.enabled)"
        )
    group = run_group(instance, run)
    automatic = sum(1 for r in group if RETRY_NUMBER_TAG in r.tags)
    by_hand = sum(1 for r in group if r.parent_run_id is not None and RETRY_NUMBER_TAG not in r.tags)
    root = next((r.run_id for r in group if r.parent_run_id is None), run.run_id)
    counted = (
        f"its run group holds {len(group) - 1} re-execution(s) of run {root[:8]} ({automatic} automatic "
        f"retr{'y' if automatic == 1 else 'ies'}, {by_hand} by hand)"
    )
    raw_limit = run.tags.get(MAX_RETRIES_TAG, str(instance.run_retries_max_retries))
    step_failures_retried = run.tags.get(
        RETRY_ON_ASSET_OR_OP_FAILURE_TAG, str(instance.run_retries_retry_on_asset_or_op_failure)
    )
    if run.tags.get(RUN_FAILURE_REASON_TAG) == STEP_FAILURE and step_failures_retried.lower() != "true":
        return RetryDecision(
            False,
            "Not retried: a step failed, and run retries re-execute crashed runs only (retry_on_asset_or_op_failure "
            "is false): the step's own retry policy has retried it within the run, and the spider sensor decides "
            "about a failed iteration",
        )
    if not raw_limit.isdigit():
        return RetryDecision(False, f"Not retried: {MAX_RETRIES_TAG}={raw_limit!r} is not a number")
    limit = int(raw_limit)
    will_retry = run.tags.get(WILL_RETRY_TAG, str(len(group) - 1 < limit).lower()) == "true"
    if will_retry:
        return RetryDecision(
            True, f"Will be retried by Dagster's run retries: {counted}, the limit is {limit}"
        )
    if len(group) - 1 >= limit:
        return RetryDecision(
            False,
            f"Not retried: the retry limit is reached: {counted}, the limit ({MAX_RETRIES_TAG}) is {limit}. A "
            f"re-execution by hand gets {instance.run_retries_max_retries} retries of its own",
        )
    return RetryDecision(False, f"Not retried by Dagster's run retries ({WILL_RETRY_TAG}=false): {counted}")


@dg.run_failure_sensor(
    name="retry_decisions",
    minimum_interval_seconds=RELEASE_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "When a run fails, writes into its log whether Dagster's run retries will re-execute it and why not: a step "
        "failed (run retries are for crashes), the retry limit is reached (the run group's re-executions counted, "
        "automatic and by hand), or retries are off. Launches nothing."
    ),
)
def retry_decisions(context: dg.RunFailureSensorContext) -> None:
    run = context.dagster_run
    decision = retry_decision(context.instance, run)
    context.instance.report_engine_event(decision.reason, run)
    context.log.info(f"run {run.run_id} ({run.job_name}) failed: {decision.reason}")
