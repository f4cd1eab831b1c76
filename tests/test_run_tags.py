"""The project's run tags, decided from what a run materializes and its partition: the one rule the sensors,
`make demo`, `topicmap topic run` and the run queue (runs launched from the UI) share. The run queue's part
is checked here through Dagster's own GraphQL schema, in process, on the shipped local instance (the webserver and
daemon version is tests/test_ui_runs.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql.test.utils import execute_dagster_graphql

from assets.dagster_internals import (
    InProcessCodeLocationOrigin,
    InProcessWorkspaceLoadTarget,
    WorkspaceProcessContext,
    WorkspaceRequestContext,
)
from assets.jobs import POST_SPIDER_ASSETS, SPIDER_ASSETS, run_tags, topic_run_tags
from orchestration.coordinator import NAMED_JOB_TAG, TaggingRunCoordinator, named_job_for
from orchestration.run_tags import run_topic
from orchestration.runs import REPOSITORY_NAME, code_location
from tests.dagster_deploy import write_instance


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
    # topic x week: the topic dimension, from its own tag or from the key
    weeks = keys("cluster_weeks")
    assert run_topic(asset_graph, weeks, {"dagster/partition": "t|2026-02-02"}) == "t"
    assert run_topic(asset_graph, weeks, {"dagster/partition/topic": "t", "dagster/partition": "x"}) == "t"
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


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[WorkspaceRequestContext]:
    """The UI's GraphQL on the shipped local instance, with the code location loaded in process."""
    write_instance(tmp_path / "home", "dagster.local.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert isinstance(instance.run_coordinator, TaggingRunCoordinator)
        instance.add_dynamic_partitions("topics", ["t"])
        origin = code_location(instance).origin
        assert isinstance(origin, InProcessCodeLocationOrigin)
        with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as process:
            yield process.create_request_context()


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
