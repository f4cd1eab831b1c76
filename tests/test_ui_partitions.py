"""The partitions the UI offers, through GraphQL as the UI asks for them, under the real daemon: every partitioned
asset offers exactly the days and weeks the declared topics span (and the keys that already hold data); the
"Missing" set a backfill is launched over holds only days that can be built, and its runs succeed; a topic added
or extended in the topics file brings its days and weeks, in date order, with the topic registry's next tick,
and the freshness checks read the file when they are evaluated: no reload of the code location. Waits on
progress (ticks, runs, backfill states), never on a wall-clock deadline.

Both tests share one deployment (each start costs three processes loading the code location); each finds it as a
fresh one would be, whichever ran before (`ui`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.dagster_deploy import DEPLOY, LocalDagster, local_dagster

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


def deployment_env(tmp_path: Path, topics: Path) -> dict[str, str]:
    """The environment of a local deployment reading ``topics``, with no setting that bounds the days and weeks
    and no Bit.ly token."""
    env = {
        **os.environ,
        "TOPICMAP_HOME": str(tmp_path / "home"),
        "TOPICMAP_DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}",
        "TOPICMAP_TOPICS_FILE": str(topics),
        "TOPICMAP_EXECUTOR": "in_process",
        # the registry's next tick within a turn of the sensor loop, not half a minute; it is stopped after each
        # tick a test waits for (`registry_tick`), so it ticks no more often than the default
        "TOPICMAP_SENSOR_INTERVAL_SECONDS": "5",
    }
    for name in (
        "TOPICMAP_BITLY_TOKEN",
        "TOPICMAP_CLICKS_START_DATE",
        "TOPICMAP_WEEKS_START",
        "TOPICMAP_CCNEWS_START",
    ):
        env.pop(name, None)
    return env


def backfill_partitions(dagster: LocalDagster, backfill: str) -> list[str]:
    """The partitions a backfill targets, as its page lists them."""
    return dagster.graphql.query(
        "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { "
        "partitionNames } } }",
        id=backfill,
    )["partitionBackfillOrError"]["partitionNames"]


def partition_stats(dagster: LocalDagster, asset: str) -> dict[str, int]:
    """The asset's partition counts, as the asset page's partition bar shows them."""
    return dagster.graphql.query(
        "query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionStats { "
        "numMaterialized numPartitions numFailed numMaterializing } } } }",
        key={"path": [asset]},
    )["assetNodeOrError"]["partitionStats"]


def topic_weeks(topic: str, first: date, last: date) -> list[str]:
    """The topic's `cluster_weeks` keys: ``topic|monday`` for each of its weeks that is over."""
    return [f"{topic}|{monday}" for monday in mondays(first, last)]


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


#: the sensor that keeps the days and weeks in step with the topics file
REGISTRY = "topic_registry"
#: the assets whose partitions are the declared days and weeks, and which the tests materialize
CALENDAR_ASSETS = ("click_totals", "cluster_weeks")


def registry_tick(dagster: LocalDagster) -> dict:
    """The topic registry's next tick (it is started), then the registry stopped: the test reads what that tick
    did, and no later tick runs meanwhile (each reads the instance and the topics file)."""
    tick = dagster.next_sensor_tick(REGISTRY)
    dagster.stop_sensor(REGISTRY)
    return tick


def seeds_runs_held() -> dict[str, object]:
    """The local instance's run limits, and the topic registry's `seeds_job` runs held in the queue: the tests
    read the days and weeks its ticks write, not the seeds of their topics (which the daemon test carries
    through), and each run would be a process loading the code location. Queued, such a run still marks its
    topic's partition as used."""
    concurrency = yaml.safe_load((DEPLOY / "dagster.local.yaml").read_text(encoding="utf-8"))["concurrency"]
    concurrency["runs"]["tag_concurrency_limits"].append(
        {"key": "dagster/sensor_name", "value": REGISTRY, "limit": 0}
    )
    return {"concurrency": concurrency}


@dataclass
class Deployment:
    dagster: LocalDagster
    instance: dg.DagsterInstance
    #: the topics file the code location reads; each test writes its own topics
    topics: Path
    #: a test ran on it
    used: bool = False


def wipe_materializations(dagster: LocalDagster, *assets: str) -> None:
    """Wipe the assets' materializations, as the asset page's "Wipe materializations" does."""
    data = dagster.graphql.query(
        "mutation($ranges: [PartitionsByAssetSelector!]!) { wipeAssets(assetPartitionRanges: $ranges) { "
        "__typename ... on PythonError { message } ... on UnsupportedOperationError { message } } }",
        ranges=[{"assetKey": {"path": [asset]}} for asset in assets],
    )
    assert data["wipeAssets"]["__typename"] == "AssetWipeSuccess", data


def clear_sensor_cursor(dagster: LocalDagster, name: str) -> None:
    """Clear the sensor's cursor, as its page's "Edit cursor" does with an empty one."""
    data = dagster.graphql.query(
        "mutation($sel: SensorSelector!) { setSensorCursor(sensorSelector: $sel, cursor: null) { "
        "__typename ... on PythonError { message } } }",
        sel={**dagster.graphql.repository, "sensorName": name},
    )
    assert data["setSensorCursor"]["__typename"] == "Sensor", data


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One local deployment for the module, reading a topics file of no topics until a test writes its own."""
    tmp_path = tmp_path_factory.mktemp("ui_partitions")
    topics = tmp_path / "topics.yaml"
    topics.write_text("topics: []\n", encoding="utf-8")
    with (
        local_dagster(tmp_path, deployment_env(tmp_path, topics), seeds_runs_held()) as dagster,
        dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
    ):
        yield Deployment(dagster, instance, topics)


@pytest.fixture
def ui(deployment: Deployment) -> Deployment:
    """The deployment as a fresh one: after another test, the topic registry is stopped (it starts again with the
    test's first tick) with no cursor (that tick evaluates the freshness checks, reading the test's file), and the
    days and weeks assets hold no data. The test's file declares only its own topics, so the registry's first tick
    deletes the other test's days and weeks: keys that hold no data."""
    if deployment.used:
        dagster = deployment.dagster
        dagster.stop_sensor(REGISTRY)
        clear_sensor_cursor(dagster, REGISTRY)
        wipe_materializations(dagster, *CALENDAR_ASSETS)
    deployment.used = True
    return deployment


def test_the_ui_offers_only_the_declared_days_and_follows_the_topics_file_without_a_reload(
    ui: Deployment,
) -> None:
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    ended = (today - timedelta(days=100), today - timedelta(days=80))
    old_key = (ended[1] + timedelta(days=10)).isoformat()  # a day the earlier rule offered (end + 30 days)
    dagster, instance, topics = ui.dagster, ui.instance, ui.topics
    topics.write_text(
        f"topics:\n  - {{name: ended, query: climate, start_date: {ended[0]}, end_date: {ended[1]}}}\n",
        encoding="utf-8",
    )
    # a click day materialized under the earlier rule: it holds data, so it stays offered and readable
    instance.add_dynamic_partitions("click_days", [old_key])
    instance.report_runless_asset_event(dg.AssetMaterialization("click_totals", partition=old_key))
    code_server = dagster.processes["code_server"][0]

    registry_tick(dagster)
    declared = days(*ended)
    assert partition_keys(dagster, "click_totals") == {"default": sorted([*declared, old_key])}
    assert partition_keys(dagster, "ccnews_stories") == {"default": declared}
    assert partition_keys(dagster, "cluster_weeks") == {"default": topic_weeks("ended", *ended)}
    # the "Missing" set: the declared days, none after the topic's end; a backfill over it builds every day
    offered = missing(dagster, "click_totals")
    assert offered == declared
    backfill = dagster.launch_backfill("click_totals", offered)
    targeted = backfill_partitions(dagster, backfill)
    assert sorted(targeted) == declared
    # its run ends (the backfill's own end, a turn of the backfill daemon later, is awaited at the end of the
    # test)
    dagster.wait_for_backfill_runs(backfill)
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
    registry_tick(dagster)
    declared = sorted([*days(*earlier), *days(*extended), *days(running_start, yesterday)])
    clicks = partition_keys(dagster, "click_totals")["default"]
    assert clicks == sorted([*declared, old_key])  # in date order, the earlier topic's days first
    assert partition_keys(dagster, "ccnews_stories") == {"default": declared}
    # each topic is offered its own weeks, none of another's (their dates do not overlap): a topic's weeks in
    # date order, one range
    declared_weeks = [
        *topic_weeks("earlier", *earlier),
        *topic_weeks("ended", *extended),
        *topic_weeks("running", running_start, today),
    ]
    assert partition_keys(dagster, "cluster_weeks") == {"default": declared_weeks}
    # still missing: without a Bit.ly token a click run materializes nothing (the days stay to be fetched)
    assert missing(dagster, "click_totals") == declared
    # the open-ended topic is running: a snapshot is due, and the check, reading the file now, says so
    run_id = execute_check(dagster, "snapshots", "snapshots_fresh")
    assert dagster.wait_for_run(run_id) == "SUCCESS", dagster.log_tails()
    check = latest_check(dagster, "snapshots", "snapshots_fresh")
    assert check["runId"] == run_id and not check["evaluation"]["success"]
    assert "last: never" in check["evaluation"]["description"]
    assert code_server.poll() is None  # the same code server throughout: nothing was reloaded
    # the backfill's runs (31 days at most each) succeeded; without a Bit.ly token they materialized nothing, so
    # Dagster ends the backfill as failed: the days stayed missing (above), to be fetched once a token is set
    dagster.wait_for_backfill(backfill)
    runs = dagster.backfill_runs(backfill)
    assert len(runs) == 1 and all(run["status"] == "SUCCESS" for run in runs), runs


def test_the_ui_offers_each_topic_its_own_weeks_and_a_missing_backfill_builds_only_those(
    ui: Deployment,
) -> None:
    """Two topics of different dates: `cluster_weeks` offers the pairs each declares (not every topic every week
    of the other, as a topic x week product would), the asset page counts as missing the declared pairs not built,
    and a "Missing" backfill targets exactly those: one run over their range, no week outside a topic's dates."""
    today = datetime.now(UTC).date()
    first = (today - timedelta(days=120), today - timedelta(days=95))
    second = (today - timedelta(days=60), today - timedelta(days=30))
    dagster, instance, topics = ui.dagster, ui.instance, ui.topics
    topics.write_text(
        "topics:\n"
        f"  - {{name: first, query: climate, start_date: {first[0]}, end_date: {first[1]}}}\n"
        f"  - {{name: second, query: climate, start_date: {second[0]}, end_date: {second[1]}}}\n",
        encoding="utf-8",
    )
    declared = [*topic_weeks("first", *first), *topic_weeks("second", *second)]
    # a week built already; and a week past the first topic's end built under the topic x week partitions of an
    # earlier version (the same key): it holds data, so it stays offered and readable
    built = declared[0]
    past_end = first[1] + timedelta(days=14)
    earlier_version = f"first|{past_end - timedelta(days=past_end.weekday())}"
    for key in (built, earlier_version):
        instance.report_runless_asset_event(dg.AssetMaterialization("cluster_weeks", partition=key))
    registry_tick(dagster)
    assert partition_keys(dagster, "cluster_weeks") == {"default": sorted([*declared, earlier_version])}
    # not offered: the first topic's weeks at the second's dates, and the reverse
    assert not {f"first|{week}" for week in mondays(*second)} & {*declared, earlier_version}
    stats = partition_stats(dagster, "cluster_weeks")
    assert (stats["numPartitions"], stats["numMaterialized"]) == (len(declared) + 1, 2)
    to_build = missing(dagster, "cluster_weeks")
    assert to_build == declared[1:]
    # "Missing" in the launch dialog: a backfill over those pairs, one run over each range of them (a
    # single-run backfill policy; the week kept between them splits them), each building its weeks in order
    backfill = dagster.launch_backfill("cluster_weeks", to_build)
    targeted = backfill_partitions(dagster, backfill)
    assert sorted(targeted) == to_build
    dagster.wait_for_backfill(backfill)
    ranges = sorted(
        (
            run["tags"]["dagster/asset_partition_range_start"],
            run["tags"]["dagster/asset_partition_range_end"],
        )
        for run in dagster.backfill_runs(backfill)
    )
    first_weeks = topic_weeks("first", *first)
    second_weeks = topic_weeks("second", *second)
    assert ranges == [(first_weeks[1], first_weeks[-1]), (second_weeks[0], second_weeks[-1])]
