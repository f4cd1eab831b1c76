"""`dagster dev` (webserver, daemon and their code servers) as a child that ends with the command that started it.

`make ui` and `topicmap demo-ui` run the UI this way. Without it, a SIGTERM to the command (a service manager, a
CI job ending, `kill`) ended the command alone and left `dagster dev`, the webserver, the daemon and the code
servers running, orphaned. Here:

- `dagster dev` runs in a process group of its own, so a terminal's Ctrl-C reaches this process only, and this
  process decides how the children stop;
- SIGTERM and SIGINT are passed on to `dagster dev` as SIGTERM, which it maps to its own clean shutdown (it asks
  the webserver and the daemon to stop, and they stop their code servers);
- whatever is left of its process group when `dagster dev` has exited (a child that did not stop in time) is
  killed, and the log says so;
- this process asks the kernel for a SIGTERM when its parent dies (Linux's PR_SET_PDEATHSIG), so `make ui` stopped
  by a signal that make does not pass on still stops everything.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
#: prctl(2) option: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1
#: how long the children of `dagster dev` get to stop after it exited, before they are killed
LEFTOVER_GRACE_SECONDS = 10.0


def _say(message: str) -> None:
    print(f"topicmap: {message}", file=sys.stderr, flush=True)


def _stop_with_parent() -> None:
    """Be sent SIGTERM when the parent process (make, a shell) dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal is still a member
        return True
    return True


def _end_group(pgid: int) -> None:
    """Stop what is left of the process group: SIGTERM, then SIGKILL after the grace period."""
    if not _group_alive(pgid):
        return
    _say(f"processes of `dagster dev` still running after it exited (group {pgid}): sending SIGTERM")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + LEFTOVER_GRACE_SECONDS
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.2)
    if _group_alive(pgid):
        _say(f"processes of `dagster dev` did not stop in {LEFTOVER_GRACE_SECONDS:.0f} s: killing them")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def run_dagster_dev(dagster_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> int:
    """Run `dagster dev -w workspace.yaml [dagster_args]` until it exits or this process is told to stop; every
    process it started is gone when this returns (module doc). Returns its exit status (0 after a stop signal)."""
    _stop_with_parent()
    dagster = Path(sys.executable).parent / "dagster"
    stopping: list[str] = []
    started: list[subprocess.Popen] = []

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        if not stopping:
            name = signal.Signals(signum).name
            stopping.append(name)
            _say(f"{name} received: stopping `dagster dev` (webserver, daemon, code servers)")
        if started and started[0].poll() is None:
            started[0].send_signal(signal.SIGTERM)

    # Handlers first: a signal ignored here (SIGINT and SIGQUIT in a command a script started with `&`, SIGHUP
    # under nohup) stays ignored in a child, and `dagster dev` maps SIGTERM to its SIGINT disposition, so it would
    # ignore the SIGTERM passed on. A handled signal is reset to the default in the child.
    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGINT)}
    process = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", *dagster_args],
        cwd=ROOT,
        env=dict(env if env is not None else os.environ),
        start_new_session=True,
    )
    started.append(process)
    if stopping:  # told to stop while it was being started
        process.send_signal(signal.SIGTERM)
    try:
        status = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if process.poll() is None:  # an exception in wait(): stop it as a signal would
            process.send_signal(signal.SIGTERM)
            process.wait()
        _end_group(process.pid)
    if stopping:
        _say("`dagster dev` and every process it started have stopped")
        return 0
    return status
