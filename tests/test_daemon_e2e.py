"""End to end on the production instance: PostgreSQL, `dagster-daemon run` and `dagster-webserver`, driven
and read through GraphQL, with a spider run killed by SIGKILL half way.

The test creates its own databases (Dagster's and the topic store's) on the test server, writes a
DAGSTER_HOME from deploy/dagster.yaml, serves a small demo web on loopback and starts the webserver and the
daemon as deploy/README.md says, on one code server of workspace.yaml's location (started beside them, where the
daemon would start its own and replace it every minute or so). Through GraphQL it turns the topic sensors on,
loads the archive and then declares a topic; the sensors carry it from seeds through every spider iteration
to a snapshot. While a spider iteration is writing, its run worker (and only it) is killed with -9: the run must
be marked failed within a bounded time, its step process must be gone before a retry is launched and log nothing
more into the failed run, the topic must complete, and the store must hold exactly the rows an in-process run of
the same topic holds (nothing lost, nothing twice).

It waits on progress (new runs, run status changes, new events, new rows), never on a total deadline: a
busy machine makes it slower, not red. It fails when nothing at all moves for NO_PROGRESS_SECONDS.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar
from unittest import mock

import dagster as dg
import pytest
import requests
import yaml
from dagster_graphql import DagsterGraphQLClient
from sqlalchemy import func, select

from orchestration.launcher import process_state
from tests import demo_topic
from tests.dagster_deploy import (
    DEPLOY,
    ROOT,
    DagsterGraphQL,
    ProgressWaiter,
    dagster_pg_env,
    descendants,
    free_port,
    listening,
    postgres_database,
    serve_code_location,
    stop_process_tree,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

pytestmark = [pytest.mark.daemon, pytest.mark.postgres]

#: nothing observable changed for this long: the deployment is stuck (a busy machine only slows it down)
NO_PROGRESS_SECONDS = 300.0
#: from the kill to the run's FAILURE: the code server notices its dead child within a second, the
#: MonitoringDaemon (poll 5 s here) through PidCheckingRunLauncher at the latest one poll later
FAILURE_DETECTION_BOUND_SECONDS = 90.0
#: per-domain politeness on the demo web: slow enough that an iteration runs for a while (to be killed)
# Slow enough that an iteration writes several batches (one every 5 s) on a quiet machine too, so a run is
# caught with rows written on both sides of the kill.
SPIDER_INTERVAL = 4.0
#: how often GraphQL is asked for a running spider run (to kill); once one is found, only the store is polled
FIND_RUN_POLL_SECONDS = 1.0
#: the sensors that need what this deployment has not: a Bit.ly token, a Facebook app, a duplicate-media list, a
#: media tags file
UNCONFIGURED_SENSORS = {
    "click_refetch_3d",
    "click_refetch_30d",
    "statistics_as_stories_join",
    "media_dups_changed",
    "media_tags_changed",
}
#: on in production, off here: Dagster's automation sensor would build the topic's weeks of clusters (a backfill and
#: its run, ~13 CPU s) beside the post-spider run, which nothing here asserts; its condition is tested tick by tick
#: in test_cluster_weeks_automation.py, a cluster_weeks backfill under the daemon in test_cluster_weeks_daemon.py
NOT_UNDER_TEST_SENSORS = {"cluster_weeks_automation"}
#: the demo topic as declared here: two iterations (the first is the one killed, the second shows spidering goes on
#: after its retry) and one snapshot period (the snapshot's timespans and pictures are test_browser.py's subject)
MAX_ITERATIONS = 1
SNAPSHOT_PERIODS = ("overall",)
IN_PROGRESS = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"}
#: events a failed run may still get after its RUN_FAILURE without anything of its steps running
RUN_LEVEL_NOTES = ("ENGINE_EVENT", "RUN_FAILURE")
PID_EVENT = re.compile(r"Started process for run \(pid: (\d+)\)")
T = TypeVar("T")


class Deployment(ProgressWaiter):
    """The running webserver + daemon, the store, and a progress meter over all of them."""

    def __init__(
        self,
        graphql: DagsterGraphQL,
        client: DagsterGraphQLClient,
        instance: dg.DagsterInstance,
        store: TopicStore,
    ):
        self.graphql = graphql
        self.client = client
        self.instance = instance
        self.store = store
        self.processes: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.stall_seconds = NO_PROGRESS_SECONDS

    def _fingerprint(self) -> object:
        """Anything that moves when the deployment works: runs and their states, the events of the unfinished
        runs (a run's steps log and materialize while its state stays STARTED), store rows."""
        try:
            self.graphql.query("{ version }")
        except requests.ConnectionError:  # the webserver is still starting: its log shows its progress
            return tuple(log.stat().st_size for _, log in self.processes.values())
        all_runs = self.instance.get_runs()
        runs = tuple(sorted((run.run_id, run.status.value) for run in all_runs))
        # each unfinished run's newest event (a finished run's state is in ``runs``)
        events = tuple(
            sorted(
                (run.run_id, record.storage_id)
                for run in all_runs
                if not run.is_finished
                for record in self.instance.get_records_for_run(run.run_id, limit=1, ascending=False).records
            )
        )
        with self.store.engine.connect() as conn:
            processed = conn.execute(
                select(func.count()).where(s.topic_fetch_urls.c.state.not_in(("pending",)))
            ).scalar_one()
        return runs, events, processed

    def topic_runs(self) -> list[dict]:
        return self.graphql.runs({"topicmap/topic": demo_topic.TOPIC})

    def topic_run_ids(self, job_names: tuple[str, ...], status: dg.DagsterRunStatus) -> list[str]:
        """The topic's runs of these jobs in this status, oldest first, read from Dagster's run storage (a poll
        of it costs the webserver nothing)."""
        runs = self.instance.get_runs(
            dg.RunsFilter(statuses=[status], tags={"topicmap/topic": demo_topic.TOPIC})
        )
        return [run.run_id for run in reversed(runs) if run.job_name in job_names]

    def snapshot_rows(self) -> int:
        """The topic's snapshots in the store (written by the snapshot step before Dagster records it)."""
        topic = select(s.topics.c.topics_id).where(s.topics.c.name == demo_topic.TOPIC).scalar_subquery()
        with self.store.engine.connect() as conn:
            return conn.execute(
                select(func.count()).select_from(s.snapshots).where(s.snapshots.c.topics_id == topic)
            ).scalar_one()

    def processed_urls(self) -> int:
        with self.store.engine.connect() as conn:
            return conn.execute(
                select(func.count()).where(s.topic_fetch_urls.c.state.not_in(("pending",)))
            ).scalar_one()


def step_processes(worker_pid: int) -> list[int]:
    """The step processes Dagster's multiprocess executor started from a run worker: forked by the run's forkserver
    (the executor's default start method) or spawned; not the forkserver itself, nor the resource tracker."""
    found = []
    for pid in descendants(worker_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        forked = b"forkserver" in command and parent != worker_pid
        if forked or b"spawn_main" in command:
            found.append(pid)
    return found


def _start(name: str, argv: list[str], env: dict[str, str], logs: Path) -> tuple[subprocess.Popen, Path]:
    log_path = logs / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, log_path


class InProcessReference:
    """The same topic run in process (no politeness, SQLite, its Dagster instance in memory): the counts the deployment
    must reproduce. It runs in a process of its own beside the deployment (which spends most of its time waiting on
    its politeness interval), niced: its counts are wanted only at the end, the deployment's processes come first."""

    def __init__(self, tmp_path: Path, web, server_port: int):  # noqa: ANN001
        home = tmp_path / "reference"
        env = demo_topic.prepare(
            home,
            web,
            server_port,
            interval=0.0,
            max_iterations=MAX_ITERATIONS,
            snapshot_periods=SNAPSHOT_PERIODS,
        )
        self.drops = home / "drops"
        env["DAGSTER_HOME"] = str(home / "dagster_home")
        (home / "dagster_home").mkdir(parents=True)
        self.stdout, self.stderr = home / "stdout.txt", home / "stderr.txt"
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.process = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-m", "tests.demo_topic", "--ephemeral"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
            )

    def counts(self) -> dict[str, int]:
        """The reference's store counts, once its run has ended."""
        assert self.process.wait() == 0, self.stderr.read_text(errors="replace")[-4000:]
        return json.loads(self.stdout.read_text().strip().splitlines()[-1])


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[Deployment, InProcessReference, Path, str]]:
    from topicmap.demo.server import serve_demo_web

    web = demo_topic.demo_web()
    with (
        serve_demo_web(web) as server,
        postgres_database("tm_e2e_dagster") as dagster_db,
        postgres_database("tm_e2e_store") as store_db,
    ):
        reference = InProcessReference(tmp_path, web, server.port)
        home = tmp_path / "deployed"
        env = demo_topic.prepare(
            home,
            web,
            server.port,
            interval=SPIDER_INTERVAL,
            declare_topic=False,
            archive_from=reference.drops,
        )
        dagster_home = home / "dagster_home"
        dagster_home.mkdir(parents=True)
        config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text(encoding="utf-8"))
        config["run_monitoring"]["poll_interval_seconds"] = 5  # production polls every 30 s
        (dagster_home / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        store_url = store_db.replace("postgresql://", "postgresql+psycopg2://", 1)
        env.update(
            dagster_pg_env(dagster_db),
            DAGSTER_HOME=str(dagster_home),
            TOPICMAP_DATABASE_URL=store_url,
            # every turn of the sensor daemon's loop (it turns at most every 5 s: any interval up to 5 s ticks each
            # sensor as often); the ticks are about half of the daemon's CPU and much of the code server's
            TOPICMAP_SENSOR_INTERVAL_SECONDS="2",
        )
        port = free_port()
        graphql = DagsterGraphQL(port)
        bin_dir = Path(sys.executable).parent
        logs = tmp_path / "logs"
        logs.mkdir()
        processes: dict[str, tuple[subprocess.Popen, Path]] = {}
        store: TopicStore | None = None
        deployed: Deployment | None = None
        try:
            # one code server for the webserver and the daemon (on workspace.yaml each would start its own, and the
            # daemon a new one every minute or so: seconds of CPU each); runs are its children, as they are the
            # daemon's code server's
            workspace = home / "workspace.yaml"
            code_server_port = free_port()
            processes["code_server"] = _start(
                "code_server",
                [str(bin_dir / "dagster"), *serve_code_location(code_server_port, workspace)[1:]],
                env,
                logs,
            )
            # the store is created and upgraded while the code server loads the code location
            store = TopicStore.open(store_url)
            client = DagsterGraphQLClient("127.0.0.1", port_number=port)
            # the instance as the deployment's processes load it (its storage's URL from the environment)
            with mock.patch.dict(os.environ, dagster_pg_env(dagster_db)):
                instance = dg.DagsterInstance.from_config(str(dagster_home))
            deployed = Deployment(graphql, client, instance, store)
            deployed.processes = processes
            deployed.wait_for("the code server", lambda: listening(code_server_port), poll=0.5)
            deployed.processes["webserver"] = _start(
                "webserver",
                [
                    str(bin_dir / "dagster-webserver"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-w",
                    str(workspace),
                ],
                env,
                logs,
            )

            def webserver_up() -> bool:
                try:
                    return (
                        requests.get(f"http://127.0.0.1:{port}/server_info", timeout=5).ok
                        and graphql.location_loaded()
                    )
                except requests.ConnectionError:
                    return False

            deployed.wait_for("the webserver and its code location", webserver_up)
            # Sensors are set before the daemon first ticks: the topic's own sensors on, those that cannot act in
            # this deployment off (each of their ticks would only say so, and delay the others' by a second), and the
            # automation this test does not assert off.
            sensors = graphql.sensors()
            off = UNCONFIGURED_SENSORS | NOT_UNDER_TEST_SENSORS
            assert {sensor["name"] for sensor in sensors} >= off
            for sensor in sensors:
                graphql.set_sensor(sensor, running=sensor["name"] not in off)
            deployed.processes["daemon"] = _start(
                "daemon", [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)], env, logs
            )
            yield deployed, reference, home, demo_topic.topics_yaml(web, MAX_ITERATIONS, SNAPSHOT_PERIODS)
        finally:
            # the code server (and its runs) last
            for process in (reference.process, *(process for process, _ in reversed(processes.values()))):
                stop_process_tree(process)
            if store is not None:
                store.dispose()
            if deployed is not None:
                deployed.instance.dispose()


def test_topic_runs_to_its_snapshot_on_the_deployment_and_survives_a_killed_spider_run(
    deployment: tuple[Deployment, InProcessReference, Path, str],
) -> None:
    deployed, reference_run, home, topics_yaml = deployment
    graphql = deployed.graphql

    # 1. The operator loads the archive (a run through the queue), then declares the topic.
    archive_run = graphql.launch_assets("archive_stories")
    deployed.wait_for(
        "archive_stories", lambda: deployed.client.get_run_status(archive_run).value in ("SUCCESS", "FAILURE")
    )
    assert deployed.client.get_run_status(archive_run).value == "SUCCESS", graphql.run_messages(archive_run)[
        -20:
    ]
    (home / "topics.yaml").write_text(topics_yaml, encoding="utf-8")

    # 2. The sensors seed the topic and launch its spider iterations. Kill one while it writes.
    def spider_runs() -> list[dict]:
        return [r for r in deployed.topic_runs() if "fetched_links" in r["assets"]]

    watched: dict[str, int] = {}  # spider run id -> processed URLs when first seen running
    worker_pids: dict[str, int] = {}  # spider run id -> its run worker's pid, read once from its events
    running: list[tuple[dict, int]] = []  # the spider run being watched, and its run worker's pid
    looked: list[float] = [0.0]  # when GraphQL was last asked for a running spider run

    def running_spider_run() -> tuple[dict, int] | None:
        # polled from Dagster's run storage; the webserver is asked only about a run found running
        for run_id in deployed.topic_run_ids(("spider_iteration_job",), dg.DagsterRunStatus.STARTED):
            if run_id not in worker_pids:
                messages = graphql.run_messages(run_id)
                found = next((int(m.group(1)) for m in map(PID_EVENT.search, messages) if m), None)
                if found is None:
                    continue
                worker_pids[run_id] = found
            run = next((r for r in spider_runs() if r["runId"] == run_id), None)
            if run is not None and run["status"] == "STARTED":
                return run, worker_pids[run_id]
        if deployed.topic_run_ids(("post_spider_job", "snapshot_job"), dg.DagsterRunStatus.SUCCESS):
            pytest.fail(
                f"every spider run finished before it could be killed; raise SPIDER_INTERVAL ({watched})"
            )
        return None

    def killable_run() -> tuple[dict, int] | None:
        # A spider run is found through GraphQL; then, while its worker lives, only the store's count is read
        # (the worker's state is in procfs): a new batch shows within a poll, with the run's later steps to come.
        if not running:
            if time.monotonic() - looked[0] < FIND_RUN_POLL_SECONDS:
                return None
            looked[0] = time.monotonic()
            found = running_spider_run()
            if found is not None:
                running.append(found)
                watched.setdefault(found[0]["runId"], deployed.processed_urls())
            return None
        run, pid = running[0]
        if process_state(pid) != "alive":  # its run ended before it wrote a batch more: watch the next one
            running.clear()
            return None
        if deployed.processed_urls() > watched[run["runId"]]:
            # the run has written a batch: kill it with rows on both sides, while it is still running
            if deployed.client.get_run_status(run["runId"]).value == "STARTED":
                return run, pid
            running.clear()
        return None

    victim, pid = deployed.wait_for("a spider run that has written rows", killable_run, poll=0.3)
    steps = step_processes(pid)
    assert steps, "the spider run's worker has no step process"
    os.kill(pid, signal.SIGKILL)  # the run worker only: its step process must not outlive it
    killed_at = time.monotonic()
    processed_at_kill = deployed.processed_urls()

    # 3. It is marked failed within a bounded time, and a retry is launched.
    deployed.wait_for(
        "the killed run to be marked failed",
        lambda: deployed.client.get_run_status(victim["runId"]).value == "FAILURE",
        poll=0.5,
    )
    detected_after = time.monotonic() - killed_at
    assert detected_after < FAILURE_DETECTION_BOUND_SECONDS, detected_after
    messages = graphql.run_messages(victim["runId"])
    assert any("signal 9" in m or "run worker process" in m for m in messages), messages[-10:]

    def retry() -> dict | None:
        for run in spider_runs():
            created_after = run["creationTime"] > victim["creationTime"]
            if run["tags"].get("dagster/parent_run_id") == victim["runId"] or (
                created_after and run["runId"] != victim["runId"]
            ):
                return run
        return None

    retry_run = deployed.wait_for("a retry of the killed spider run", retry)
    # a failed run is dead before its retry: its step process went with its worker
    assert all(process_state(step) != "alive" for step in steps), {
        step: process_state(step) for step in steps
    }

    # 4. The topic completes: spidering goes on to the snapshot, and nothing is left running.
    def finished() -> bool:
        # the store is asked first (no webserver work): Dagster is asked once the snapshot's row is there
        done = (
            deployed.snapshot_rows() > 0
            and any(m["partition"] == demo_topic.TOPIC for m in graphql.materialized_partitions("snapshots"))
            and not any(r["status"] in IN_PROGRESS for r in deployed.topic_runs())
        )
        return done

    deployed.wait_for("the topic's snapshot", finished, poll=2.0)
    # nothing of the killed run's steps landed in it after it failed: only run-level notes (the retry, and a
    # second RUN_FAILURE when Dagster's two detectors of a dead worker, the code server and run monitoring, race)
    events = graphql.run_events(victim["runId"])
    failed_at = next(i for i, e in enumerate(events) if e["eventType"] == "RUN_FAILURE")
    late = [e for e in events[failed_at + 1 :] if e["stepKey"] or e["eventType"] not in RUN_LEVEL_NOTES]
    assert late == [], late
    runs = deployed.topic_runs()
    failed = [r for r in runs if r["status"] == "FAILURE"]
    assert [r["runId"] for r in failed] == [victim["runId"]], [
        (r["runId"], r["assets"], r["tags"], graphql.run_messages(r["runId"])[-12:]) for r in failed
    ]
    assert deployed.client.get_run_status(retry_run["runId"]).value == "SUCCESS"
    assert any(m["partition"] == demo_topic.TOPIC for m in graphql.materialized_partitions("seeds"))
    # one spider run of the topic at a time: the sensor waited for Dagster's retry instead of doubling it
    spans = sorted((r["startTime"], r["endTime"], r["runId"]) for r in spider_runs() if r["startTime"])
    overlaps = [(a[2], b[2]) for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1]]
    assert overlaps == [], overlaps
    assert len(spider_runs()) >= 3  # iterations went on after the retry

    # 5. The store holds exactly what an in-process run holds: no URL lost, no row twice.
    counts = demo_topic.store_counts(deployed.store)
    reference = reference_run.counts()
    assert counts["topic_fetch_urls"] > processed_at_kill > 0
    assert counts["duplicate_fetch_urls"] == 0 and counts["duplicate_stories"] == 0
    assert counts == reference, {
        k: (counts[k], reference[k]) for k in counts if counts[k] != reference.get(k)
    }
    caught_by = "its code server" if any("signal 9" in m for m in messages) else "run monitoring"
    print(f"\nkilled run marked failed after {detected_after:.1f} s by {caught_by}; counts {counts}")
