"""Dagster's and dagster-celery's internals are imported in one module per library, each name once with a comment
saying why no public API does it, and the libraries are pinned to the release the tests ran against.

Any other import of ``dagster._...`` (or of dagster-celery beyond its public ``celery_executor``) fails here; so does a
name added to or dropped from an internals module without this list following it. An upgrade of Dagster or
dagster-celery then starts from this list: each name is one to check in the new release.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: where the project's Python lives
PACKAGES = ("topicmap", "assets", "resources", "sensors", "orchestration", "tests", "benchmarks")

#: library -> (its internals module, the private names it holds, as each is named in the library)
INTERNALS: dict[str, tuple[str, set[str]]] = {
    "dagster": (
        "assets/dagster_internals.py",
        {
            # the types an executor, a run launcher or a run coordinator is handed
            "BaseAssetGraph",
            "CheckRunHealthResult",
            "ExecutionPlan",
            "ExecutionPlanSnapshot",
            "ExecutionStep",
            "KnownExecutionState",
            "LaunchRunContext",
            "PlanOrchestrationContext",
            "RetryMode",
            "StepDependencyConfig",
            "UnresolvedMappedExecutionStep",
            "UnresolvedMappedStepInput",
            "UnresolvedStepHandle",
            "WorkerStatus",
            # the run tags Dagster writes and reads
            "ASSET_PARTITION_RANGE_END_TAG",
            "ASSET_PARTITION_RANGE_START_TAG",
            "BACKFILL_ID_TAG",
            "GRPC_INFO_TAG",
            "MAX_RETRIES_TAG",
            "PARTITION_NAME_TAG",
            "RETRY_NUMBER_TAG",
            "RETRY_ON_ASSET_OR_OP_FAILURE_TAG",
            "RETRY_STRATEGY_TAG",
            "RUN_FAILURE_REASON_TAG",
            "RUN_KEY_TAG",
            "SCHEDULE_NAME_TAG",
            "SENSOR_NAME_TAG",
            "ReexecutionStrategy",
            "WILL_RETRY_TAG",
            # a run created from the code location and executed in this process (orchestration/runs.py)
            "EngineEventData",
            "InProcessCodeLocation",
            "InProcessCodeLocationOrigin",
            "JobSubsetSelector",
            "LoadableTargetOrigin",
            "ReconstructableJob",
            "WorkspaceFileTarget",
            "execute_run",
            "merge_run_tags",
            # the instance class of both instance files (orchestration/instance.py)
            "InstanceRef",
            # the asset backfill a sensor requests (sensors/automation.py)
            "AssetGraphSubset",
            "AssetKeyPartitionKey",
            # the instance's local compute-log folder, which the webserver serves pictures from (assets/metadata.py)
            "LocalComputeLogManager",
            # tests: a workspace in process, the daemons' single passes, a backfill's status
            "BulkActionStatus",
            "InProcessWorkspaceLoadTarget",
            "ModuleTarget",
            "WorkspaceProcessContext",
            "WorkspaceRequestContext",
            "consume_new_runs_for_automatic_reexecution",
            "create_test_daemon_workspace_context",
            "monitor_started_run",
        },
    ),
    "dagster_celery": (
        "orchestration/celery_internals.py",
        {
            "CELERY_CONFIG",
            "CeleryExecutor",
            "DEFAULT_CONFIG",
            "_submit_task",
            "core_celery_execution_loop",
            "create_task",
            "dict_wrapper",
            "make_app",
        },
    ),
}
#: what each library exports (its top-level module, names without a leading underscore); dagster's: all of them
PUBLIC: dict[str, set[str] | None] = {"dagster": None, "dagster_celery": {"celery_executor", "__version__"}}
#: the pyproject requirement that pins each library to the release tested
PINS = {"dagster": "dagster==", "dagster_celery": "dagster-celery=="}


#: a library's internal module named in a string (imported with importlib)
INTERNAL_MODULE = re.compile(r"(dagster\._|dagster_celery\.)[\w.]+")


def _imported_on_use(tree: ast.Module) -> dict[ast.AST, str]:
    """An internals module's ``IMPORTED_ON_USE``: the string naming a module (a node of the tree) -> the private
    name its ``__getattr__`` imports from that module (several names may come from one module)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["IMPORTED_ON_USE"]:
            assert isinstance(node.value, ast.Dict)
            return {
                module: ast.literal_eval(name)
                for name, module in zip(node.value.keys, node.value.values, strict=True)
                if name is not None
            }
    return {}


def _private_imports(path: Path) -> list[tuple[str, str, int]]:
    """(library, private name, line) of every import of a library's internals in one file: import statements, and
    module names in strings (an importlib import)."""
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    on_use = _imported_on_use(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and INTERNAL_MODULE.fullmatch(node.value)
        ):
            library = node.value.partition(".")[0]
            found.append((library, on_use.get(node, node.value), node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                library, _, rest = alias.name.partition(".")
                if library in INTERNALS and rest:
                    found.append((library, alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            library, _, rest = node.module.partition(".")
            if library not in INTERNALS:
                continue
            public = PUBLIC[library]
            for alias in node.names:
                if rest or alias.name.startswith("_") or (public is not None and alias.name not in public):
                    found.append((library, alias.name, node.lineno))
    return found


def _python_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_internals_are_imported_only_in_their_module() -> None:
    allowed = {(library, ROOT / module) for library, (module, _) in INTERNALS.items()}
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name} ({library}'s internals)"
        for path in _python_files()
        for library, name, line in _private_imports(path)
        if (library, path) not in allowed
    ]
    assert offenders == [], "import these from the library's internals module (see INTERNALS) instead"


@pytest.mark.parametrize("library", sorted(INTERNALS))
def test_each_internals_module_holds_the_names_listed(library: str) -> None:
    module, listed = INTERNALS[library]
    path = ROOT / module
    held = [name for lib, name, _ in _private_imports(path) if lib == library]
    assert len(held) == len(set(held)), f"{module} imports a name twice"
    assert set(held) == listed, f"{module} holds {sorted(held)}; the list here says {sorted(listed)}"
    # each name on its own line, with the reason no public API does it (beside it, or above a name imported on use)
    lines = path.read_text().splitlines()
    for name in held:
        ((index, line),) = [
            (i, line)
            for i, line in enumerate(lines)
            if re.match(rf'\s+({name}( as \w+)?|"{name}": "[\w.]+"),', line)
        ]
        assert "#" in line or lines[index - 1].strip().startswith("#"), (
            f"{module}: {name} has no comment saying why"
        )


@pytest.mark.parametrize("library", sorted(INTERNALS))
def test_each_library_whose_internals_are_used_is_pinned_exactly(library: str) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'"{re.escape(PINS[library])}\d+\.\d+\.\d+"', pyproject), f"{library} is not pinned"
