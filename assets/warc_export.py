"""A topic's stories archived as WARC files in Media Cloud's story-indexer layout."""

from datetime import UTC, datetime

import dagster as dg

from assets.jobs import POOL_ARCHIVE
from assets.metadata import CODE_VERSIONS, OWNERS
from assets.partitions import stored_topic_id, topics_partitions
from resources.store import TopicStoreResource
from topicmap.store.names import topicmap_home


@dg.asset(
    # an export of a finished topic, read by whoever studies it (beside the snapshots), not an input of the archive
    group_name="exports",
    owners=OWNERS,
    code_version=CODE_VERSIONS["story_warc_archive"],
    kinds={"python", "warc"},
    tags={"topicmap/stage": "exports"},
    pool=POOL_ARCHIVE,
    partitions_def=topics_partitions,
    # the deduplicated topic: merged-away stories are not exported twice
    deps=[dg.AssetDep("deduped_stories", partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "The topic's deduplicated stories (their stored pages plus story-indexer metadata) written as WARC files "
        "in Media Cloud's story-indexer layout under `TOPICMAP_HOME/exports/warc/{topic}/`, one folder per "
        "export; read back after writing."
    ),
)
def story_warc_archive(context: dg.AssetExecutionContext, store: TopicStoreResource) -> dg.MaterializeResult:
    # warcio: load when used
    from topicmap.archive.warc_export import STORIES_PER_FILE, count_archived_stories, export_topic_warc

    now = datetime.now(UTC).replace(microsecond=0)
    folder = topicmap_home() / "exports" / "warc" / context.partition_key / now.strftime("%Y%m%dT%H%M%SZ")
    topic_store = store.open()
    stored_topic_id(topic_store, context.partition_key)  # an undeclared topic fails here, at once
    export = export_topic_warc(topic_store, context.partition_key, folder, now=now)
    read_back = count_archived_stories(export.files)
    if read_back != export.stories_written:
        raise dg.Failure(
            allow_retries=False,
            description=f"WARC export wrote {export.stories_written} stories but {read_back} read back from {folder}",
        )
    context.log.info(f"{export.stories_written} stories in {len(export.files)} WARC file(s) under {folder}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": export.stories_written,
            "stories_without_page": export.stories_without_page,
            "files": dg.MetadataValue.json([str(p) for p in export.files]),
            "folder": dg.MetadataValue.path(str(folder)),
            "bytes": sum(p.stat().st_size for p in export.files),
            "stories_per_file": STORIES_PER_FILE,
            "metadata_layout": dg.MetadataValue.md(
                "story-indexer's metadata documentation: `rss_entry` (link, title, domain, pub_date, fetch_date, source_url, "
                "source_feed_id, source_source_id, via), `http_metadata` (response_code, fetch_timestamp, "
                "final_url, encoding), `content_metadata` (url, normalized_url, canonical_domain, "
                "publication_date, language, article_title, text_content, parsed_date); null where unknown"
            ),
        }
    )
