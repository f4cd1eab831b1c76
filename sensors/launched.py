"""Run requests a sensor has already launched, dropped by the sensor itself with the reason in its tick.

Dagster skips a run request whose run key the sensor already launched a run under: the request is idempotent, but
the tick then reads "0 runs requested" (SKIPPED) with no reason, however often it repeats. A sensor that settles says
so instead: it drops those requests before returning, and a tick left with none is a skip whose reason names each
one (run key, run, status), next to why the sensor wanted it.

A run created under the key but never started (NOT_STARTED: the daemon died between creating and submitting it) is
kept: the daemon submits that run when the request comes again.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.dagster_internals import RUN_KEY_TAG, SENSOR_NAME_TAG

#: a run in any of these states was submitted: the daemon would not launch its run key again
LAUNCHED_STATUSES = [status for status in dg.DagsterRunStatus if status != dg.DagsterRunStatus.NOT_STARTED]


def launched_run(instance: dg.DagsterInstance, sensor_name: str, run_key: str) -> dg.DagsterRun | None:
    """The run ``sensor_name`` launched under ``run_key`` (the newest), None if it launched none or only created it."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(
            tags={SENSOR_NAME_TAG: sensor_name, RUN_KEY_TAG: run_key}, statuses=LAUNCHED_STATUSES
        ),
        limit=1,
    )
    return records[0].dagster_run if records else None


def drop_launched(
    instance: dg.DagsterInstance, sensor_name: str, requests: Sequence[dg.RunRequest]
) -> tuple[list[dg.RunRequest], list[str]]:
    """The requests ``sensor_name`` has not launched yet, and a note for each one it has."""
    kept: list[dg.RunRequest] = []
    notes: list[str] = []
    for request in requests:
        run = launched_run(instance, sensor_name, request.run_key) if request.run_key else None
        if run is None:
            kept.append(request)
            continue
        what = " ".join(filter(None, [request.job_name or run.job_name, request.partition_key]))
        notes.append(
            f"{what}: already launched under run key {request.run_key} (run {run.run_id[:8]}, "
            f"{run.status.value})"
        )
    return kept, notes
