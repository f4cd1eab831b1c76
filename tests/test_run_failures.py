"""Dead runs, on a real Dagster instance (deploy/dagster.local.yaml): the URL claims of a spider run that was killed
(or canceled) are free as soon as the sensor reacts to it, not a lease later; a run killed after its work was done is
retried into a success, not into "No steps needed to be retried"; a run killed with work left is retried from its
failure, its succeeded steps not run again; a run whose worker is killed as it reports its success stays a success.

The tests wait on rows and run states (with a generous safety limit), never on time."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from datetime import date
from functools import partial
from pathlib import Path
from typing import TypeVar

import dagster as dg
import pytest
from sqlalchemy import select

from assets.dagster_internals import (
    RETRY_NUMBER_TAG,
    RETRY_STRATEGY_TAG,
    WILL_RETRY_TAG,
    ModuleTarget,
    WorkspaceProcessContext,
    consume_new_runs_for_automatic_reexecution,
    create_test_daemon_workspace_context,
    monitor_started_run,
)
from orchestration.executor import STRATEGY_BY_EXECUTOR, STRATEGY_BY_TAG
from orchestration.instance import FAILURE_NOT_RECORDED
from orchestration.launcher import PidCheckingRunLauncher, process_state
from resources.store import TopicStoreResource
from sensors.run_failures import release_claims_of_canceled_runs, release_claims_of_failed_runs
from tests.dagster_deploy import ROOT, run_status_tick
from tests.faultserver import FaultServer
from tests.killed_after_success_job import dynamic_job
from topicmap.spider.claims import ClaimQueue, claim_keys, run_holder
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig

T = TypeVar("T")
RUN_SUCCESS, RUN_FAILURE = dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE
F, H = s.topic_fetch_urls, s.topic_spider_holders
#: nothing at all happened for this long: something is stuck (a busy machine only makes the tests slower)
SAFETY_SECONDS = 300.0
TOPIC = "dead-holders"
STALLING_URLS = [f"http://site{site}.test/stall?n={n}" for site in range(3) for n in range(2)]
#: URLs another run, alive, holds: never released by the dead run's tick
LIVE_URLS = ["http://busy.test/stall?n=0", "http://busy.test/stall?n=1"]
pytestmark = pytest.mark.deployment


def wait_for(what: str, check: Callable[[], T | None], poll: float = 0.1) -> T:
    """``check()`` once it answers; fails naming ``what`` if it never does within the safety limit."""
    started = time.monotonic()
    while (found := check()) is None or found is False:
        assert time.monotonic() - started < SAFETY_SECONDS, f"waited {SAFETY_SECONDS:.0f} s for {what}"
        time.sleep(poll)
    return found


@pytest.fixture
def instance(local_instance_template: Path, tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = shutil.copytree(local_instance_template, tmp_path / "dagster_home")
    with dg.DagsterInstance.from_config(str(home)) as dagster_instance:
        yield dagster_instance


def tick(
    sensor: dg.SensorDefinition,
    instance: dg.DagsterInstance,
    cursor: str | None,
    store_url: str,
    run: dg.DagsterRun | None = None,
):  # noqa: ANN201 - Dagster's SensorExecutionData
    """One evaluation of a run status sensor with the store, in the code location of ``run``."""
    return run_status_tick(
        sensor, instance, cursor, run, {"store": TopicStoreResource(database_url=store_url)}
    )


def holders_of(store: TopicStore, run_id: str) -> tuple[list[str], list[str]]:
    """(URLs claimed by a holder of ``run_id``, its rows among the live holders)."""
    prefix = f"{run_id}/"
    with store.engine.connect() as conn:
        claimed = conn.execute(select(F.c.url).where(F.c.claimed_by.startswith(prefix))).scalars().all()
        live = conn.execute(select(H.c.holder).where(H.c.holder.startswith(prefix))).scalars().all()
    return sorted(claimed), sorted(live)


def run_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.message for entry in instance.all_logs(run_id)]


# ---------------------------------------------------------------- claims of a dead spider run


def _spider_topic(store: TopicStore, topics_file: Path) -> int:
    """The topic, declared in ``topics_file``, with no URL pending yet."""
    topic = TopicConfig(name=TOPIC, query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 2, 1))
    topics_file.write_text(
        f"topics:\n  - name: {TOPIC}\n    query: climate\n    start_date: 2026-01-01\n    end_date: 2026-02-01\n",
        encoding="utf-8",
    )
    return store.upsert_topic(topic)


def _pending(store: TopicStore, topics_id: int, urls: list[str]) -> None:
    """``urls`` pending in the topic's iteration 0."""
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            F,
            [
                {"topics_id": topics_id, "url": url, "iteration": 0, "state": "pending"} | claim_keys(url)
                for url in urls
            ],
            ["topics_id", "url"],
        )


def test_a_killed_spider_runs_claims_are_free_once_the_sensor_has_reacted(
    instance: dg.DagsterInstance, tmp_path: Path, sqlite_store_url: str
) -> None:
    store_url = sqlite_store_url  # an upgraded store, copied
    store = TopicStore.open(store_url)
    topics_id = _spider_topic(store, tmp_path / "topics.yaml")
    instance.add_dynamic_partitions("topics", [TOPIC])
    # another spider run, alive, holds the URLs of one site (a lease that outlasts any slow machine)
    _pending(store, topics_id, LIVE_URLS)
    other_run = str(uuid.uuid4())
    live = ClaimQueue(store, topics_id, 0, run_holder(other_run, "spider_iteration"), lease=3600.0)
    live.join()
    assert sorted(row["url"] for row in live.claim(10)) == sorted(LIVE_URLS)
    _pending(store, topics_id, STALLING_URLS)

    with ExitStack() as stack:
        server = FaultServer().start()
        stack.callback(server.stop)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(instance.root_directory),
            "TOPICMAP_HOME": str(tmp_path),
            "TOPICMAP_DATABASE_URL": store_url,
            "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
            # every page streams for ever: the run holds its claims until it is killed
            "TOPICMAP_PAGE_SOURCE_JSON": json.dumps(
                {
                    "allow_networks": [f"127.0.0.1:{server.port}"],
                    "host_overrides": {"*.test": f"127.0.0.1:{server.port}"},
                    "total_timeout": 3600,
                    "read_timeout": 3600,
                }
            ),
        }
        worker = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import dagster as dg\n"
                "from orchestration.definitions import defs\n"
                "from orchestration.runs import run_job\n"
                f"run_job(defs, dg.DagsterInstance.get(), 'spider_iteration_job', {TOPIC!r})\n",
            ],
            cwd=ROOT,
            env=env,
        )
        stack.callback(worker.wait)
        stack.callback(worker.kill)

        def spider_claims() -> tuple[dg.DagsterRun, set[str]] | None:
            assert worker.poll() is None, f"the spider run ended ({worker.returncode}) before it was killed"
            runs = instance.get_runs(dg.RunsFilter(job_name="spider_iteration_job"))
            with store.engine.connect() as conn:
                holders = set(
                    conn.execute(
                        select(F.c.claimed_by).where(F.c.url.in_(STALLING_URLS), F.c.claimed_by.is_not(None))
                    ).scalars()
                )
            return (runs[0], holders) if runs and holders else None

        run, holders = wait_for("the spider run to claim URLs", spider_claims)
        # the claims name the run (and its step), so they can be released by run
        assert holders == {run_holder(run.run_id, "spider_iteration")}
        assert holders_of(store, run.run_id)[1] == sorted(holders)
        # the sensor's first tick: it starts watching from here
        cursor = tick(release_claims_of_failed_runs, instance, None, store_url, run).cursor

        worker.kill()
        worker.wait()
        record = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))[0]
        monitor_started_run(instance, None, record, logging.getLogger("test"))  # ty: ignore[invalid-argument-type]
        assert _status(instance, run.run_id) == dg.DagsterRunStatus.FAILURE
        claimed = holders_of(store, run.run_id)[0]  # a dead run's claims outlive it ...
        assert claimed and set(claimed) <= set(STALLING_URLS)

        result = tick(release_claims_of_failed_runs, instance, cursor, store_url, run)
    # ... until the sensor reacts to its failure: then none is left, and the next run takes every URL at once
    assert [reaction.dagster_run.run_id for reaction in result.dagster_run_reactions] == [run.run_id]
    assert holders_of(store, run.run_id) == ([], [])
    assert any(
        f"Released {len(claimed)} URL claim(s) this run held when it failed" in m
        for m in run_messages(instance, run.run_id)
    )
    following = ClaimQueue(store, topics_id, 0, run_holder(str(uuid.uuid4()), "spider_iteration"))
    assert sorted(row["url"] for row in following.claim(100)) == sorted(STALLING_URLS)
    # the live run keeps what it holds
    assert holders_of(store, other_run) == (sorted(LIVE_URLS), [run_holder(other_run, "spider_iteration")])
    # a tick that sees the same failure again releases nothing more
    again = tick(release_claims_of_failed_runs, instance, cursor, store_url, run)
    assert [reaction.dagster_run.run_id for reaction in again.dagster_run_reactions] == [run.run_id]
    assert holders_of(store, other_run)[0] == sorted(LIVE_URLS)
    store.dispose()


def test_a_canceled_runs_claims_are_free_once_the_sensor_has_reacted(
    instance: dg.DagsterInstance, tmp_path: Path, sqlite_store_url: str
) -> None:
    """A run canceled while a step held claims it could not release (the step was killed)."""
    store_url = sqlite_store_url  # an upgraded store, copied
    store = TopicStore.open(store_url)
    topics_id = _spider_topic(store, tmp_path / "topics.yaml")
    _pending(store, topics_id, STALLING_URLS)
    run = instance.add_run(
        dg.DagsterRun(
            job_name="spider_iteration_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED
        )
    )
    for shard in range(2):
        claims = ClaimQueue(store, topics_id, 0, run_holder(run.run_id, f"shard-{shard}-of-2"))
        claims.join()
        claims.claim(2)
    claimed = holders_of(store, run.run_id)[0]
    assert len(claimed) == 4
    cursor = tick(release_claims_of_canceled_runs, instance, None, store_url).cursor
    instance.report_run_canceled(run)
    result = tick(release_claims_of_canceled_runs, instance, cursor, store_url)
    assert [reaction.dagster_run.run_id for reaction in result.dagster_run_reactions] == [run.run_id]
    assert holders_of(store, run.run_id) == ([], [])
    store.dispose()


# ---------------------------------------------------------------- a retry of a run whose work was done


@pytest.fixture(scope="module")
def code_location(
    tmp_path_factory: pytest.TempPathFactory, local_instance_template: Path
) -> Iterator[WorkspaceProcessContext]:
    """tests/killed_after_success_job.py served by a real code server, which launches real run workers; the steps
    run in the run worker (TOPICMAP_EXECUTOR=in_process, inherited by the code server and its run workers). One
    code server and its instance for the module's tests (each loads in seconds of CPU): every test finds its own
    runs by their ids."""
    home = shutil.copytree(local_instance_template, tmp_path_factory.mktemp("retry_tests") / "dagster_home")
    target = ModuleTarget(
        module_name="tests.killed_after_success_job",
        attribute="defs",
        working_directory=str(ROOT),
        location_name="retry_tests",
    )
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        dg.DagsterInstance.from_config(str(home)) as instance,
    ):
        monkeypatch.setenv("TOPICMAP_EXECUTOR", "in_process")
        with create_test_daemon_workspace_context(target, instance) as context:
            yield context


def _launch(workspace: WorkspaceProcessContext, job_name: str, run_config: dict) -> dg.DagsterRun:
    """A run of ``job_name`` created, queued and launched as the UI and the run queue do."""
    instance = workspace.instance
    request = workspace.create_request_context()
    location = request.get_code_location("retry_tests")
    remote_job = location.get_repository("__repository__").get_full_job(job_name)
    plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    )
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config=run_config,
        resolved_op_selection=None,
        step_keys_to_execute=None,
        status=dg.DagsterRunStatus.NOT_STARTED,
        tags=None,
        root_run_id=None,
        parent_run_id=None,
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        op_selection=None,
        asset_selection=None,
        asset_check_selection=None,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_graph=request.asset_graph,
    )
    instance.submit_run(run.run_id, request)
    return instance.launch_run(run.run_id, request)


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    return instance.get_run_by_id(run_id).status


def _failed(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun | None:
    """The run once it is failed and Dagster has decided whether to retry it (the tag follows the status)."""
    run = instance.get_run_by_id(run_id)
    return run if run.status == dg.DagsterRunStatus.FAILURE and WILL_RETRY_TAG in run.tags else None


def _ended(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus | None:
    status = _status(instance, run_id)
    return status if status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE) else None


def _counted(count_file: Path) -> list[str]:
    """``step key run id`` of every step execution that counted, in order."""
    return count_file.read_text(encoding="utf-8").splitlines()


def _count_config(job_ops: list[str], count_file: Path, done_file: Path) -> dict:
    config = {"count_file": str(count_file), "done_file": str(done_file)}
    return {"ops": {op: {"config": config} for op in job_ops}}


def _kill_and_retry(
    workspace: WorkspaceProcessContext, run: dg.DagsterRun, done_file: Path
) -> tuple[dg.DagsterRun, dg.DagsterRun]:
    """Kill ``run``'s worker once it has written its pid to ``done_file``; (the failed run, its automatic retry as
    Dagster's run retries create it), the retry not launched yet."""
    instance = workspace.instance
    worker = None
    try:

        def waiting() -> bool:
            ended = _ended(instance, run.run_id)
            assert ended is None, (ended, run_messages(instance, run.run_id)[-10:])
            return done_file.exists()

        wait_for("the run worker to wait to be killed", waiting)
        worker = int(done_file.read_text(encoding="utf-8"))
        assert _status(instance, run.run_id) == dg.DagsterRunStatus.STARTED
        os.kill(worker, signal.SIGKILL)
        # its code server sees the run worker die and marks the run failed; Dagster's run retries retry it
        failed = wait_for("the killed run to be failed, to be retried", lambda: _failed(instance, run.run_id))
    finally:
        if worker is not None and process_state(worker) == "alive":
            os.kill(worker, signal.SIGKILL)
    assert failed.tags[WILL_RETRY_TAG] == "true"
    record = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))[0]
    list(consume_new_runs_for_automatic_reexecution(workspace, [record], logging.getLogger("test")))
    retries = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": run.run_id}))
    assert len(retries) == 1, run_messages(instance, run.run_id)[-5:]
    assert retries[0].tags.get(RETRY_NUMBER_TAG) == "1"
    return failed, retries[0]


def _assert_ended_as_done(
    workspace: WorkspaceProcessContext, run: dg.DagsterRun, retry: dg.DagsterRun
) -> None:
    """``retry`` launched (as the run queue does) ends as a success with no run worker started, saying why."""
    instance = workspace.instance
    instance.launch_run(retry.run_id, workspace.create_request_context())
    assert _status(instance, retry.run_id) == dg.DagsterRunStatus.SUCCESS
    messages = run_messages(instance, retry.run_id)
    assert any(f"Not run: every step of run {run.run_id}" in m for m in messages), messages
    assert not any(m.startswith("Started process for run") for m in messages), messages  # no worker started


def test_a_run_killed_after_its_work_was_done_is_retried_into_a_success(
    code_location: WorkspaceProcessContext, tmp_path: Path
) -> None:
    count_file, done_file = tmp_path / "count", tmp_path / "done"
    # the step succeeds; its run worker then waits in the success hook, the run's success not yet reported
    run = _launch(code_location, "one_step_job", _count_config(["count_run"], count_file, done_file))
    failed, retry = _kill_and_retry(code_location, run, done_file)
    _assert_ended_as_done(code_location, run, retry)
    assert _counted(count_file) == [f"count_run {run.run_id}"]  # the work was done once
    # how: once its step had succeeded the executor tagged the run to be retried ALL_STEPS
    # (orchestration/executor.py), which creates the retry that Dagster's retry from the failure refuses to create
    # when no step is left
    assert failed.tags.get(RETRY_STRATEGY_TAG) == "ALL_STEPS"
    assert failed.tags.get(STRATEGY_BY_TAG) == STRATEGY_BY_EXECUTOR


def test_a_run_of_two_steps_killed_after_its_work_was_done_is_retried_into_a_success(
    code_location: WorkspaceProcessContext, tmp_path: Path
) -> None:
    count_file, done_file = tmp_path / "count", tmp_path / "done"
    # both steps succeed; the run worker then waits in the second one's success hook
    run = _launch(code_location, "two_step_job", _count_config(["first", "second"], count_file, done_file))
    failed, retry = _kill_and_retry(code_location, run, done_file)
    _assert_ended_as_done(code_location, run, retry)
    assert _counted(count_file) == [f"first {run.run_id}", f"second {run.run_id}"]  # each step ran once
    assert failed.tags.get(RETRY_STRATEGY_TAG) == "ALL_STEPS"


def test_a_run_killed_with_work_left_is_retried_from_its_failure(
    code_location: WorkspaceProcessContext, tmp_path: Path
) -> None:
    """A run killed while its second step ran: its retry runs that step only, not the first one that had
    succeeded (ALL_STEPS is set only once every step has succeeded)."""
    instance = code_location.instance
    count_file, done_file = tmp_path / "count", tmp_path / "done"
    run = _launch(
        code_location, "killed_midway_job", _count_config(["first", "stall_once"], count_file, done_file)
    )
    failed, retry = _kill_and_retry(code_location, run, done_file)
    assert RETRY_STRATEGY_TAG not in failed.tags  # Dagster's default: from the failure
    assert retry.step_keys_to_execute == ["stall_once"]
    instance.launch_run(retry.run_id, code_location.create_request_context())
    status = wait_for("the retry to end", lambda: _ended(instance, retry.run_id))
    assert status == dg.DagsterRunStatus.SUCCESS, run_messages(instance, retry.run_id)[-10:]
    assert _counted(count_file) == [f"first {run.run_id}", f"stall_once {retry.run_id}"]
    # the retry did all its work: it is marked in turn
    assert instance.get_run_by_id(retry.run_id).tags.get(RETRY_STRATEGY_TAG) == "ALL_STEPS"


# ---------------------------------------------------------------- a run killed as it reports its success

#: runs launched at most, each one's worker killed as soon as its success is stored, to land a kill in the moment
#: between the stored RUN_SUCCESS and the run's status update (most kills land there)
KILLED_AS_SUCCEEDING_RUNS = 20
#: the code server's report on a run worker that died with its run unfinished (dagster/_grpc/server.py), of run {}
WORKER_DIED_REPORT = "Run execution process for {} was terminated by signal 9"


def _kill_as_success_is_stored(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """SIGKILL ``run``'s worker the moment its RUN_SUCCESS is in the event log; whether the worker still lived."""
    launcher = instance.run_launcher
    assert isinstance(launcher, PidCheckingRunLauncher)
    pid, _ = wait_for("the run worker to report its pid", lambda: launcher.worker_pid(run))

    def success_stored() -> bool:
        return bool(instance.get_records_for_run(run.run_id, of_type=RUN_SUCCESS, limit=1).records)

    wait_for("the run's success to be stored", success_stored, poll=0.0)
    if process_state(pid) != "alive":
        return False
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def test_a_run_whose_success_is_stored_stays_a_success_when_its_worker_is_killed(
    code_location: WorkspaceProcessContext, sqlite_store_url: str
) -> None:
    """A run worker killed after it stored the run's RUN_SUCCESS, before it updated the run's status: its code
    server finds it dead with the run unfinished and reports a failure, which is not recorded. The run ends as a
    success (the event log's word), with no retry and no claims released. Runs are killed until one kill lands in
    that moment (the code server's report on the dead worker says so), each run checked."""
    instance = code_location.instance
    store_url = sqlite_store_url
    cursor = tick(release_claims_of_failed_runs, instance, None, store_url).cursor
    runs: list[dg.DagsterRun] = []
    landed: list[dg.DagsterRun] = []  # killed between the stored success and the status update
    while not landed and len(runs) < KILLED_AS_SUCCEEDING_RUNS:
        run = _launch(code_location, "ends_job", {})
        runs.append(run)
        killed = _kill_as_success_is_stored(instance, run)
        status = wait_for("the run to end", partial(_ended, instance, run.run_id))
        messages = run_messages(instance, run.run_id)
        assert status == dg.DagsterRunStatus.SUCCESS, messages[-5:]
        assert not instance.get_records_for_run(run.run_id, of_type=RUN_FAILURE).records
        assert WILL_RETRY_TAG not in instance.get_run_by_id(run.run_id).tags
        if any(WORKER_DIED_REPORT.format(run.run_id) in m for m in messages):
            assert killed  # only a killed worker leaves its run unfinished
            assert any(m.startswith(FAILURE_NOT_RECORDED) for m in messages), messages[-5:]
            landed.append(run)
    assert landed, f"none of {len(runs)} kills landed between a stored success and the run's status update"
    # Dagster's run retries and the claim-release sensor react to failures: there is none to react to
    records = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id for run in runs]))
    list(consume_new_runs_for_automatic_reexecution(code_location, records, logging.getLogger("test")))
    for run in runs:
        assert not instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": run.run_id}))
    result = tick(release_claims_of_failed_runs, instance, cursor, store_url, landed[0])
    assert not result.dagster_run_reactions


# ---------------------------------------------------------------- which runs the executor marks as done

INHERITED = {RETRY_STRATEGY_TAG: "ALL_STEPS", STRATEGY_BY_TAG: STRATEGY_BY_EXECUTOR}
WHEN_SUCCEEDED = "retry strategy when "


def _run_dynamic_job(instance: dg.DagsterInstance, tags: dict[str, str], fail: str) -> dg.DagsterRun:
    with dg.execute_job(
        dg.reconstructable(dynamic_job),
        instance=instance,
        run_config={"ops": {"mapped": {"config": {"fail": fail}}}},
        tags=tags,
        raise_on_error=False,
    ) as result:
        assert result.success == (not fail)
        return instance.get_run_by_id(result.run_id)


@pytest.mark.parametrize(
    ("tags", "fail", "strategy"),
    [
        pytest.param({}, "", "ALL_STEPS", id="done"),
        pytest.param({}, "a", None, id="a step failed"),
        pytest.param(INHERITED, "a", "FROM_FAILURE", id="inherited, a step failed"),
        pytest.param(INHERITED, "", "ALL_STEPS", id="inherited, done"),
        pytest.param({RETRY_STRATEGY_TAG: "FROM_FAILURE"}, "", "FROM_FAILURE", id="named, done"),
        pytest.param({RETRY_STRATEGY_TAG: "ALL_STEPS"}, "a", "ALL_STEPS", id="named, a step failed"),
    ],
)
def test_a_run_is_retried_all_steps_once_every_step_has_succeeded(
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    tags: dict[str, str],
    fail: str,
    strategy: str | None,
) -> None:
    """The strategy a retry of the run would take: ALL_STEPS only once every step (the steps mapped over a dynamic
    output included) has succeeded, unless the run names one itself; an ALL_STEPS inherited from a run marked this
    way is put back to Dagster's default as the run starts."""
    monkeypatch.setenv("TOPICMAP_EXECUTOR", "in_process")
    run = _run_dynamic_job(instance, tags, fail)
    assert run.tags.get(RETRY_STRATEGY_TAG) == strategy
    messages = run_messages(instance, run.run_id)
    assert any(m.startswith("Retry strategy set back to FROM_FAILURE") for m in messages) == (
        tags == INHERITED
    )
    seen = {m.removeprefix(WHEN_SUCCEEDED) for m in messages if m.startswith(WHEN_SUCCEEDED)}
    if tags == {} and not fail:
        # marked as the last step succeeded, before its success hook ran; not before
        assert seen == {
            "fan_out succeeded: None",
            "mapped[a] succeeded: None",
            "mapped[b] succeeded: None",
            "gathered succeeded: ALL_STEPS",
        }
    if tags == INHERITED and not fail:
        assert "fan_out succeeded: FROM_FAILURE" in seen and "gathered succeeded: ALL_STEPS" in seen


def test_a_run_of_step_processes_is_marked_once_every_step_has_succeeded(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dagster's default executor (a process per step, the code location's default) reports the steps' events,
    dynamic outputs included, to the run worker, which marks the run."""
    monkeypatch.delenv("TOPICMAP_EXECUTOR", raising=False)
    run = _run_dynamic_job(instance, {}, "")
    assert run.tags.get(RETRY_STRATEGY_TAG) == "ALL_STEPS"
    assert run.tags.get(STRATEGY_BY_TAG) == STRATEGY_BY_EXECUTOR
