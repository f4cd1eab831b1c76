"""A code location for the retry tests (tests/test_run_failures.py), loaded by a real code server.

Every job runs on the code location's executor (``executor_from_env``); the tests set TOPICMAP_EXECUTOR=in_process, so
each step, and its hooks, run in the run worker itself. Each counting step appends its step key and run id to
``count_file``, so a test sees which runs executed it.

``one_step_job``: when its step has succeeded, a success hook writes the run worker's pid to ``done_file`` and then
waits until the test kills the worker. The worker dies after the step's success is recorded and before it can report
the run's: a run whose work is done, marked failed.

``two_step_job``: the same with two steps, the hook on the second: killed after both steps succeeded.

``killed_midway_job``: its first step succeeds; its second writes the run worker's pid to ``done_file`` and waits
until the test kills the worker (a run with work left), unless ``done_file`` exists: a retry counts and ends.

``ends_job``: one step that does nothing; the run ends on its own (the tests kill its worker as it reports the run's
success).

``dynamic_job`` (a function, built when called: on the executor TOPICMAP_EXECUTOR names then): a step mapped over a
dynamic output and one collecting it; a success hook logs what retry strategy the run carries as each step succeeds.
"""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from assets.dagster_internals import RETRY_STRATEGY_TAG
from orchestration.executor import executor_from_env


class CountConfig(dg.Config):
    count_file: str
    done_file: str


def _report_worker(done_file: str) -> None:
    """Write this process's pid (the run worker's, the step being in process) to ``done_file``; wait to be killed."""
    done = Path(done_file)
    done.with_suffix(".tmp").write_text(str(os.getpid()), encoding="utf-8")
    done.with_suffix(".tmp").rename(done)  # whole, never half written
    while True:  # until the test kills this run worker
        time.sleep(0.1)


def _count(context: dg.OpExecutionContext, count_file: str) -> None:
    with open(count_file, "a", encoding="utf-8") as count:
        count.write(f"{context.op_handle} {context.run_id}\n")


@dg.success_hook
def wait_after_success(context: dg.HookContext) -> None:
    _report_worker(context.op_config["done_file"])


@dg.op(ins={"after": dg.In(dg.Nothing)})
def count_run(context: dg.OpExecutionContext, config: CountConfig) -> None:
    _count(context, config.count_file)


@dg.op(ins={"after": dg.In(dg.Nothing)})
def stall_once(context: dg.OpExecutionContext, config: CountConfig) -> None:
    if not Path(config.done_file).exists():
        _report_worker(config.done_file)
    _count(context, config.count_file)


@dg.job(executor_def=executor_from_env(), hooks={wait_after_success})
def one_step_job() -> None:
    count_run()


@dg.job(executor_def=executor_from_env())
def two_step_job() -> None:
    count_run.alias("second").with_hooks({wait_after_success})(after=count_run.alias("first")())


@dg.job(executor_def=executor_from_env())
def killed_midway_job() -> None:
    stall_once(after=count_run.alias("first")())


@dg.op
def does_nothing() -> None:
    pass


@dg.job(executor_def=executor_from_env())
def ends_job() -> None:
    does_nothing()


class MappedConfig(dg.Config):
    fail: str = ""  # the mapping key whose step raises


@dg.op(out=dg.DynamicOut(str))
def fan_out() -> Iterator[dg.DynamicOutput[str]]:
    for key in ("a", "b"):
        yield dg.DynamicOutput(key, mapping_key=key)


@dg.op
def mapped(value: str, config: MappedConfig) -> str:
    if value == config.fail:
        raise RuntimeError(f"step for {value} fails, as configured")
    return value


@dg.op
def gathered(values: list[str]) -> None:
    assert sorted(values) == ["a", "b"]


@dg.success_hook
def log_retry_strategy(context: dg.HookContext) -> None:
    run = context.instance.get_run_by_id(context.run_id)
    strategy = run.tags.get(RETRY_STRATEGY_TAG) if run is not None else None
    context.log.info(f"retry strategy when {context.step_key} succeeded: {strategy}")


def dynamic_job() -> dg.JobDefinition:
    @dg.job(name="dynamic_job", executor_def=executor_from_env(), hooks={log_retry_strategy})
    def job() -> None:
        gathered(fan_out().map(mapped).collect())

    return job


defs = dg.Definitions(jobs=[one_step_job, two_step_job, killed_midway_job, ends_job])
