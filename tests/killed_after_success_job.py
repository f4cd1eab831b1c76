"""A code location for the retry tests (tests/test_run_failures.py), loaded by a real code server.

``one_step_job``: its one op appends the run id to ``count_file`` (so a test sees how many runs executed it); when
the step has succeeded, a success hook writes the run worker's pid to ``done_file`` and then waits until the test
kills the worker. The in-process executor runs the hook in the run worker itself, so the worker dies after its
step's success is recorded and before it can report the run's: a run whose work is done, marked failed.

``two_step_job``: two steps that do nothing, for the retry strategy of a run of several steps.
"""

import os
import time
from pathlib import Path

import dagster as dg


class CountConfig(dg.Config):
    count_file: str
    done_file: str


@dg.success_hook
def wait_after_success(context: dg.HookContext) -> None:
    done = Path(context.op_config["done_file"])
    done.with_suffix(".tmp").write_text(str(os.getpid()), encoding="utf-8")
    done.with_suffix(".tmp").rename(done)  # whole, never half written
    while True:  # until the test kills this run worker
        time.sleep(0.1)


@dg.op
def count_run(context: dg.OpExecutionContext, config: CountConfig) -> None:
    with open(config.count_file, "a", encoding="utf-8") as count:
        count.write(context.run_id + "\n")


@dg.job(executor_def=dg.in_process_executor, hooks={wait_after_success})
def one_step_job() -> None:
    count_run()


@dg.op
def first() -> int:
    return 1


@dg.op
def second(value: int) -> int:
    return value + 1


@dg.job(executor_def=dg.in_process_executor)
def two_step_job() -> None:
    second(first())


defs = dg.Definitions(jobs=[one_step_job, two_step_job])
