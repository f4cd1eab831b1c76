"""In-process materialization for the demo runner: one way to run a selection and fail with its message."""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

#: the demo prints its own summary; Dagster's per-event lines stay in the UI (make ui)
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def materialize_selection(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    selection: Sequence[str],
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Any:
    """Materialize ``selection`` (with its asset checks) in the instance; exit with the failure's message."""
    result = dg.materialize(
        assets=[*(defs.assets or []), *(defs.asset_checks or [])],
        selection=list(selection),
        instance=instance,
        partition_key=partition_key,
        resources=defs.resources,
        tags=dict(tags or {}),
        raise_on_error=False,
        run_config=QUIET_LOGS,
    )
    if not result.success:
        failures = [event.message for event in result.all_events if event.is_failure]
        raise SystemExit(
            f"demo: materializing {list(selection)} ({partition_key or dict(tags or {})}) failed: {failures[-1:]}"
        )
    return result
