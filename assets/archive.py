"""The story archive: CSV, Parquet and WARC drops loaded into the topic store."""

import dagster as dg

from assets.jobs import POOL_ARCHIVE
from assets.metadata import table
from resources.archive import ArchiveDropsResource
from resources.store import TopicStoreResource


@dg.asset(
    group_name="archive",
    kinds={"python", "sql"},
    tags={"topicmap/stage": "archive"},
    pool=POOL_ARCHIVE,
    description=(
        "Stories (url, title, text, publish_date, medium) loaded from the archive drops folder: CSV, "
        "Parquet and WARC files (story-indexer archives or generic crawls). Each file is loaded once (recognised by content hash); a bad row is reported with "
        "its line and skipped."
    ),
)
def archive_stories(
    context: dg.AssetExecutionContext, store: TopicStoreResource, drops: ArchiveDropsResource
) -> dg.MaterializeResult:
    # pyarrow, warcio and the HTML extractors load with the run that reads drops, not with the code location
    from topicmap.archive.drops import ArchiveFileError, file_sha256, parse_drop

    topic_store = store.open()
    files = drops.files()
    loaded_files, skipped_files, created, existing = [], [], 0, 0
    row_errors: list[dict] = []
    file_errors: list[str] = []
    for path in files:
        sha = file_sha256(path)
        if topic_store.archive_file_loaded(sha):
            skipped_files.append(path.name)
            continue
        try:
            drop = parse_drop(path)
        except ArchiveFileError as exc:
            context.log.error(str(exc))
            file_errors.append(str(exc))
            continue
        for error in drop.errors:
            context.log.warning(f"skipped bad archive row: {error}")
            row_errors.append({"file": path.name, "line": error.line, "problem": error.problem})
        result = topic_store.add_stories(drop.stories, source=f"archive:{path.name}")
        topic_store.record_archive_file(str(path), sha, len(drop.stories), len(drop.errors))
        created += result.created
        existing += result.existing
        loaded_files.append(path.name)
        context.log.info(
            f"{path.name}: {result.created} new stories, {result.existing} already known, {len(drop.errors)} bad rows"
        )
    total = topic_store.story_count()
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": total,
            "files_loaded": len(loaded_files),
            "files_already_loaded": len(skipped_files),
            "files_rejected": dg.MetadataValue.json(file_errors),
            "stories_added": created,
            "stories_already_known": existing,
            "rows_rejected": len(row_errors),
            "rejected_rows": table(row_errors, ["file", "line", "problem"]),
            "drops_folder": dg.MetadataValue.path(str(drops.folder())),
        }
    )
