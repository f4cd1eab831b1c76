"""The spider: one materialization per iteration of the topic's fetched links, stories and links."""

import json
from typing import TYPE_CHECKING

import dagster as dg

from assets.jobs import POOL_SPIDER
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import declared_topic, topics_partitions
from resources.fetcher import PageSourceResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap import settings

if TYPE_CHECKING:
    from topicmap.spider.iteration import IterationReport, Spider

SPIDER_GROUP = "spider"
#: The data's path through an iteration, as the lineage graph draws it: seeds give the links to fetch, fetched pages
#: give the relevant stories, relevant stories give the links mined from them (which the next iteration fetches).
#: One step writes all three, so this is each asset's upstream, not an order of steps.
SPIDER_LINEAGE = {
    "fetched_links": "seeds",
    "relevant_stories": "fetched_links",
    "topic_links": "relevant_stories",
}
SPIDER_TAGS = {"topicmap/stage": "spider"}
#: an iteration is idempotent (every write keyed), so a step that died on a network or database error is retried
#: after a growing pause; a SpiderError (the topic is unusable) is not
SPIDER_RETRY_POLICY = dg.RetryPolicy(
    max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


SPIDER_ASSET_DESCRIPTIONS = {
    "fetched_links": "Rows in topic_fetch_urls: every URL the spider met, with its state, HTTP code and message.",
    "relevant_stories": "Rows in topic_stories: the stories that match the topic, with the iteration that found them.",
    "topic_links": "Rows in topic_links: links mined from topic stories, pointed at the story they lead to.",
}


def spider_spec(key: str) -> dg.AssetSpec:
    """The spec of one of the spider's three assets, the same in the single-step and the sharded iteration."""
    return dg.AssetSpec(
        key,
        deps=[SPIDER_LINEAGE[key]],  # same topic partition upstream (identity mapping)
        partitions_def=topics_partitions,
        group_name=SPIDER_GROUP,
        owners=OWNERS,
        code_version=CODE_VERSIONS[key],
        kinds={"python", "sql"},
        tags=SPIDER_TAGS,
        description=SPIDER_ASSET_DESCRIPTIONS[key],
    )


@dg.multi_asset(
    specs=[spider_spec(key) for key in SPIDER_LINEAGE],
    partitions_def=topics_partitions,
    # One iteration writes all three tables in one pass, so none can be materialized without the others; the
    # lineage still draws the data's path (SPIDER_LINEAGE) rather than three siblings of seeds.
    can_subset=False,
    pool=POOL_SPIDER,
    retry_policy=SPIDER_RETRY_POLICY,
    description="One spider iteration: fetch pending links, keep relevant stories, mine their links.",
)
def spider_iteration(
    context: dg.AssetExecutionContext,
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
    page_source: PageSourceResource,
):
    from topicmap.spider.claims import run_holder
    from topicmap.spider.iteration import Spider  # the fetchers and HTML extractors load here

    topic = declared_topic(topics_file, context.partition_key)
    topic_store = store.open()
    topic_store.upsert_topic(topic)
    # the claims are the run's: released at once should the run fail or be canceled (sensors/run_failures.py)
    holder = run_holder(context.run_id, context.op_def.name)
    with page_source.open(topic_store, topic) as source:
        spider = Spider(topic_store, topic, source, log=context.log.info)
        report = _failing_the_topic(topic_store, spider, lambda: spider.run_iteration(holder))
    for asset_key, metadata in iteration_metadata(topic_store, spider.topics_id, report).items():
        yield dg.MaterializeResult(asset_key=asset_key, metadata=metadata)


def _failing_the_topic(topic_store, spider: "Spider", step):  # noqa: ANN001, ANN202
    """Run a spider step; a SpiderError marks the topic failed (with why) and fails the run."""
    from topicmap.spider.iteration import SpiderError

    try:
        return step()
    except SpiderError as exc:
        topic_store.set_topic_state(spider.topics_id, "error", str(exc))
        raise dg.Failure(str(exc), allow_retries=False) from exc


def iteration_metadata(topic_store, topics_id: int, report: "IterationReport") -> dict[str, dict]:  # noqa: ANN001
    """The three spider assets' metadata after an iteration (the topic's state is recorded too)."""
    from topicmap.spider.store import SpiderStore  # SQLAlchemy loads with the run, not with the code location

    if report.done:
        topic_store.set_topic_state(topics_id, "spidering completed", f"{report.iteration} iterations")
    else:
        topic_store.set_topic_state(topics_id, "running", f"iteration {report.iteration} done")
    spider_store = SpiderStore(topic_store, topics_id)
    states = spider_store.url_states()
    per_iteration = spider_store.stories_per_iteration()
    link_count, resolved_links = spider_store.link_counts()
    common = {
        "iteration": report.iteration,
        "frontier_left": report.frontier_left,
        "spidering_done": report.done,
    }
    return {
        "fetched_links": {
            **common,
            "dagster/row_count": sum(states.values()),
            "urls_processed_this_iteration": report.urls_processed,
            "urls_by_state_this_iteration": dg.MetadataValue.json(dict(report.states)),
            "urls_by_state": counts_markdown(dict(sorted(states.items())), "state", "URLs"),
            "fetch_rate_pages_per_s": round(report.fetch_rate, 2),
            "seconds_waiting_on_throttles": round(report.throttle_wait, 2),
            "error_rate": round(report.error_rate, 4),
            "top_errors": dg.MetadataValue.json([{"message": m, "count": c} for m, c in report.top_errors]),
            "preview": table(
                spider_store.fetched_urls_preview(report.iteration),
                ["url", "iteration", "state", "code", "message"],
            ),
        },
        "relevant_stories": {
            **common,
            "dagster/row_count": report.topic_stories,
            "new_stories": report.stories_added,
            "stories_per_iteration": counts_markdown(
                {str(k): v for k, v in sorted(per_iteration.items())}, "iteration", "stories"
            ),
            "preview": table(
                spider_store.topic_stories_preview(),
                ["stories_id", "iteration", "url", "title", "publish_date"],
            ),
        },
        "topic_links": {
            **common,
            "dagster/row_count": link_count,
            "new_links": report.links_added,
            "links_resolved_to_stories": resolved_links,
            "states_json": dg.MetadataValue.json(json.loads(json.dumps(states))),
        },
    }


# ---------------------------------------------------------------- the same iteration, sharded (Celery)
#
# plan (seeds, which iteration, the topic's size) -> N shard steps (each claims and fetches the pending URLs
# whose URL hash falls in its shard; on any Celery worker) -> finish (link mining, link pointing, metrics,
# health). Selected by TOPICMAP_SPIDER_SHARDS > 1 (spider_shards below); the outcome is the same as
# the single-step asset's, because every URL is claimed before it is fetched and resolved against what was
# known when the iteration started (topicmap.spider.claims, Spider.process_pending).


def spider_shards() -> int:
    """How many shard steps one spider iteration fans out into (TOPICMAP_SPIDER_SHARDS, default 1)."""
    shards = settings.SPIDER_SHARDS.integer()
    if shards < 1:
        raise ValueError(f"{settings.SPIDER_SHARDS.name} must be >= 1, got {shards}")
    return shards


class SpiderShardsConfig(dg.Config):
    """How many shard steps this iteration fans out into (default: TOPICMAP_SPIDER_SHARDS)."""

    shards: int = 0


@dg.op(
    ins={"seeds": dg.In(dg.Nothing)},
    out={"plan": dg.Out(dict), "shard": dg.DynamicOut(dict)},
    description="Import seeds, pick the iteration, and fan out one shard step per URL-hash shard.",
)
def spider_plan(
    context: dg.OpExecutionContext,
    config: SpiderShardsConfig,
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
):
    from topicmap.spider.iteration import Spider

    count = config.shards or spider_shards()
    if count < 1:
        raise dg.Failure(f"shards must be >= 1, got {count}")
    topic = declared_topic(topics_file, context.partition_key)
    topic_store = store.open()
    topic_store.upsert_topic(topic)
    spider = Spider(topic_store, topic, source=None, log=context.log.info)  # type: ignore[arg-type]
    plan = _failing_the_topic(topic_store, spider, spider.begin_iteration)
    yield dg.Output(plan.to_json(), output_name="plan")
    if plan.pending_iteration is None:
        return  # nothing to fetch: the finish step mines and records the iteration
    context.log.info(f"{topic.name}: iteration {plan.pending_iteration} in {count} shards")
    for index in range(count):
        yield dg.DynamicOutput(
            {"plan": plan.to_json(), "index": index, "count": count},
            mapping_key=f"shard_{index}_of_{count}",
            output_name="shard",
        )


@dg.op(
    description="Claim, fetch and judge the pending URLs of one shard of the iteration (any worker).",
    pool=POOL_SPIDER,
    retry_policy=SPIDER_RETRY_POLICY,
)
def spider_shard(
    context: dg.OpExecutionContext,
    shard: dict,
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
    page_source: PageSourceResource,
) -> dict:
    from topicmap.spider.claims import Shard, run_holder
    from topicmap.spider.iteration import IterationPlan, Spider

    plan = IterationPlan.from_json(shard["plan"])
    topic = declared_topic(topics_file, plan.topic)
    topic_store = store.open()
    with page_source.open(topic_store, topic) as source:
        spider = Spider(topic_store, topic, source, log=context.log.info)
        # the holder is the run and the shard: a task redelivered after its worker died takes its claims back,
        # and a run that failed or was canceled has them released at once (sensors/run_failures.py)
        holder = run_holder(context.run_id, f"shard-{shard['index']}-of-{shard['count']}")
        report = spider.process_pending(
            plan.pending_iteration, Shard(shard["index"], shard["count"]), holder=holder
        )
    return report.to_json()


@dg.op(
    out={key: dg.Out(dg.Nothing) for key in ("fetched_links", "relevant_stories", "topic_links")},
    description="Mine links, point links at known stories, record the iteration's metrics and health.",
)
def spider_finish(
    context: dg.OpExecutionContext,
    plan: dict,
    parts: list[dict],
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
):
    from topicmap.spider.iteration import IterationPlan, IterationReport, Spider

    iteration_plan = IterationPlan.from_json(plan)
    topic = declared_topic(topics_file, iteration_plan.topic)
    topic_store = store.open()
    spider = Spider(topic_store, topic, source=None, log=context.log.info)  # type: ignore[arg-type]
    reports = [IterationReport.from_json(part) for part in parts]
    report = _failing_the_topic(topic_store, spider, lambda: spider.finish_iteration(iteration_plan, reports))
    for asset_key, metadata in iteration_metadata(topic_store, spider.topics_id, report).items():
        yield dg.Output(None, output_name=asset_key, metadata=metadata)


@dg.graph(
    name="spider_iteration_sharded",
    ins={"seeds": dg.GraphIn()},
    out={key: dg.GraphOut() for key in SPIDER_LINEAGE},
)
def spider_iteration_graph(seeds):  # noqa: ANN001, ANN201 - a graph body
    """One spider iteration fanned out into URL-hash shards that run as separate steps (Celery tasks)."""
    plan, shards = spider_plan(seeds)
    parts = shards.map(spider_shard).collect()
    return spider_finish(plan, parts)


# Built from the graph rather than with @graph_multi_asset, which cannot declare deps between its own outputs (every
# output would hang off seeds); the specs are then the single-step asset's, so both variants look the same in the UI.
spider_iteration_sharded = dg.AssetsDefinition.from_graph(
    spider_iteration_graph,
    keys_by_input_name={"seeds": dg.AssetKey("seeds")},
    keys_by_output_name={key: dg.AssetKey(key) for key in SPIDER_LINEAGE},
    internal_asset_deps={key: {dg.AssetKey(upstream)} for key, upstream in SPIDER_LINEAGE.items()},
    partitions_def=topics_partitions,
    can_subset=False,
).map_asset_specs(lambda spec: spider_spec(spec.key.to_user_string()))
