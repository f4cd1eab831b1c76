"""`make ui` and `topicmap demo-ui` stop every process they started when they get SIGTERM or SIGINT.

Each case starts the command as a user or a service manager would, waits until the UI answers and the daemon and a
code server run, notes every process below the command, sends the signal and waits until each of those processes is
gone. SIGTERM goes to the command alone, as `kill PID` or a service manager sends it, to a command started as a
script's `command &` starts it (SIGINT and SIGQUIT ignored, which a child inherits); SIGINT to the command's process
group, as a terminal's Ctrl-C does (make, given SIGINT, waits for its recipe, which it takes to have had it too).
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


@pytest.mark.parametrize(
    ("command", "sig"),
    [
        ("make ui", signal.SIGTERM),
        ("make ui", signal.SIGINT),
        ("topicmap demo-ui", signal.SIGTERM),
        ("topicmap demo-ui", signal.SIGINT),
    ],
    ids=["make-ui-SIGTERM", "make-ui-SIGINT", "demo-ui-SIGTERM", "demo-ui-SIGINT"],
)
def test_the_ui_commands_stop_every_process_they_started(
    tmp_path: Path, command: str, sig: signal.Signals
) -> None:
    if command.startswith("make") and not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("`make ui` needs the checkout's virtualenv (make venv)")
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
    log = (tmp_path / "ui.log").open("w")
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        started = time.monotonic()
        while True:
            # the process tree (all of /proc) is read only once the UI answers, late in the start
            tree = _tree(process.pid) if _ui_answers(port) else {}
            commands = " | ".join(tree.values())
            if "_daemon run" in commands and ("grpc" in commands or "code-server" in commands):
                break
            assert process.poll() is None, (
                f"{command} exited early: {(tmp_path / 'ui.log').read_text()[-3000:]}"
            )
            assert time.monotonic() - started < STARTED_WITHIN_SECONDS, (
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
        log.close()
