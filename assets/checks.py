"""Asset checks of every stage whose output can be wrong in a way a data engineer should see.

Each check runs real queries against the topic store (and reads the files a stage wrote) through
:mod:`topicmap.store.integrity`, and says in its metadata what it looked at and what it found (how many, the first
of them as a table). A check runs after its asset in every run that materializes it (it is part of the asset's
jobs); in a run of one topic it looks at that topic, executed on its own (the asset page's "Execute checks") at
every topic. None blocks anything downstream: severity ERROR for data that is wrong or lost, WARN for data that
is still read right but should be cleaned up (a chain of merges, a stale clustering).

Checks on other assets live beside them: click_totals (assets/social.py), snapshots (assets/snapshots.py: the
consistency of a snapshot as it is built, and its files), cc_outlet_stories (assets/commoncrawl.py), cluster_weeks
(assets/clusters.py).
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from assets.metadata import table
from resources.archive import ArchiveDropsResource
from resources.commoncrawl import CommonCrawlResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap.clusters.names import MIN_STORIES
from topicmap.store.names import StoreError, topicmap_home

if TYPE_CHECKING:
    from topicmap.store.integrity import Finding

ERROR, WARN = dg.AssetCheckSeverity.ERROR, dg.AssetCheckSeverity.WARN


def topics_in_scope(context: dg.AssetCheckExecutionContext) -> list[str] | None:
    """The topics of the run's partition (a topic-partitioned run), or None (every topic) for a check run alone."""
    run = context.op_execution_context
    if run.has_partition_key_range:
        return [str(key) for key in run.partition_keys]
    if run.has_partition_key:
        return [str(run.partition_key)]
    return None


def check_result(
    finding: "Finding",
    columns: Sequence[str],
    ok: str,
    wrong: str,
    severity: dg.AssetCheckSeverity = ERROR,
    topics: Sequence[str] | None = None,
    checked: str = "rows_checked",
) -> dg.AssetCheckResult:
    """A check result from a finding: passed when it found nothing; ``wrong`` takes ``{n}``, the number found."""
    from topicmap.store.integrity import MAX_EXAMPLES

    metadata: dict[str, object] = {
        "problems_found": finding.problems,
        checked: finding.checked,
        "topics": "every topic" if topics is None else ", ".join(topics),
        "found": table(finding.examples, list(columns), MAX_EXAMPLES),
    }
    if finding.notes:
        metadata["notes"] = dg.MetadataValue.md("\n".join(f"- {note}" for note in finding.notes))
    return dg.AssetCheckResult(
        passed=finding.ok,
        severity=severity,
        description=ok if finding.ok else wrong.format(n=finding.problems),
        metadata=metadata,
    )


# ---------------------------------------------------------------------------------------------- archive
@dg.asset_check(
    asset="archive_stories",
    description=(
        "Every file in the drops folder is recorded in `archive_files`, loaded or failed with its reason. A file "
        "with no record was neither loaded nor could its failure be recorded: it is read again on every run."
    ),
)
def no_drop_file_stuck(store: TopicStoreResource, drops: ArchiveDropsResource) -> dg.AssetCheckResult:
    from topicmap.archive.integrity import drop_files_not_recorded  # pyarrow, extractors

    finding = drop_files_not_recorded(store.open(), drops.files(), drops.folder())
    return check_result(
        finding,
        ["file", "bytes"],
        "every drop file is recorded as loaded or failed",
        "{n} drop files are neither loaded nor recorded as failed (see the run's log for why)",
        checked="files_checked",
    )


@dg.asset_check(
    asset="ccnews_stories",
    description=(
        "No CC-NEWS file is left `loading` with no progress for an hour: its loader died mid-file. Re-run its day "
        "(completed files are skipped, the cut file resumes after its last committed record)."
    ),
)
def no_ccnews_file_stuck(store: TopicStoreResource) -> dg.AssetCheckResult:
    from topicmap.store.integrity import ccnews_files_stuck

    return check_result(
        ccnews_files_stuck(store.open()),
        ["day", "path", "records_done", "last_progress"],
        "no CC-NEWS file is stuck loading",
        "{n} CC-NEWS files are stuck loading: re-run their days",
        checked="files_recorded",
    )


@dg.asset_check(
    asset="cc_outlet_stories",
    description=(
        "No Common Crawl outlet is left `running` by a worker that stopped renewing its heartbeat for longer than "
        "the lease: the next loader run takes it over and resumes it from its cursor."
    ),
)
def no_outlet_stuck(store: TopicStoreResource, commoncrawl: CommonCrawlResource) -> dg.AssetCheckResult:
    from topicmap.store.integrity import cc_outlets_stuck

    return check_result(
        cc_outlets_stuck(store.open(), commoncrawl.lease_seconds),
        ["domain", "collection", "claimed_by", "last_heartbeat", "next_page"],
        "no outlet is left running by a worker that is gone",
        "{n} outlets are left running by a worker that is gone: materialize cc_outlet_stories to resume them",
        severity=WARN,
        checked="outlets_in_queue",
    )


# ---------------------------------------------------------------------------------------------- seeds, spider
@dg.asset_check(
    asset="seeds",
    description=(
        "Every seed URL is recorded: each valid URL of the topic's seed CSV files has a `topic_seed_urls` row, each "
        "archive seed's story exists, and each seed the spider imported is one of its URLs (`topic_fetch_urls`)."
    ),
)
def every_seed_url_recorded(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource, topics_file: TopicsFileResource
) -> dg.AssetCheckResult:
    from topicmap.topics.integrity import seed_urls_not_recorded

    topics = topics_in_scope(context)
    seed_files = {
        topic.name: [seed_list.path for seed_list in topic.seed_urls] for topic in topics_file.load().topics
    }
    return check_result(
        seed_urls_not_recorded(store.open(), seed_files, topics),
        ["topic", "url", "problem"],
        "every seed URL is recorded",
        "{n} seed URLs are not recorded as they should be",
        topics=topics,
        checked="seeds_recorded",
    )


@dg.asset_check(
    asset="fetched_links",
    description=(
        "No URL is left claimed after an iteration: a pending URL whose claim expired or whose "
        "iteration is recorded as done was claimed by a worker that neither finished nor released it."
    ),
)
def no_url_left_claimed(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    import time

    from topicmap.store.integrity import claimed_urls_left

    topics = topics_in_scope(context)
    return check_result(
        claimed_urls_left(store.open(), topics, time.time()),
        ["topic", "url", "iteration", "state", "claimed_by", "why"],
        "no open URL is left claimed",
        "{n} open URLs are left claimed by a worker that is gone",
        topics=topics,
        checked="open_urls_claimed",
    )


# ---------------------------------------------------------------------------------------------- dedup
@dg.asset_check(
    asset="deduped_media",
    description=(
        "No medium's `dup_media_id` points to a duplicate medium (or to itself): the duplicate-media list should "
        "name each final medium directly. Dedup follows such chains, so the topic is still right (WARN)."
    ),
)
def no_medium_points_to_a_duplicate(store: TopicStoreResource) -> dg.AssetCheckResult:
    from topicmap.store.integrity import media_pointing_to_duplicates

    return check_result(
        media_pointing_to_duplicates(store.open()),
        ["media_id", "medium", "dup_media_id", "points_to", "which_is_a_duplicate_of"],
        "every duplicate medium points at a final medium",
        "{n} media point at a medium that is itself a duplicate: fix the duplicate-media list",
        severity=WARN,
        checked="duplicate_media",
    )


@dg.asset_check(
    asset="deduped_media",
    description="No topic story is left in a duplicate medium: media dedup merges or moves each into the final one.",
)
def no_topic_story_in_a_duplicate_medium(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.store.integrity import topic_stories_in_duplicate_media

    topics = topics_in_scope(context)
    return check_result(
        topic_stories_in_duplicate_media(store.open(), topics),
        ["topic", "stories_id", "url", "medium", "dup_media_id"],
        "no topic story is in a duplicate medium",
        "{n} topic stories are still in a duplicate medium",
        topics=topics,
        checked="topic_stories",
    )


@dg.asset_check(
    asset="deduped_stories",
    description=(
        "No story is recorded as merged into a story that was itself merged later (A into B, then B into C): "
        "`topic_merged_stories_map` should name the final survivor. Snapshots and click totals follow such chains, "
        "so their figures are still right (WARN)."
    ),
)
def no_story_merged_into_a_merged_story(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.store.integrity import stories_merged_into_merged

    topics = topics_in_scope(context)
    return check_result(
        stories_merged_into_merged(store.open(), topics),
        ["topic", "stories_id", "merged_into", "which_was_merged_into", "reasons"],
        "every merge names a final survivor",
        "{n} stories are recorded as merged into a story that was merged away later",
        severity=WARN,
        topics=topics,
        checked="merges",
    )


@dg.asset_check(
    asset="deduped_stories",
    description=(
        "No story recorded as merged away is still in its topic: no `topic_stories` row and no topic link from or "
        "to it (dedup moves them to the survivor)."
    ),
)
def no_merged_story_left_in_the_topic(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.store.integrity import merged_stories_left_in_topic

    topics = topics_in_scope(context)
    return check_result(
        merged_stories_left_in_topic(store.open(), topics),
        ["topic", "stories_id", "merged_into", "still_a_topic_story", "topic_links"],
        "every merged story has left its topic",
        "{n} merged stories are still in their topic",
        topics=topics,
        checked="merges",
    )


@dg.asset_check(
    asset="near_duplicates",
    description=(
        "Every near-duplicate group has as many members as its recorded size, its representative among them, and "
        "only stories of the topic (a story merged away since leaves a stale group: re-materialize)."
    ),
)
def near_duplicate_groups_consistent(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.store.integrity import near_duplicate_groups_inconsistent

    topics = topics_in_scope(context)
    return check_result(
        near_duplicate_groups_inconsistent(store.open(), topics),
        ["topic", "group_stories_id", "members", "problem"],
        "every near-duplicate group is consistent",
        "{n} near-duplicate groups are inconsistent",
        topics=topics,
        checked="groups",
    )


# ---------------------------------------------------------------------------------------------- clusters, snapshots
@dg.asset_check(
    asset="clusters",
    description=(
        f"Every topic story has a cluster in the topic's one-shot clustering (a topic of {MIN_STORIES}+ stories "
        "has one), and every cluster named is listed. Stories without a cluster mean the clustering predates the "
        "topic's latest stories (WARN: re-materialize clusters); a cluster that is not listed, a broken file (ERROR)."
    ),
)
def every_topic_story_has_a_cluster(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.store.integrity import stories_without_cluster

    topics = topics_in_scope(context)
    finding = stories_without_cluster(store.open(), topics, MIN_STORIES, topicmap_home())
    only_stale = all(e["problem"] == "a topic story without a cluster" for e in finding.examples)
    return check_result(
        finding,
        ["topic", "stories_id", "problem"],
        "every topic story has a cluster",
        "{n} topic stories have no (valid) cluster",
        severity=WARN if only_stale else ERROR,
        topics=topics,
        checked="topic_stories_checked",
    )


@dg.asset_check(
    asset="snapshots",
    description=(
        "The counts recorded in `timespans` for each topic's newest snapshot are consistent: none negative, no more "
        "media than stories or medium links than story links, no timespan above the overall one, the monthly and "
        "the weekly story links adding up to the same number, and every count equal to the snapshot's manifest."
    ),
)
def timespan_counts_consistent(
    context: dg.AssetCheckExecutionContext, store: TopicStoreResource
) -> dg.AssetCheckResult:
    from topicmap.snapshots.folder import read_manifest
    from topicmap.snapshots.store import latest_snapshot_ids, snapshot_paths
    from topicmap.store.integrity import timespan_counts_inconsistent

    topics = topics_in_scope(context)
    topic_store = store.open()
    manifests: dict[str, dict | None] = {}
    for topic in latest_snapshot_ids(topic_store):
        if topics is not None and topic not in topics:
            continue
        try:
            manifests[topic] = read_manifest(snapshot_paths(topic_store, topic)["folder"])
        except StoreError:
            manifests[topic] = None
    return check_result(
        timespan_counts_inconsistent(topic_store, topics, manifests),
        ["topic", "snapshots_id", "timespan", "problem"],
        "every timespan's counts are consistent",
        "{n} timespan counts are inconsistent",
        topics=topics,
        checked="timespans_checked",
    )


ASSET_CHECKS = [
    no_drop_file_stuck,
    no_ccnews_file_stuck,
    no_outlet_stuck,
    every_seed_url_recorded,
    no_url_left_claimed,
    no_medium_points_to_a_duplicate,
    no_topic_story_in_a_duplicate_medium,
    no_story_merged_into_a_merged_story,
    no_merged_story_left_in_the_topic,
    near_duplicate_groups_consistent,
    every_topic_story_has_a_cluster,
    timespan_counts_consistent,
]
"""Every check of this module, for the code location's Definitions."""
