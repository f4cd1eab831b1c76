"""A run launcher whose run workers the MonitoringDaemon can check: Dagster's DefaultRunLauncher plus a pid check.

DefaultRunLauncher starts each run worker as a child process of the code server that holds the code
location. It implements no worker health check, so Dagster's run monitoring can only time runs out: when
the code server dies together with its run worker (a host reboot, an OOM kill of the process group, a
`kill -9` of the tree), nobody reports the failure and the run stays STARTED forever, holding its queue
and pool slots.

Every run worker reports its pid in an engine event when it starts ("Started process for run (pid: N)").
This launcher reads that pid back and tells the MonitoringDaemon whether the process still lives, so a
dead worker is marked FAILED at the next monitoring poll; `run_retries` then re-launches it from the
failure. The check is only trusted where it means something: the code server that launched the run must
be on this host (loopback or a unix socket, which is what `dagster-daemon run -w workspace.yaml` starts
for a python_module location), or, for a run executed in the process that created it (`make demo`,
`topicmap topic run`), that process must be on this host. For a code server on another host the check answers
RUNNING and leaves the run to the `max_runtime_seconds` backstop, because a pid on another machine says nothing here.

A failed run must also be dead. Its step processes (Dagster's multiprocess executor starts one per step, and
reports each pid in a STEP_WORKER_STARTED event) die with their run worker on Linux (orchestration/executor.py);
wherever one still outlives it, this launcher kills it when it finds the worker dead and, at the latest, before it
launches a retry or re-execution of the failed run, so the two never write the same work into the event log.

A run whose work was done before it failed (its worker killed after its last step succeeded, before it could
report the run's success) must not fail its retry. Dagster retries a crashed run from its failure (FROM_FAILURE), and
for such a run that finds no step to run: it refuses to create the retry ("No steps needed to be retried in the
failed run"). So the code location's executor tags a run ``dagster/retry_strategy=ALL_STEPS`` as soon as all its steps
have succeeded (orchestration/executor.py, ``MarkingWorkDone``), and Dagster creates the retry; a run killed before
that keeps FROM_FAILURE, which runs again only the steps that had not succeeded. An automatic retry
(``dagster/retry_number``) whose parent has no step left to run is not launched: this launcher writes why into the
retry's log and ends it as a success, with no run worker started. A re-execution launched by hand is always run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from contextlib import suppress
from pathlib import Path

from dagster import DagsterEvent, DagsterEventType, DagsterRun, DagsterRunStatus, DefaultRunLauncher

from assets.dagster_internals import (
    GRPC_INFO_TAG,
    RETRY_NUMBER_TAG,
    CheckRunHealthResult,
    KnownExecutionState,
    LaunchRunContext,
    WorkerStatus,
)

#: the engine event a run worker emits when it starts (dagster/_grpc/impl.py)
STARTED_MESSAGE = "Started process for run (pid: "
#: engine events read to find the pid: it is among the first few of a run
PID_EVENT_SEARCH_LIMIT = 50
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
#: run tag of a run executed in the process that created it (orchestration/runs.py): the host of that process,
#: which reports its pid as a run worker does
IN_PROCESS_HOST_TAG = "topicmap/run_host"


def process_state(pid: int) -> str | None:
    """'alive', 'zombie' (exited, not yet reaped: it will never run again) or None (no such process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return "alive"  # exists, owned by another user
    stat = Path(f"/proc/{pid}/stat")
    try:
        # the state letter follows the command name in parentheses, which may itself contain spaces
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "alive"  # no procfs (macOS): os.kill succeeding is all we know
    return "zombie" if state in ("Z", "X") else "alive"


def process_start_time(pid: int) -> float | None:
    """The process's start time as a Unix timestamp (from procfs), or None where procfs cannot say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5): starttime in clock ticks since boot
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class PidCheckingRunLauncher(DefaultRunLauncher):
    """DefaultRunLauncher whose run workers the MonitoringDaemon checks by pid (see the module docstring)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def _worker_is_local(self, run: DagsterRun) -> bool:
        grpc_info = run.tags.get(GRPC_INFO_TAG)
        if not grpc_info:
            # a run executed in the process that created it (`make demo`, `topicmap topic run`) names its host
            return run.tags.get(IN_PROCESS_HOST_TAG) in {socket.gethostname(), socket.getfqdn()}
        info = json.loads(grpc_info)
        if info.get("socket"):
            return True  # a unix socket is always on this host
        return info.get("host") in LOOPBACK_HOSTS | {socket.gethostname(), socket.getfqdn()}

    def worker_pid(self, run: DagsterRun) -> tuple[int, float] | None:
        """(pid, timestamp of its start event); one small indexed read per STARTED run and poll."""
        records = self._instance.get_records_for_run(
            run.run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=PID_EVENT_SEARCH_LIMIT
        ).records
        for record in records:
            entry = record.event_log_entry
            if entry.message.startswith(STARTED_MESSAGE) and entry.dagster_event is not None:
                pid_value = entry.dagster_event.engine_event_data.metadata.get("pid")
                if pid_value is not None:
                    return int(pid_value.value), entry.timestamp
        return None

    def _step_pids(self, run: DagsterRun) -> list[tuple[int, float]]:
        """(pid, timestamp of its event) of every step process the run's multiprocess executor started."""
        records = self._instance.get_records_for_run(
            run.run_id, of_type=DagsterEventType.STEP_WORKER_STARTED
        ).records
        found = []
        for record in records:
            event = record.event_log_entry.dagster_event
            pid_value = event.engine_event_data.metadata.get("pid") if event is not None else None
            if pid_value is not None:
                found.append((int(pid_value.value), record.event_log_entry.timestamp))
        return found

    def end_step_processes(self, run: DagsterRun) -> list[int]:
        """SIGKILL the step processes of ``run`` that still live; the pids killed.

        Only on this host, and only a process known to be the one that reported the pid (started no later than
        its event): without procfs a pid cannot be told from a reused one, and nothing is killed."""
        if not self._worker_is_local(run):
            return []
        ended = []
        for pid, reported_at in self._step_pids(run):
            started = process_start_time(pid)
            if process_state(pid) != "alive" or started is None or started > reported_at + 1.0:
                continue
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
        return ended

    def launch_run(self, context: LaunchRunContext) -> None:
        # A retry or re-execution of a failed run starts only once nothing of the failed run is left running.
        run = context.dagster_run
        parent = self._instance.get_run_by_id(run.parent_run_id) if run.parent_run_id else None
        if parent is not None and parent.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
            ended = self.end_step_processes(parent)
            if ended:
                self._instance.report_engine_event(
                    f"Ended step processes {ended} of run {parent.run_id}, left running by its dead run worker",
                    run,
                )
            if RETRY_NUMBER_TAG in run.tags and self._work_done(parent):
                self._end_as_done(run, parent)
                return
        super().launch_run(context)

    def _work_done(self, run: DagsterRun) -> bool:
        """Whether a failed or canceled ``run`` left no step to run: Dagster's own reckoning of what a retry from
        its failure would run (failed, interrupted and never started steps, and the steps downstream of them)."""
        if run.execution_plan_snapshot_id is None:
            return False  # nothing known of its steps
        steps, _ = KnownExecutionState.build_resume_retry_reexecution(self._instance, run)
        return not steps

    def _end_as_done(self, run: DagsterRun, parent: DagsterRun) -> None:
        """End the automatic retry ``run`` as a success without launching it: ``parent`` did all of its work."""
        reason = (
            f"Not run: every step of run {parent.run_id}, which this run retries, had succeeded before that run "
            f"was marked {parent.status.value.lower()} (as when its run worker dies after its last step, before it "
            "can report the run's success). Its work is done, so this retry ends as a success without starting a run "
            "worker."
        )
        self._instance.report_engine_event(reason, run)
        self._instance.report_dagster_event(
            DagsterEvent(
                event_type_value=DagsterEventType.RUN_SUCCESS.value,
                job_name=run.job_name,
                message=f"Finished without running: the work of run {parent.run_id} was done.",
            ),
            run_id=run.run_id,
        )

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        # Anything but RUNNING/SUCCESS makes the MonitoringDaemon fail the run, so "cannot tell" is RUNNING.
        if not self._worker_is_local(run):
            return CheckRunHealthResult(
                WorkerStatus.RUNNING, "the run's code server is not on this host; pid not checked"
            )
        found = self.worker_pid(run)
        if found is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker has not reported its pid yet")
        pid, reported_at = found
        state = process_state(pid)
        started = process_start_time(pid)
        if state is None:
            death = f"run worker process {pid} is gone"
        elif state == "zombie":
            death = f"run worker process {pid} has exited"
        # a pid reused by a later process: the worker that reported it is gone (1 s of clock-tick slack)
        elif started is not None and started > reported_at + 1.0:
            death = f"run worker process {pid} is gone (pid reused by a newer process)"
        else:
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker process {pid} is alive")
        # the MonitoringDaemon fails the run on this answer: its steps end first (module doc)
        ended = self.end_step_processes(run)
        return CheckRunHealthResult(
            WorkerStatus.FAILED, death + (f"; ended its step processes {ended}" if ended else "")
        )
