"""With the real daemon: started from the CLI, the daily click catch-up launches ONE asset backfill over the due
days (the Backfills tab), the backfill daemon runs it as click_totals runs of up to 31 days, and every topic story
gets its clicks. Waits on progress (new runs, backfill status), never on a wall-clock deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from assets.dagster_internals import BulkActionStatus
from assets.partitions import apply_calendar
from tests.dagster_deploy import free_port, listening, serve_code_location, stop_process_tree
from tests.social_fixtures import TOPIC, add_topic_stories, click_table, dataset_for, week_of_stories
from topicmap.demo.standins import run_standin_server
from topicmap.store.topic_store import TopicStore

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.daemon
#: the daemon is considered stuck when nothing new happens (no new run, no new daemon log line) for this long
STALL_SECONDS = 900
FROZEN_CLOCK_LOCATION = {
    "module_name": "tests.frozen_clock_location",
    "attribute": "defs",
    "location_name": "topicmap",
    "working_directory": str(ROOT),
}


#: the ``dagster`` CLI (its console script's entry point) run once for each command given (a JSON list of argument
#: lists), in one interpreter: each command as the ``dagster`` script runs it, Dagster imported once for them all
CLI = """
import json, sys
from importlib.metadata import entry_points

(script,) = entry_points(group="console_scripts", name="dagster")
main = script.load()
for args in json.loads(sys.argv[1]):
    sys.argv = ["dagster", *args]
    try:
        main()
    except SystemExit as end:
        if end.code not in (0, None):
            sys.exit(f"dagster {' '.join(args)} exited with {end.code}")
"""


def _dagster(commands: list[list[str]], env: dict[str, str], workspace: Path) -> None:
    """The ``dagster`` CLI commands, in order, on ``workspace``; each must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", CLI, json.dumps([[*args, "-w", str(workspace)] for args in commands])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_catch_up_sensor_launches_one_backfill_the_daemon_completes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    (tmp_path / "topics.yaml").write_text("topics: []\n", encoding="utf-8")
    # the code location with its clock frozen at 2024-03-15 06:00 UTC (tests/frozen_clock_location.py), served
    # by one code server that the CLI commands and the daemon share
    workspace = tmp_path / "workspace.yaml"
    code_server_port = free_port()
    serve = serve_code_location(code_server_port, workspace, FROZEN_CLOCK_LOCATION)
    store = TopicStore.open(f"sqlite:///{home / 'topicmap.sqlite3'}")
    stories = week_of_stories(date(2024, 1, 10), 3, 2)
    ids = add_topic_stories(store, stories)
    with run_standin_server(dataset_for(stories, seed=5)) as server:
        env = {
            **os.environ,
            "DAGSTER_HOME": str(dagster_home),
            "TOPICMAP_HOME": str(home),
            "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
            "TOPICMAP_BITLY_TOKEN": server.dataset.bitly_token,
            "TOPICMAP_BITLY_BASE_URL": server.base_url_bitly,
            "TOPICMAP_EXECUTOR": "in_process",  # steps in the run worker: the backfill is the subject
        }
        env.pop("TOPICMAP_DATABASE_URL", None)
        code_server_log = tmp_path / "code_server.log"
        with open(code_server_log, "wb") as out:
            code_server = subprocess.Popen(
                [str(Path(sys.executable).parent / serve[0]), *serve[1:]],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        log_path = tmp_path / "daemon.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
        daemon = None
        try:
            while not listening(code_server_port):  # it listens once its definitions are loaded
                assert code_server.poll() is None, code_server_log.read_text()[-3000:]
                time.sleep(0.5)
            # only the catch-up: the refetch sensors (running by default) would otherwise race it for the same
            # days, and the topic registry, whose topics file declares none, would take the days away again
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                apply_calendar(
                    instance, [TOPIC], date(2024, 3, 15)
                )  # the stories' topic's days, as the registry adds them
            stops = [
                ["sensor", "stop", name]
                for name in ("click_refetch_3d", "click_refetch_30d", "topic_registry")
            ]
            _dagster([*stops, ["sensor", "start", "click_totals_catch_up"]], env, workspace)
            daemon = subprocess.Popen(
                [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(workspace)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                progress, last_change = None, time.monotonic()
                while True:
                    backfills = instance.get_backfills()
                    done = [b for b in backfills if b.status != BulkActionStatus.REQUESTED]
                    if done:
                        break
                    now_seen = (len(backfills), len(instance.get_runs()), log_path.stat().st_size)
                    if now_seen != progress:
                        progress, last_change = now_seen, time.monotonic()
                    assert daemon.poll() is None, log_path.read_text()[-3000:]
                    assert time.monotonic() - last_change < STALL_SECONDS, log_path.read_text()[-3000:]
                    time.sleep(2)
                (backfill,) = backfills
                assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, log_path.read_text()[-3000:]
                assert backfill.tags["topicmap/api"] == "bitly"
                runs = instance.get_runs(
                    filters=dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id})
                )
                assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
                days = {
                    m.partition
                    for m in (
                        e.asset_materialization
                        for e in instance.fetch_materializations(
                            dg.AssetKey("click_totals"), limit=100
                        ).records
                    )
                }
                assert days == {"2024-01-10", "2024-01-11", "2024-01-12"}
            table = click_table(store)
            assert set(table) == set(ids.values()) and all(
                row["clicks_30d"] is not None for row in table.values()
            )
        finally:
            if daemon is not None and daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
                try:
                    daemon.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(daemon.pid, signal.SIGKILL)
            stop_process_tree(code_server)  # and its run workers
            log.close()
            store.dispose()
