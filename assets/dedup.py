"""Dedup of a spidered topic: duplicate media, duplicate stories, near-duplicates across media."""

from collections import Counter

import dagster as dg

from assets.jobs import POOL_ANALYSIS
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import stored_topic_id, topics_partitions
from resources.dedup import MediaDupsResource
from resources.store import TopicStoreResource

# topicmap.dedup (pandas, numpy) is imported in each asset function: loading the code location does not pay for it.

DEDUP_GROUP = "dedup"
DEDUP_TAGS = {"topicmap/stage": "dedup"}


def _merge_metadata(report, topic_store, topics_id: int) -> dict:  # noqa: ANN001
    from topicmap.dedup.store import merge_counts

    return {
        "merged_now": len(report.merges),
        "merged_by_reason_now": counts_markdown(dict(report.reasons), "reason", "stories"),
        "merged_in_topic_total": counts_markdown(merge_counts(topic_store, topics_id), "reason", "stories"),
        "cross_media_links_before": report.cross_media_links_before,
        "cross_media_links_after": report.cross_media_links_after,
        "examples": table(report.merges, ["source_stories_id", "target_stories_id", "reason"]),
    }


@dg.asset(
    group_name=DEDUP_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["deduped_media"],
    kinds={"python", "sql"},
    tags=DEDUP_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    deps=[dg.AssetDep("relevant_stories", partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "Topic stories in duplicate media (dup_media_id chains followed to their end) merged into a matching "
        "story of the final medium (same URL/guid, or same title and day) or moved there; links and iterations "
        "follow; every merge is kept in topic_merged_stories_map."
    ),
)
def deduped_media(
    context: dg.AssetExecutionContext, store: TopicStoreResource, media_dups: MediaDupsResource
) -> dg.MaterializeResult:
    from topicmap.dedup.rules import MergeCycleError
    from topicmap.dedup.store import (
        declare_duplicate_media,
        merge_duplicate_media,
        read_media_dups_csv,
    )
    from topicmap.store.curated_files import curated_file_digest

    topic_store = store.open()
    topics_id = stored_topic_id(topic_store, context.partition_key)
    declared = 0
    path = media_dups.file()
    # The list's content is part of this asset's data version: a run with another list is another result
    # (sensors/dedup.py re-runs dedup when the list changes).
    dups_digest = curated_file_digest(path)
    if path is not None:
        pairs, problems = read_media_dups_csv(path)
        declared, refused = declare_duplicate_media(topic_store, pairs)
        for problem in [*problems, *refused]:
            context.log.warning(f"duplicate media: {problem}")
    try:
        report = merge_duplicate_media(topic_store, topics_id)
    except MergeCycleError as exc:
        raise dg.Failure(f"duplicate media: {exc}", allow_retries=False) from exc
    context.log.info(f"{len(report.merges)} stories merged, {len(report.moved)} moved to their final medium")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(f"media-dups:{(dups_digest or 'none')[:16]}:merged:{len(report.merges)}"),
        metadata={
            "media_dups_sha256": dups_digest or "no list",
            "dup_media_declared_now": declared,
            "stories_moved_now": len(report.moved),
            "moved_examples": table(report.moved, ["stories_id", "from_media_id", "to_media_id"]),
            **_merge_metadata(report, topic_store, topics_id),
        },
    )


@dg.asset(
    group_name=DEDUP_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["deduped_stories"],
    kinds={"python", "sql"},
    tags=DEDUP_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    deps=[dg.AssetDep(deduped_media, partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "Stories of one medium that are one story (same normalized title on the same day, or the same lossy "
        "URL) merged into a survivor (most text, then earliest, then lowest id); links re-pointed."
    ),
)
def deduped_stories(context: dg.AssetExecutionContext, store: TopicStoreResource) -> dg.MaterializeResult:
    from topicmap.dedup.store import merge_duplicate_stories

    topic_store = store.open()
    topics_id = stored_topic_id(topic_store, context.partition_key)
    report = merge_duplicate_stories(topic_store, topics_id)
    context.log.info(f"{len(report.merges)} duplicate stories merged: {dict(report.reasons)}")
    return dg.MaterializeResult(metadata=_merge_metadata(report, topic_store, topics_id))


@dg.asset(
    group_name=DEDUP_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["near_duplicates"],
    kinds={"python", "sql"},
    tags=DEDUP_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    deps=[dg.AssetDep(deduped_stories, partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "Near-duplicate groups across media (syndicated copies): 64-bit simhash fingerprints (stored per story), "
        "pairs found with block-permutation tables and verified by shingle overlap, grouped as connected "
        "components with a representative (the earliest copy), a size and the media involved."
    ),
)
def near_duplicates(context: dg.AssetExecutionContext, store: TopicStoreResource) -> dg.MaterializeResult:
    from topicmap.dedup.store import find_near_duplicates

    topic_store = store.open()
    topics_id = stored_topic_id(topic_store, context.partition_key)
    report = find_near_duplicates(topic_store, topics_id)
    sizes = {str(k): v for k, v in sorted(Counter(g["size"] for g in report.groups).items())}
    context.log.info(f"{len(report.groups)} near-duplicate groups among {report.stories} stories")
    preview = [{**g, "media": ", ".join(g["media"])} for g in report.groups]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": sum(g["size"] for g in report.groups),
            "stories": report.stories,
            "fingerprints_computed_now": report.fingerprinted,
            "pairs": report.pairs,
            "groups": len(report.groups),
            "group_sizes": counts_markdown(sizes, "group size", "groups"),
            "largest_groups": table(preview, ["representative", "size", "media", "title"]),
        }
    )
