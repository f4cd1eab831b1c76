"""Which executor runs the code location's steps, from the environment (TOPICMAP_EXECUTOR, TOPICMAP_CELERY_*).

Kept apart from the Celery worker app (``orchestration/celery_app.py``) so that loading the code location does
not import Celery unless it is chosen. See that module and deploy/celery.md.

Unset, it is Dagster's default executor (``multi_or_in_process``: one process per step) with one difference: a step
process dies with its run worker. Dagster's step processes outlive a killed run worker; run monitoring then marks
the run failed and run retries launch it again while the orphaned step goes on writing materializations and
STEP_SUCCESS into the failed run. Here the run worker leaves its pid in the environment its step processes inherit,
and each step process, as it loads the code location, asks the kernel to kill it when that parent dies
(``end_with_run_worker``; Linux's PR_SET_PDEATHSIG). The run launcher ends any step process that still outlives
its worker before a retry starts (orchestration/launcher.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import dagster as dg

DEFAULT_BROKER = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_BACKEND = "rpc://"
#: seconds a Celery run's unstarted steps may sit in a queue no worker consumes before the run fails
START_TIMEOUT_ENV = "TOPICMAP_CELERY_START_TIMEOUT"
DEFAULT_START_TIMEOUT = 120.0

#: what every worker and the run's executor must agree on (worker-side: acks and redelivery)
CELERY_SETTINGS = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,  # a worker holds no task it has not started: a free worker takes it
    "broker_connection_retry_on_startup": True,
}


def broker_url() -> str:
    return os.environ.get("TOPICMAP_CELERY_BROKER") or DEFAULT_BROKER


def backend_url() -> str:
    return os.environ.get("TOPICMAP_CELERY_BACKEND") or DEFAULT_BACKEND


def start_timeout() -> float:
    """TOPICMAP_CELERY_START_TIMEOUT in seconds (default 120): how long a Celery run's unstarted steps may wait
    in a queue no worker consumes before the run fails (orchestration/celery_app.py, ``_RunTasks``)."""
    raw = (os.environ.get(START_TIMEOUT_ENV) or "").strip()
    if not raw:
        return DEFAULT_START_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:  # also refuses nan
        raise ValueError(f"{START_TIMEOUT_ENV} must be a number of seconds above 0, got {raw!r}")
    return seconds


#: set by a run worker that starts step processes: its pid, for the step processes it starts (module doc)
RUN_WORKER_PID_ENV = "TOPICMAP_RUN_WORKER_PID"
#: prctl(2) option: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1


@dg.executor(
    name="multi_or_in_process_ending_with_worker",
    config_schema=dg.multi_or_in_process_executor.config_schema,
    requirements=dg.multi_or_in_process_executor.get_requirements,
)
def steps_end_with_run_worker(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Dagster's default executor (config ``multiprocess`` or ``in_process``, as Dagster's) whose step processes
    die with the run worker that started them (module doc)."""
    if "multiprocess" in init_context.executor_config:
        # this process is the run worker: the step processes it spawns inherit the variable
        os.environ[RUN_WORKER_PID_ENV] = str(os.getpid())
    create = dg.multi_or_in_process_executor.executor_creation_fn
    assert create is not None  # a decorated executor always has one
    return create(init_context)


def end_with_run_worker() -> None:
    """In a step process started by a run worker of ``steps_end_with_run_worker``: be killed when that worker dies.

    Called as the code location loads, which a step process does before it runs any step. Elsewhere (the code
    server, the webserver, a run worker itself, tests) the variable is absent or names another parent: nothing."""
    worker = os.environ.pop(RUN_WORKER_PID_ENV, None)  # popped: a process this step starts is no step process
    if worker is None or int(worker) != os.getppid() or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed in a step process")
    if os.getppid() != int(worker):  # the worker died before the request above took effect
        os.kill(os.getpid(), signal.SIGKILL)


def executor_from_env() -> dg.ExecutorDefinition:
    """The celery executor when TOPICMAP_EXECUTOR=celery, else Dagster's default one whose step processes end
    with their run worker (``steps_end_with_run_worker``); ``in_process``: that one running every step in the run
    worker itself (no step process to start: a small deployment, the tests that run many small runs)."""
    choice = (os.environ.get("TOPICMAP_EXECUTOR") or "").strip().lower()
    if choice == "in_process":
        return steps_end_with_run_worker.configured({"in_process": {}})
    if choice in ("", "default", "multiprocess"):
        return steps_end_with_run_worker
    if choice != "celery":
        raise ValueError(f"TOPICMAP_EXECUTOR must be 'celery', 'in_process' or unset, got {choice!r}")
    # celery loads only where it is chosen; dagster-celery's executor without its silent waits
    from orchestration.celery_app import topicmap_celery_executor

    # The broker URL may carry a password: it is passed as an env reference, never as a literal in run config.
    return topicmap_celery_executor.configured(
        {
            "broker": {"env": "TOPICMAP_CELERY_BROKER"}
            if os.environ.get("TOPICMAP_CELERY_BROKER")
            else DEFAULT_BROKER,
            "backend": {"env": "TOPICMAP_CELERY_BACKEND"}
            if os.environ.get("TOPICMAP_CELERY_BACKEND")
            else DEFAULT_BACKEND,
            "config_source": CELERY_SETTINGS,
            "start_timeout": start_timeout(),
        }
    )
