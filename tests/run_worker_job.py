"""A one-step job for the step-process tests, run the way a run worker runs a job of the code location: Dagster's
multiprocess executor as orchestration/executor.py sets it up, and the same call as the code location makes when a
step process loads it. The step writes its pid to STEP_PID_FILE and then waits for STEP_RELEASE_FILE, as a long
step would.

    DAGSTER_HOME=... STEP_PID_FILE=... STEP_RELEASE_FILE=... [STEP_START_METHOD=spawn] \
        python -c "import tests.run_worker_job as job; job.main()"

Imported, not run as ``__main__``, so that the job is reconstructed from its module, as a code location's is: the
executor forks the step from a forkserver that has loaded this module (STEP_START_METHOD=spawn: a new interpreter).
"""

import os
import time
from pathlib import Path

import dagster as dg

from orchestration.executor import end_with_run_worker, steps_end_with_run_worker

end_with_run_worker()  # as orchestration/definitions.py does


@dg.op
def long_step(context: dg.OpExecutionContext) -> None:
    pid_file = Path(os.environ["STEP_PID_FILE"])
    pid_file.with_suffix(".tmp").write_text(str(os.getpid()), encoding="utf-8")
    pid_file.with_suffix(".tmp").rename(pid_file)  # whole, never half written
    release = Path(os.environ["STEP_RELEASE_FILE"])
    while not release.exists():
        time.sleep(0.05)
    context.log.info("step released")


@dg.job(executor_def=steps_end_with_run_worker)
def long_job() -> None:
    long_step()


def main() -> None:
    start_method = os.environ.get("STEP_START_METHOD")
    config = (
        {"execution": {"config": {"multiprocess": {"start_method": {start_method: {}}}}}}
        if start_method
        else {}
    )
    with dg.DagsterInstance.get() as instance:
        dg.execute_job(dg.reconstructable(long_job), instance=instance, run_config=config)
