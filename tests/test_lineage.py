"""The lineage graph draws the data's path: archive loaders -> seeds -> fetched links -> relevant stories -> topic
links, in the single-step spider and the sharded one alike, without making a run wait on its upstream."""

from __future__ import annotations

import dagster as dg
import pytest

from assets.spider import spider_iteration, spider_iteration_sharded
from orchestration.definitions import build_resources, defs
from orchestration.runs import REPOSITORY_NAME, code_location

SPIDER_PATH = {
    "fetched_links": {"seeds"},
    "relevant_stories": {"fetched_links"},
    "topic_links": {"relevant_stories"},
}


def _parents(graph, key: str) -> set[str]:  # noqa: ANN001 - an AssetGraph or the webserver's remote one
    return {parent.to_user_string() for parent in graph.get(dg.AssetKey(key)).parent_keys}


@pytest.mark.parametrize("spider", [spider_iteration, spider_iteration_sharded], ids=["one_step", "sharded"])
def test_the_spider_assets_follow_one_another(spider: dg.AssetsDefinition) -> None:
    graph = dg.Definitions(assets=[spider], resources=build_resources()).resolve_asset_graph()
    assert {key: _parents(graph, key) for key in SPIDER_PATH} == SPIDER_PATH
    # one iteration writes all three: selecting one selects the others (a run never writes one table alone)
    assert not spider.can_subset
    assert {key.to_user_string() for key in spider.keys} == set(SPIDER_PATH)
    # and the sharded variant shows what the single-step one shows
    for key in SPIDER_PATH:
        spec = graph.get(dg.AssetKey(key))
        assert spec.owners and spec.code_version and spec.group_name == "spider", key


def test_the_code_location_draws_the_archive_loaders_above_seeds() -> None:
    graph = defs.resolve_asset_graph()
    assert {key: _parents(graph, key) for key in SPIDER_PATH} == SPIDER_PATH
    loaders = {"archive_stories", "cc_outlet_stories", "ccnews_stories"}
    assert _parents(graph, "seeds") == loaders
    # any CC-NEWS day may hold a topic's stories
    mapping = graph.get(dg.AssetKey("seeds")).partition_mappings[dg.AssetKey("ccnews_stories")]
    assert isinstance(mapping, dg.AllPartitionMapping)
    assert _parents(graph, "cc_outlet_stories") == {"cc_outlet_queue"}


def test_the_webserver_sees_the_same_lineage() -> None:
    """The graph the UI draws is the code location's remote asset graph (what the webserver reads over gRPC)."""
    with dg.DagsterInstance.ephemeral() as instance:
        graph = code_location(instance).get_repository(REPOSITORY_NAME).asset_graph
        assert {key: _parents(graph, key) for key in SPIDER_PATH} == SPIDER_PATH
        assert _parents(graph, "seeds") == {"archive_stories", "cc_outlet_stories", "ccnews_stories"}


def test_seeding_a_topic_neither_waits_on_nor_runs_a_loader() -> None:
    graph = defs.resolve_asset_graph()
    seeds_node = graph.get(dg.AssetKey("seeds")).assets_def.node_def
    # deps, not inputs: nothing is loaded from the loaders, so a seeds run reads whatever the archive holds
    assert all(input_def.dagster_type.is_nothing for input_def in seeds_node.input_defs)
    jobs = {
        name: {key.to_user_string() for key in defs.resolve_job_def(name).asset_layer.executable_asset_keys}
        for name in ("seeds_job", "spider_iteration_job", "archive_job", "ccnews_daily")
    }
    assert jobs == {
        "seeds_job": {"seeds"},
        "spider_iteration_job": set(SPIDER_PATH),
        "archive_job": {"archive_stories"},
        "ccnews_daily": {"ccnews_stories"},
    }
