"""The spider: one materialization per iteration of the topic's fetched links, stories and links."""

import json

import dagster as dg
from sqlalchemy import func, select

from assets.jobs import POOL_SPIDER
from assets.metadata import counts_markdown, table
from assets.partitions import topics_partitions
from assets.seeds import seeds
from resources.fetcher import PageSourceResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap.store import schema as s

SPIDER_GROUP = "spider"
SPIDER_TAGS = {"topicmap/stage": "spider"}
#: an iteration is idempotent (every write keyed), so a step that died on a network or database error is retried
#: after a growing pause; a SpiderError (the topic is unusable) is not
SPIDER_RETRY_POLICY = dg.RetryPolicy(
    max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


def _preview(store, query, columns: list[str]) -> dg.TableMetadataValue:  # noqa: ANN001
    with store.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query.limit(15)).mappings()]
    return table(rows, columns)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "fetched_links",
            group_name=SPIDER_GROUP,
            kinds={"python", "sql"},
            tags=SPIDER_TAGS,
            deps=[dg.AssetDep(seeds, partition_mapping=dg.IdentityPartitionMapping())],
            description="Rows in topic_fetch_urls: every URL the spider met, with its state, HTTP code and message.",
        ),
        dg.AssetSpec(
            "relevant_stories",
            group_name=SPIDER_GROUP,
            kinds={"python", "sql"},
            tags=SPIDER_TAGS,
            deps=[dg.AssetDep(seeds, partition_mapping=dg.IdentityPartitionMapping())],
            description="Rows in topic_stories: the stories that match the topic, with the iteration that found them.",
        ),
        dg.AssetSpec(
            "topic_links",
            group_name=SPIDER_GROUP,
            kinds={"python", "sql"},
            tags=SPIDER_TAGS,
            deps=[dg.AssetDep(seeds, partition_mapping=dg.IdentityPartitionMapping())],
            description="Rows in topic_links: links mined from topic stories, pointed at the story they lead to.",
        ),
    ],
    partitions_def=topics_partitions,
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
    from topicmap.spider.iteration import Spider, SpiderError  # the fetchers and HTML extractors load here

    topic = topics_file.topic(context.partition_key)
    topic_store = store.open()
    topic_store.upsert_topic(topic)
    with page_source.open(topic_store, topic) as source:
        spider = Spider(topic_store, topic, source, log=context.log.info)
        try:
            report = spider.run_iteration()
        except SpiderError as exc:
            topic_store.set_topic_state(spider.topics_id, "error", str(exc))
            raise dg.Failure(str(exc), allow_retries=False) from exc
    topics_id = spider.topics_id
    if report.done:
        topic_store.set_topic_state(topics_id, "spidering completed", f"{report.iteration} iterations")
    else:
        topic_store.set_topic_state(topics_id, "running", f"iteration {report.iteration} done")
    f, ts, tl = s.topic_fetch_urls, s.topic_stories, s.topic_links
    with topic_store.engine.connect() as conn:
        states = dict(
            conn.execute(
                select(f.c.state, func.count()).where(f.c.topics_id == topics_id).group_by(f.c.state)
            ).all()
        )
        per_iteration = dict(
            conn.execute(
                select(ts.c.iteration, func.count())
                .where(ts.c.topics_id == topics_id)
                .group_by(ts.c.iteration)
            ).all()
        )
        link_count = conn.execute(select(func.count()).where(tl.c.topics_id == topics_id)).scalar_one()
        resolved_links = conn.execute(
            select(func.count()).where(tl.c.topics_id == topics_id, tl.c.ref_stories_id.is_not(None))
        ).scalar_one()
    common = {
        "iteration": report.iteration,
        "frontier_left": report.frontier_left,
        "spidering_done": report.done,
    }
    yield dg.MaterializeResult(
        asset_key="fetched_links",
        metadata={
            **common,
            "dagster/row_count": sum(states.values()),
            "urls_processed_this_iteration": report.urls_processed,
            "urls_by_state_this_iteration": dg.MetadataValue.json(dict(report.states)),
            "urls_by_state": counts_markdown(dict(sorted(states.items())), "state", "URLs"),
            "fetch_rate_pages_per_s": round(report.fetch_rate, 2),
            "seconds_waiting_on_throttles": round(report.throttle_wait, 2),
            "error_rate": round(report.error_rate, 4),
            "top_errors": dg.MetadataValue.json([{"message": m, "count": c} for m, c in report.top_errors]),
            "preview": _preview(
                topic_store,
                select(f.c.url, f.c.iteration, f.c.state, f.c.code, f.c.message)
                .where(f.c.topics_id == topics_id, f.c.iteration == report.iteration)
                .order_by(f.c.fetch_date.desc()),
                ["url", "iteration", "state", "code", "message"],
            ),
        },
    )
    yield dg.MaterializeResult(
        asset_key="relevant_stories",
        metadata={
            **common,
            "dagster/row_count": report.topic_stories,
            "new_stories": report.stories_added,
            "stories_per_iteration": counts_markdown(
                {str(k): v for k, v in sorted(per_iteration.items())}, "iteration", "stories"
            ),
            "preview": _preview(
                topic_store,
                select(
                    ts.c.stories_id,
                    ts.c.iteration,
                    s.stories.c.url,
                    s.stories.c.title,
                    s.stories.c.publish_date,
                )
                .join(s.stories, s.stories.c.stories_id == ts.c.stories_id)
                .where(ts.c.topics_id == topics_id)
                .order_by(ts.c.topic_stories_id.desc()),
                ["stories_id", "iteration", "url", "title", "publish_date"],
            ),
        },
    )
    yield dg.MaterializeResult(
        asset_key="topic_links",
        metadata={
            **common,
            "dagster/row_count": int(link_count),
            "new_links": report.links_added,
            "links_resolved_to_stories": int(resolved_links),
            "states_json": dg.MetadataValue.json(json.loads(json.dumps(states))),
        },
    )
