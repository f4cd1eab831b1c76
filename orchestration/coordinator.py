"""The run queue of both shipped instances: Dagster's QueuedRunCoordinator that first makes every run a run of the
project, whoever launched it.

The run queue's limits (one spider run per topic, a cap per API: deploy/dagster.yaml) are keyed on run tags that the
project's sensors set. A run launched from the UI (Materialize, or a backfill from the asset graph) is a run of
Dagster's implicit `__ASSET_JOB` with no such tag, so without this it would bypass every limit. On submit, before the
run is queued, this coordinator:

* names the job: a fresh run of a job with no page of its own (Dagster's implicit `__ASSET_JOB`, a sensor's anonymous
  asset job) whose assets all belong to one of the code location's named jobs becomes, in place, a run of the
  smallest such job (the same run id, asset selection, partition and tags), so it shows on that job's page;
* adds the project's tags (assets/jobs.py ``run_tags``, from the run's assets and partition) that the run lacks.

Pools need nothing here: they are set on the assets' ops and apply to every run that executes them.
"""

from __future__ import annotations

from collections.abc import Collection

import dagster as dg
from dagster._core.definitions.assets.graph.remote_asset_graph import RemoteAssetGraph
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext
from dagster._core.storage.runs.schema import RunsTable
from dagster._core.storage.runs.sql_run_storage import SqlRunStorage
from dagster._core.storage.tags import PARTITION_SET_TAG
from dagster._core.workspace.context import BaseWorkspaceRequestContext
from dagster._serdes import serialize_value

from orchestration.run_tags import run_asset_keys, tags_for_run

#: Dagster's implicit asset job (`__ASSET_JOB`) and anonymous sensor jobs start with this: no page of their own
HIDDEN_JOB_PREFIX = "__"
#: the project's run tags (assets/jobs.py)
PROJECT_TAG_PREFIX = "topicmap/"


def named_job_for(asset_graph: RemoteAssetGraph, asset_keys: Collection[dg.AssetKey]) -> str | None:
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


def replace_stored_run(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """Write ``run`` over the stored run of its id: its job, snapshots and origins (its tags are left to
    ``add_run_tags``, which keeps the tags table in step).

    Dagster has no call that changes a stored run's job; this updates the run's row as Dagster's own
    ``replace_job_origin`` migration does. Deleting the run and creating it again under the same id is no way out:
    Dagster's delete leaves the run's planned asset-check rows (and, on SQLite, its tags) behind, and the new run's
    planned checks then collide with them."""
    storage = instance.run_storage
    if not isinstance(storage, SqlRunStorage):
        raise TypeError(
            f"naming a run's job needs SQL run storage (SQLite, PostgreSQL), not {type(storage).__name__}"
        )
    with storage.connect() as conn:
        conn.execute(
            RunsTable.update()
            .where(RunsTable.c.run_id == run.run_id)
            .values(
                pipeline_name=run.job_name, snapshot_id=run.job_snapshot_id, run_body=serialize_value(run)
            )
        )


class TaggingRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator that gives every run the project's job name and tags before queueing it (module doc)."""

    def submit_run(self, context: SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        if run.status == dg.DagsterRunStatus.NOT_STARTED:  # a run submitted again is left as it is queued
            run = self._as_project_run(run, context.workspace)
        return super().submit_run(SubmitRunContext(run, context.workspace))

    def _as_project_run(self, run: dg.DagsterRun, workspace: BaseWorkspaceRequestContext) -> dg.DagsterRun:
        plan_id = run.execution_plan_snapshot_id
        plan = self._instance.get_execution_plan_snapshot(plan_id) if plan_id else None
        asset_graph = workspace.asset_graph
        asset_keys = run_asset_keys(run.asset_selection, plan)
        # Re-executions and retries keep their job: they belong to the run group of their parent.
        if run.job_name.startswith(HIDDEN_JOB_PREFIX) and run.parent_run_id is None and asset_keys:
            job_name = named_job_for(asset_graph, asset_keys)
            if job_name is not None:
                run = self._as_run_of(run, job_name, workspace)
        missing = {
            k: v for k, v in tags_for_run(asset_graph, asset_keys, run.tags).items() if k not in run.tags
        }
        if missing:
            self._instance.add_run_tags(run.run_id, missing)
            run = self._instance.get_run_by_id(run.run_id) or run
        return run

    def _as_run_of(
        self, run: dg.DagsterRun, job_name: str, workspace: BaseWorkspaceRequestContext
    ) -> dg.DagsterRun:
        """The same run (id, assets, checks, config, tags) as a run of ``job_name``; the run as it was if the code
        location cannot plan it (it is then queued under its own job, with the project's tags all the same)."""
        origin = run.remote_job_origin
        if origin is None:
            return run
        try:
            location = workspace.get_code_location(origin.location_name)
            remote_job = location.get_job(
                JobSubsetSelector(
                    location_name=origin.location_name,
                    repository_name=origin.repository_origin.repository_name,
                    job_name=job_name,
                    op_selection=None,
                    asset_selection=list(run.asset_selection) if run.asset_selection else None,
                    asset_check_selection=(
                        None if run.asset_check_selection is None else list(run.asset_check_selection)
                    ),
                )
            )
            plan = location.get_execution_plan(
                remote_job,
                run.run_config,
                step_keys_to_execute=None,
                known_state=None,
                instance=self._instance,
            ).execution_plan_snapshot
        except Exception:  # noqa: BLE001 - naming the job is a courtesy; the run must still be queued
            self._logger.warning(
                f"run {run.run_id} stays a run of {run.job_name}: {job_name} cannot plan it", exc_info=True
            )
            return run
        renamed = self._instance.run_domain.construct_run_with_snapshots(
            job_name=job_name,
            run_id=run.run_id,
            run_config=run.run_config,
            resolved_op_selection=None,
            step_keys_to_execute=plan.step_keys_to_execute,
            status=run.status,
            tags=run.tags,
            root_run_id=None,
            parent_run_id=None,
            job_snapshot=remote_job.job_snapshot,
            execution_plan_snapshot=plan,
            parent_job_snapshot=remote_job.parent_job_snapshot,
            asset_selection=run.asset_selection,
            asset_check_selection=run.asset_check_selection,
            op_selection=None,
            remote_job_origin=remote_job.get_remote_origin(),
            job_code_origin=remote_job.get_python_origin(),
            asset_graph=workspace.asset_graph,
        )
        replace_stored_run(self._instance, renamed)
        # the job's own tags (e.g. dagster/max_runtime), except the project's: those follow from the run's assets
        tags = {
            k: v
            for k, v in remote_job.tags.items()
            if not k.startswith(PROJECT_TAG_PREFIX) and k not in run.tags
        }
        if run.tags.get(PARTITION_SET_TAG) == f"{run.job_name}_partition_set":
            tags[PARTITION_SET_TAG] = f"{job_name}_partition_set"
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
        return self._instance.get_run_by_id(run.run_id) or renamed
