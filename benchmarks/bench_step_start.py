"""What a run of many steps pays to start its step processes: forked from a forkserver that has loaded the code
location (the code location's executor, orchestration/executor.py) against a new interpreter per step (Dagster's
multiprocess default, ``spawn``: the anchor).

Run: .venv/bin/python benchmarks/bench_step_start.py [--steps 16] [--start-method forkserver|spawn]

(It re-runs itself as an imported module, so that the job is reconstructed from its module, as a code location's is.)

One run of a job of ``--steps`` trivial steps in a chain (the post-spider job has 16 steps with its checks, and its
steps depend on one another), through ``executor_from_env()`` as the code location builds it, on a throwaway
instance. This module imports the code location (orchestration.definitions), so each spawned step imports Dagster and
the code location again, as a real step does; a forked one starts from the forkserver's loaded copy. Prints one
JSON line: the run's wall time and seconds per step (not its CPU: the forkserver is no child this process reaps, so
rusage would leave it out). Pair the two start methods with a paired timer (A B A B, medians) for the ratio: the
machine's speed drifts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dagster as dg  # noqa: E402

import orchestration.definitions  # noqa: E402, F401 - each spawned step imports the code location, as a real one does
from orchestration.executor import executor_from_env  # noqa: E402

DEFAULT_STEPS = 16
STEPS_ENV = "BENCH_STEP_START_STEPS"


def chain_job(steps: int) -> dg.JobDefinition:
    @dg.op
    def first() -> int:
        return 0

    @dg.op
    def step(previous: int) -> int:
        return previous + 1

    @dg.job(executor_def=executor_from_env())
    def chain() -> None:
        value = first()
        for _ in range(steps - 1):
            value = step(value)

    return chain


def chain() -> dg.JobDefinition:
    """The job, reconstructed by module and name in each step process (its size from the environment)."""
    return chain_job(int(os.environ[STEPS_ENV]))


def run(start_method: str) -> None:
    steps = int(os.environ[STEPS_ENV])
    config = {"execution": {"config": {"multiprocess": {"start_method": {start_method: {}}}}}}
    if start_method == "forkserver":
        config = {}  # the executor's own default, which preloads this module
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        began = time.perf_counter()
        result = dg.execute_job(dg.reconstructable(chain), instance=instance, run_config=config)
        wall = time.perf_counter() - began
        assert result.success
    print(
        json.dumps(
            {
                "start_method": start_method,
                "steps": steps,
                "run_seconds": round(wall, 2),
                "seconds_per_step": round(wall / steps, 3),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--start-method", choices=["forkserver", "spawn"], default="forkserver")
    args = parser.parse_args()
    env = {**os.environ, STEPS_ENV: str(args.steps)}
    code = f"import benchmarks.bench_step_start as bench; bench.run({args.start_method!r})"
    sys.exit(subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=False).returncode)


if __name__ == "__main__":
    main()
