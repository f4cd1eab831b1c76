"""No silent waits for a Celery-executed run (TOPICMAP_EXECUTOR=celery), and the Redis result backend works.

A driver process runs ``celery_job`` (tests/celery_waits_job.py) with the code location's executor
(``executor_from_env``), as a run worker does; each driver is forked, with its test's environment, from one process
of the module's that imported Dagster, Celery and the job once (each driver used to import them anew). RabbitMQ (a
virtual host of this module's own, its queue emptied for each test) or Redis (a database of this test's own) is the
broker.

- No worker consumes the run's queue: the run fails once TOPICMAP_CELERY_START_TIMEOUT has passed, naming the
  broker (password masked) and the queue, and its task is no longer in the queue (no worker started later runs
  it).
- SIGTERM or SIGINT to the waiting run: it ends, and its task is out of the queue.
- A broker nothing listens on: the run fails naming that broker.
- A real run with the Redis result backend (the ``celery-redis`` extra) on one worker, one step queued behind
  the other for longer than the start timeout: the run succeeds (a busy worker is no missing worker).

Under CI=true a missing RabbitMQ or Redis fails the test; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from kombu import Connection

from orchestration.executor import executor_from_env
from tests.celery_waits_job import RELEASE_ENV

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "dagster"  # dagster-celery's queue, the one every step of the code location goes to
SHORT_TIMEOUT = 5  # seconds: TOPICMAP_CELERY_START_TIMEOUT in the tests that expect it to fire or not
SAFETY = 600  # seconds: a generous bound on any one wait, only so that a broken run cannot hang the suite
pytestmark = pytest.mark.deployment


# --- the driver: runs the job of tests/celery_waits_job.py as a run worker does ---


DRIVER = """
import json, sys, time
import dagster as dg
from tests.celery_waits_job import celery_job

instance = dg.DagsterInstance.get()
started = time.monotonic()
with dg.execute_job(dg.reconstructable(celery_job), instance=instance) as result:
    seconds = time.monotonic() - started
    output = result.output_for_node("total") if result.success else None
texts = []
for record in instance.all_logs(result.run_id):
    texts.append(record.user_message or "")
    data = getattr(record.dagster_event, "event_specific_data", None) if record.dagster_event else None
    error = getattr(data, "error", None)
    if error is not None:
        texts.append(error.to_string())
status = instance.get_run_by_id(result.run_id).status.value
print("RESULT " + json.dumps({"success": result.success, "status": status, "seconds": seconds,
                               "output": output, "text": "\\n".join(texts)}), flush=True)
"""


#: one process for the module: imports what every driver needs (not the Celery app, which reads its broker from the
#: environment on import), then forks a driver for each line read (JSON: environment, log file, exit file) and answers
#: its pid. It reaps each driver as it ends and writes its exit status (Popen's returncode: minus the signal that
#: killed it) to the driver's exit file: the test is not the driver's parent, so it could not learn it otherwise.
FORKER = """
import json, os, signal, sys, traceback
import celery, dagster, dagster_celery, kombu, redis
import orchestration.celery_internals, tests.celery_waits_job
DRIVER = sys.argv[1]
exit_files = {}

def reap(signum, frame):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        path = exit_files.pop(pid, None)
        if path is None:
            continue
        with open(path + ".tmp", "w") as out:
            out.write(str(os.waitstatus_to_exitcode(status)))
        os.replace(path + ".tmp", path)

signal.signal(signal.SIGCHLD, reap)
for line in sys.stdin:
    order = json.loads(line)
    # a driver that ends at once is reaped only once its exit file is known
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    pid = os.fork()
    if pid:
        exit_files[pid] = order["exit"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        print(pid, flush=True)
        continue
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    os.environ.clear()
    os.environ.update(order["env"])
    log = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 0
    try:
        exec(compile(DRIVER, "<driver>", "exec"), {"__name__": "__main__"})
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
"""


class Driver:
    """A driver forked by the module's forker: what the tests ask of a driver process (poll, wait, signals). Its exit
    status is the one the forker wrote to its exit file once it reaped it."""

    def __init__(self, pid: int, exit_file: Path) -> None:
        self.pid = pid
        self.exit_file = exit_file

    def poll(self) -> int | None:
        try:
            return int(self.exit_file.read_text())
        except FileNotFoundError:
            return None

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"driver {self.pid}", timeout)
            time.sleep(0.05)
        return code

    def ended(self) -> str:
        """How it ended, for an assertion's message."""
        code = self.poll()
        if code is None:
            return f"driver {self.pid} is still running"
        if code < 0:
            return f"driver {self.pid} was killed by {signal.Signals(-code).name}"
        return f"driver {self.pid} exited with code {code}"

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        if self.poll() is None:  # not yet reaped: the pid is still the driver's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def forker() -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(
        [sys.executable, "-c", FORKER, DRIVER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    process.stdin.close()  # the forker's loop ends
    process.wait(timeout=60)


# --- brokers and backends of this test's own ---


def _server_problem(name: str, port: int) -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return None
    except OSError as error:
        return f"{name} not reachable at 127.0.0.1:{port}: {error}"


def _unavailable(name: str, problem: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires {name}: {problem}")
    pytest.skip(problem)


def _require(name: str, port: int) -> None:
    problem = _server_problem(name, port)
    if problem is not None:
        _unavailable(name, problem)


@pytest.fixture(scope="module")
def amqp_vhost() -> Iterator[str]:
    """amqp://guest:guest@127.0.0.1:5672/<a virtual host of this module's own> (each rabbitmqctl call starts an
    Erlang VM: one virtual host for the module, its queue emptied for each test by ``amqp_broker``)."""
    _require("RabbitMQ", 5672)
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        _unavailable("rabbitmqctl", "rabbitmqctl is needed to give the test a virtual host of its own")
    vhost = f"topicmap-test-{uuid.uuid4().hex[:10]}"
    subprocess.run([ctl, "add_vhost", vhost], check=True, capture_output=True)
    subprocess.run(
        [ctl, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"], check=True, capture_output=True
    )
    yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    subprocess.run([ctl, "delete_vhost", vhost], capture_output=True)


@pytest.fixture
def amqp_broker(amqp_vhost: str) -> Iterator[str]:
    """The module's virtual host with no run's queue in it: no message, no consumer another test left."""
    _delete_queue(amqp_vhost)
    yield amqp_vhost
    _delete_queue(amqp_vhost)


@pytest.fixture
def redis_db() -> Iterator[str]:
    """redis://127.0.0.1:6379/<n>: a database no other test run holds (claimed with SET NX), emptied afterwards."""
    _require("Redis", 6379)
    import redis  # the celery-redis extra (installed with dev)

    claim = f"topicmap-test-{uuid.uuid4().hex}"
    for db in range(1, 16):
        client = redis.Redis(host="127.0.0.1", port=6379, db=db)
        if client.dbsize() == 0 and client.set("topicmap-test-claim", claim, nx=True):
            break
        client.close()
    else:
        pytest.fail("no free Redis database among 1-15 for this test")
    yield f"redis://127.0.0.1:6379/{db}"
    client.flushdb()
    client.close()


@pytest.fixture(params=["amqp", "redis"])
def broker(request: pytest.FixtureRequest) -> str:
    """A broker of this test's own: RabbitMQ (the broker deploy/celery.md shows) or Redis."""
    return request.getfixturevalue("amqp_broker" if request.param == "amqp" else "redis_db")


def _env(tmp_path: Path, broker: str, backend: str | None, start_timeout: float) -> dict[str, str]:
    home = tmp_path / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home),
        "TOPICMAP_HOME": str(tmp_path / "home"),
        "TOPICMAP_EXECUTOR": "celery",
        "TOPICMAP_CELERY_BROKER": broker,
        "TOPICMAP_CELERY_START_TIMEOUT": str(start_timeout),
        RELEASE_ENV: str(tmp_path / "release"),
    }
    env.pop("TOPICMAP_CELERY_BACKEND", None)
    if backend is not None:
        env["TOPICMAP_CELERY_BACKEND"] = backend
    return env


def _start_driver(forker: subprocess.Popen, env: dict[str, str], log: Path) -> Driver:
    exit_file = log.with_name(log.name + ".exit")
    forker.stdin.write(json.dumps({"env": env, "log": str(log), "exit": str(exit_file)}) + "\n")
    forker.stdin.flush()
    line = forker.stdout.readline()
    assert line.strip().isdigit(), f"the forker ended: {line!r}"
    return Driver(int(line), exit_file)


def _ended(driver: Driver, log: Path) -> str:
    """How a driver ended and the end of its output."""
    return f"{driver.ended()}\n{log.read_text(errors='replace')[-4000:]}"


def _result(driver: Driver, log: Path) -> dict:
    driver.wait(timeout=SAFETY)
    output = log.read_text(errors="replace")
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, _ended(driver, log)
    return json.loads(lines[-1].removeprefix("RESULT "))


def _queued(broker: str) -> int:
    """Messages waiting in the run's queue, as the broker counts them (Redis drops an emptied queue: none)."""
    with Connection(broker) as conn:
        return _queued_on(conn)


def _queued_on(conn: Connection) -> int:
    """``_queued`` on an open connection (kombu opens a new channel after a channel error)."""
    try:
        return conn.default_channel.queue_declare(queue=QUEUE, passive=True).message_count
    except conn.channel_errors:
        return 0


def _delete_queue(broker: str) -> None:
    with Connection(broker) as conn:
        conn.default_channel.queue_delete(queue=QUEUE)


def _wait_until_queued(broker: str, count: int, driver: Driver, log: Path) -> None:
    deadline = time.monotonic() + SAFETY
    with Connection(broker) as conn:  # one connection for the whole wait: a new one per poll costs CPU
        while True:
            assert driver.poll() is None, _ended(driver, log)
            if _queued_on(conn) >= count:
                return
            assert time.monotonic() < deadline, "the run's tasks never reached the queue"
            time.sleep(0.1)


def _masked(broker: str) -> str:
    return broker.replace("guest:guest@", "guest:**@")


# --- the tests ---


def test_a_run_no_worker_consumes_fails_after_the_start_timeout(
    forker: subprocess.Popen, broker: str, tmp_path: Path
) -> None:
    # another run waits in the same queue, with a start timeout far beyond the test: its tasks must stay
    bystander_log, log = tmp_path / "bystander.log", tmp_path / "driver.log"
    bystander = _start_driver(forker, _env(tmp_path / "bystander", broker, None, 3600), bystander_log)
    driver = None
    try:
        _wait_until_queued(broker, 2, bystander, bystander_log)
        driver = _start_driver(forker, _env(tmp_path, broker, None, SHORT_TIMEOUT), log)
        _wait_until_queued(broker, 4, driver, log)
        result = _result(driver, log)
        assert _queued(broker) == 2  # the failed run's tasks are out of the queue; the other run's are not
        bystander.send_signal(signal.SIGTERM)
        assert not _result(bystander, bystander_log)["success"]
    finally:
        for process in (driver, bystander):
            if process is not None and process.poll() is None:
                process.kill()
    assert not result["success"] and result["status"] == "FAILURE"
    text = result["text"]
    assert f"No Celery worker consumes queue '{QUEUE}' on broker {_masked(broker)}" in text, text[-3000:]
    assert "TOPICMAP_CELERY_START_TIMEOUT" in text
    assert "guest:guest@" not in text  # the password is masked wherever the broker is named
    # it waited for the timeout, not forever (no upper bound: a busy machine may take its time)
    assert result["seconds"] >= SHORT_TIMEOUT
    # no worker started later can run a step of either run: their tasks are gone from the queue
    assert _queued(broker) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_waiting_run_ends_on_a_signal_and_takes_its_task_off_the_queue(
    forker: subprocess.Popen, amqp_broker: str, tmp_path: Path, signum: signal.Signals
) -> None:
    log = tmp_path / "driver.log"
    # a start timeout far beyond the test: it is the signal that ends the run
    driver = _start_driver(forker, _env(tmp_path, amqp_broker, None, 3600), log)
    try:
        _wait_until_queued(amqp_broker, 2, driver, log)
        driver.send_signal(signum)
        result = _result(driver, log)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert not result["success"], result
    text = result["text"]
    assert "interrupted" in text.lower(), text[-3000:]
    # the run's log says what became of its steps, and the queue agrees
    masked = _masked(amqp_broker)
    assert f"Took steps first, second off Celery queue '{QUEUE}' on {masked}" in text, text[-3000:]
    assert _queued(amqp_broker) == 0


def test_a_run_on_a_broker_nothing_listens_on_names_it(forker: subprocess.Popen, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    broker = f"amqp://guest:s3cret@127.0.0.1:{port}//"
    log = tmp_path / "driver.log"
    driver = _start_driver(forker, _env(tmp_path, broker, None, SHORT_TIMEOUT), log)
    try:
        result = _result(driver, log)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert not result["success"]
    text = result["text"]
    assert f"Celery broker amqp://guest:**@127.0.0.1:{port}// is out of reach" in text, text[-3000:]
    assert "s3cret" not in text


def test_a_run_with_the_redis_result_backend(
    forker: subprocess.Popen, broker: str, redis_db: str, tmp_path: Path
) -> None:
    env = _env(tmp_path, broker, redis_db, SHORT_TIMEOUT)
    worker_log, log = tmp_path / "worker.log", tmp_path / "driver.log"
    with worker_log.open("wb") as out:
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "orchestration.celery_app", "worker"),
                *("-n", "waits@%h", "--concurrency=1", "--prefetch-multiplier=1"),
                *("--without-gossip", "--without-mingle", "-l", "INFO"),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    driver = None
    try:
        deadline = time.monotonic() + SAFETY
        while "ready." not in worker_log.read_text(errors="replace"):
            assert worker.poll() is None, worker_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, worker_log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        driver = _start_driver(forker, env, log)
        # one step runs on the only worker; the other waits in the queue behind it
        while "STEP_START" not in worker_log.read_text(errors="replace"):
            assert driver.poll() is None, _ended(driver, log)
            assert worker.poll() is None, worker_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, worker_log.read_text(errors="replace")[-3000:]
            time.sleep(0.1)
        _wait_until_queued(broker, 1, driver, log)
        # it waits three start timeouts (a lower bound: a slow machine only waits longer) before it may run
        waiting_since = time.monotonic()
        while time.monotonic() < waiting_since + 3 * SHORT_TIMEOUT:
            assert driver.poll() is None, _ended(driver, log)
            time.sleep(0.2)
        (tmp_path / "release").touch()
        result = _result(driver, log)
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert result["success"], result["text"][-4000:]
    assert result["output"] == 2  # both steps' outputs reached the last one
    worker_text = worker_log.read_text(errors="replace")
    assert "redis" in worker_text.lower()  # the worker's banner: results in Redis
    assert "Task execute_plan" in worker_text and "succeeded" in worker_text, worker_text[-3000:]


def test_a_start_timeout_that_is_not_a_positive_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPICMAP_EXECUTOR", "celery")
    for value in ("soon", "0", "-3"):
        monkeypatch.setenv("TOPICMAP_CELERY_START_TIMEOUT", value)
        with pytest.raises(ValueError, match=f"TOPICMAP_CELERY_START_TIMEOUT must be .*{value!r}"):
            executor_from_env()
