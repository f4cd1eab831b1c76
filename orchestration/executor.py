"""Which executor runs the code location's steps, from the environment (TOPICMAP_EXECUTOR).

Kept apart from the Celery worker app (``orchestration/celery_app.py``, which reads TOPICMAP_CELERY_*) so that
loading the code location does not import Celery unless it is chosen. See that module and deploy/celery.md.

Unset, it is Dagster's default executor (``multi_or_in_process``: one process per step) with two differences.
Step processes are forked from a forkserver that has loaded the code location once per run,
not spawned as new interpreters that each import Dagster and the code location again: a run of 16 steps (the
post-spider job with its checks) starts one loaded process instead of 16. And a step process dies with its run
worker. Dagster's step processes outlive a killed run worker; run monitoring then marks the run failed and run
retries launch it again while the orphaned step goes on writing materializations and STEP_SUCCESS into the failed
run. Here the run worker leaves its pid in the environment of the processes it starts; the forkserver, as it loads the
code location, asks the kernel to kill it when that worker dies, and every step process it forks to be killed when
the forkserver dies (``end_with_run_worker``; Linux's PR_SET_PDEATHSIG; a spawned step process asks the same of its
worker). The run launcher ends any step process that still outlives its worker before a retry starts
(orchestration/launcher.py).

Whichever it is, it marks a run whose work is done (``MarkingWorkDone``). A run worker killed after every step of its
run succeeded, before it could report the run's success, leaves a failed run with nothing left to run, and Dagster's
retry from the failure (FROM_FAILURE, its default) refuses to create a retry of it ("No steps needed to be retried in
the failed run"): the run would stay failed although its work is done. So as soon as the run worker learns that the
last step of its run has succeeded (the STEP_SUCCESS stored; with the steps in process, before that step's success
hooks run), with no step failed, the executor tags the run ``dagster/retry_strategy=ALL_STEPS``, unless the run names
a strategy itself: Dagster then creates the retry, and the run launcher ends it as a success without starting it, the
reason in its log (orchestration/launcher.py). A run killed earlier keeps the retry from its failure, which runs again
only the steps that had not succeeded. (A step process or Celery worker stores the STEP_SUCCESS before the run worker
receives it: a run worker killed in between still leaves a failed run that Dagster does not retry.)

``topicmap/retry_strategy_by=executor`` says the strategy was set this way. A re-execution of such a run (from the
UI, or a retry) inherits its tags, and with them an ALL_STEPS its own steps have not earned: as it starts, the executor
puts that back to FROM_FAILURE, so that a re-execution killed half-way does not redo the steps it had done.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import dagster as dg

from assets.dagster_internals import (
    RETRY_STRATEGY_TAG,
    EngineEventData,
    ReexecutionStrategy,
    RetryMode,
    StepDependencyConfig,
    UnresolvedMappedExecutionStep,
    UnresolvedMappedStepInput,
    UnresolvedStepHandle,
)
from topicmap import settings

if TYPE_CHECKING:  # an Executor is handed these internal types
    from assets.dagster_internals import ExecutionPlan, PlanOrchestrationContext

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
    # Unless the run's config names a start method, step processes are forked from a forkserver that has loaded the
    # job's module once per run, instead of each a new interpreter that imports Dagster and the code location again
    # (seconds of CPU per step). Each step process keeps the forkserver alive (CPython hands it the worker's end of
    # the forkserver's pipe), so the forkserver cannot wait for that pipe to close: it dies with the worker by
    # PR_SET_PDEATHSIG, as a spawned step does (end_with_run_worker).
    config = init_context.executor_config
    if "multiprocess" in config:
        # this process is the run worker: the step processes it starts inherit the variable
        os.environ[settings.RUN_WORKER_PID.name] = str(os.getpid())
        multiprocess = config["multiprocess"]
        # forked from a forkserver only where it preloads the job's module, which calls end_with_run_worker (the
        # forkserver then dies with the worker, and the steps with it); a job loaded from a file keeps spawn
        module = getattr(init_context.job, "get_module", lambda: None)()
        if isinstance(multiprocess, dict) and not multiprocess.get("start_method") and module is not None:
            start_method = {"forkserver": {"preload_modules": [module]}}  # named: Dagster reads none as []
            config = {**config, "multiprocess": {**multiprocess, "start_method": start_method}}
            init_context = init_context._replace(executor_config=config)
    create = dg.multi_or_in_process_executor.executor_creation_fn
    assert create is not None  # a decorated executor always has one
    return create(init_context)


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux's PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed in a step process")


def end_with_run_worker() -> None:
    """In the forkserver (or a spawned step process) started by a run worker of ``steps_end_with_run_worker``: be
    killed when that worker dies, and have every process forked from here (the step processes) killed when this one
    dies, so a step never outlives the run worker.

    Called as the code location loads, which the forkserver does once, as it starts, by preloading the code
    location's module (a spawned step process: before it runs its step). Elsewhere (the code server, the webserver,
    a run worker itself, tests) the variable is absent or names another parent: nothing."""
    worker = os.environ.pop(
        settings.RUN_WORKER_PID.name, None
    )  # popped: a process this one starts is not started by a worker
    if worker is None or not sys.platform.startswith("linux"):
        return
    if int(worker) != os.getppid():
        return
    _die_with_parent()
    if os.getppid() != int(worker):  # the worker died before the request above took effect
        os.kill(os.getpid(), signal.SIGKILL)
    # the forkserver forks each step process: that child dies with it (and it, above, with the worker)
    os.register_at_fork(after_in_child=_die_with_parent)


#: run tag: ``dagster/retry_strategy`` on this run was set by ``MarkingWorkDone``, not named by whoever launched it
STRATEGY_BY_TAG = "topicmap/retry_strategy_by"
STRATEGY_BY_EXECUTOR = "executor"
#: step events after which a step runs no more in this run; a failed step means the run's work is not done
ENDED = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_SKIPPED}
FAILED = {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RESOURCE_INIT_FAILURE}


class _StepsLeft:
    """The steps of an execution plan not yet ended, followed through the events its executor yields.

    A step mapped over a dynamic output counts once per mapping key its upstream step yields, as Dagster resolves it.
    A step this cannot follow (mapped over a step the run does not execute, or over several dynamic outputs) never
    ends: the run is never done, and keeps Dagster's retry from the failure."""

    def __init__(self, plan: ExecutionPlan) -> None:
        self.left: set[str] = set()
        #: (step key, dynamic output name) -> the handles of the steps mapped over it, until that step has ended
        self.mapped: dict[tuple[str, str], list[UnresolvedStepHandle]] = {}
        self.failed = False
        for key in plan.step_keys_to_execute:
            step = plan.get_step_by_key(key)
            sources = (
                {
                    (step_input.resolved_by_step_key, step_input.resolved_by_output_name)
                    for step_input in step.step_inputs
                    if isinstance(step_input, UnresolvedMappedStepInput)
                }
                if isinstance(step, UnresolvedMappedExecutionStep)
                else set()
            )
            if len(sources) == 1:
                self.mapped.setdefault(sources.pop(), []).append(step.handle)
            else:
                self.left.add(key)  # an unresolved key with several sources never ends: never done

    def record(self, event: dg.DagsterEvent) -> None:
        key, kind = event.step_key, event.event_type
        if key is None:
            return
        if kind in FAILED:
            self.failed = True
        elif kind == dg.DagsterEventType.STEP_OUTPUT:
            output = event.step_output_data
            if output.mapping_key is not None:
                for handle in self.mapped.get((key, output.output_name), []):
                    self.left.add(handle.resolve(output.mapping_key).to_key())
        elif kind in ENDED:
            self.left.discard(key)
            for source in [source for source in self.mapped if source[0] == key]:
                del self.mapped[source]  # its mapped steps are all known now

    @property
    def done(self) -> bool:
        """Every step ended, none failed: the run's work is done."""
        return not (self.failed or self.left or self.mapped)


class MarkingWorkDone(dg.Executor):
    """``executor`` that tags its run ``dagster/retry_strategy=ALL_STEPS`` as soon as every step of the run has
    succeeded, unless the run names a strategy itself; and puts back to FROM_FAILURE an ALL_STEPS its run inherited
    from a run marked this way (module doc)."""

    def __init__(self, executor: dg.Executor) -> None:
        self._executor = executor

    @property
    def retries(self) -> RetryMode:
        return self._executor.retries

    @property
    def step_dependency_config(self) -> StepDependencyConfig:
        return self._executor.step_dependency_config

    def get_step_event_or_retry_event(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - Dagster's
        return self._executor.get_step_event_or_retry_event(*args, **kwargs)

    def log_failure_or_retry_event_after_error(self, *args: Any, **kwargs: Any) -> dg.DagsterEvent:
        return self._executor.log_failure_or_retry_event_after_error(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - whatever the wrapped executor holds
        # what an executor's own loop asks of ``plan_context.executor``, which is this (dagster-celery: app_args())
        executor = self.__dict__.get("_executor")
        if executor is None:
            raise AttributeError(name)
        return getattr(executor, name)

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[dg.DagsterEvent]:
        run, instance = plan_context.dagster_run, plan_context.instance
        strategy = run.tags.get(RETRY_STRATEGY_TAG)
        if STRATEGY_BY_TAG not in run.tags and strategy is not None:  # named by whoever launched the run
            yield from self._executor.execute(plan_context, execution_plan)
            return
        # set by this executor, so inherited (a run is executed once): ALL_STEPS from a run whose work was done
        if strategy == ReexecutionStrategy.ALL_STEPS.name:
            instance.add_run_tags(run.run_id, {RETRY_STRATEGY_TAG: ReexecutionStrategy.FROM_FAILURE.name})
            yield dg.DagsterEvent.engine_event(
                plan_context,
                f"Retry strategy set back to FROM_FAILURE: this run inherited {RETRY_STRATEGY_TAG}=ALL_STEPS from a "
                "run whose steps had all succeeded; it is set again when every step of this run has.",
                EngineEventData(),
            )
        steps = _StepsLeft(execution_plan)
        for event in self._executor.execute(plan_context, execution_plan):
            yield event
            if steps.done:
                continue  # marked already
            steps.record(event)
            if steps.done:  # the last step's success is stored (yielded); its success hooks have not run yet
                instance.add_run_tags(
                    run.run_id,
                    {
                        RETRY_STRATEGY_TAG: ReexecutionStrategy.ALL_STEPS.name,
                        STRATEGY_BY_TAG: STRATEGY_BY_EXECUTOR,
                    },
                )


def marking_work_done(definition: dg.ExecutorDefinition) -> dg.ExecutorDefinition:
    """``definition`` (same name, config and requirements) whose executor is wrapped in ``MarkingWorkDone``."""
    create = definition.executor_creation_fn
    assert create is not None  # a decorated or configured executor always has one
    return dg.ExecutorDefinition(
        name=definition.name,
        config_schema=definition.config_schema,
        requirements=definition.get_requirements,
        executor_creation_fn=lambda init_context: MarkingWorkDone(create(init_context)),
        description=definition.description,
    )


def executor_from_env() -> dg.ExecutorDefinition:
    """The celery executor when TOPICMAP_EXECUTOR=celery, else Dagster's default one whose step processes end
    with their run worker (``steps_end_with_run_worker``); ``in_process``: that one running every step in the run
    worker itself (no step process to start: a small deployment, the tests that run many small runs). Each marks a
    run whose work is done (``MarkingWorkDone``)."""
    return marking_work_done(_chosen_executor())


def _chosen_executor() -> dg.ExecutorDefinition:
    choice = settings.EXECUTOR.value().strip().lower()
    if choice == "in_process":
        return steps_end_with_run_worker.configured({"in_process": {}})
    if choice in ("", "default", "multiprocess"):
        return steps_end_with_run_worker
    if choice != "celery":
        raise ValueError(f"TOPICMAP_EXECUTOR must be 'celery', 'in_process' or unset, got {choice!r}")
    # celery loads only where it is chosen; dagster-celery's executor without its silent waits
    from orchestration.celery_app import celery_executor_from_env

    return celery_executor_from_env()
