"""The story archive: CSV, Parquet and WARC drops loaded into the topic store."""

import dagster as dg

from assets.jobs import POOL_ARCHIVE
from assets.metadata import CODE_VERSIONS, OWNERS, table
from resources.archive import ArchiveDropsResource
from resources.store import TopicStoreResource


@dg.asset(
    group_name="archive",
    owners=OWNERS,
    code_version=CODE_VERSIONS["archive_stories"],
    kinds={"python", "sql"},
    tags={"topicmap/stage": "archive"},
    pool=POOL_ARCHIVE,
    description=(
        "Stories (url, title, text, publish_date, medium) loaded from the archive drops folder: CSV, "
        "Parquet and WARC files (story-indexer archives or generic crawls). Each file is loaded once (recognised "
        "by content hash; a file holding the same bytes as another is reported under its own name, not read "
        "again); a bad row is reported with its line and skipped."
    ),
)
def archive_stories(
    context: dg.AssetExecutionContext, store: TopicStoreResource, drops: ArchiveDropsResource
) -> dg.MaterializeResult:
    # pyarrow, warcio, the HTML extractors and SQLAlchemy load with the run that reads drops, not with the code
    # location
    from topicmap.archive.drops import load_drops

    topic_store = store.open()
    limits = drops.read_limits()
    report = load_drops(
        topic_store,
        drops.files(),
        drops.folder(),
        log=context.log,
        limits=limits,
        retry_failed=drops.retry_failed_files,
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": topic_store.story_count(),
            "files_loaded": len(report.loaded),
            "files_already_loaded": len(report.already_loaded),
            "files_failed": len(report.failed),
            "failed_files": table(report.failed, ["file", "reason"]),
            "files_failed_before_unchanged": table(report.failed_before, ["file", "reason"]),
            # each file has its row: one holding the bytes of a file recorded before names it, and is not read
            "files_same_bytes": table(report.same_bytes, ["file", "same_as", "outcome"]),
            "stories_added": report.created,
            "stories_already_known": report.existing,
            "rows_rejected": report.rows_rejected,
            "rejected_rows": table(report.row_errors, ["file", "where", "problem"]),
            "read_limits": dg.MetadataValue.json(
                {
                    "max_payload_bytes": limits.max_payload_bytes,
                    "max_file_bytes": limits.max_file_bytes,
                    "max_row_bytes": limits.max_row_bytes,
                    "max_page_bytes": limits.max_page_bytes,
                    "max_expansion": limits.max_expansion,
                }
            ),
            "drops_folder": dg.MetadataValue.path(str(drops.folder())),
        }
    )
