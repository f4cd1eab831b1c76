"""The partitions the UI offers, through GraphQL as the UI asks for them, under the real daemon: every partitioned
asset offers exactly the days and weeks the declared topics span (and the keys that already hold data); the
"Missing" set a backfill is launched over holds only days that can be built, and its runs succeed; a topic added
or extended in the topics file brings its days and weeks, in date order, with the topic registry's next tick,
and the freshness checks read the file when they are evaluated: no reload of the code location. Waits on
progress (ticks, runs, backfill states), never on a wall-clock deadline."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from tests.dagster_deploy import LocalDagster, local_dagster

pytestmark = pytest.mark.daemon


def days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def mondays(first: date, last: date) -> list[str]:
    """The Mondays of the weeks from ``first`` to ``last``, each once it is over by today."""
    today = datetime.now(UTC).date()
    monday = first - timedelta(days=first.weekday())
    out = []
    while monday <= last and monday + timedelta(days=7) <= today:
        out.append(monday.isoformat())
        monday += timedelta(days=7)
    return out


def partition_keys(dagster: LocalDagster, asset: str) -> dict[str, list[str]]:
    """The asset's partition keys by dimension, as the asset page and the launch dialog read them."""
    data = dagster.graphql.query(
        "query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename ... on AssetNode { "
        "partitionKeysByDimension { name partitionKeys } } } }",
        key={"path": [asset]},
    )["assetNodeOrError"]
    return {d["name"]: d["partitionKeys"] for d in data["partitionKeysByDimension"]}


def missing(dagster: LocalDagster, asset: str) -> list[str]:
    """The partitions the UI shows as missing (and a "Missing" backfill targets) of a one-dimension asset."""
    data = dagster.graphql.query(
        "query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { "
        "assetPartitionStatuses { __typename ... on DefaultPartitionStatuses { unmaterializedPartitions } } } } }",
        key={"path": [asset]},
    )["assetNodeOrError"]
    return data["assetPartitionStatuses"]["unmaterializedPartitions"]


def latest_check(dagster: LocalDagster, asset: str, check: str) -> dict:
    data = dagster.graphql.query(
        "query($key: AssetKeyInput!, $name: String!) { assetCheckExecutions(assetKey: $key, checkName: $name, "
        "limit: 1) { runId evaluation { success description } } }",
        key={"path": [asset]},
        name=check,
    )
    (execution,) = data["assetCheckExecutions"]
    return execution


def execute_check(dagster: LocalDagster, asset: str, check: str) -> str:
    """Run one asset check as the Checks tab's "Execute" button does; the run id."""
    data = dagster.graphql.query(
        "mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename "
        "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }",
        params={
            "selector": {
                **dagster.graphql.repository,
                "jobName": "__ASSET_JOB",
                "assetSelection": [],
                "assetCheckSelection": [{"assetKey": {"path": [asset]}, "name": check}],
            },
            "mode": "default",
        },
    )
    assert data["launchRun"]["__typename"] == "LaunchRunSuccess", data
    return data["launchRun"]["run"]["runId"]


def test_the_ui_offers_only_the_declared_days_and_follows_the_topics_file_without_a_reload(
    tmp_path: Path,
) -> None:
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    ended = (today - timedelta(days=100), today - timedelta(days=80))
    old_key = (ended[1] + timedelta(days=10)).isoformat()  # a day the earlier rule offered (end + 30 days)
    topics = tmp_path / "topics.yaml"
    topics.write_text(
        f"topics:\n  - {{name: ended, query: climate, start_date: {ended[0]}, end_date: {ended[1]}}}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "TOPICMAP_HOME": str(tmp_path / "home"),
        "TOPICMAP_DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}",
        "TOPICMAP_TOPICS_FILE": str(topics),
        "TOPICMAP_EXECUTOR": "in_process",
    }
    for name in (
        "TOPICMAP_BITLY_TOKEN",
        "TOPICMAP_CLICKS_START_DATE",
        "TOPICMAP_WEEKS_START",
        "TOPICMAP_CCNEWS_START",
    ):
        env.pop(name, None)
    with (
        local_dagster(tmp_path, env) as dagster,
        dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
    ):
        # a click day materialized under the earlier rule: it holds data, so it stays offered and readable
        instance.add_dynamic_partitions("click_days", [old_key])
        instance.report_runless_asset_event(dg.AssetMaterialization("click_totals", partition=old_key))
        code_server = dagster.processes["code_server"][0]

        dagster.next_sensor_tick("topic_registry")
        declared = days(*ended)
        assert partition_keys(dagster, "click_totals") == {"default": sorted([*declared, old_key])}
        assert partition_keys(dagster, "ccnews_stories") == {"default": declared}
        assert partition_keys(dagster, "cluster_weeks") == {"topic": ["ended"], "week": mondays(*ended)}
        # the "Missing" set: the declared days, none after the topic's end; a backfill over it builds every day
        offered = missing(dagster, "click_totals")
        assert offered == declared
        backfill = dagster.launch_backfill("click_totals", offered)
        targeted = dagster.graphql.query(
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { "
            "partitionNames } } }",
            id=backfill,
        )["partitionBackfillOrError"]["partitionNames"]
        assert sorted(targeted) == declared
        # its runs (31 days at most each) succeed; without a Bit.ly token they materialize nothing, so Dagster
        # ends the backfill as failed: the days stay missing, to be fetched once a token is set
        dagster.wait_for_backfill(backfill)
        runs = dagster.backfill_runs(backfill)
        assert len(runs) == 1 and all(run["status"] == "SUCCESS" for run in runs), runs
        # the topic ended long ago: nothing can be late
        fresh = latest_check(dagster, "snapshots", "snapshots_fresh")["evaluation"]
        assert fresh["success"] and "nothing can be late" in fresh["description"]

        # The file changes under the running code location: the ended topic is extended by five days, an
        # open-ended topic and one older than both are declared.
        running_start = today - timedelta(days=12)
        earlier = (today - timedelta(days=130), today - timedelta(days=120))
        extended = (ended[0], ended[1] + timedelta(days=5))
        topics.write_text(
            "topics:\n"
            f"  - {{name: ended, query: climate, start_date: {extended[0]}, end_date: {extended[1]}}}\n"
            f"  - {{name: running, query: climate, start_date: {running_start}, end_date: open}}\n"
            f"  - {{name: earlier, query: climate, start_date: {earlier[0]}, end_date: {earlier[1]}}}\n",
            encoding="utf-8",
        )
        dagster.next_sensor_tick("topic_registry")
        declared = sorted([*days(*earlier), *days(*extended), *days(running_start, yesterday)])
        clicks = partition_keys(dagster, "click_totals")["default"]
        assert clicks == sorted([*declared, old_key])  # in date order, the earlier topic's days first
        assert partition_keys(dagster, "ccnews_stories") == {"default": declared}
        weeks = partition_keys(dagster, "cluster_weeks")
        assert sorted(weeks["topic"]) == ["earlier", "ended", "running"]
        assert weeks["week"] == sorted(
            {*mondays(*earlier), *mondays(*extended), *mondays(running_start, today)}
        )
        # still missing: without a Bit.ly token a click run materializes nothing (the days stay to be fetched)
        assert missing(dagster, "click_totals") == declared
        # the open-ended topic is running: a snapshot is due, and the check, reading the file now, says so
        run_id = execute_check(dagster, "snapshots", "snapshots_fresh")
        assert dagster.wait_for_run(run_id) == "SUCCESS", dagster.log_tails()
        check = latest_check(dagster, "snapshots", "snapshots_fresh")
        assert check["runId"] == run_id and not check["evaluation"]["success"]
        assert "last: never" in check["evaluation"]["description"]
        assert code_server.poll() is None  # the same code server throughout: nothing was reloaded
