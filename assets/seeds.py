"""A topic's seeds: its query over the archive, month by month, plus its seed URL lists and the URLs shared in its
posts (``posts:`` in topics.yaml; ``topicmap.topics.posts``).

Each materialization records what it read of the archive (metadata ``archive_scan``: the topic's dates then, the
newest archive story read, how many stories), so the next one, requested when the archive grows
(``archive_growth`` sensor) or the declaration changes (``topic_registry``), reads only what is new.
"""

from typing import TYPE_CHECKING

import dagster as dg

from assets.archive import archive_stories
from assets.commoncrawl import cc_outlet_stories, ccnews_stories
from assets.jobs import POOL_ARCHIVE
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import declared_topic, topics_partitions
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource

if TYPE_CHECKING:
    from topicmap.topics.seeding import ArchiveScan

#: the metadata entry of a seeds materialization that records what it read of the archive
ARCHIVE_SCAN_METADATA = "archive_scan"
#: the columns of the ``posts`` metadata table: one row per post source
POST_COLUMNS = (
    "source",
    "files",
    "posts_read",
    "posts_kept",
    "posts_new",
    "out_of_dates",
    "not_matching_query",
    "bad_rows",
    "file_errors",
    "urls_found",
    "urls_refused",
)


def last_seeding(instance: dg.DagsterInstance, topic: str) -> "tuple[bool, ArchiveScan | None]":
    """Whether the topic's seeds were ever materialized, and what the last materialization read of the archive
    (None: never seeded, or by a release that did not record it; the topic's archive is then read whole)."""
    from topicmap.topics.seeding import ArchiveScan

    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("seeds"), asset_partitions=[topic]), limit=1
    ).records
    if not records:
        return False, None
    entry = records[0].asset_materialization.metadata.get(ARCHIVE_SCAN_METADATA)
    return True, ArchiveScan.from_json(entry.value) if entry is not None else None


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
        "(run month by month), plus URLs from the topic's seed CSV files and URLs shared in its post dumps "
        "(`topic_posts`, `topic_post_urls`). Fails if more than max_stories match. "
        "Seeded again, it reads only the archive stories added since and the dates the topic gained (an "
        "open-ended topic gains each day); `archive_scan` records what it read. A `respider` declaration, or "
        "dates that widened, has the links of the stories concerned mined again (`respidered_stories`). A changed "
        "query, dates or seed lists start the topic's next version (`topic_versions`): its stories are judged "
        "again and those no longer matching its query or dated outside its dates leave the version "
        "(`stories_left_version`, `stories_outside_dates`), nothing deleted."
    ),
)
def seeds(
    context: dg.AssetExecutionContext, store: TopicStoreResource, topics_file: TopicsFileResource
) -> dg.MaterializeResult:
    # reads drops: pyarrow, extractors
    from topicmap.spider.rejudge import rejudge_topic
    from topicmap.spider.respider import apply_respider
    from topicmap.topics.seeding import SeedingRequest, TooManySeedsError, select_seeds
    from topicmap.topics.versions import record_version

    topic = declared_topic(topics_file, context.partition_key)
    topic_store = store.open()
    topics_id = topic_store.upsert_topic(topic)
    # new settings (query, dates, seed lists) start the topic's next version
    version, new_version = record_version(topic_store, topics_id, topic)
    context.log.info(f"{topic.name}: {'new ' if new_version else ''}{version.describe()}")
    # a respider declaration, or dates that widened: those stories' links are mined again by the next iteration
    respidered = apply_respider(topic_store, topic)
    context.log.info(respidered.summary())
    _, previous = last_seeding(context.instance, context.partition_key)
    known = {row["url"] for row in topic_store.seed_rows(topics_id)}
    try:
        selection = select_seeds(
            topic_store,
            SeedingRequest(
                topic, previous=previous, topics_id=topics_id, known_urls=known, progress=context.log.info
            ),
        )
    except TooManySeedsError as exc:
        topic_store.set_topic_state(topics_id, "error", str(exc))
        raise dg.Failure(str(exc), allow_retries=False) from exc
    for error in selection.csv_errors:
        context.log.warning(f"skipped bad seed URL row: {error}")
    for report in selection.posts:
        for error in report.errors:
            context.log.warning(f"posts of {report.source}: skipped: {error}")
    inserted = topic_store.add_seed_urls(topics_id, selection.rows)
    rejudged = None
    if version.judged_at is None:  # a new version (or one a killed seeding left unjudged): its stories again
        rejudged = rejudge_topic(
            topic_store, version, [row["url"] for row in selection.rows if row.get("assume_match")]
        )
        context.log.info(f"{topic.name}: {rejudged.summary()}")
    all_rows = topic_store.seed_rows(topics_id)
    scan = selection.plan.scan
    context.log.info(
        f"{topic.name}: archive read: {selection.plan.reason} ({selection.scanned} stories through story "
        f"{scan.through_id}); {len(selection.rows)} seeds selected, {inserted} new"
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(all_rows),
            "seeds_selected": len(selection.rows),
            "seeds_new": inserted,
            "archive_stories_scanned": selection.scanned,
            "archive_read": dg.MetadataValue.text(selection.plan.reason),
            ARCHIVE_SCAN_METADATA: dg.MetadataValue.json(scan.to_json()),
            "topic_dates": f"{scan.start_date}..{scan.end_date}"
            + (" (open-ended)" if topic.open_ended else ""),
            "seeds_per_month": counts_markdown(dict(selection.per_month), "month / file", "seeds"),
            "bad_seed_rows": len(selection.csv_errors),
            "respidered_stories": respidered.stories,
            "respider": dg.MetadataValue.text(respidered.summary()),
            **(
                {
                    "posts": table([report.counts() for report in selection.posts], POST_COLUMNS),
                    "posts_read": sum(report.posts_read for report in selection.posts),
                    "post_urls_found": sum(report.urls_found for report in selection.posts),
                    "bad_post_rows": sum(report.bad_rows for report in selection.posts),
                }
                if selection.posts
                else {}
            ),
            "preview": table(all_rows, ["url", "source", "stories_id", "publish_date", "title"]),
            "query": dg.MetadataValue.text(topic.query),
            "topic_version": version.version,
            "topic_version_new": new_version,
            **(
                {
                    "stories_left_version": rejudged.left,
                    "stories_back_in_version": rejudged.back,
                    "stories_outside_dates": rejudged.outside_dates,
                    "rejudged": dg.MetadataValue.text(rejudged.summary()),
                }
                if rejudged is not None
                else {}
            ),
        }
    )
