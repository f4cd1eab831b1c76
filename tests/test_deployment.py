"""The shipped Dagster instances load, agree with each other, and the run launcher's health check finds dead
run workers (the check Dagster's own MonitoringDaemon calls)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.dagster_internals import GRPC_INFO_TAG, EngineEventData, WorkerStatus, monitor_started_run
from orchestration.coordinator import TaggingRunCoordinator
from orchestration.instance import FAILURE_NOT_RECORDED, TopicmapInstance
from orchestration.launcher import IN_PROCESS_HOST_TAG, PidCheckingRunLauncher, process_state
from tests.dagster_deploy import DEPLOY, ROOT, dagster_pg_env, postgres_database, write_instance

LOCAL_GRPC = json.dumps({"host": "localhost", "port": 4266})
#: a step process is killed by the kernel as its run worker exits: still alive after this long, it was not
STEP_DEATH_PATIENCE_SECONDS = 30.0


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_local_and_production_instances_differ_only_in_storage() -> None:
    production, local = _load(DEPLOY / "dagster.yaml"), _load(DEPLOY / "dagster.local.yaml")
    assert production.pop("storage")["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    assert "storage" not in local  # Dagster's default: SQLite under DAGSTER_HOME
    assert production == local


def _check_instance(instance: dg.DagsterInstance) -> None:
    """What both instances promise: queue limits, pools, monitoring, crash-only retries, the pid launcher, no
    failure recorded for a run whose success is stored."""
    assert isinstance(instance, TopicmapInstance)
    assert isinstance(instance.run_launcher, PidCheckingRunLauncher)
    assert instance.run_launcher.supports_check_run_worker_health
    assert isinstance(instance.run_coordinator, TaggingRunCoordinator)
    assert instance.run_monitoring_enabled
    assert instance.run_monitoring_start_timeout_seconds == 180
    assert instance.run_monitoring_cancel_timeout_seconds == 180
    assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
    assert instance.run_retries_retry_on_asset_or_op_failure is False
    queue = instance.get_concurrency_config().run_queue_config
    limits = {limit["key"]: limit for limit in queue.tag_concurrency_limits}
    assert limits["topicmap/spider_topic"] == {
        "key": "topicmap/spider_topic",
        "value": {"applyLimitPerUniqueValue": True},
        "limit": 1,
    }
    assert limits["topicmap/api"]["limit"] == 2 and limits["dagster/backfill"]["limit"] == 3
    pools = instance.get_concurrency_config().pool_config
    assert pools.default_pool_limit == 2
    # a pool nobody configured (the assets' spider, social_api, archive, analysis) gets the default limit
    spider = instance.event_log_storage.get_concurrency_info("spider")
    assert spider.limit == 2 and spider.using_default_limit


def test_local_instance_loads(tmp_path: Path) -> None:
    write_instance(tmp_path / "home", "dagster.local.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        _check_instance(instance)
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"


@pytest.mark.postgres
def test_production_instance_loads_on_postgres(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_database("tm_deploy") as database_url:
        for name, value in dagster_pg_env(database_url).items():
            monkeypatch.setenv(name, value)
        write_instance(tmp_path / "home", "dagster.yaml")
        with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
            _check_instance(instance)
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert instance.get_runs() == []  # the tables were created in the new database
        # and the CLI an operator would run agrees (it prints the storage classes it loaded)
        info = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "instance", "info"],
            env={**os.environ, "DAGSTER_HOME": str(tmp_path / "home")},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert "PostgresRunStorage" in info.stdout and "PidCheckingRunLauncher" in info.stdout


def test_production_instance_names_the_missing_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_DB", "DAGSTER_PG_USERNAME"):
        monkeypatch.setenv(name, "x" if name != "DAGSTER_PG_PORT" else "5432")
    monkeypatch.delenv("DAGSTER_PG_PASSWORD", raising=False)
    write_instance(tmp_path / "home", "dagster.yaml")
    with pytest.raises(Exception, match="DAGSTER_PG_PASSWORD"):
        dg.DagsterInstance.from_config(str(tmp_path / "home"))


def test_make_instance_installs_the_template_and_keeps_a_users_file(tmp_path: Path) -> None:
    home = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MAKEFLAGS", "MFLAGS")}
    run = [*("make", "-s", "-C", str(ROOT), "instance"), f"TOPICMAP_HOME={home}"]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=60)
    installed = home / "dagster_home" / "dagster.yaml"
    assert _load(installed) == _load(DEPLOY / "dagster.local.yaml")
    installed.write_text("telemetry:\n  enabled: true\n", encoding="utf-8")  # the operator's own file
    out = subprocess.run(run, env=env, check=True, capture_output=True, text=True, timeout=60).stdout
    assert "keeping" in out and installed.read_text() == "telemetry:\n  enabled: true\n"
    missing = subprocess.run(
        [*run, "TOPICMAP_INSTANCE=postgres"],
        env={k: v for k, v in env.items() if not k.startswith("DAGSTER_PG_")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode != 0 and "needs DAGSTER_PG_HOST" in missing.stdout


# -- the run launcher's health check, through the MonitoringDaemon's own per-run function ------------------


def _started_run(
    instance: dg.DagsterInstance,
    pid: int | None,
    grpc_info: str = LOCAL_GRPC,
    tags: dict[str, str] | None = None,
) -> dg.DagsterRun:
    """A STARTED run as DefaultRunLauncher leaves it: the code server's address tag and the worker's pid event
    (``tags`` instead of the address: a run executed where it was created, as orchestration/runs.py tags it)."""
    run = instance.add_run(
        dg.DagsterRun(
            job_name="spider_iteration_job",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.STARTED,
            tags={GRPC_INFO_TAG: grpc_info} if tags is None else tags,
        )
    )
    if pid is not None:
        instance.report_engine_event(
            f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid)
        )
    return run


def _monitor(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRun:
    record = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))[0]
    monitor_started_run(instance, None, record, logging.getLogger("test"))  # ty: ignore[invalid-argument-type]
    return instance.get_run_by_id(run.run_id)


@pytest.fixture(scope="module")
def monitored_instance(tmp_path_factory: pytest.TempPathFactory):
    """One instance from the local template for the health-check tests (each adds runs of its own)."""
    home = tmp_path_factory.mktemp("monitored") / "home"
    write_instance(home, "dagster.local.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


def test_monitoring_fails_a_run_whose_worker_was_killed(monitored_instance: dg.DagsterInstance) -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        run = _started_run(monitored_instance, worker.pid)
        assert _monitor(monitored_instance, run).status == dg.DagsterRunStatus.STARTED  # alive: left alone
        worker.kill()  # SIGKILL; not reaped yet: a zombie still has its pid but will never run again
        while process_state(worker.pid) == "alive":
            time.sleep(0.05)
        assert process_state(worker.pid) == "zombie"
        failed = _monitor(monitored_instance, run)
    finally:
        worker.kill()
        worker.wait()
    assert failed.status == dg.DagsterRunStatus.FAILURE
    messages = [e.message for e in monitored_instance.all_logs(run.run_id)]
    assert any(f"run worker process {worker.pid} has exited" in m for m in messages), messages
    # once reaped, the pid is simply gone
    gone = _started_run(monitored_instance, worker.pid)
    assert _monitor(monitored_instance, gone).status == dg.DagsterRunStatus.FAILURE


def test_monitoring_fails_a_run_whose_creating_process_died(monitored_instance: dg.DagsterInstance) -> None:
    """A `make demo` / `topicmap topic run` run executes in the process that created it: if that process is
    killed, the run is failed as a dead run worker's is (here: a process that has exited)."""
    creator = subprocess.Popen([sys.executable, "-c", "pass"])
    creator.wait()
    here = _started_run(monitored_instance, creator.pid, tags={IN_PROCESS_HOST_TAG: socket.gethostname()})
    assert _monitor(monitored_instance, here).status == dg.DagsterRunStatus.FAILURE
    # a process on another host: its pid means nothing here
    elsewhere = _started_run(
        monitored_instance, creator.pid, tags={IN_PROCESS_HOST_TAG: "another-host.example"}
    )
    assert _monitor(monitored_instance, elsewhere).status == dg.DagsterRunStatus.STARTED


def test_monitoring_keeps_a_run_whose_success_is_stored(monitored_instance: dg.DagsterInstance) -> None:
    """A run worker that died after storing the run's RUN_SUCCESS, before updating the run's status: monitoring
    finds it dead with the run STARTED and reports a failure, which is not recorded; the run ends a success."""
    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    worker.wait()
    run = _started_run(monitored_instance, worker.pid)
    stored_at = time.time() - 5.0
    success = dg.EventLogEntry(
        error_info=None,
        level=logging.DEBUG,
        user_message="",
        run_id=run.run_id,
        timestamp=stored_at,
        job_name=run.job_name,
        dagster_event=dg.DagsterEvent(dg.DagsterEventType.RUN_SUCCESS.value, run.job_name),
    )
    monitored_instance.store_event(success)  # the event log's write; the run's status is left as it was
    assert monitored_instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    kept = _monitor(monitored_instance, run)
    assert kept.status == dg.DagsterRunStatus.SUCCESS
    record = monitored_instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))[0]
    assert record.end_time == pytest.approx(stored_at)  # the run ended when its success was stored
    failures = monitored_instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert not failures.records
    messages = [e.message for e in monitored_instance.all_logs(run.run_id)]
    reason = next(m for m in messages if m.startswith(FAILURE_NOT_RECORDED))
    assert f"run worker process {worker.pid} is gone" in reason, reason  # what monitoring reported
    # a second failure reported later (another watcher, a later poll) is not recorded either
    monitored_instance.report_run_failed(kept)
    assert monitored_instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
    assert not monitored_instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE
    ).records


def test_monitoring_leaves_runs_it_cannot_judge_alone(monitored_instance: dg.DagsterInstance) -> None:
    # no pid reported yet (the worker is still importing the code location)
    assert (
        _monitor(monitored_instance, _started_run(monitored_instance, None)).status
        == dg.DagsterRunStatus.STARTED
    )
    # a code server on another host: a pid there means nothing here (max_runtime_seconds is the backstop)
    remote = _started_run(monitored_instance, 999_999_999, json.dumps({"host": "10.1.2.3", "port": 4000}))
    assert _monitor(monitored_instance, remote).status == dg.DagsterRunStatus.STARTED


def test_monitoring_sees_a_reused_pid(monitored_instance: dg.DagsterInstance) -> None:
    """A live process that started after the worker reported the same pid is not the worker."""
    run = _started_run(monitored_instance, None)
    reported = monitored_instance.report_engine_event(
        f"Started process for run (pid: {os.getpid()}).", run, EngineEventData.in_process(os.getpid())
    )
    record = monitored_instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT
    ).records
    assert record and reported is not None
    # the same event as if written a day ago, on a second run: this (newer) process only reuses the number
    old = _started_run(monitored_instance, None)
    monitored_instance.store_event(
        record[0].event_log_entry._replace(run_id=old.run_id, timestamp=time.time() - 86400)
    )
    launcher = monitored_instance.run_launcher
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    result = launcher.check_run_worker_health(old)
    assert result.status == WorkerStatus.FAILED and "pid reused" in (result.msg or "")


def _report_step_process(instance: dg.DagsterInstance, run: dg.DagsterRun, pid: int) -> None:
    """The event Dagster's multiprocess executor logs as a step process starts (its pid in the metadata)."""
    instance.report_dagster_event(
        dg.DagsterEvent(
            event_type_value=dg.DagsterEventType.STEP_WORKER_STARTED.value,
            job_name=run.job_name,
            step_key="spider_iteration",
            event_specific_data=EngineEventData(metadata={"pid": dg.MetadataValue.text(str(pid))}),
        ),
        run_id=run.run_id,
    )


def test_monitoring_ends_the_step_processes_a_dead_worker_left(
    monitored_instance: dg.DagsterInstance,
) -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    step = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        run = _started_run(monitored_instance, worker.pid)
        _report_step_process(monitored_instance, run, step.pid)
        worker.kill()
        worker.wait()
        failed = _monitor(monitored_instance, run)
        # the step was killed (SIGKILL) before the run was failed, so a retry never races it
        assert step.wait(timeout=60) == -9
    finally:
        for process in (worker, step):
            process.kill()
            process.wait()
    assert failed.status == dg.DagsterRunStatus.FAILURE
    messages = [e.message for e in monitored_instance.all_logs(run.run_id)]
    assert any(f"ended its step processes [{step.pid}]" in m for m in messages), messages


def test_only_the_step_process_that_reported_a_pid_is_ended(monitored_instance: dg.DagsterInstance) -> None:
    """A live process that started after the step event's time only reuses the pid: it is left alone."""
    launcher = monitored_instance.run_launcher
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        run = _started_run(monitored_instance, None)
        _report_step_process(monitored_instance, run, bystander.pid)
        (record,) = monitored_instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED
        ).records
        old = _started_run(monitored_instance, None)
        monitored_instance.store_event(
            record.event_log_entry._replace(run_id=old.run_id, timestamp=time.time() - 86400)
        )
        assert launcher.end_step_processes(old) == []
        # a run whose code server was on another host: its pids mean nothing here
        remote = _started_run(monitored_instance, None, json.dumps({"host": "10.1.2.3", "port": 4000}))
        _report_step_process(monitored_instance, remote, bystander.pid)
        assert launcher.end_step_processes(remote) == []
        assert process_state(bystander.pid) == "alive"
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.deployment
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_a_step_process_dies_with_its_run_worker(tmp_path: Path, start_method: str) -> None:
    """Dagster's multiprocess executor leaves a step process running when its run worker is killed; the code
    location's executor does not (orchestration/executor.py), so a failed run's steps write nothing more: neither a
    step forked from the run's forkserver (the default) nor a spawned one."""
    (tmp_path / "home").mkdir()
    pid_file, release = tmp_path / "step.pid", tmp_path / "release"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "STEP_PID_FILE": str(pid_file),
        "STEP_RELEASE_FILE": str(release),
    }
    if start_method == "spawn":
        env["STEP_START_METHOD"] = "spawn"  # else the executor's default
    worker = subprocess.Popen(
        [sys.executable, "-c", "import tests.run_worker_job as job; job.main()"], cwd=ROOT, env=env
    )
    step = None
    try:
        while not pid_file.exists():  # the worker loads the job and starts its step process
            assert worker.poll() is None, (
                f"the run worker exited ({worker.returncode}) before its step started"
            )
            time.sleep(0.1)
        step = int(pid_file.read_text(encoding="utf-8"))
        assert process_state(step) == "alive"
        worker.kill()
        worker.wait()
        # the kernel kills the step as its parent exits; give a loaded machine time to schedule it
        waited = time.monotonic()
        while process_state(step) == "alive" and time.monotonic() - waited < STEP_DEATH_PATIENCE_SECONDS:
            time.sleep(0.05)
        assert process_state(step) != "alive", "the step process outlived its run worker"
    finally:
        release.touch()  # an orphaned step would finish now
        worker.kill()
        worker.wait()
        if step is not None and process_state(step) == "alive":
            os.kill(step, signal.SIGKILL)


def test_spider_sensor_waits_for_dagsters_own_retry(monitored_instance: dg.DagsterInstance) -> None:
    """A crashed spider run that run_retries will re-launch is not launched a second time by the sensor."""
    from sensors.spider import retries_pending

    topic = f"retry-{uuid.uuid4().hex[:6]}"
    crashed = monitored_instance.add_run(
        dg.DagsterRun(
            job_name="spider_iteration_job",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.FAILURE,
            tags={"topicmap/topic": topic, "dagster/will_retry": "true"},
        )
    )
    assert retries_pending(monitored_instance, topic) == 1
    monitored_instance.add_run(
        dg.DagsterRun(
            job_name="spider_iteration_job",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.STARTED,
            tags={"topicmap/topic": topic, "dagster/parent_run_id": crashed.run_id},
        )
    )
    assert retries_pending(monitored_instance, topic) == 0  # the retry exists: it counts as in progress
