"""Asset checks of every stage whose output can be wrong in a way a data engineer should see.

Each check runs real queries against the topic store (and reads the files a stage wrote) through
:mod:`topicmap.store.integrity`, and says in its metadata what it looked at and what it found (how many, the first
of them as a table). A check runs after its asset in every run that materializes it (it is part of the asset's
jobs); in a run of one topic it looks at that topic, executed on its own (the asset page's "Execute checks") at
every topic. None blocks anything downstream: severity ERROR for data that is wrong or lost, WARN for data that
is still read right but should be cleaned up (a chain of merges, a stale clustering).

The checks are one table (``STORE_CHECKS``): each row names the asset, the finding it reads and how its result
reads; ``store_asset_check`` makes the Dagster check of a row.

Checks on other assets live beside them: click_totals (assets/social.py), snapshots (assets/snapshots.py: the
consistency of a snapshot as it is built, and its files), cc_outlet_stories (assets/commoncrawl.py), cluster_weeks
(assets/clusters.py).
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import dagster as dg

from assets.metadata import table
from topicmap.clusters.names import MIN_STORIES
from topicmap.store.names import StoreError, topicmap_home

if TYPE_CHECKING:
    from topicmap.store.integrity import Finding
    from topicmap.store.topic_store import TopicStore

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


@dataclass(frozen=True)
class CheckInputs:
    """What a check reads: its resources (``store``, and what its row names) and the topics in scope (None:
    every topic)."""

    resources: Any
    topics: list[str] | None

    def store(self) -> "TopicStore":
        return self.resources.store.open()


@dataclass(frozen=True)
class StoreCheck:
    """One row of the table: the asset checked, the finding it reads and how its result reads.

    ``find`` reads the finding; ``columns`` are those of its examples; ``ok`` and ``wrong`` (which takes
    ``{n}``, the number found) describe the result; ``checked`` names the count of what was looked at.
    ``per_topic``: the check looks at the run's topics (every topic when executed on its own). ``severity`` may
    depend on what was found."""

    name: str
    asset: str
    description: str
    find: Callable[[CheckInputs], "Finding"]
    columns: tuple[str, ...]
    ok: str
    wrong: str
    checked: str
    severity: dg.AssetCheckSeverity | Callable[["Finding"], dg.AssetCheckSeverity] = ERROR
    per_topic: bool = False
    resources: frozenset[str] = frozenset({"store"})


# The findings' modules load with the first check (SQLAlchemy, pyarrow, extractors), not with the code location.
def _integrity() -> ModuleType:
    from topicmap.store import integrity

    return integrity


def _drop_files_not_recorded(inputs: CheckInputs) -> "Finding":
    from topicmap.archive.integrity import drop_files_not_recorded

    drops = inputs.resources.drops
    return drop_files_not_recorded(inputs.store(), drops.files(), drops.folder())


def _seed_urls_not_recorded(inputs: CheckInputs) -> "Finding":
    from topicmap.topics.integrity import seed_urls_not_recorded

    seed_files = {
        topic.name: [seed_list.path for seed_list in topic.seed_urls]
        for topic in inputs.resources.topics_file.load().topics
    }
    return seed_urls_not_recorded(inputs.store(), seed_files, inputs.topics)


def _cluster_severity(finding: "Finding") -> dg.AssetCheckSeverity:
    """Stories without a cluster only: the clustering predates them (WARN); anything else is broken (ERROR)."""
    only_stale = all(e["problem"] == "a topic story without a cluster" for e in finding.examples)
    return WARN if only_stale else ERROR


def _timespan_counts_inconsistent(inputs: CheckInputs) -> "Finding":
    from topicmap.snapshots.folder import read_manifest
    from topicmap.snapshots.store import latest_snapshot_ids, snapshot_paths

    topic_store = inputs.store()
    manifests: dict[str, dict | None] = {}
    for topic in latest_snapshot_ids(topic_store):
        if inputs.topics is not None and topic not in inputs.topics:
            continue
        try:
            manifests[topic] = read_manifest(snapshot_paths(topic_store, topic)["folder"])
        except StoreError:
            manifests[topic] = None
    return _integrity().timespan_counts_inconsistent(topic_store, inputs.topics, manifests)


STORE_CHECKS: list[StoreCheck] = [
    # ------------------------------------------------------------------------------------------ archive
    StoreCheck(
        name="no_drop_file_stuck",
        asset="archive_stories",
        description=(
            "Every file in the drops folder is recorded in `archive_files`, loaded or failed with its reason. A "
            "file with no record was neither loaded nor could its failure be recorded: it is read again on every "
            "run."
        ),
        find=_drop_files_not_recorded,
        columns=("file", "bytes"),
        ok="every drop file is recorded as loaded or failed",
        wrong="{n} drop files are neither loaded nor recorded as failed (see the run's log for why)",
        checked="files_checked",
        resources=frozenset({"store", "drops"}),
    ),
    StoreCheck(
        name="no_ccnews_file_stuck",
        asset="ccnews_stories",
        description=(
            "No CC-NEWS file is left `loading` with no progress for an hour: its loader died mid-file. Re-run its "
            "day (completed files are skipped, the cut file resumes after its last committed record)."
        ),
        find=lambda inputs: _integrity().ccnews_files_stuck(inputs.store()),
        columns=("day", "path", "records_done", "last_progress"),
        ok="no CC-NEWS file is stuck loading",
        wrong="{n} CC-NEWS files are stuck loading: re-run their days",
        checked="files_recorded",
    ),
    StoreCheck(
        name="no_outlet_stuck",
        asset="cc_outlet_stories",
        description=(
            "No Common Crawl outlet is left `running` by a worker that stopped renewing its heartbeat for longer "
            "than the lease: the next loader run takes it over and resumes it from its cursor."
        ),
        find=lambda inputs: _integrity().cc_outlets_stuck(
            inputs.store(), inputs.resources.commoncrawl.lease_seconds
        ),
        columns=("domain", "collection", "claimed_by", "last_heartbeat", "next_page"),
        ok="no outlet is left running by a worker that is gone",
        wrong="{n} outlets are left running by a worker that is gone: materialize cc_outlet_stories to resume them",
        checked="outlets_in_queue",
        severity=WARN,
        resources=frozenset({"store", "commoncrawl"}),
    ),
    # ------------------------------------------------------------------------------------------ seeds, spider
    StoreCheck(
        name="every_seed_url_recorded",
        asset="seeds",
        description=(
            "Every seed URL is recorded: each valid URL of the topic's seed CSV files has a `topic_seed_urls` row, "
            "each archive seed's story exists, and each seed the spider imported is one of its URLs "
            "(`topic_fetch_urls`)."
        ),
        find=_seed_urls_not_recorded,
        columns=("topic", "url", "problem"),
        ok="every seed URL is recorded",
        wrong="{n} seed URLs are not recorded as they should be",
        checked="seeds_recorded",
        per_topic=True,
        resources=frozenset({"store", "topics_file"}),
    ),
    StoreCheck(
        name="no_url_left_claimed",
        asset="fetched_links",
        description=(
            "No URL is left claimed after an iteration: a pending URL whose claim expired or whose "
            "iteration is recorded as done was claimed by a worker that neither finished nor released it."
        ),
        find=lambda inputs: _integrity().claimed_urls_left(inputs.store(), inputs.topics, time.time()),
        columns=("topic", "url", "iteration", "state", "claimed_by", "why"),
        ok="no open URL is left claimed",
        wrong="{n} open URLs are left claimed by a worker that is gone",
        checked="open_urls_claimed",
        per_topic=True,
    ),
    # ------------------------------------------------------------------------------------------ dedup
    StoreCheck(
        name="no_medium_points_to_a_duplicate",
        asset="deduped_media",
        description=(
            "No medium's `dup_media_id` points to a duplicate medium (or to itself): the duplicate-media list "
            "should name each final medium directly. Dedup follows such chains, so the topic is still right (WARN)."
        ),
        find=lambda inputs: _integrity().media_pointing_to_duplicates(inputs.store()),
        columns=("media_id", "medium", "dup_media_id", "points_to", "which_is_a_duplicate_of"),
        ok="every duplicate medium points at a final medium",
        wrong="{n} media point at a medium that is itself a duplicate: fix the duplicate-media list",
        checked="duplicate_media",
        severity=WARN,
    ),
    StoreCheck(
        name="no_topic_story_in_a_duplicate_medium",
        asset="deduped_media",
        description=(
            "No topic story is left in a duplicate medium: media dedup merges or moves each into the final one."
        ),
        find=lambda inputs: _integrity().topic_stories_in_duplicate_media(inputs.store(), inputs.topics),
        columns=("topic", "stories_id", "url", "medium", "dup_media_id"),
        ok="no topic story is in a duplicate medium",
        wrong="{n} topic stories are still in a duplicate medium",
        checked="topic_stories",
        per_topic=True,
    ),
    StoreCheck(
        name="no_story_merged_into_a_merged_story",
        asset="deduped_stories",
        description=(
            "No story is recorded as merged into a story that was itself merged later (A into B, then B into C): "
            "`topic_merged_stories_map` should name the final survivor. Snapshots and click totals follow such "
            "chains, so their figures are still right (WARN)."
        ),
        find=lambda inputs: _integrity().stories_merged_into_merged(inputs.store(), inputs.topics),
        columns=("topic", "stories_id", "merged_into", "which_was_merged_into", "reasons"),
        ok="every merge names a final survivor",
        wrong="{n} stories are recorded as merged into a story that was merged away later",
        checked="merges",
        severity=WARN,
        per_topic=True,
    ),
    StoreCheck(
        name="no_merged_story_left_in_the_topic",
        asset="deduped_stories",
        description=(
            "No story recorded as merged away is still in its topic: no `topic_stories` row and no topic link from "
            "or to it (dedup moves them to the survivor)."
        ),
        find=lambda inputs: _integrity().merged_stories_left_in_topic(inputs.store(), inputs.topics),
        columns=("topic", "stories_id", "merged_into", "still_a_topic_story", "topic_links"),
        ok="every merged story has left its topic",
        wrong="{n} merged stories are still in their topic",
        checked="merges",
        per_topic=True,
    ),
    StoreCheck(
        name="near_duplicate_groups_consistent",
        asset="near_duplicates",
        description=(
            "Every near-duplicate group has as many members as its recorded size, its representative among them, "
            "and only stories of the topic (a story merged away since leaves a stale group: re-materialize)."
        ),
        find=lambda inputs: _integrity().near_duplicate_groups_inconsistent(inputs.store(), inputs.topics),
        columns=("topic", "group_stories_id", "members", "problem"),
        ok="every near-duplicate group is consistent",
        wrong="{n} near-duplicate groups are inconsistent",
        checked="groups",
        per_topic=True,
    ),
    # ------------------------------------------------------------------------------------------ clusters, snapshots
    StoreCheck(
        name="every_topic_story_has_a_cluster",
        asset="clusters",
        description=(
            f"Every topic story has a cluster in the topic's one-shot clustering (a topic of {MIN_STORIES}+ "
            "stories has one), and every cluster named is listed. Stories without a cluster mean the clustering "
            "predates the topic's latest stories (WARN: re-materialize clusters); a cluster that is not listed, a "
            "broken file (ERROR)."
        ),
        find=lambda inputs: _integrity().stories_without_cluster(
            inputs.store(), inputs.topics, MIN_STORIES, topicmap_home()
        ),
        columns=("topic", "stories_id", "problem"),
        ok="every topic story has a cluster",
        wrong="{n} topic stories have no (valid) cluster",
        checked="topic_stories_checked",
        severity=_cluster_severity,
        per_topic=True,
    ),
    StoreCheck(
        name="timespan_counts_consistent",
        asset="snapshots",
        description=(
            "The counts recorded in `timespans` for each topic's newest snapshot are consistent: none negative, no "
            "more media than stories or medium links than story links, no timespan above the overall one, the "
            "monthly and the weekly story links adding up to the same number, and every count equal to the "
            "snapshot's manifest."
        ),
        find=_timespan_counts_inconsistent,
        columns=("topic", "snapshots_id", "timespan", "problem"),
        ok="every timespan's counts are consistent",
        wrong="{n} timespan counts are inconsistent",
        checked="timespans_checked",
        per_topic=True,
    ),
]


def store_asset_check(spec: StoreCheck) -> dg.AssetChecksDefinition:
    """The Dagster asset check of one row of the table."""

    @dg.asset_check(
        asset=spec.asset,
        name=spec.name,
        description=spec.description,
        required_resource_keys=set(spec.resources),
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        topics = topics_in_scope(context) if spec.per_topic else None
        finding = spec.find(CheckInputs(context.resources, topics))
        severity = spec.severity(finding) if callable(spec.severity) else spec.severity
        return check_result(finding, spec.columns, spec.ok, spec.wrong, severity, topics, spec.checked)

    return _check


#: every check of this module by name, for the code location's Definitions
CHECKS_BY_NAME: dict[str, dg.AssetChecksDefinition] = {
    spec.name: store_asset_check(spec) for spec in STORE_CHECKS
}
ASSET_CHECKS = list(CHECKS_BY_NAME.values())
