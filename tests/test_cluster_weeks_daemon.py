"""cluster_weeks under the real daemon: a backfill over three weeks of one topic, launched as the UI launches it
(GraphQL on dagster-webserver), is one run that builds the weeks in order, each from exactly the state the week
before left, each week materialized as it is built. Re-materializing the first week with a new story makes the
asset check name every later week stale; one backfill over them rebuilds them from the new state and the check
passes. The documented command, `dagster asset materialize --partition-range`, builds the same range in one run.
Waits on progress (runs, backfill states), never on a wall-clock deadline.

The backfill daemon turns every 30 s: a backfill's run is requested on one turn and the backfill completed on a
later one. What the test does between (the rebuilt week, the documented command) it does as soon as the backfill's
run has ended, while the daemon has yet to turn: the repair backfill is then often taken up on the turn that
completes the first one. The rebuilt week runs in the test process (`test_browser.py` launches one week of
`cluster_weeks` from the UI, through the run queue, and sees the later weeks stale)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.clusters import cluster_weeks
from tests.dagster_deploy import ROOT, LocalDagster, local_dagster
from tests.test_clusters import LATE_STORY, TOPIC, WEEKS, add_stories, build_store, resources

pytestmark = pytest.mark.daemon
KEYS = [f"{TOPIC}|{week}" for week in WEEKS]  # the topic's weeks, as the topic registry adds them: topic|week


def week_materializations(instance: dg.DagsterInstance, run_id: str) -> list[dg.EventLogRecord]:
    """The run's cluster_weeks materializations, in the order they were stored."""
    records = instance.fetch_materializations(dg.AssetKey("cluster_weeks"), limit=100).records
    return sorted((r for r in records if r.run_id == run_id), key=lambda r: r.storage_id)


def figures(record: dg.EventLogRecord) -> dict[str, object]:
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def week_of(record: dg.EventLogRecord) -> str:
    return record.partition_key.split("|")[1]


def check_evaluation(instance: dg.DagsterInstance, run_id: str) -> dg.AssetCheckEvaluation:
    (event,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return event.dagster_event.event_specific_data


def backfill_run(dagster: LocalDagster, backfill_id: str) -> str:
    """The backfill's one run, once it has succeeded (the backfill itself is completed on a later turn of the
    backfill daemon, see ``completed_in_one_run``); its id."""

    def ended() -> list[dict] | None:
        runs = dagster.backfill_runs(backfill_id)
        return runs if runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs) else None

    (run,) = dagster.wait_for(f"the run of backfill {backfill_id}", ended)
    assert run["status"] == "SUCCESS", dagster.log_tails()
    return run["runId"]


def completed_in_one_run(dagster: LocalDagster, backfill_id: str, keys: list[str], run_id: str) -> None:
    """The backfill over ``keys``, as the UI launched it, succeeded in exactly one run: ``run_id``."""
    assert dagster.wait_for_backfill(backfill_id) == "COMPLETED_SUCCESS", dagster.log_tails()
    (run,) = dagster.backfill_runs(backfill_id)
    assert (run["runId"], run["status"]) == (run_id, "SUCCESS")
    assert (
        run["tags"]["dagster/asset_partition_range_start"],
        run["tags"]["dagster/asset_partition_range_end"],
    ) == (
        keys[0],
        keys[-1],
    )


def test_a_backfill_builds_the_weeks_in_one_run_and_a_rebuilt_week_marks_later_weeks_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = build_store(tmp_path, stories_per_group=24)
    (tmp_path / "topics.yaml").write_text(
        f"topics:\n  - {{name: {TOPIC}, query: news, start_date: 2026-02-02, end_date: 2026-03-31}}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "TOPICMAP_HOME": str(tmp_path / "home"),
        "TOPICMAP_DATABASE_URL": str(store.engine.url),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
        "TOPICMAP_EXECUTOR": "in_process",  # steps in the run worker: the runs are the subject, not step processes
    }
    try:
        with (
            local_dagster(tmp_path, env) as dagster,
            dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
        ):
            # the topic registry sensor's job, stopped here: the topic and its weeks
            instance.add_dynamic_partitions("topics", [TOPIC])
            instance.add_dynamic_partitions("topic_weeks", KEYS)
            backfill = dagster.launch_backfill("cluster_weeks", KEYS)
            run_id = backfill_run(dagster, backfill)
            # the weeks were materialized one by one, in order, as the run built them
            built = week_materializations(instance, run_id)
            assert [week_of(r) for r in built] == WEEKS
            first = [figures(r) for r in built]
            assert first[0]["started_fresh"] and first[0]["previous_state"] == ""
            for week, before, after in zip(WEEKS, first, first[1:], strict=False):
                assert after["started_from"] == week and after["previous_state"] == before["state"]
            assert [f["batches_so_far"] for f in first] == [1, 2, 3]
            assert check_evaluation(instance, run_id).passed

            # A story arrives late in the first week: rebuilt alone (one partition's run, here in the test process),
            # its state changes, and the check names every later week, not only the next one.
            add_stories(store, [LATE_STORY])
            monkeypatch.setenv("TOPICMAP_HOME", env["TOPICMAP_HOME"])
            rebuilt_result = dg.materialize(
                [cluster_weeks], partition_key=KEYS[0], instance=instance, resources=resources(store)
            )
            assert rebuilt_result.success
            rebuilt_run = rebuilt_result.run_id
            (rebuilt,) = [figures(r) for r in week_materializations(instance, rebuilt_run)]
            assert rebuilt["state"] != first[0]["state"]
            check = check_evaluation(instance, rebuilt_run)
            assert not check.passed and check.metadata["stale_weeks"].value == {TOPIC: WEEKS[1:]}

            # One backfill over the stale weeks rebuilds them in order from the new state: the check passes.
            repair = dagster.launch_backfill("cluster_weeks", KEYS[1:])
            completed_in_one_run(dagster, backfill, KEYS, run_id)
            repair_run = backfill_run(dagster, repair)
            repaired = [figures(r) for r in week_materializations(instance, repair_run)]
            assert [f["previous_state"] for f in repaired] == [rebuilt["state"], repaired[0]["state"]]
            assert check_evaluation(instance, repair_run).passed

            # The documented command builds the whole range in one run, from the same stories the same states.
            cli = subprocess.run(
                [
                    str(Path(sys.executable).parent / "dagster"),
                    *("asset", "materialize", "-m", "orchestration.definitions", "--select", "cluster_weeks"),
                    *("--partition-range", f"{KEYS[0]}...{KEYS[-1]}"),
                ],
                cwd=ROOT,
                env=dagster.env,
                capture_output=True,
                text=True,
            )
            assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
            (cli_run,) = {
                r.run_id
                for r in instance.fetch_materializations(dg.AssetKey("cluster_weeks"), limit=100).records
            } - {
                run_id,
                rebuilt_run,
                repair_run,
            }
            again = [figures(r) for r in week_materializations(instance, cli_run)]
            assert [f["state"] for f in again] == [rebuilt["state"], *(f["state"] for f in repaired)]
            assert check_evaluation(instance, cli_run).passed
            completed_in_one_run(dagster, repair, KEYS[1:], repair_run)
    finally:
        store.dispose()
