"""`make ui` and `topicmap demo-ui` stop every process they started when they get SIGTERM or SIGINT.

Each case starts the command as a user or a service manager would, waits until the UI answers and the daemon and a
code server run, notes every process below the command, sends the signal and waits until each of those processes is
gone. SIGTERM goes to the command alone, as `kill PID` or a service manager sends it, to a command started as a
script's `command &` starts it (SIGINT and SIGQUIT ignored, which a child inherits); SIGINT to the command's process
group, as a terminal's Ctrl-C does (make, given SIGINT, waits for its recipe, which it takes to have had it too).
The next case's command starts (in a folder and on a port of its own) while one case is tested, so its start, most
of a case's time, overlaps the case before.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.daemon

#: a bound for a broken command, never a timing the test asserts: a busy machine is slower, well within it
STARTED_WITHIN_SECONDS = 600
STOPPED_WITHIN_SECONDS = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, command line) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), fields[0], cmdline)
    return found


def _tree(root: int) -> dict[int, str]:
    """The live processes below ``root`` (itself included): pid -> command line."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(child)
    tree, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        if pid in processes and processes[pid][1] != "Z":
            tree[pid] = processes[pid][2]
        frontier += children.get(pid, [])
    return tree


def _alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of ``pids`` still running (a zombie, or a pid taken by a kernel thread, is not)."""
    alive = {}
    for pid, cmd in pids.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[0] != "Z" and cmdline.strip(b"\0"):
            alive[pid] = cmd
    return alive


def _ui_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


CASES = {
    "make-ui-SIGTERM": ("make ui", signal.SIGTERM),
    "make-ui-SIGINT": ("make ui", signal.SIGINT),
    "demo-ui-SIGTERM": ("topicmap demo-ui", signal.SIGTERM),
    "demo-ui-SIGINT": ("topicmap demo-ui", signal.SIGINT),
}


@dataclass
class Started:
    """A command started for one case: its process, the UI's port, its log, when it was started."""

    process: subprocess.Popen
    port: int
    log: Path
    started: float


def _runnable(command: str) -> bool:
    return not command.startswith("make") or (ROOT / ".venv" / ".installed").exists()


def _start(tmp_path: Path, command: str, sig: signal.Signals) -> Started:
    home = tmp_path / "home"
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "dagster.local.yaml", dagster_home / "dagster.yaml")
    port = _free_port()
    env = {
        **os.environ,
        "TOPICMAP_HOME": str(home),
        "DAGSTER_HOME": str(dagster_home),
        "TOPICMAP_TOPICS_FILE": str(ROOT / "topics.yaml"),
    }
    if command.startswith("make"):
        argv = ["make", "--no-print-directory", "ui", f"DAGSTER_PORT={port}"]
    else:
        argv = [str(BIN / "topicmap"), "demo-ui", "-p", str(port)]
    if sig == signal.SIGTERM:
        # started as a script's `command &` starts it: SIGINT and SIGQUIT ignored (the SIGTERM of a service manager
        # or `kill` must still stop everything)
        argv = ["sh", "-c", 'trap "" INT QUIT; exec "$@"', "sh", *argv]
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Started(process, port, log, time.monotonic())


@pytest.fixture(scope="module")
def started_command(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Started]]:
    """The command of a case, started; asking for one also starts the next selected case's, so that one comes up
    while this one is tested (each in a folder and on a port of its own). What a test did not stop is killed."""
    selected = [
        item.callspec.id
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and item.callspec.id in CASES
    ]
    commands: dict[str, Started] = {}

    def start(case: str) -> Started | None:
        command, sig = CASES[case]
        if case not in commands and _runnable(command):
            commands[case] = _start(tmp_path_factory.mktemp(case), command, sig)
        return commands.get(case)

    def get(case: str) -> Started:
        found = start(case)
        later = selected[selected.index(case) + 1 :] if case in selected else []
        if later:
            start(later[0])
        assert found is not None
        return found

    try:
        yield get
    finally:
        for ui in commands.values():
            for pid in _alive(_tree(ui.process.pid)):
                os.kill(pid, signal.SIGKILL)
            ui.process.wait()


@pytest.mark.parametrize("case", list(CASES))
def test_the_ui_commands_stop_every_process_they_started(
    started_command: Callable[[str], Started], case: str
) -> None:
    command, sig = CASES[case]
    if not _runnable(command):
        pytest.skip("`make ui` needs the checkout's virtualenv (make venv)")
    ui = started_command(case)
    process, port = ui.process, ui.port
    try:
        while True:
            # the process tree (all of /proc) is read only once the UI answers, late in the start
            tree = _tree(process.pid) if _ui_answers(port) else {}
            commands = " | ".join(tree.values())
            if "_daemon run" in commands and ("grpc" in commands or "code-server" in commands):
                break
            assert process.poll() is None, f"{command} exited early: {ui.log.read_text()[-3000:]}"
            assert time.monotonic() - ui.started < STARTED_WITHIN_SECONDS, (
                f"{command} never came up: {_tree(process.pid)}"
            )
            time.sleep(1)
        tree = _tree(process.pid)
        assert len(tree) >= 4, tree  # the command, dagster dev, the webserver, the daemon (and code servers)
        if sig == signal.SIGINT:
            os.killpg(process.pid, sig)  # the command's own group (start_new_session), as a terminal would
        else:
            process.send_signal(sig)
        process.wait(timeout=STOPPED_WITHIN_SECONDS)
        stopped = time.monotonic()
        while _alive(tree) and time.monotonic() - stopped < STOPPED_WITHIN_SECONDS:
            time.sleep(0.5)
        assert _alive(tree) == {}, f"still running after {sig.name} to {command}: {_alive(tree)}"
        assert not _ui_answers(port)
    finally:
        for pid in _alive(_tree(process.pid)):
            os.kill(pid, signal.SIGKILL)
