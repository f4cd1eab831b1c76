"""Spider iterations sharded over Celery workers (dagster-celery), selected by the environment.

    TOPICMAP_EXECUTOR=celery         run the code location's steps as Celery tasks (default: in process /
                                     Dagster's multiprocess executor, nothing to set up)
    TOPICMAP_SPIDER_SHARDS=4         one spider iteration fans out into 4 shard steps (default 1: the plain,
                                     single-step iteration)
    TOPICMAP_CELERY_BROKER           amqp://guest:guest@127.0.0.1:5672// by default (RabbitMQ)
    TOPICMAP_CELERY_BACKEND          rpc:// by default; redis://127.0.0.1:6379/0 for a shared result backend
                                     (the celery-redis extra: pip install -e '.[celery-redis]')
    TOPICMAP_CELERY_START_TIMEOUT    seconds a run's unstarted steps may wait in a queue that no worker
                                     consumes before the run fails (default 120)

Workers: ``celery -A orchestration.celery_app worker --concurrency=1 --prefetch-multiplier=1`` from the repository
(the code location must be importable on every worker, with the same environment); see deploy/celery.md.

Every worker acknowledges a task only once it has run (``task_acks_late``) and hands it back if its process
dies (``task_reject_on_worker_lost``): a worker killed mid-shard has its shard delivered to another worker,
which takes back the shard's claims at once (same claim holder: run id + shard) and finishes it. With Celery's
defaults the message would be gone and the run would wait forever. A shard run twice is harmless: every write
is keyed, and the URLs the first run wrote are not pending any more.

The run's side, ``topicmap_celery``: dagster-celery's executor with no silent waits (``_RunTasks``). Stock
dagster-celery submits each step and polls its result with no time limit: a run whose broker is out of reach
fails with kombu's bare "Connection refused", a run whose queue no worker consumes waits forever, and SIGTERM or
SIGINT revokes its tasks and then waits for results no worker will send, leaving the tasks in the queue for a
worker started later.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg
from celery import Celery
from celery.exceptions import TaskRevokedError
from celery.result import AsyncResult
from kombu import Queue
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from assets.dagster_internals import RetryMode
from orchestration.celery_internals import (
    CELERY_CONFIG,
    DEFAULT_CONFIG,
    CeleryExecutor,
    core_celery_execution_loop,
    create_task,
    dict_wrapper,
    make_app,
    submit_task,
)
from topicmap import settings

if TYPE_CHECKING:  # dagster-celery's executor is handed these internal types
    from assets.dagster_internals import (
        ExecutionPlan,
        ExecutionStep,
        KnownExecutionState,
        PlanOrchestrationContext,
    )

DEFAULT_BROKER = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_BACKEND = "rpc://"
#: seconds a Celery run's unstarted steps may sit in a queue no worker consumes before the run fails
DEFAULT_START_TIMEOUT = 120.0

#: what every worker and the run's executor must agree on (worker-side: acks and redelivery)
CELERY_SETTINGS = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,  # a worker holds no task it has not started: a free worker takes it
    "broker_connection_retry_on_startup": True,
}


def broker_url() -> str:
    return settings.CELERY_BROKER.value() or DEFAULT_BROKER


def backend_url() -> str:
    return settings.CELERY_BACKEND.value() or DEFAULT_BACKEND


def start_timeout() -> float:
    """TOPICMAP_CELERY_START_TIMEOUT in seconds (default 120): how long a Celery run's unstarted steps may wait
    in a queue no worker consumes before the run fails (``_RunTasks``)."""
    raw = settings.CELERY_START_TIMEOUT.value().strip()
    if not raw:
        return DEFAULT_START_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:  # also refuses nan
        raise ValueError(
            f"{settings.CELERY_START_TIMEOUT.name} must be a number of seconds above 0, got {raw!r}"
        )
    return seconds


# The worker app: `celery -A orchestration.celery_app worker`. dagster-celery's execute_plan task on an app with
# our broker, backend and settings (its stock `dagster_celery.app` would use early acknowledgement).
app = make_app(
    {
        "broker": broker_url(),
        "backend": backend_url(),
        "include": [],
        "config_source": dict_wrapper(dict(DEFAULT_CONFIG, **CELERY_SETTINGS)),
    }
)
execute_plan = create_task(app)


#: how often a run asks whether a worker consumes the queue its unfinished steps are in
PROBE_SECONDS = 2.0
#: how long such a question waits for workers' replies where the broker cannot count consumers (Redis)
INSPECT_SECONDS = 1.0


class CeleryWaitError(Exception):
    """A Celery run that would otherwise wait without end: its broker is out of reach or no worker takes its steps."""


@dataclass
class _Task:
    """One step's Celery task, as dagster-celery's loop sees it: it calls only ``ready``, ``get`` and ``revoke``."""

    run: _RunTasks
    result: AsyncResult
    step_key: str
    queue: str
    done: bool = False
    withdrawn: bool = False  # taken off its queue unstarted: it will never run

    def ready(self) -> bool:
        if not self.withdrawn and not self.result.ready():
            self.run.watch(self.queue)
            return False
        self.done = True
        return True

    def get(self) -> list:
        if self.withdrawn:
            raise TaskRevokedError(
                f"step {self.step_key} was taken off queue {self.queue!r} before it started"
            )
        return self.result.get()

    def revoke(self) -> None:
        # dagster-celery revokes every task on SIGTERM/SIGINT, then waits for their results
        self.run.withdraw()


class _RunTasks:
    """One run's Celery tasks, submitted through dagster-celery's loop (``core_celery_execution_loop``).

    Wrapped, not forked: the loop stays dagster-celery's; what it submits comes back as ``_Task``s, whose
    ``ready`` also watches the queue and whose ``revoke`` also takes unstarted tasks off it.

    - Broker out of reach (on submit or later): ``CeleryWaitError`` naming the broker (password masked).
    - A queue with unfinished steps and no consumer for ``start_timeout`` seconds on end: the run fails naming the
      broker and queue. Asking whether anyone consumes, not whether a step started, keeps a step queued behind
      busy workers waiting as long as it takes.
    - Stopping (that timeout, or SIGTERM/SIGINT): every task still in its queue is taken out of it, acknowledged,
      so no worker started later runs a step of a run that has ended; a task a worker already holds is revoked as
      dagster-celery does, and the run waits for that worker.
    """

    def __init__(self, broker: str, start_timeout: float) -> None:
        self.broker = maybe_sanitize_url(broker)
        self.start_timeout = start_timeout
        self.app: Celery | None = None
        self.log: dg.DagsterLogManager | None = None
        self.broker_errors: tuple[type[Exception], ...] = ()
        self.tasks: list[_Task] = []
        self.unconsumed_since: dict[str, float] = {}
        self.next_probe: dict[str, float] = {}
        self.stopped = False

    @contextmanager
    def _naming_broker(self) -> Iterator[None]:
        """kombu's errors name no broker ("[Errno 111] Connection refused"): say which one."""
        try:
            yield
        except self.broker_errors as error:
            raise CeleryWaitError(f"Celery broker {self.broker} is out of reach: {error}") from error

    def submit(
        self,
        app: Celery,
        plan_context: PlanOrchestrationContext,
        step: ExecutionStep,
        queue: str,
        priority: int,
        known_state: KnownExecutionState,
    ) -> _Task:
        """dagster-celery's ``step_execution_fn``: its own submission, watched."""
        if self.app is None:
            self.app, self.log = app, plan_context.log
            # kombu raises its own error for a broker it cannot reach, the transport's for a connection lost
            self.broker_errors = (OperationalError, *app.connection_for_write().connection_errors)
        with self._naming_broker():
            result = submit_task(app, plan_context, step, queue, priority, known_state)
        task = _Task(self, result, step.key, queue)
        self.tasks.append(task)
        return task

    def watch(self, queue: str) -> None:
        """Fail the run once no worker has consumed ``queue`` for ``start_timeout`` seconds."""
        now = time.monotonic()
        if now < self.next_probe.get(queue, 0.0):
            return
        self.next_probe[queue] = now + PROBE_SECONDS
        if self._consumed(queue):
            self.unconsumed_since.pop(queue, None)
            return
        since = self.unconsumed_since.setdefault(queue, now)
        if now - since < self.start_timeout:
            return
        waiting = ", ".join(t.step_key for t in self.tasks if t.queue == queue and not t.done)
        self.withdraw()
        raise CeleryWaitError(
            f"No Celery worker consumes queue {queue!r} on broker {self.broker}: waited {self.start_timeout:g} s "
            f"({settings.CELERY_START_TIMEOUT.name}) with steps {waiting} unstarted, now taken off the queue. Start a worker on "
            "that broker and queue (deploy/celery.md), then re-execute the run."
        )

    def _consumed(self, queue: str) -> bool:
        assert self.app is not None
        with self._naming_broker(), self.app.connection_for_write() as conn:
            if conn.transport.driver_type == "amqp":
                # RabbitMQ counts the queue's consumers itself: a worker deep in a long step still counts
                return conn.default_channel.queue_declare(queue=queue, passive=True).consumer_count > 0
            # other brokers (Redis) count none: ask the workers which queues they consume
            replies = self.app.control.inspect(timeout=INSPECT_SECONDS, connection=conn).active_queues()
        return any(q["name"] == queue for queues in (replies or {}).values() for q in queues)

    def withdraw(self) -> None:
        """Take the run's unfinished tasks off their queues (once: the run is stopping); revoke the others."""
        if self.stopped or self.app is None or self.log is None:
            return
        self.stopped = True
        unfinished = [t for t in self.tasks if not t.done]
        for queue in {t.queue for t in unfinished}:
            by_id = {t.result.id: t for t in unfinished if t.queue == queue}
            taken = self._take_off(queue, set(by_id))
            for task_id in taken:
                by_id[task_id].withdrawn = True
            if taken:
                steps = ", ".join(sorted(by_id[i].step_key for i in taken))
                self.log.info(
                    f"Took steps {steps} off Celery queue {queue!r} on {self.broker}: no worker will run them"
                )
        for task in unfinished:
            if not task.withdrawn:
                task.result.revoke()

    def _take_off(self, queue: str, ids: set[str]) -> set[str]:
        """Acknowledge the messages of these tasks still in ``queue``; put every other message back."""
        assert self.app is not None
        taken: set[str] = set()
        held = []
        with self._naming_broker(), self.app.connection_for_write() as conn:
            messages = Queue(queue).bind(conn.default_channel)
            try:
                # held unacknowledged, a message is not handed out again: each get returns the next one
                while taken != ids and (message := messages.get(no_ack=False)) is not None:
                    if message.headers.get("id") in ids:
                        message.ack()
                        taken.add(message.headers["id"])
                    else:
                        held.append(message)
            finally:
                for message in held:
                    message.requeue()
        return taken


class _CeleryExecutorWithoutSilentWaits(CeleryExecutor):
    """dagster-celery's executor whose loop submits through ``_RunTasks`` (its config and app unchanged)."""

    def __init__(self, start_timeout: float, **celery_executor_args: object) -> None:
        super().__init__(**celery_executor_args)
        self.start_timeout = start_timeout

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[dg.DagsterEvent]:
        run = _RunTasks(self.broker, self.start_timeout)
        return core_celery_execution_loop(plan_context, execution_plan, step_execution_fn=run.submit)


@dg.executor(
    name="topicmap_celery",
    config_schema={
        **CELERY_CONFIG,
        "start_timeout": dg.Field(
            float,
            description="Seconds a queue with unstarted steps may go without a consumer before the run fails",
        ),
    },
    requirements=dg.multiple_process_executor_requirements(),
)
def topicmap_celery_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """dagster-celery's ``celery_executor`` (same config) with no silent waits (``_RunTasks``)."""
    config = init_context.executor_config
    return _CeleryExecutorWithoutSilentWaits(
        start_timeout=config["start_timeout"],
        broker=config.get("broker"),
        backend=config.get("backend"),
        config_source=config.get("config_source"),
        include=config.get("include"),
        retries=RetryMode.from_config(config["retries"]),
    )


def celery_executor_from_env() -> dg.ExecutorDefinition:
    """``topicmap_celery`` configured from TOPICMAP_CELERY_* (orchestration/executor.py picks it when
    TOPICMAP_EXECUTOR=celery). The broker URL may carry a password: it is passed as an env reference, never as a
    literal in run config."""
    return topicmap_celery_executor.configured(
        {
            "broker": {"env": settings.CELERY_BROKER.name}
            if settings.CELERY_BROKER.value()
            else DEFAULT_BROKER,
            "backend": {"env": settings.CELERY_BACKEND.name}
            if settings.CELERY_BACKEND.value()
            else DEFAULT_BACKEND,
            "config_source": CELERY_SETTINGS,
            "start_timeout": start_timeout(),
        }
    )
