"""Every name of Dagster's internals (``dagster._...``) this project uses, imported here once; the rest of the code
(orchestration, sensors, tests, benchmarks) imports them from this module. tests/test_private_apis.py fails on any
other import of ``dagster._`` and lists the names held here.

Each is something Dagster 1.13 has no public name for: the types an executor, a run launcher or a run coordinator is
handed, the defaults a custom instance class returns, the run tags Dagster itself writes and reads, creating a run of
a code location and executing it in this process, the class of a local compute-log folder (the one folder the
webserver serves files from), and (for tests) the daemons' single iterations. Dagster is pinned
exactly (pyproject.toml: the Dagster family as one unit), so these cannot change under us without an upgrade the tests
then run against. A name that becomes public moves to ``dagster`` and leaves this list. Kept beside assets/beta.py (the
beta APIs in use), in the lowest package that uses it, so that sensors and orchestration both import it downwards.
"""

import importlib

from dagster._core.definitions.assets.graph.asset_graph_subset import (
    AssetGraphSubset,  # the asset backfill a sensor requests (RunRequest.for_asset_graph_subset): no public constructor
)
from dagster._core.definitions.assets.graph.base_asset_graph import (
    BaseAssetGraph,  # the type of a code location's asset graph, local or remote (workspace.asset_graph): not exported
)
from dagster._core.definitions.events import (
    AssetKeyPartitionKey,  # one asset partition, what AssetGraphSubset is built from: not exported
)
from dagster._core.definitions.reconstruct import (
    ReconstructableJob,  # what a code location hands back for a job to execute here: not exported
)
from dagster._core.definitions.selector import (
    JobSubsetSelector,  # names a job (and asset subset) of a code location, to plan a run of it: not exported
)
from dagster._core.events import (
    EngineEventData,  # an engine event's data (a run worker's pid) for instance.report_engine_event: not exported
)
from dagster._core.execution.api import (
    execute_run,  # executes a run already created in the instance, in this process: execute_job creates its own
)
from dagster._core.execution.context.system import (
    PlanOrchestrationContext,  # the context Executor.execute is handed: not exported
)
from dagster._core.execution.execute_in_process import (
    merge_run_tags,  # a run's tags from its job, partition and caller, as a launch computes them: not exported
)
from dagster._core.execution.plan.handle import (
    UnresolvedStepHandle,  # a step mapped over a dynamic output, before its mapping keys are known: not exported
)
from dagster._core.execution.plan.inputs import (
    UnresolvedMappedStepInput,  # the input that maps a step over an upstream dynamic output: not exported
)
from dagster._core.execution.plan.plan import (
    ExecutionPlan,  # the plan Executor.execute is handed: not exported
)
from dagster._core.execution.plan.resume_retry import (
    ReexecutionStrategy,  # the values of the dagster/retry_strategy run tag: not exported
)
from dagster._core.execution.plan.state import (
    KnownExecutionState,  # a run's step outcomes, and what a retry from its failure would run: not exported
)
from dagster._core.execution.plan.step import (
    ExecutionStep,  # one step of an ExecutionPlan, as dagster-celery submits it: not exported
    UnresolvedMappedExecutionStep,  # a step mapped over a dynamic output, in an ExecutionPlan: not exported
)
from dagster._core.execution.retries import (
    RetryMode,  # Executor.retries' type, which a wrapping executor returns and dagster-celery's takes: not exported
)
from dagster._core.execution.step_dependency_config import (
    StepDependencyConfig,  # Executor.step_dependency_config's type, for a wrapping executor: not exported
)
from dagster._core.instance.ref import (
    InstanceRef,  # its config_defaults are what a dagster.yaml `instance_class` must return: not exported
)
from dagster._core.launcher import (
    CheckRunHealthResult,  # what RunLauncher.check_run_worker_health returns: not exported
    LaunchRunContext,  # what RunLauncher.launch_run is handed: not exported
    WorkerStatus,  # a run worker's health in CheckRunHealthResult: not exported
)
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,  # a code location loaded in this process: not exported
)
from dagster._core.snap import (
    ExecutionPlanSnapshot,  # a stored run's plan (instance.get_execution_plan_snapshot): not exported
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,  # run tag Dagster reads for a single-run range: not exported
    ASSET_PARTITION_RANGE_START_TAG,  # run tag Dagster reads for a single-run range: not exported
    BACKFILL_ID_TAG,  # run tag naming the backfill a run belongs to (dagster/backfill): not exported
    GRPC_INFO_TAG,  # run tag naming the code server a run worker was launched from: not exported
    MAX_RETRIES_TAG,  # run tag of the automatic retries a run group may hold (dagster/max_retries): not exported
    PARTITION_NAME_TAG,  # run tag of a run's partition (dagster/partition): not exported
    RETRY_NUMBER_TAG,  # run tag Dagster sets on an automatic retry: not exported
    RETRY_ON_ASSET_OR_OP_FAILURE_TAG,  # run tag: whether a run failed by a step is retried: not exported
    RETRY_STRATEGY_TAG,  # run tag choosing what a retry runs (dagster/retry_strategy): not exported
    RUN_FAILURE_REASON_TAG,  # run tag of why a failed run failed (a step, a crash...): not exported
    RUN_KEY_TAG,  # run tag of the run key a sensor's run was requested under: not exported
    SCHEDULE_NAME_TAG,  # run tag naming the schedule that launched a run: not exported
    SENSOR_NAME_TAG,  # run tag naming the sensor that launched a run (the UI's "Launched by"): not exported
    WILL_RETRY_TAG,  # run tag Dagster sets on a failed run: whether it will retry it: not exported
)
from dagster._core.types.loadable_target_origin import (
    LoadableTargetOrigin,  # where a code location is loaded from (module, working directory): not exported
)

#: private names imported when first asked for (``__getattr__``): their modules load SQLAlchemy, a file watcher, or
#: Dagster's workspace, backfill and remote-code-location modules (about 35 modules, which made loading the code
#: location a third slower than a bare ``import dagster``), none of which loading the code location needs
#: (tests/test_code_location_load.py)
IMPORTED_ON_USE = {
    # the code location an InProcessCodeLocationOrigin loads (jobs, plans, asset graph): not exported
    "InProcessCodeLocation": "dagster._core.remote_representation.code_location",
    # the code locations workspace.yaml declares: not exported
    "WorkspaceFileTarget": "dagster._core.workspace.load_target",
    # a workspace of a code location loaded in this process (tests): not exported
    "InProcessWorkspaceLoadTarget": "dagster._core.workspace.load_target",
    # a workspace of a code location given by module (tests): not exported
    "ModuleTarget": "dagster._core.workspace.load_target",
    # a workspace over code locations, as the webserver holds it (tests): not exported
    "WorkspaceProcessContext": "dagster._core.workspace.context",
    # one request's view of that workspace, for GraphQL in process (tests): not exported
    "WorkspaceRequestContext": "dagster._core.workspace.context",
    # a backfill's status, as the instance reports it (tests): not exported
    "BulkActionStatus": "dagster._core.execution.backfill",
    # the instance's compute logs kept in a local folder, which the webserver serves (assets/metadata.py:
    # page_picture): the class is public, its module is not
    "LocalComputeLogManager": "dagster._core.storage.local_compute_log_manager",
    # a workspace for one daemon iteration run in a test: not exported
    "create_test_daemon_workspace_context": "dagster._core.test_utils",
    # one pass of the run-retry daemon: not exported
    "consume_new_runs_for_automatic_reexecution": "dagster._daemon.auto_run_reexecution.auto_run_reexecution",
    # one run-monitoring check of a started run: not exported
    "monitor_started_run": "dagster._daemon.monitoring.run_monitoring",
}


def __getattr__(name: str) -> object:
    """One of ``IMPORTED_ON_USE``, imported now."""
    if name not in IMPORTED_ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(IMPORTED_ON_USE[name]), name)


__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "AssetGraphSubset",
    "BACKFILL_ID_TAG",
    "AssetKeyPartitionKey",
    "BaseAssetGraph",
    "CheckRunHealthResult",
    "EngineEventData",
    "ExecutionPlan",
    "ExecutionPlanSnapshot",
    "ExecutionStep",
    "GRPC_INFO_TAG",
    "MAX_RETRIES_TAG",
    "InProcessCodeLocationOrigin",
    "InstanceRef",
    "JobSubsetSelector",
    "KnownExecutionState",
    "LaunchRunContext",
    "LoadableTargetOrigin",
    "PARTITION_NAME_TAG",
    "PlanOrchestrationContext",
    "RETRY_NUMBER_TAG",
    "RETRY_ON_ASSET_OR_OP_FAILURE_TAG",
    "RETRY_STRATEGY_TAG",
    "RUN_FAILURE_REASON_TAG",
    "RUN_KEY_TAG",
    "SCHEDULE_NAME_TAG",
    "SENSOR_NAME_TAG",
    "ReconstructableJob",
    "ReexecutionStrategy",
    "RetryMode",
    "StepDependencyConfig",
    "UnresolvedMappedExecutionStep",
    "UnresolvedMappedStepInput",
    "UnresolvedStepHandle",
    "WILL_RETRY_TAG",
    "WorkerStatus",
    "execute_run",
    "merge_run_tags",
]
