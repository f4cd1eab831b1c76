"""The job tests/test_celery_waits.py runs on Celery: its driver processes and the Celery workers import it from
here (the repository is on their PYTHONPATH), a module that imports no more than the job needs (not pytest)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg

from orchestration.executor import executor_from_env

RELEASE_ENV = "TOPICMAP_TEST_RELEASE"  # a file path: the job's steps finish once it exists


@dg.op
def held() -> int:
    """Runs until the test creates the release file: the step occupies its worker as long as the test wants."""
    release = Path(os.environ[RELEASE_ENV])
    while not release.exists():
        time.sleep(0.05)
    return 1


@dg.op
def total(first: int, second: int) -> int:
    return first + second


def celery_job() -> dg.JobDefinition:
    """Two independent steps, then one that adds their outputs (passed through the IO manager and the result
    backend), on the executor the code location uses."""

    @dg.job(name="celery_waits_job", executor_def=executor_from_env())
    def job() -> None:
        total(held.alias("first")(), held.alias("second")())

    return job
