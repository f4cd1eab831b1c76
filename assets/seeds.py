"""A topic's seeds: its query over the archive, month by month, plus its seed URL lists."""

import dagster as dg

from assets.archive import archive_stories
from assets.commoncrawl import cc_outlet_stories, ccnews_stories
from assets.jobs import POOL_ARCHIVE
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import declared_topic, topics_partitions
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource


@dg.asset(
    group_name="topics",
    owners=OWNERS,
    code_version=CODE_VERSIONS["seeds"],
    kinds={"python", "sql"},
    tags={"topicmap/stage": "topics"},
    # a query over the whole archive: it shares the archive's slots rather than the spider's
    pool=POOL_ARCHIVE,
    partitions_def=topics_partitions,
    # Seeds are drawn from the story archive, which every loader fills: the drops folder, Common Crawl's outlets and
    # CC-NEWS days (any day may hold a topic's stories: all of them). Deps, not inputs: a topic is seeded from
    # whatever the archive holds, so a run of seeds never waits on (or launches) a loader.
    deps=[
        archive_stories,
        cc_outlet_stories,
        dg.AssetDep(ccnews_stories, partition_mapping=dg.AllPartitionMapping()),
    ],
    description=(
        "Rows in `topic_seed_urls`: archive stories in the topic's date range that match its boolean query "
        "(run month by month), plus URLs from the topic's seed CSV files. Fails if more than max_stories match."
    ),
)
def seeds(
    context: dg.AssetExecutionContext, store: TopicStoreResource, topics_file: TopicsFileResource
) -> dg.MaterializeResult:
    from topicmap.topics.seeding import TooManySeedsError, select_seeds  # reads drops: pyarrow, extractors

    topic = declared_topic(topics_file, context.partition_key)
    topic_store = store.open()
    topics_id = topic_store.upsert_topic(topic)
    try:
        selection = select_seeds(topic_store, topic, progress=context.log.info)
    except TooManySeedsError as exc:
        topic_store.set_topic_state(topics_id, "error", str(exc))
        raise dg.Failure(str(exc), allow_retries=False) from exc
    for error in selection.csv_errors:
        context.log.warning(f"skipped bad seed URL row: {error}")
    inserted = topic_store.add_seed_urls(topics_id, selection.rows)
    all_rows = topic_store.seed_rows(topics_id)
    context.log.info(f"{topic.name}: {len(selection.rows)} seeds selected, {inserted} new")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(all_rows),
            "seeds_selected": len(selection.rows),
            "seeds_new": inserted,
            "archive_stories_scanned": selection.scanned,
            "seeds_per_month": counts_markdown(dict(selection.per_month), "month / file", "seeds"),
            "bad_seed_rows": len(selection.csv_errors),
            "preview": table(all_rows, ["url", "source", "stories_id", "publish_date", "title"]),
            "query": dg.MetadataValue.text(topic.query),
        }
    )
