"""Media tags: the curated tags file (TOPICMAP_MEDIA_TAGS_FILE) loaded into tag_sets / tags / media_tags_map.

The format and the rules are in topicmap/store/media_tags.py. Snapshots read the tags (media-tag foci, link maps
coloured by a tag set), so they depend on this asset; the `media_tags_changed` sensor re-runs both when the file
changes.
"""

import hashlib
import json

import dagster as dg

from assets.jobs import POOL_ANALYSIS
from assets.metadata import CODE_VERSIONS, OWNERS, table
from assets.partitions import stored_topic_id, topics_partitions
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from topicmap import settings
from topicmap.store.names import StoreError

# topicmap.store.media_tags is imported in the asset function: loading the code location does not pay for it.

MEDIA_TAGS_GROUP = "dedup"
MEDIA_TAGS_TAGS = {"topicmap/stage": "dedup"}
#: bad rows and unknown media listed in the metadata (all are counted)
LISTED = 50


def _listing(lines: list[str]) -> dg.MarkdownMetadataValue:
    shown = [f"- {line}" for line in lines[:LISTED]]
    if len(lines) > LISTED:
        shown.append(f"- ... and {len(lines) - LISTED} more")
    return dg.MetadataValue.md("\n".join(shown) if shown else "none")


@dg.asset(
    group_name=MEDIA_TAGS_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["media_tags"],
    kinds={"python", "sql"},
    tags=MEDIA_TAGS_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    # by key: a tag on a duplicate medium counts for its final medium, so the duplicate media come first
    deps=[dg.AssetDep("deduped_media", partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "Media tags (media_type, partisanship, country, ...) from the curated CSV `medium_url,tag_set,tag` "
        f"named by {settings.MEDIA_TAGS_FILE.name}, loaded into tag_sets / tags / media_tags_map (the file is the source of "
        "truth; bad rows are reported with their line numbers and skipped). A tag on a duplicate medium counts for "
        "its final medium. Shows how the tags cover the topic's media; snapshots use them for media-tag foci and "
        "to colour link maps."
    ),
)
def media_tags(
    context: dg.AssetExecutionContext, store: TopicStoreResource, media_tags_file: MediaTagsResource
) -> dg.MaterializeResult:
    from topicmap.store.curated_files import curated_file_digest
    from topicmap.store.media_tags import (
        load_media_tags,
        read_media_tags_csv,
        topic_tag_coverage,
    )

    topic_store = store.open()
    topics_id = stored_topic_id(topic_store, context.partition_key)
    path = media_tags_file.file()
    metadata: dict[str, object] = {
        "tags_file": dg.MetadataValue.path(str(path)) if path else "not configured"
    }
    if path is None:
        # No file is not an empty file: the stored tags stay (a lost setting must not wipe a curation).
        context.log.info(
            f"{settings.MEDIA_TAGS_FILE.name} is not set: no tags loaded, the stored tags are kept"
        )
    else:
        if not path.is_file():
            raise dg.Failure(
                f"media tags file {path} ({settings.MEDIA_TAGS_FILE.name}) does not exist",
                allow_retries=False,
            )
        try:
            found = read_media_tags_csv(path)
        except StoreError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        for problem in found.problems[:LISTED]:
            context.log.warning(f"media tags: {problem}")
        if found.problems and not found.rows:
            # a broken header (or a file of bad rows) would otherwise remove every stored tag
            raise dg.Failure(
                f"media tags file {path}: no usable row, nothing loaded: {found.problems[0]}",
                allow_retries=False,
            )
        loaded = load_media_tags(topic_store, found.rows)
        if loaded.unknown_media:
            context.log.info(
                f"media tags: {len(loaded.unknown_media)} medium URL(s) name no medium of the store yet "
                f"(e.g. {loaded.unknown_media[0]}); their tags apply once a story of theirs is stored"
            )
        metadata.update(
            {
                "media_tags_sha256": curated_file_digest(path) or "",
                "rows_loaded": len(found.rows),
                "bad_rows": len(found.problems),
                "bad_row_lines": _listing(found.problems),
                "media_tagged": loaded.media_tagged,
                "tags_by_set": dg.MetadataValue.json(loaded.tags_by_set),
                "map_rows_added_now": loaded.added,
                "map_rows_removed_now": loaded.removed,
                "unknown_media": len(loaded.unknown_media),
                "unknown_media_urls": _listing(loaded.unknown_media),
            }
        )
    try:
        coverage = topic_tag_coverage(topic_store, topics_id)
    except StoreError as exc:  # a duplicate-media cycle
        raise dg.Failure(f"media tags: {exc}", allow_retries=False) from exc
    # The tags of this topic's media are what downstream snapshots read: their hash is this asset's data version,
    # so a tags change elsewhere leaves this topic's snapshot fresh, and one here marks it stale.
    topic_tags = json.dumps(coverage.by_tag, sort_keys=True).encode("utf-8")
    metadata.update(
        {
            "dagster/row_count": sum(int(row["media"]) for row in coverage.by_tag),  # type: ignore[call-overload]
            "topic_media": coverage.media,
            "topic_media_untagged_by_set": dg.MetadataValue.json(coverage.untagged_media),
            "topic_tags": table(coverage.by_tag, ["tag_set", "tag", "media", "stories"], limit=100),
        }
    )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(f"media-tags:{hashlib.sha256(topic_tags).hexdigest()[:16]}"),
        metadata=metadata,
    )
