"""Runs the project starts itself (`make demo`, `topicmap topic run`): the code location's named jobs, created in the
Dagster instance as the UI creates a run and executed in this process.

A run is created from the code location that workspace.yaml declares, so it records the location's job origin and
the job's code origin, as a run launched from the UI does: it is listed on its job's page and the Overview timeline,
and re-executes from the UI (a run with no such origin fails there with "Expected non-None value"). It is then
executed here with Dagster's in-process executor: no daemon is needed, and no run worker or step process has to load
the code location again, which keeps `make demo` quick (with TOPICMAP_EXECUTOR=celery the steps go to the Celery
workers, as the run's would from the UI). Its results are read back from the instance's event log (``FinishedRun``),
as the UI reads them.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from assets.dagster_internals import (
    RUN_KEY_TAG,
    SENSOR_NAME_TAG,
    EngineEventData,
    InProcessCodeLocationOrigin,
    JobSubsetSelector,
    LoadableTargetOrigin,
    ReconstructableJob,
    execute_run,
    merge_run_tags,
)
from orchestration.launcher import IN_PROCESS_HOST_TAG, STARTED_MESSAGE
from orchestration.run_tags import LAUNCHED_BY_TAG, MANUAL, run_asset_keys, tags_for_run

if TYPE_CHECKING:
    from assets.dagster_internals import InProcessCodeLocation
    from topicmap.topics.declarations import TopicConfig

ROOT = Path(__file__).resolve().parent.parent
#: the workspace the webserver and the daemon load: runs started here name the same code location
WORKSPACE_FILE = ROOT / "workspace.yaml"
REPOSITORY_NAME = "__repository__"

#: the demo prints its own summary; Dagster's per-event lines stay in the UI (make ui)
QUIET_LOGS: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
#: every step in this process (the executor's config is recorded with the run: a re-execution runs the same way)
IN_PROCESS: dict[str, Any] = {"execution": {"config": {"in_process": {}}}}


def as_sensor_run(sensor_name: str, run_key: str) -> dict[str, str]:
    """Tags that make a run started here count as the run ``sensor_name`` requests under ``run_key``.

    Dagster's own run tags: a run carrying a sensor's name and run key is, to the sensor daemon and to the sensor
    itself (sensors/launched.py), a run that sensor already launched, so a sensor started later does not repeat
    work done here."""
    return {SENSOR_NAME_TAG: sensor_name, RUN_KEY_TAG: run_key}


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended, read from the instance's event log."""

    instance: dg.DagsterInstance
    run_id: str
    job_name: str

    def materializations(self, asset: str) -> list[dg.AssetMaterialization]:
        """The run's materializations of ``asset``, in the order they were logged."""
        records = self.instance.get_records_for_run(
            self.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        found = [record.event_log_entry.asset_materialization for record in records]
        return [m for m in found if m is not None and m.asset_key == dg.AssetKey(asset)]

    def metadata(self, asset: str) -> Mapping[str, dg.MetadataValue]:
        """The metadata of the run's one materialization of ``asset``."""
        found = self.materializations(asset)
        if len(found) != 1:
            raise ValueError(
                f"run {self.run_id} of {self.job_name} materialized {asset} {len(found)} times, not once"
            )
        return found[0].metadata

    def check_evaluations(self, asset: str) -> list[dg.AssetCheckEvaluation]:
        """The run's evaluations of the checks on ``asset``."""
        records = self.instance.get_records_for_run(
            self.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
        evaluations = [r.event_log_entry.dagster_event.asset_check_evaluation_data for r in records]
        return [e for e in evaluations if e.asset_key == dg.AssetKey(asset)]

    def failure_messages(self) -> list[str]:
        return [
            entry.message
            for entry in self.instance.all_logs(self.run_id)
            if entry.dagster_event and entry.dagster_event.is_failure
        ]


@functools.cache
def code_location(instance: dg.DagsterInstance) -> InProcessCodeLocation:
    """The code location of workspace.yaml, loaded in this process (one per instance and process)."""
    from assets.dagster_internals import WorkspaceFileTarget  # Dagster's workspace modules: imported on use

    (origin,) = WorkspaceFileTarget(paths=[str(WORKSPACE_FILE)]).create_origins()
    target = origin.loadable_target_origin
    # the workspace names its working directory relative to itself; the run's code origin gets the full path
    working_directory = (WORKSPACE_FILE.parent / (target.working_directory or ".")).resolve()
    in_process = InProcessCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(
            module_name=target.module_name,
            python_file=target.python_file,
            attribute=target.attribute,
            working_directory=str(working_directory),
        ),
        location_name=origin.location_name,
    )
    return in_process.create_location(instance)


def _create_run(
    instance: dg.DagsterInstance,
    job_name: str,
    partition_key: str | None,
    tags: Mapping[str, str],
    run_config: Mapping[str, Any],
    asset_selection: Sequence[dg.AssetKey] | None,
) -> tuple[dg.DagsterRun, ReconstructableJob]:
    """The run as the UI's launch creates it (origins, snapshots, planned materializations), tagged by the project."""
    location = code_location(instance)
    recon_job = location.get_reconstructable_job(REPOSITORY_NAME, job_name)
    job_def = recon_job.get_definition()
    # the job's own tags and the partition's (the partition key checked against the job's partitions)
    run_tags = merge_run_tags(job_def, partition_key, tags, asset_selection, instance, run_config)
    remote_job = location.get_job(
        JobSubsetSelector(
            location_name=location.name,
            repository_name=REPOSITORY_NAME,
            job_name=job_name,
            op_selection=None,
            asset_selection=asset_selection,
        )
    )
    plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    ).execution_plan_snapshot
    asset_graph = location.get_repository(REPOSITORY_NAME).asset_graph
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config=run_config,
        status=dg.DagsterRunStatus.NOT_STARTED,
        # the project's tags from what the run materializes; the caller's (iteration, run key) are kept as given
        tags={
            **tags_for_run(asset_graph, run_asset_keys(asset_selection, plan), run_tags),
            **run_tags,
            IN_PROCESS_HOST_TAG: socket.gethostname(),
            # started by hand (`make demo`, `topicmap topic run`), tagged as its sensor's run or not
            LAUNCHED_BY_TAG: MANUAL,
        },
        root_run_id=None,
        parent_run_id=None,
        step_keys_to_execute=plan.step_keys_to_execute,
        execution_plan_snapshot=plan,
        job_snapshot=remote_job.job_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        asset_selection=frozenset(asset_selection) if asset_selection else None,
        asset_check_selection=None,
        resolved_op_selection=None,
        op_selection=None,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_graph=asset_graph,
    )
    return run, recon_job


def run_job(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    job_name: str,
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, Any] | None = None,
    asset_selection: Sequence[str] | None = None,
) -> FinishedRun:
    """Create a run of the code location's job ``job_name`` (optionally of a subset of its assets) in ``instance`` and
    execute it in this process; exit with the failure's message if it fails.

    ``defs`` must be the definitions the code location serves (orchestration.definitions.defs): the run executes the
    code location's job, and a caller holding other definitions would get a run of something else."""
    served = code_location(instance).get_reconstructable_job(REPOSITORY_NAME, job_name).get_definition()
    if served is not defs.resolve_job_def(job_name):
        raise ValueError(
            f"run_job runs the jobs of the code location in {WORKSPACE_FILE.name}; the definitions given hold "
            f"another {job_name}"
        )
    config = {**QUIET_LOGS, **dict(run_config or {})}
    executor_config = served.executor_def.config_schema.config_type
    if "execution" not in config and "in_process" in getattr(executor_config, "fields", {}):
        config.update(IN_PROCESS)
    run, recon_job = _create_run(
        instance,
        job_name,
        partition_key,
        dict(tags or {}),
        config,
        [dg.AssetKey(name) for name in asset_selection] if asset_selection else None,
    )
    # reported as a run worker reports itself, so run monitoring fails the run should this process die mid-run
    instance.report_engine_event(
        f"{STARTED_MESSAGE}{os.getpid()}).", run, EngineEventData.in_process(os.getpid())
    )
    execute_run(recon_job, run, instance)
    finished = FinishedRun(instance, run.run_id, job_name)
    ended = instance.get_run_by_id(run.run_id)
    if ended is None or ended.status != dg.DagsterRunStatus.SUCCESS:
        raise SystemExit(
            f"{job_name} ({partition_key or dict(tags or {})}) failed: {finished.failure_messages()[-1:]} "
            f"(run {run.run_id})"
        )
    return finished


def seed_topic(defs: dg.Definitions, instance: dg.DagsterInstance, topic: TopicConfig) -> FinishedRun:
    """Run ``seeds_job`` for ``topic`` as the topic registry sensor would: its run key, so the
    sensor finds the work done."""
    return run_job(
        defs,
        instance,
        "seeds_job",
        topic.name,
        tags={
            "topicmap/topic": topic.name,
            **as_sensor_run("topic_registry", f"seeds:{topic.name}:{topic.config_hash[:12]}"),
        },
    )
