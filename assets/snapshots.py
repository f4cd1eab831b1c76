"""Snapshots: a topic's cross-media link network per timespan, written once per distinct input and recorded.

The rules live in topicmap.snapshots.compute (counting), topicmap.snapshots.linkmap (GEXF and picture) and
topicmap.snapshots.store (reading the deduplicated topic, keying, the immutable folder, the store rows).
"""

from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from assets.jobs import POOL_ANALYSIS
from assets.metadata import png_markdown, table
from assets.partitions import topics_partitions
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap.snapshots.names import (
    CHECK_DATES,
    CHECK_LINK_COUNTS,
    CHECK_TOPIC_STORIES,
    DEFAULT_PICTURE_PERIODS,
    PERIODS,
)
from topicmap.store.names import StoreError, topicmap_home

if TYPE_CHECKING:
    from topicmap.snapshots.store import BuiltSnapshot

# topicmap.snapshots.store (pandas, pyarrow, matplotlib, networkx) is imported inside the functions that run a
# snapshot: loading the code location does not pay for it.

SNAPSHOTS_GROUP = "snapshots"
SNAPSHOTS_TAGS = {"topicmap/stage": "snapshots"}
TOP_MEDIA = 10

CHECK_DESCRIPTIONS = {
    CHECK_LINK_COUNTS: (
        "Per timespan, the medium link counts sum to the number of story links, every story link joins two "
        "different media, and the timespan's counters match its tables."
    ),
    CHECK_TOPIC_STORIES: "Every story counted or linked in a timespan is a (deduplicated) topic story.",
    CHECK_DATES: "No timespan starts before the topic's start date or ends after its end date.",
}


class SnapshotConfig(dg.Config):
    """Options that change a snapshot's files (so they are part of its key)."""

    count_syndicated_once: bool = Field(
        default=False,
        description=(
            "Count links from the copies of one near-duplicate (syndicated) story to the same story once. "
            "Either way, such repeated links are reported per timespan (syndicated_repeat_link_count)."
        ),
    )
    picture_periods: list[str] = Field(
        default=list(DEFAULT_PICTURE_PERIODS),
        description=(
            f"Periods ({', '.join(PERIODS)}) whose timespans get a rendered PNG link map. Every timespan gets a "
            "GEXF; weekly pictures are off by default (about one second each, 17+ per topic)."
        ),
    )


def _check_results(built: "BuiltSnapshot") -> list[dg.AssetCheckResult]:
    results = []
    for name, problems in built.problems.items():
        results.append(
            dg.AssetCheckResult(
                check_name=name,
                passed=not problems,
                metadata={
                    "timespans_checked": len(built.result.timespans),
                    "problems": dg.MetadataValue.md(
                        "\n".join(f"- {p}" for p in problems[:50]) if problems else "none"
                    ),
                },
            )
        )
    return results


def _metadata(built: "BuiltSnapshot") -> dict[str, object]:
    from topicmap.snapshots.store import timespan_rows

    result = built.result
    overall = next((snap for snap in result.timespans if snap.timespan.period == "overall"), None)
    counts = [
        {
            "timespan": row["key"],
            "period": row["period"],
            "start": row["start_date"],
            "end": row["last_date"],
            "stories": row["story_count"],
            "story links": row["story_link_count"],
            "media": row["medium_count"],
            "medium links": row["medium_link_count"],
            "syndicated repeats": row["syndicated_repeat_link_count"],
        }
        for row in timespan_rows(result)
        if not row["empty"]  # a topic over decades has thousands of empty weeks: counted below instead
    ]
    empty = [snap.timespan for snap in result.timespans if snap.empty]
    top_lines = ["| timespan | top media by media inlinks |", "|---|---|"]
    for snap in result.timespans:
        if snap.empty:
            continue
        top = snap.top_media(3)
        names = ", ".join(
            f"{name} ({inlinks})"
            for name, inlinks in zip(top["name"].tolist(), top["media_inlink_count"].tolist(), strict=True)
        )
        top_lines.append(f"| {snap.timespan.key} | {names or '-'} |")
    metadata: dict[str, object] = {
        "snapshot_id": built.snapshots_id,
        "snapshot_key": dg.MetadataValue.text(built.snapshot_key),
        "snapshot_folder": dg.MetadataValue.path(str(built.folder)),
        "written_now": built.written,
        "iteration": built.inputs.iteration,
        "dagster/row_count": overall.counts.story_count if overall else 0,
        "timespan_counts": table(counts, list(counts[0]) if counts else ["timespan"], limit=len(counts)),
        "top_media_per_timespan": dg.MetadataValue.md("\n".join(top_lines)),
        "dedup_state": dg.MetadataValue.json(built.inputs.dedup_state),
        "input_rows": dg.MetadataValue.json(built.inputs.row_counts()),
        "dropped_links": dg.MetadataValue.json(result.dropped_links),
        "count_syndicated_once": result.count_syndicated_once,
        # Timespans without stories are recorded (store, manifest) but get no files, maps or pictures.
        "timespans_recorded": len(result.timespans),
        "timespans_empty": len(empty),
        "timespans_empty_by_period": dg.MetadataValue.json(
            {
                period: sum(ts.period == period for ts in empty)
                for period in PERIODS
                if any(ts.period == period for ts in empty)
            }
        ),
    }
    if overall is not None:
        top = overall.top_media(TOP_MEDIA).astype(object)
        metadata["top_media"] = table(
            top.where(top.notna(), None).to_dict("records"),
            ["media_id", "name", "media_inlink_count", "inlink_count", "story_count", "facebook_share_count"],
        )
        if not overall.empty:  # an empty timespan has no files
            metadata["link_map_gexf"] = dg.MetadataValue.path(str(built.gexf(overall.timespan.key)))
        picture = built.picture(overall.timespan.key)
        if picture is not None:
            metadata["link_map"] = dg.MetadataValue.path(str(picture))
            preview = png_markdown(picture, f"media link map of {built.inputs.topic_name}")
            if preview is not None:
                metadata["link_map_preview"] = preview
    return metadata


@dg.asset(
    partitions_def=topics_partitions,
    group_name=SNAPSHOTS_GROUP,
    kinds={"python", "parquet"},
    tags=SNAPSHOTS_TAGS,
    pool=POOL_ANALYSIS,
    # by key, so this stage imports no other stage's module (a key not in the code location would show as an
    # external asset rather than fail to load). The same topic's partition of each topic asset; click totals are
    # per publication day, and a topic's snapshot reads the days its stories fall on: every day, as far as the
    # graph can say (the days are the topic's dates, unknown to a partition mapping).
    deps=[
        *(
            dg.AssetDep(key, partition_mapping=dg.IdentityPartitionMapping())
            for key in (
                "relevant_stories",
                "topic_links",
                "deduped_stories",
                "near_duplicates",
                "story_statistics",
            )
        ),
        dg.AssetDep("click_totals", partition_mapping=dg.AllPartitionMapping()),
    ],
    check_specs=[
        dg.AssetCheckSpec(name, asset="snapshots", description=description, blocking=True)
        for name, description in CHECK_DESCRIPTIONS.items()
    ],
    description=(
        "A snapshot of the deduplicated topic: per timespan (overall, monthly, weekly, custom) its cross-media "
        "story links, story and medium link counts and medium links, with each story's Facebook shares and Bit.ly "
        "clicks, as Parquet + Media Cloud style CSV, a GEXF link map and, for overall/monthly/custom timespans, a "
        "PNG picture (the overall one shown on the asset page). Written once per distinct input to "
        "`TOPICMAP_HOME/exports/snapshots/{topic}/{key}/` (never overwritten) and recorded in `snapshots` / "
        "`timespans`."
    ),
)
def snapshots(
    context: dg.AssetExecutionContext,
    config: SnapshotConfig,
    store: TopicStoreResource,
    topics_file: TopicsFileResource,
):
    from topicmap.snapshots.store import SnapshotOptions, build_snapshot

    topic = topics_file.topic(context.partition_key)
    topic_store = store.open()
    topic_store.upsert_topic(topic)  # the snapshot records the declaration as it is now
    try:
        options = SnapshotOptions(
            count_syndicated_once=config.count_syndicated_once, picture_periods=tuple(config.picture_periods)
        )
        built = build_snapshot(topic_store, topic.name, options, home=topicmap_home(), log=context.log.info)
    except (StoreError, ValueError) as exc:
        raise dg.Failure(f"snapshot of {topic.name!r} failed: {exc}", allow_retries=False) from exc
    context.log.info(
        f"snapshot {built.snapshots_id} ({built.snapshot_key[:16]}) "
        f"{'written to' if built.written else 'already complete in'} {built.folder}"
    )
    yield dg.MaterializeResult(metadata=_metadata(built))
    yield from _check_results(built)


@dg.asset_check(
    asset=snapshots,
    description=(
        "The newest snapshot of every topic still matches its manifest: no file missing or changed since it was "
        "written (snapshots are immutable)."
    ),
)
def snapshot_files_intact(store: TopicStoreResource) -> dg.AssetCheckResult:
    from topicmap.snapshots.store import latest_snapshot_ids, snapshot_paths, verify_snapshot_files

    topic_store = store.open()
    home = topicmap_home()
    problems: list[str] = []
    checked = 0
    for topic, snapshots_id in latest_snapshot_ids(topic_store).items():
        try:
            folder = snapshot_paths(topic_store, topic, snapshots_id, home=home)["folder"]
        except StoreError as exc:
            problems.append(str(exc))
            continue
        checked += 1
        problems += verify_snapshot_files(folder)
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "snapshots_checked": checked,
            "problems": dg.MetadataValue.md(
                "\n".join(f"- {p}" for p in problems[:50]) if problems else "none"
            ),
        },
    )
