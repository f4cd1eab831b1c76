"""The Dagster instance of both instance files (deploy/dagster.yaml, ``instance_class``): Dagster's own, except that a
run whose success is stored is never marked failed afterwards.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, EventLogEntry, EventLogRecord

from assets.dagster_internals import InstanceRef

#: how the engine event that stands for a run failure not recorded begins
FAILURE_NOT_RECORDED = "Run failure not recorded: "


class SuccessKeepingInstance(DagsterInstance):
    """DagsterInstance that records no failure of a run whose success is stored (see the module docstring)."""

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
