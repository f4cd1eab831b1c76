"""Running the code location's named jobs in-process (the demo, `topicmap topic run`): one way to launch a job in
the Dagster instance and fail with its message. The runs are recorded under the job's name with their assets, so
the UI lists them, links them to their assets and can re-execute them."""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

#: the demo prints its own summary; Dagster's per-event lines stay in the UI (make ui)
QUIET_LOGS: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}

# Dagster's own run tags: a run carrying a sensor's name and run key is, to the sensor daemon, a run that sensor
# already launched (for runs launched outside the daemon it matches on the sensor name), so a sensor started
# later does not repeat work done here.
RUN_KEY_TAG = "dagster/run_key"
SENSOR_NAME_TAG = "dagster/sensor_name"


def as_sensor_run(sensor_name: str, run_key: str) -> dict[str, str]:
    """Tags that make an in-process run count as the run ``sensor_name`` requests under ``run_key``."""
    return {SENSOR_NAME_TAG: sensor_name, RUN_KEY_TAG: run_key}


def run_job(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    job_name: str,
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, Any] | None = None,
    asset_selection: Sequence[str] | None = None,
) -> dg.ExecuteInProcessResult:
    """Execute the named job (optionally a subset of its assets) in ``instance``; exit with the failure's message."""
    job = defs.resolve_job_def(job_name)
    result = job.execute_in_process(
        instance=instance,
        partition_key=partition_key,
        tags=dict(tags or {}),
        run_config={**QUIET_LOGS, **dict(run_config or {})},
        asset_selection=[dg.AssetKey(k) for k in asset_selection] if asset_selection else None,
        raise_on_error=False,
    )
    if not result.success:
        failures = [event.message for event in result.all_events if event.is_failure]
        raise SystemExit(
            f"{job_name} ({partition_key or dict(tags or {})}) failed: {failures[-1:]} (run {result.run_id})"
        )
    return result
