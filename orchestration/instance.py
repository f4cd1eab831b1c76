"""The Dagster instance of both instance files (deploy/dagster.yaml, ``instance_class``): Dagster's own, except that a
run whose success is stored is never marked failed afterwards, and that a re-execution by hand does not say a sensor or
schedule launched it.

**A finished run stays finished.**

A run worker stores a run's RUN_SUCCESS in the event log first and updates the run's status (runs table) after it: two
writes. A worker killed between them (a ``kill -9``, an OOM kill, a host shutting down as the run ends) leaves a run
whose event log says it succeeded and whose status still says STARTED. Every process that watches run workers reads
that status: the code server that launched the worker finds it dead with its run unfinished, and the MonitoringDaemon
finds its pid gone; each reports the run failed. Recorded, that failure turns a finished run into a failed one: the UI
and alerts say FAILURE, run retries create a retry, the run-failure sensors (the URL-claim release) react to it.

This instance does not record such a failure. Every event passes through ``handle_new_event``, in every process that
loads the instance (webserver, daemon, code servers, run workers), whoever reports it; a run failure for a run with a
stored RUN_SUCCESS is replaced by an engine event saying why, and the run's status is brought up to its stored success,
the write the killed worker did not make.

**A re-execution by hand is not the sensor's.** A re-execution copies its parent's tags (the UI's Re-execute asks for
them), ``dagster/sensor_name`` and ``dagster/schedule_name`` among them: the UI would say "Launched by <sensor>" of a
run someone launched by hand, and count it among the sensor's runs. Every re-execution passes through
``create_reexecuted_run``; one that is not Dagster's automatic retry (those carry ``dagster/retry_number`` and stay
the launcher's) is created from its parent's tags without those two.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    EventLogEntry,
    EventLogRecord,
)

from assets.dagster_internals import RETRY_NUMBER_TAG, SCHEDULE_NAME_TAG, SENSOR_NAME_TAG, InstanceRef

#: how the engine event that stands for a run failure not recorded begins
FAILURE_NOT_RECORDED = "Run failure not recorded: "
#: the tags that name who launched a run, in Dagster's UI, not passed on to a re-execution by hand
LAUNCHER_TAGS = (SENSOR_NAME_TAG, SCHEDULE_NAME_TAG)


class TopicmapInstance(DagsterInstance):
    """DagsterInstance that records no failure of a run whose success is stored, and whose re-executions by hand do
    not name their parent's sensor or schedule (see the module docstring)."""

    @classmethod
    def config_schema(cls) -> Mapping[str, Any]:
        return {}  # nothing of its own to configure

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        # Dagster's own defaults (an `instance_class` must name them)
        return InstanceRef.config_defaults(base_dir)

    def handle_new_event(self, event: EventLogEntry, *, batch_metadata: Any = None) -> None:
        dagster_event = event.dagster_event
        if dagster_event is not None and dagster_event.event_type == DagsterEventType.RUN_FAILURE:
            success = self._stored_success(event.run_id)
            if success is not None:
                self._keep_success(event.run_id, success, reported=dagster_event.message or event.message)
                return
        super().handle_new_event(event, batch_metadata=batch_metadata)

    def create_reexecuted_run(self, *, parent_run: DagsterRun, **kwargs: Any) -> DagsterRun:
        if RETRY_NUMBER_TAG not in (kwargs.get("extra_tags") or {}):
            # by hand (the UI, GraphQL, a backfill from failure): the parent's tags, but for who launched it
            parent_run = parent_run.with_tags(
                {k: v for k, v in parent_run.tags.items() if k not in LAUNCHER_TAGS}
            )
        return super().create_reexecuted_run(parent_run=parent_run, **kwargs)

    def _stored_success(self, run_id: str) -> EventLogRecord | None:
        records = self.get_records_for_run(run_id, of_type=DagsterEventType.RUN_SUCCESS, limit=1).records
        return records[0] if records else None

    def _keep_success(self, run_id: str, success: EventLogRecord, reported: str) -> None:
        """Instead of the failure ``reported``: an engine event saying why, and the run's status made the stored
        success's."""
        run = self.get_run_by_id(run_id)
        if run is None:
            return
        stored_at = datetime.fromtimestamp(success.timestamp, UTC)
        self.report_engine_event(
            f"{FAILURE_NOT_RECORDED}this run's success was stored at {stored_at.isoformat(timespec='milliseconds')}, "
            "before the failure was reported (its run worker ended between storing the run's success and updating "
            f"its status, as when killed as the run ended). The run stays a success. Failure reported: {reported}",
            run,
        )
        if run.status != DagsterRunStatus.SUCCESS:
            # the run storage's own update for a stored run event, as Dagster makes it after storing one
            self.run_storage.handle_run_event(
                run.run_id, success.event_log_entry.get_dagster_event(), stored_at
            )
