"""The project's run tags, decided from what a run materializes and its partition: the one rule the sensors,
`make demo`, `topicmap topic run` and the run queue (runs launched from the UI) share. The run queue's part
is checked here through Dagster's own GraphQL schema, in process, on the shipped local instance (the webserver and
daemon version is tests/test_ui_runs.py)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from assets.dagster_internals import (
    RETRY_NUMBER_TAG,
    RUN_FAILURE_REASON_TAG,
    WILL_RETRY_TAG,
    InProcessCodeLocationOrigin,
    InProcessWorkspaceLoadTarget,
    WorkspaceProcessContext,
    WorkspaceRequestContext,
    consume_new_runs_for_automatic_reexecution,
)
from assets.jobs import POST_SPIDER_ASSETS, SPIDER_ASSETS, run_tags, topic_run_tags
from assets.partitions import click_days_partitions
from orchestration.coordinator import NAMED_JOB_TAG, TaggingRunCoordinator, named_job_for
from orchestration.run_tags import LAUNCHED_BY_TAG, run_topic
from orchestration.runs import REPOSITORY_NAME, code_location
from sensors.retries import retry_decisions
from tests.dagster_deploy import run_status_tick


@pytest.fixture(scope="module")
def asset_graph():  # noqa: ANN201 - a RemoteRepositoryAssetGraph, as the webserver and the daemon see the assets
    with dg.DagsterInstance.ephemeral() as instance:
        yield code_location(instance).get_repository(REPOSITORY_NAME).asset_graph


def keys(*names: str) -> set[dg.AssetKey]:
    return {dg.AssetKey(name) for name in names}


def test_tags_follow_from_the_assets_and_the_topic() -> None:
    assert run_tags(SPIDER_ASSETS, "t") == {
        "topicmap/topic": "t",
        "topicmap/stage": "spider",
        "topicmap/spider_topic": "t",  # the run queue's one-spider-run-per-topic limit
    }
    assert run_tags(["fetched_links"], "t") == run_tags(SPIDER_ASSETS, "t")  # any of the spider's assets
    assert run_tags(POST_SPIDER_ASSETS, "t") == {
        "topicmap/topic": "t",
        "topicmap/stage": "post-spider",
        "topicmap/api": "facebook",  # story_statistics
    }
    assert run_tags(["clusters"], "t") == {"topicmap/topic": "t", "topicmap/stage": "post-spider"}
    assert run_tags(["click_totals"]) == {"topicmap/api": "bitly"}
    assert run_tags(["seeds"], "t") == {"topicmap/topic": "t"}
    assert run_tags(["archive_stories"]) == {}
    # the sensors' spider runs: the same tags plus the iteration they belong to
    assert topic_run_tags("t", 3, "spider") == {**run_tags(SPIDER_ASSETS, "t"), "topicmap/iteration": "3"}
    with pytest.raises(ValueError, match="stage must be"):
        topic_run_tags("t", 3, "spiders")


def test_the_topic_is_read_from_the_runs_partition(asset_graph) -> None:  # noqa: ANN001
    spider = keys(*SPIDER_ASSETS)
    assert run_topic(asset_graph, spider, {"dagster/partition": "t"}) == "t"
    # a single-run range over one topic is that topic; over two, no one topic
    one = {"dagster/asset_partition_range_start": "t", "dagster/asset_partition_range_end": "t"}
    assert run_topic(asset_graph, spider, one) == "t"
    assert run_topic(asset_graph, spider, {**one, "dagster/asset_partition_range_end": "u"}) is None
    # a topic's week: the topic of the key, of a range's two ends if they are one topic's
    weeks = keys("cluster_weeks")
    assert run_topic(asset_graph, weeks, {"dagster/partition": "t|2026-02-02"}) == "t"
    assert run_topic(asset_graph, weeks, {"dagster/partition": "added-by-hand"}) is None  # no topic week
    week_range = {
        "dagster/asset_partition_range_start": "t|2026-02-02",
        "dagster/asset_partition_range_end": "t|2026-03-02",
    }
    assert run_topic(asset_graph, weeks, week_range) == "t"
    assert (
        run_topic(asset_graph, weeks, {**week_range, "dagster/asset_partition_range_end": "u|2026-01-05"})
        is None
    )
    # a publication day is no topic
    assert run_topic(asset_graph, keys("click_totals"), {"dagster/partition": "2026-02-02"}) is None


def test_a_run_of_assets_is_tagged_with_the_smallest_job_that_holds_them(asset_graph) -> None:  # noqa: ANN001
    assert named_job_for(asset_graph, keys(*SPIDER_ASSETS)) == "spider_iteration_job"
    assert named_job_for(asset_graph, keys("snapshots")) == "snapshot_job"  # not post_spider_job
    assert named_job_for(asset_graph, keys("clusters", "deduped_media")) == "post_spider_job"
    assert named_job_for(asset_graph, keys("click_totals")) == "click_totals_job"
    assert named_job_for(asset_graph, keys("seeds", "fetched_links")) is None  # no named job holds both
    assert named_job_for(asset_graph, keys("no_such_asset")) is None


LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } ... on InvalidSubsetError { message } } }"""


@pytest.fixture(scope="module")
def ui_home(local_instance_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped local instance of ``ui`` with the topic's partitions, made once for the module (each test's is a
    copy)."""
    home = shutil.copytree(local_instance_template, tmp_path_factory.mktemp("run_tags") / "home")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("topics", ["t"])
        # click days as the topic registry keeps them (assets/partitions.py): the days a range below launches
        instance.add_dynamic_partitions(
            click_days_partitions.name, ["2026-01-10", "2026-01-11", "2026-01-12"]
        )
    return home


@pytest.fixture
def ui(ui_home: Path, tmp_path: Path) -> Iterator[WorkspaceRequestContext]:
    """The UI's GraphQL on the shipped local instance, with the code location loaded in process."""
    home = shutil.copytree(ui_home, tmp_path / "home")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_coordinator, TaggingRunCoordinator)
        origin = code_location(instance).origin
        assert isinstance(origin, InProcessCodeLocationOrigin)
        with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as process:
            yield process.create_request_context()


def execute_dagster_graphql(ui: WorkspaceRequestContext, query: str, variables: dict):  # noqa: ANN201
    """Dagster's own GraphQL schema, imported here: loading it takes half a second, and every test process
    imports this module to collect it."""
    from dagster_graphql.test.utils import execute_dagster_graphql as execute

    return execute(ui, query, variables)


def launch(ui: WorkspaceRequestContext, assets: list[str], tags: dict[str, str]) -> dg.DagsterRun:
    """Materialize ``assets`` as the asset graph's button does (a run of `__ASSET_JOB`); the run as stored."""
    result = execute_dagster_graphql(
        ui,
        LAUNCH,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": "topicmap",
                    "repositoryName": REPOSITORY_NAME,
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": [name]} for name in assets],
                },
                "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
            }
        },
    )
    answer = result.data["launchRun"]
    assert answer["__typename"] == "LaunchRunSuccess", answer
    return ui.instance.get_run_by_id(answer["run"]["runId"])


def test_the_run_queue_tags_runs_launched_from_the_asset_graph(ui: WorkspaceRequestContext) -> None:
    spider = launch(ui, SPIDER_ASSETS, {"dagster/partition": "t"})
    # Dagster's name stays (no public call renames a run); the tag names the job whose work it is
    assert spider.status == dg.DagsterRunStatus.QUEUED and spider.job_name == "__ASSET_JOB"
    assert spider.tags[NAMED_JOB_TAG] == "spider_iteration_job"
    assert run_tags(SPIDER_ASSETS, "t").items() <= spider.tags.items()
    assert spider.run_op_concurrency.all_pools == {"spider"}
    # a single run over a range of publication days, with the asset's checks planned for each day
    clicks = launch(
        ui,
        ["click_totals"],
        {
            "dagster/asset_partition_range_start": "2026-01-10",
            "dagster/asset_partition_range_end": "2026-01-12",
        },
    )
    assert clicks.status == dg.DagsterRunStatus.QUEUED and clicks.job_name == "__ASSET_JOB"
    assert clicks.tags[NAMED_JOB_TAG] == "click_totals_job" and clicks.tags["topicmap/api"] == "bitly"
    assert clicks.run_op_concurrency.all_pools == {"social_api"}
    planned = ui.instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("click_totals"), "clicks_30d_not_below_3d"), limit=10
    )
    assert {record.run_id for record in planned} == {clicks.run_id}
    # assets no named job holds together: no named job, the project's tags all the same
    mixed = launch(ui, ["seeds", *SPIDER_ASSETS], {"dagster/partition": "t"})
    assert mixed.job_name == "__ASSET_JOB" and mixed.tags["topicmap/spider_topic"] == "t"
    assert NAMED_JOB_TAG not in mixed.tags
    # the coordinator wrote to the runs table only through the instance: the stored run is Dagster's own
    assert ui.instance.get_run_by_id(spider.run_id).job_snapshot_id == spider.job_snapshot_id


def test_every_asset_runs_in_a_pool() -> None:
    """Pools limit a step whoever launched its run (sensor, UI, backfill): an asset outside every pool has no limit."""
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    materializable = [key for key in graph.get_all_asset_keys() if graph.get(key).is_materializable]
    assert materializable and [k.to_user_string() for k in materializable if not graph.get(k).pools] == []


REEXECUTE = """mutation($params: ReexecutionParams!) { launchPipelineReexecution(reexecutionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
#: a sensor's run as the sensor daemon creates it: the sensor's name, its tick and run key
SENSOR_RUN = {
    "dagster/sensor_name": "spider_iterations",
    "dagster/tick": "7",
    "dagster/run_key": "spider:t:0",
}


def reexecute(ui: WorkspaceRequestContext, parent: dg.DagsterRun) -> dg.DagsterRun:
    """Re-execute ``parent`` as the run page's Re-execute button does (by parent run id); the run as queued."""
    result = execute_dagster_graphql(
        ui, REEXECUTE, {"params": {"parentRunId": parent.run_id, "strategy": "ALL_STEPS"}}
    )
    answer = result.data["launchPipelineReexecution"]
    assert answer["__typename"] == "LaunchRunSuccess", answer
    return ui.instance.get_run_by_id(answer["run"]["runId"])


def fail(ui: WorkspaceRequestContext, run: dg.DagsterRun, cursor: str) -> tuple[dg.DagsterRun, str, str]:
    """``run`` failed as a run whose worker was killed fails (no step failed), then the retry_decisions sensor's
    tick: (the failed run, what the sensor wrote into its log, the sensor's cursor)."""
    instance = ui.instance
    instance.report_run_failed(run)
    cursor = run_status_tick(retry_decisions, instance, cursor, run).cursor
    said = [
        e.message for e in instance.all_logs(run.run_id) if e.message.startswith(("Will be", "Not retried"))
    ]
    assert len(said) == 1, said
    return instance.get_run_by_id(run.run_id), said[0], cursor


def retried(ui: WorkspaceRequestContext, failed: dg.DagsterRun) -> dg.DagsterRun | None:
    """One pass of Dagster's run retries over the failed run: its automatic retry, as queued, if it made one."""
    record = ui.instance.get_run_records(dg.RunsFilter(run_ids=[failed.run_id]))[0]
    list(consume_new_runs_for_automatic_reexecution(ui.process_context, [record], logging.getLogger("test")))
    children = ui.instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": failed.run_id}))
    assert len(children) <= 1
    return children[0] if children else None


def retry_chain(
    ui: WorkspaceRequestContext, run: dg.DagsterRun, cursor: str
) -> tuple[list[dg.DagsterRun], list[str], str]:
    """``run`` killed, then each of its automatic retries killed in turn, until Dagster retries no more: (the runs, what
    the sensor wrote into each failed run's log, the sensor's cursor)."""
    chain, said = [run], []
    while True:
        failed, why, cursor = fail(ui, chain[-1], cursor)
        said.append(why)
        retry = retried(ui, failed)
        if retry is None:
            assert failed.tags[WILL_RETRY_TAG] == "false"
            return chain, said, cursor
        assert failed.tags[WILL_RETRY_TAG] == "true" and retry.tags[RETRY_NUMBER_TAG]
        chain.append(retry)


def test_a_re_execution_by_hand_says_so_and_is_retried_like_any_run(ui: WorkspaceRequestContext) -> None:
    """Who launched a run is in its tags, and a killed re-execution by hand is retried as often as a first run: Dagster
    counts every re-execution of a run against its retry limit, and logs nothing when a run is not retried."""
    instance = ui.instance
    cursor = run_status_tick(retry_decisions, instance, None).cursor  # the sensor starts before any failure
    parent = launch(ui, SPIDER_ASSETS, {"dagster/partition": "t", **SENSOR_RUN})
    assert parent.tags[LAUNCHED_BY_TAG] == "sensor:spider_iterations"
    # the sensor's run fails and is retried up to the instance's limit (2), each failure saying why
    chain, said, cursor = retry_chain(ui, parent, cursor)
    assert len(chain) == 3 and [r.tags[LAUNCHED_BY_TAG] for r in chain[1:]] == ["retry", "retry"]
    assert {r.tags["dagster/sensor_name"] for r in chain} == {
        "spider_iterations"
    }  # retries stay the sensor's
    assert said[0] == (
        "Will be retried by Dagster's run retries: its run group holds 0 re-execution(s) of run "
        f"{parent.run_id[:8]} (0 automatic retries, 0 by hand), the limit is 2"
    )
    assert said[-1] == (
        "Not retried: the retry limit is reached: its run group holds 2 re-execution(s) of run "
        f"{parent.run_id[:8]} (2 automatic retries, 0 by hand), the limit (dagster/max_retries) is 2. A "
        "re-execution by hand gets 2 retries of its own"
    )

    # re-executed by hand from the UI: launched by hand, and not shown as the sensor's (Dagster would copy its tag)
    by_hand = reexecute(ui, chain[-1])
    assert by_hand.tags[LAUNCHED_BY_TAG] == "manual"
    assert "dagster/sensor_name" not in by_hand.tags and by_hand.tags["dagster/run_key"] == "spider:t:0"
    assert by_hand.tags["dagster/parent_run_id"] == chain[-1].run_id
    # killed, it is retried twice, as a first run is, though its run group already held 3 re-executions
    again, said, cursor = retry_chain(ui, by_hand, cursor)
    assert len(again) == 3 and [r.tags[LAUNCHED_BY_TAG] for r in again[1:]] == ["retry", "retry"]
    assert said[0] == (
        "Will be retried by Dagster's run retries: its run group holds 3 re-execution(s) of run "
        f"{parent.run_id[:8]} (2 automatic retries, 1 by hand), the limit is 5"
    )
    assert said[-1].startswith(
        "Not retried: the retry limit is reached: its run group holds 5 re-execution(s)"
    )

    # a run whose step failed is not retried (run retries are for crashes), and says so
    stepped = launch(ui, SPIDER_ASSETS, {"dagster/partition": "t"})
    assert stepped.tags[LAUNCHED_BY_TAG] == "manual"
    instance.add_run_tags(stepped.run_id, {RUN_FAILURE_REASON_TAG: "STEP_FAILURE"})  # as Dagster records it
    failed, why, cursor = fail(ui, instance.get_run_by_id(stepped.run_id), cursor)
    assert failed.tags[WILL_RETRY_TAG] == "false" and why.startswith(
        "Not retried: a step failed, and run retries re-execute crashed runs only"
    )
    assert retried(ui, failed) is None
