"""Helpers for the tests that run Dagster as deployed: a PostgreSQL database of their own, an instance folder
from deploy/, free loopback ports, and processes that are stopped (with their children) when the test ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import dagster as dg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from assets.jobs import POST_SPIDER_ASSETS, SPIDER_ASSETS
from tests.conftest import postgres_url, require_postgres

#: the assets of the named jobs (assets/jobs.py) the tests look for in runs
JOB_ASSETS: dict[str, list[str]] = {
    "archive_job": ["archive_stories"],
    "seeds_job": ["seeds"],
    "spider_iteration_job": SPIDER_ASSETS,
    "post_spider_job": POST_SPIDER_ASSETS,
    "snapshot_job": ["snapshots"],
}

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
PG_ENV_VARS = (
    "DAGSTER_PG_HOST",
    "DAGSTER_PG_PORT",
    "DAGSTER_PG_DB",
    "DAGSTER_PG_USERNAME",
    "DAGSTER_PG_PASSWORD",
)


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty database on the test server (its SQLAlchemy URL), dropped afterwards with its connections."""
    require_postgres()
    admin_url = postgres_url()
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def dagster_pg_env(database_url: str) -> dict[str, str]:
    """The DAGSTER_PG_* variables deploy/dagster.yaml reads, for the database at ``database_url``."""
    url = make_url(database_url)
    return {
        "DAGSTER_PG_HOST": url.host or "127.0.0.1",
        "DAGSTER_PG_PORT": str(url.port or 5432),
        "DAGSTER_PG_DB": url.database or "",
        "DAGSTER_PG_USERNAME": url.username or "postgres",
        "DAGSTER_PG_PASSWORD": url.password or "",
    }


def write_instance(dagster_home: Path, template: str, **overrides: object) -> Path:
    """``dagster_home/dagster.yaml`` from ``deploy/<template>``; top-level ``overrides`` replace whole keys."""
    import yaml

    config = yaml.safe_load((DEPLOY / template).read_text(encoding="utf-8"))
    config.update(overrides)
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / "dagster.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def run_status_tick(
    sensor: dg.SensorDefinition,
    instance: dg.DagsterInstance,
    cursor: str | None,
    run: dg.DagsterRun | None = None,
    resources: dict[str, object] | None = None,
):  # noqa: ANN201 - Dagster's SensorExecutionData
    """One evaluation of a run status sensor as the sensor daemon makes it in the code location of ``run`` (such a
    sensor reacts to the runs of its own code location only)."""
    origin = run.remote_job_origin.repository_origin if run is not None and run.remote_job_origin else None
    context = dg.SensorEvaluationContext(
        instance_ref=None,
        cursor=cursor,
        repository_name=origin.repository_name if origin else None,
        instance=instance,
        resources=resources or {},
        code_location_origin=origin.code_location_origin if origin else None,
    )
    with context:
        return sensor.evaluate_tick(context)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from procfs), children first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def stop_process_tree(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM the process and everything it started (code servers, run workers), SIGKILL what lingers."""
    stop_process_trees([process], timeout)


def stop_process_trees(processes: list[subprocess.Popen], timeout: float = 30.0) -> None:
    """`stop_process_tree` for several processes at once: every one (and what it started) is sent SIGTERM, then
    waited on together for up to ``timeout`` seconds, so they stop in the time of the slowest, not of them all."""
    running = [process for process in processes if process.poll() is None]
    pids = [pid for process in running for pid in (process.pid, *descendants(process.pid))]
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in running:
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for process in running:
        process.wait()


class DagsterGraphQL:
    """Raw GraphQL against a running webserver, for what DagsterGraphQLClient has no call for."""

    def __init__(self, port: int, location: str = "topicmap"):
        import requests

        self.base_url = f"http://127.0.0.1:{port}"
        self.url = f"{self.base_url}/graphql"
        self.location = location
        self.repository = {"repositoryLocationName": location, "repositoryName": "__repository__"}
        self._session = requests.Session()

    def query(self, document: str, **variables: object) -> dict:
        answer = self._session.post(self.url, json={"query": document, "variables": variables}, timeout=120)
        answer.raise_for_status()
        body = answer.json()
        if body.get("errors"):
            raise AssertionError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def location_loaded(self) -> bool:
        data = self.query(
            "{ workspaceOrError { ... on Workspace { locationEntries { name "
            "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        )
        for entry in data["workspaceOrError"].get("locationEntries", []):
            if entry["name"] == self.location:
                loaded = entry["locationOrLoadError"]
                if loaded and loaded["__typename"] == "PythonError":
                    raise AssertionError(f"code location failed to load: {loaded['message']}")
                return bool(loaded) and loaded["__typename"] == "RepositoryLocation"
        return False

    def sensors(self) -> list[dict]:
        data = self.query(
            "query($sel: RepositorySelector!) { sensorsOrError(repositorySelector: $sel) { __typename "
            "... on Sensors { results { name sensorState { id status } "
            "assetSelection { assetKeys { path } } } } } }",
            sel=self.repository,
        )
        return data["sensorsOrError"]["results"]

    def set_sensor(self, sensor: dict, running: bool) -> None:
        if running:
            data = self.query(
                "mutation($sel: SensorSelector!) { startSensor(sensorSelector: $sel) { __typename "
                "... on Sensor { sensorState { status } } ... on PythonError { message } } }",
                sel={**self.repository, "sensorName": sensor["name"]},
            )
            assert data["startSensor"].get("sensorState", {}).get("status") == "RUNNING", data
        else:
            data = self.query(
                "mutation($id: String!) { stopSensor(id: $id) { __typename "
                "... on StopSensorMutationResult { instigationState { status } } ... on PythonError { message } } }",
                id=sensor["sensorState"]["id"],
            )
            assert data["stopSensor"].get("instigationState", {}).get("status") == "STOPPED", data

    def launch_assets(self, *asset_names: str, tags: dict[str, str] | None = None) -> str:
        """Launch a run of the assets (as the UI's Materialize button does); its run id."""
        data = self.query(
            "mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename "
            "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } "
            "... on RunConfigValidationInvalid { errors { message } } } }",
            params={
                "selector": {
                    **self.repository,
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": [name]} for name in asset_names],
                },
                "mode": "default",
                "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
            },
        )
        assert data["launchRun"]["__typename"] == "LaunchRunSuccess", data
        return data["launchRun"]["run"]["runId"]

    def reexecute(self, parent_run_id: str, strategy: str = "ALL_STEPS") -> str:
        """Re-execute a run as the UI's Re-execute button does (by parent run id); the new run's id."""
        data = self.query(
            "mutation($params: ReexecutionParams!) { launchPipelineReexecution(reexecutionParams: $params) { "
            "__typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } "
            "... on RunConfigValidationInvalid { errors { message } } } }",
            params={"parentRunId": parent_run_id, "strategy": strategy},
        )
        answer = data["launchPipelineReexecution"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        return answer["run"]["runId"]

    def job_page_runs(self, job_name: str) -> list[str]:
        """The run ids the job's page lists: runs of that name tagged with this code location's repository."""
        label = f"{self.repository['repositoryName']}@{self.location}"
        data = self.query(
            "query($filter: RunsFilter) { runsOrError(filter: $filter, limit: 500) { __typename "
            "... on Runs { results { runId } } } }",
            filter={"pipelineName": job_name, "tags": [{"key": ".dagster/repository", "value": label}]},
        )
        return [run["runId"] for run in data["runsOrError"]["results"]]

    def add_partition(self, partitions_def_name: str, key: str) -> None:
        """Add a dynamic partition as the launch dialog's "Add partition" does."""
        data = self.query(
            "mutation($sel: RepositorySelector!, $name: String!, $key: String!) { addDynamicPartition("
            "repositorySelector: $sel, partitionsDefName: $name, partitionKey: $key) { __typename "
            "... on PythonError { message } ... on UnauthorizedError { message } } }",
            sel=self.repository,
            name=partitions_def_name,
            key=key,
        )
        assert data["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", data

    def runs(self, tags: dict[str, str] | None = None) -> list[dict]:
        """Runs (newest first), filtered by tags."""
        data = self.query(
            "query($filter: RunsFilter) { runsOrError(filter: $filter, limit: 500) { __typename "
            "... on Runs { results { runId status creationTime startTime endTime "
            "jobName tags { key value } assetSelection { path } } } } }",
            filter={"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
        )
        runs = data["runsOrError"]["results"]
        for run in runs:
            run["tags"] = {tag["key"]: tag["value"] for tag in run["tags"]}
            # a named job's run has no run-level asset selection: its assets are the job's own
            selected = {"/".join(key["path"]) for key in run["assetSelection"] or []}
            run["assets"] = selected or set(JOB_ASSETS.get(run["jobName"], ()))
        return runs

    def run_events(self, run_id: str) -> list[dict]:
        """The run's events in the order they were stored: eventType, stepKey (None for run-level), message."""
        events: list[dict] = []
        cursor = None
        while True:
            data = self.query(
                "query($runId: ID!, $after: String) { logsForRun(runId: $runId, afterCursor: $after, limit: 1000) { "
                "__typename ... on EventConnection { cursor hasMore events { "
                "... on MessageEvent { eventType stepKey message } } } } }",
                runId=run_id,
                after=cursor,
            )["logsForRun"]
            events += [
                {"eventType": None, "stepKey": None, "message": "", **event} for event in data["events"]
            ]
            if not data["hasMore"]:
                return events
            cursor = data["cursor"]

    def run_messages(self, run_id: str) -> list[str]:
        return [event["message"] or "" for event in self.run_events(run_id)]

    def materialized_partitions(self, asset_name: str) -> list[dict]:
        data = self.query(
            "query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { __typename "
            "... on Asset { assetMaterializations(limit: 100) { runId partition timestamp } } } }",
            key={"path": [asset_name]},
        )
        return data["assetOrError"].get("assetMaterializations", [])


def serve_code_location(port: int, workspace: Path, module: dict[str, str] | None = None) -> list[str]:
    """The command (its first word a script beside this interpreter) of ONE code server of workspace.yaml's
    location (or of ``module``, a ``python_module`` entry of a workspace file) on loopback ``port``, and
    ``workspace`` written to name it: a webserver, a daemon and CLI commands on ``workspace`` share it, where on a
    ``python_module`` workspace each would start its own (and the daemon a new one every minute or so)."""
    import yaml

    if module is None:
        (location,) = yaml.safe_load((ROOT / "workspace.yaml").read_text(encoding="utf-8"))["load_from"]
        module = location["python_module"]
    server = {"host": "127.0.0.1", "port": port, "location_name": module["location_name"]}
    workspace.write_text(yaml.safe_dump({"load_from": [{"grpc_server": server}]}), encoding="utf-8")
    return [
        *("dagster", "api", "grpc", "-h", "127.0.0.1", "-p", str(port)),
        *("-m", module["module_name"], "-a", module["attribute"]),
        *("--location-name", module["location_name"], "-d", str(ROOT / module["working_directory"])),
    ]


def listening(port: int) -> bool:
    """Something listens on loopback ``port`` (a code server does once its definitions are loaded)."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


# ------------------------------------------------------------------------------ webserver + daemon, SQLite

#: a backfill still under way, in GraphQL; every other status is final
BACKFILL_REQUESTED = "REQUESTED"
#: the statuses of a run that has ended, in GraphQL
RUN_ENDED = ("SUCCESS", "FAILURE", "CANCELED")


class ProgressWaiter:
    """Waiting on Dagster processes by progress, never by a total deadline: a subclass sets ``processes`` (name →
    (process, log path)) and ``stall_seconds``, and says what moves when its deployment works
    (``_fingerprint``) and what to show when it stalls (``log_tails``)."""

    processes: dict[str, tuple[subprocess.Popen, Path]]
    stall_seconds: float
    #: the fingerprint (several queries) is taken this often, not on every poll: a stall is minutes, and the
    #: webserver answering queries is CPU the deployment under test does not get
    fingerprint_seconds: float = 10.0
    #: when set, the polls of one wait back off from ``poll`` to this many seconds (half as long again each
    #: time): what is done at once is seen at once, and a wait of minutes costs a few dozen queries, not hundreds
    max_poll_seconds: float | None = None
    _last: object = None
    _since: float = 0.0
    _fingerprinted: float = 0.0

    def _fingerprint(self) -> object:
        raise NotImplementedError

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {name} (last lines):\n" + log.read_text(errors="replace")[-3000:]
            for name, (_, log) in self.processes.items()
        )

    def wait_for(self, what: str, condition: Callable[[], T | None], poll: float = 1.0) -> T:
        """Poll ``condition`` until it returns a value; fail only when nothing moves for ``stall_seconds``."""
        self._since = self._since or time.monotonic()
        delay = poll
        while True:
            found = condition()
            if found:
                return found
            for name, (process, _) in self.processes.items():
                assert process.poll() is None, (
                    f"{name} exited ({process.returncode}) waiting for {what}\n{self.log_tails()}"
                )
            if time.monotonic() - self._fingerprinted >= self.fingerprint_seconds:
                fingerprint, self._fingerprinted = self._fingerprint(), time.monotonic()
                if fingerprint != self._last:
                    self._last, self._since = fingerprint, time.monotonic()
                elif time.monotonic() - self._since > self.stall_seconds:
                    raise AssertionError(
                        f"no progress for {self.stall_seconds:.0f} s waiting for {what}\n{self.log_tails()}"
                    )
            time.sleep(delay)
            if self.max_poll_seconds:
                delay = max(poll, min(delay * 1.5, self.max_poll_seconds))


class LocalDagster(ProgressWaiter):
    """``dagster-webserver`` and ``dagster-daemon run``, apart as in production, with a DAGSTER_HOME of their own
    from deploy/dagster.local.yaml (SQLite, the run queue and its limits), on ONE code server of workspace.yaml's
    location (``dagster api grpc``, where each would otherwise start its own; runs are its children as they are
    the daemon's code server's). Every sensor is stopped before the daemon starts, so only what the test launches
    runs. Waits on progress (runs, their states, backfill states, the processes' logs), never on a total deadline."""

    #: a stall is minutes: a fingerprint every half minute sees one; polls back off to 3 s, under a turn of the
    #: daemon's loops (sensors every 5 s, backfills every 30 s)
    fingerprint_seconds = 30.0
    max_poll_seconds = 3.0
    #: how long `stop` waits for the processes after SIGTERM before it SIGKILLs what is left: they stop in seconds
    #: even loaded (a code server under way with a run in about 7 s on a machine loaded 5); a code server whose run
    #: worker lingers (Dagster's run worker defers SIGTERM) waits for it, which a test deployment gains nothing from
    stop_seconds = 10.0

    def __init__(
        self,
        tmp_path: Path,
        env: dict[str, str],
        stall_seconds: float = 600.0,
        instance_overrides: dict[str, object] | None = None,
    ):
        self.dagster_home = tmp_path / "dagster_home"
        write_instance(self.dagster_home, "dagster.local.yaml", **(instance_overrides or {}))
        self.env = {**env, "DAGSTER_HOME": str(self.dagster_home)}
        self.logs = tmp_path / "logs"
        self.logs.mkdir(exist_ok=True)
        self.code_server_port = free_port()
        self.workspace = tmp_path / "workspace.yaml"
        self.port = free_port()
        self.graphql = DagsterGraphQL(self.port)
        self.processes: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.stall_seconds = stall_seconds

    def _start(self, name: str, argv: list[str]) -> None:
        bin_dir = Path(sys.executable).parent
        log_path = self.logs / f"{name}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [str(bin_dir / argv[0]), *argv[1:]],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes[name] = (process, log_path)

    def _start_code_server(self) -> None:
        """workspace.yaml's code location served on a loopback port, and a workspace file that names it."""
        self._start("code_server", serve_code_location(self.code_server_port, self.workspace))
        self.wait_for("the code server", lambda: listening(self.code_server_port), poll=0.5)

    def start(self, before_daemon: Callable[[], object] | None = None) -> None:
        """Start the code server, the webserver (sensors stopped) and the daemon; ``before_daemon``, if given, is
        called just before the daemon starts (e.g. to wait for set-up that ran meanwhile)."""
        import requests

        self._start_code_server()
        self._start(
            "webserver",
            ["dagster-webserver", "-h", "127.0.0.1", "-p", str(self.port), "-w", str(self.workspace)],
        )

        def loaded() -> bool:
            try:
                return requests.get(f"{self.graphql.base_url}/server_info", timeout=5).ok and (
                    self.graphql.location_loaded()
                )
            except requests.ConnectionError:
                return False

        self.wait_for("the webserver and its code location", loaded)
        for sensor in self.graphql.sensors():
            if sensor["sensorState"]["status"] == "RUNNING":
                self.graphql.set_sensor(sensor, running=False)
        if before_daemon is not None:
            before_daemon()
        self._start("daemon", ["dagster-daemon", "run", "-w", str(self.workspace)])

    def stop(self) -> None:
        """Stop the daemon, the webserver and the code server (with its run workers) together: stopped one after
        the other, each waited for in turn, they took the sum of their stops (seconds each when loaded). Nothing
        needs the code server once the deployment ends: its clients stop with it."""
        stop_process_trees([process for process, _ in self.processes.values()], self.stop_seconds)

    def _fingerprint(self) -> object:
        sizes = tuple(log.stat().st_size for _, log in self.processes.values())
        try:
            runs = self.graphql.query(
                "{ runsOrError(limit: 500) { ... on Runs { results { runId status } } } }"
            )
            runs = tuple(sorted((r["runId"], r["status"]) for r in runs["runsOrError"]["results"]))
            backfills = tuple(sorted((b["id"], b["status"]) for b in self.backfills()))
        except Exception:  # noqa: BLE001 - the webserver still starting: its log shows the progress
            return sizes
        return runs, backfills, sizes

    def launch_backfill(self, asset_name: str, partitions: list[str]) -> str:
        """An asset backfill over ``partitions``, as the UI's Materialize → Launch backfill makes it; its id."""
        data = self.graphql.query(
            "mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) { "
            "__typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } "
            "... on InvalidSubsetError { message } ... on PartitionKeysNotFoundError { message } } }",
            params={"assetSelection": [{"path": [asset_name]}], "partitionNames": partitions},
        )
        answer = data["launchPartitionBackfill"]
        assert answer["__typename"] == "LaunchBackfillSuccess", answer
        return answer["backfillId"]

    def backfills(self) -> list[dict]:
        data = self.graphql.query(
            "{ partitionBackfillsOrError(limit: 100) { __typename ... on PartitionBackfills { results { id status } } } }"
        )
        return data["partitionBackfillsOrError"]["results"]

    def backfill_status(self, backfill_id: str) -> str:
        """The backfill's status as its page shows it (REQUESTED while under way)."""
        backfill = self.graphql.query(
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename "
            "... on PartitionBackfill { status } } }",
            id=backfill_id,
        )["partitionBackfillOrError"]
        assert "status" in backfill, backfill
        return backfill["status"]

    def wait_for_backfill(self, backfill_id: str) -> str:
        """The backfill's final status (COMPLETED_SUCCESS, COMPLETED_FAILED, FAILED, CANCELED...)."""

        def final() -> str | None:
            status = self.backfill_status(backfill_id)
            return None if status == BACKFILL_REQUESTED else status

        return self.wait_for(f"backfill {backfill_id}", final)

    def backfill_runs(self, backfill_id: str) -> list[dict]:
        return self.graphql.runs({"dagster/backfill": backfill_id})

    def wait_for_backfill_runs(self, backfill_id: str, count: int = 1) -> list[dict]:
        """The backfill's runs once ``count`` of them (at least) are submitted and every one has ended, or once
        the backfill has: what they did can be read before the backfill daemon's next turn (every 30 s) marks
        the backfill done. Its status and its full set of runs are `wait_for_backfill`'s."""

        def ended() -> tuple[list[dict]] | None:
            runs = self.backfill_runs(backfill_id)
            if len(runs) >= count and all(run["status"] in RUN_ENDED for run in runs):
                return (runs,)
            if self.backfill_status(backfill_id) == BACKFILL_REQUESTED:
                return None
            return (self.backfill_runs(backfill_id),)

        (runs,) = self.wait_for(f"the runs of backfill {backfill_id}", ended)
        return runs

    def schedule_dry_run(self, name: str, timestamp: float) -> list[dict]:
        """The schedule evaluated by the code location at ``timestamp`` (the UI's "Test schedule"): its run
        requests, each with runKey, jobName and tags (as a dict)."""
        data = self.graphql.query(
            "mutation($sel: ScheduleSelector!, $at: Float) { scheduleDryRun(selectorData: $sel, timestamp: $at) { "
            "__typename ... on DryRunInstigationTick { evaluationResult { skipReason error { message } "
            "runRequests { runKey jobName tags { key value } } } } ... on PythonError { message } } }",
            sel={**self.graphql.repository, "scheduleName": name},
            at=timestamp,
        )["scheduleDryRun"]
        assert data["__typename"] == "DryRunInstigationTick", data
        result = data["evaluationResult"]
        assert not result["error"], result["error"]
        return [
            {**request, "tags": {tag["key"]: tag["value"] for tag in request["tags"]}}
            for request in result["runRequests"] or []
        ]

    def sensor_ticks(self, name: str) -> list[dict]:
        """The sensor's finished ticks, newest first: status, skipReason, runKeys, and the dynamic partitions
        each added and deleted."""
        data = self.graphql.query(
            "query($sel: SensorSelector!) { sensorOrError(sensorSelector: $sel) { __typename ... on Sensor { "
            "sensorState { ticks(limit: 100) { timestamp status skipReason runKeys error { message } "
            "dynamicPartitionsRequestResults { partitionsDefName partitionKeys type } } } } } }",
            sel={**self.graphql.repository, "sensorName": name},
        )
        ticks = data["sensorOrError"]["sensorState"]["ticks"]
        return [tick for tick in ticks if tick["status"] != "STARTED"]

    def next_sensor_tick(self, name: str) -> dict:
        """Start the sensor if it is stopped, and wait for its next tick that started after this call, finished
        (returned): a tick already under way may have read what the caller has just changed, or not."""
        called = time.time()
        sensor = next(s for s in self.graphql.sensors() if s["name"] == name)
        if sensor["sensorState"]["status"] != "RUNNING":
            self.graphql.set_sensor(sensor, running=True)

        def ticked() -> dict | None:
            ticks = [tick for tick in self.sensor_ticks(name) if tick["timestamp"] > called]
            return ticks[-1] if ticks else None  # newest first: the first one to start after the call

        tick = self.wait_for(f"a tick of {name}", ticked, poll=1.0)
        assert tick["status"] != "FAILURE", tick
        return tick

    def stop_sensor(self, name: str) -> None:
        """Stop the sensor (if running), and wait until it is seen stopped with no tick under way: a tick under way
        stores its cursor when it ends, over one set meanwhile."""

        def stopped() -> bool:
            sensor = next(s for s in self.graphql.sensors() if s["name"] == name)
            if sensor["sensorState"]["status"] == "RUNNING":
                self.graphql.set_sensor(sensor, running=False)
                return False
            data = self.graphql.query(
                "query($sel: SensorSelector!) { sensorOrError(sensorSelector: $sel) { ... on Sensor { "
                "sensorState { ticks(limit: 1) { status } } } } }",
                sel={**self.graphql.repository, "sensorName": name},
            )
            return all(tick["status"] != "STARTED" for tick in data["sensorOrError"]["sensorState"]["ticks"])

        self.wait_for(f"{name} to stop", stopped)

    def launch_job(self, job_name: str, tags: dict[str, str]) -> str:
        """A run of a named job with these tags (a partition's among them), as the UI launches it; its run id."""
        data = self.graphql.query(
            "mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename "
            "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }",
            params={
                "selector": {**self.graphql.repository, "jobName": job_name},
                "mode": "default",
                "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
            },
        )
        assert data["launchRun"]["__typename"] == "LaunchRunSuccess", data
        return data["launchRun"]["run"]["runId"]

    def wait_for_run(self, run_id: str) -> str:
        """The run's final status (SUCCESS, FAILURE, CANCELED)."""

        def final() -> str | None:
            run = self.graphql.query(
                "query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }", id=run_id
            )["runOrError"]
            assert "status" in run, run
            status = run["status"]
            return status if status in RUN_ENDED else None

        return self.wait_for(f"run {run_id}", final)


@contextmanager
def local_dagster(
    tmp_path: Path, env: dict[str, str], instance_overrides: dict[str, object] | None = None
) -> Iterator[LocalDagster]:
    """A started `LocalDagster`, stopped afterwards; ``instance_overrides`` replace top-level keys of its
    dagster.yaml (`write_instance`)."""
    dagster = LocalDagster(tmp_path, env, instance_overrides=instance_overrides)
    try:
        dagster.start()
        yield dagster
    finally:
        dagster.stop()
