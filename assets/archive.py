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
        "Parquet and WARC files (story-indexer archives or generic crawls). Each file is loaded once (recognised by content hash); a bad row is reported with "
        "its line and skipped."
    ),
)
def archive_stories(
    context: dg.AssetExecutionContext, store: TopicStoreResource, drops: ArchiveDropsResource
) -> dg.MaterializeResult:
    # pyarrow, warcio, the HTML extractors and SQLAlchemy load with the run that reads drops, not with the code
    # location
    from sqlalchemy.exc import SQLAlchemyError

    from topicmap.archive.drops import STATE_FAILED, load_drop, printable_name

    topic_store = store.open()
    limits = drops.read_limits()
    loaded, already_loaded, failed, failed_before = [], [], [], []
    created = existing = rows_rejected = 0
    row_errors: list[dict] = []
    for path in drops.files():
        name = printable_name(path.relative_to(drops.folder()))  # a name that is not UTF-8 is shown escaped
        try:
            result = load_drop(
                topic_store,
                path,
                limits=limits,
                retry_failed=drops.retry_failed_files,
                progress=context.log.info,
                folder=drops.folder(),
            )
        except SQLAlchemyError:
            raise  # the store, not the file: fail the run, nothing is recorded against the file
        except Exception as exc:  # a reader bug or an I/O error: this file fails this run alone, unrecorded
            context.log.error(f"{name}: could not be read, will be retried next run: {exc!r}")
            failed.append({"file": name, "reason": f"{type(exc).__name__}: {exc}"})
            continue
        if result.state == "already loaded":
            already_loaded.append(name)
            continue
        if result.state == "failed before":
            failed_before.append({"file": name, "reason": result.reason})
            context.log.warning(f"{name}: failed before and unchanged since, not read: {result.reason}")
            continue
        for error in result.errors:
            context.log.warning(f"skipped bad archive row: {error}")
            row_errors.append({"file": name, "where": error.where, "problem": error.problem})
        rows_rejected += result.rows_rejected
        created += result.created
        existing += result.existing
        if result.state == STATE_FAILED:
            context.log.error(
                f"{name}: failed (kept the {result.stories_read} stories before): {result.reason}"
            )
            failed.append({"file": name, "reason": result.reason})
        else:
            loaded.append(name)
        context.log.info(
            f"{name}: {result.state}; {result.created} new stories, {result.existing} already known, "
            f"{result.rows_rejected} bad rows"
        )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": topic_store.story_count(),
            "files_loaded": len(loaded),
            "files_already_loaded": len(already_loaded),
            "files_failed": len(failed),
            "failed_files": table(failed, ["file", "reason"]),
            "files_failed_before_unchanged": table(failed_before, ["file", "reason"]),
            "stories_added": created,
            "stories_already_known": existing,
            "rows_rejected": rows_rejected,
            "rejected_rows": table(row_errors, ["file", "where", "problem"]),
            "read_limits": dg.MetadataValue.json(
                {
                    "max_payload_bytes": limits.max_payload_bytes,
                    "max_file_bytes": limits.max_file_bytes,
                    "max_row_bytes": limits.max_row_bytes,
                    "max_page_bytes": limits.max_page_bytes,
                }
            ),
            "drops_folder": dg.MetadataValue.path(str(drops.folder())),
        }
    )
