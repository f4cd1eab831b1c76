"""The run queue of both shipped instances: Dagster's QueuedRunCoordinator that first gives every run the project's
tags, whoever launched it.

The run queue's limits (one spider run per topic, a cap per API: deploy/dagster.yaml) are keyed on run tags that the
project's sensors set. A run launched from the UI (Materialize, or a backfill from the asset graph) is a run of
Dagster's implicit `__ASSET_JOB` with no such tag, so without this it would bypass every limit. On submit, before the
run is queued, this coordinator adds to the run, through the instance's public ``add_run_tags``:

* the project's tags (assets/jobs.py ``run_tags``, from the run's assets and partition) that the run lacks;
* ``topicmap/launched_by`` (orchestration/run_tags.py): who launched the run, ``manual`` for a re-execution by hand
  (whose parent's sensor tags the instance leaves off: orchestration/instance.py), ``retry`` for Dagster's run
  retries;
* on a re-execution by hand, ``dagster/max_retries``: the instance's retries afresh (sensors/retries.py), where
  Dagster would count every earlier re-execution of the run against them;
* on a fresh run of a job with no page of its own (Dagster's implicit `__ASSET_JOB`, a sensor's anonymous asset job)
  whose assets all belong to one of the code location's named jobs, ``topicmap/named_job``: the smallest such job.
  Dagster has no public call that changes a run's job, so the run keeps Dagster's job name; the tag says which named
  job's work it is (the Runs list shows it, and filters on it).

Pools need nothing here: they are set on the assets' ops and apply to every run that executes them.
"""

from __future__ import annotations

from collections.abc import Collection

import dagster as dg

from assets.dagster_internals import BaseAssetGraph
from orchestration.run_tags import LAUNCHED_BY_TAG, MANUAL, launched_by, run_asset_keys, tags_for_run
from sensors.retries import fresh_retry_budget

#: Dagster's implicit asset job (`__ASSET_JOB`) and anonymous sensor jobs start with this: no page of their own
HIDDEN_JOB_PREFIX = "__"
#: run tag on a run of such a job: the named job (assets/jobs.py) that holds every asset the run materializes
NAMED_JOB_TAG = "topicmap/named_job"


def named_job_for(asset_graph: BaseAssetGraph, asset_keys: Collection[dg.AssetKey]) -> str | None:
    """The smallest named job that materializes every asset of ``asset_keys`` (None if no named job holds them all).

    Ties go to the first name in alphabetical order, so the choice never depends on the order jobs were loaded."""
    candidates: set[str] | None = None
    for key in asset_keys:
        if not asset_graph.has(key):
            return None
        named = {
            n for n in asset_graph.get_materialization_job_names(key) if not n.startswith(HIDDEN_JOB_PREFIX)
        }
        candidates = named if candidates is None else candidates & named
    if not candidates:
        return None
    sizes = dict.fromkeys(candidates, 0)
    for key in asset_graph.get_all_asset_keys():
        for name in asset_graph.get_materialization_job_names(key):
            if name in sizes:
                sizes[name] += 1
    return min(sorted(candidates), key=sizes.__getitem__)


class TaggingRunCoordinator(dg.QueuedRunCoordinator):
    """QueuedRunCoordinator that gives every run the project's tags before queueing it (module doc)."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        if run.status == dg.DagsterRunStatus.NOT_STARTED:  # a run submitted again is left as it is queued
            run = self._with_project_tags(run, context.workspace.asset_graph)
        return super().submit_run(dg.SubmitRunContext(run, context.workspace))

    def _with_project_tags(self, run: dg.DagsterRun, asset_graph: BaseAssetGraph) -> dg.DagsterRun:
        plan_id = run.execution_plan_snapshot_id
        plan = self._instance.get_execution_plan_snapshot(plan_id) if plan_id else None
        asset_keys = run_asset_keys(run.asset_selection, plan)
        added = {
            k: v for k, v in tags_for_run(asset_graph, asset_keys, run.tags).items() if k not in run.tags
        }
        # Re-executions and retries inherit their parent's tags, this one among them.
        if run.job_name.startswith(HIDDEN_JOB_PREFIX) and run.parent_run_id is None and asset_keys:
            job_name = named_job_for(asset_graph, asset_keys)
            if job_name is not None and NAMED_JOB_TAG not in run.tags:
                added[NAMED_JOB_TAG] = job_name
        # ...and this one too, which is replaced: a re-execution by hand is no longer its parent's sensor's run
        who = launched_by(run)
        if run.tags.get(LAUNCHED_BY_TAG) != who:
            added[LAUNCHED_BY_TAG] = who
        if who == MANUAL and run.parent_run_id is not None:
            added.update(fresh_retry_budget(self._instance, run))
        if added:
            self._instance.add_run_tags(run.run_id, added)
            run = self._instance.get_run_by_id(run.run_id) or run
        return run
