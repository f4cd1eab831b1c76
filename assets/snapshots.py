"""Snapshots: a topic's cross-media link network per timespan, written once per distinct input and recorded.

The rules live in topicmap.snapshots.compute (counting), topicmap.snapshots.linkmap (GEXF and picture) and
topicmap.snapshots.store (reading the deduplicated topic, keying, the immutable folder, the store rows, through
topicmap.snapshots.inputs, .key and .folder).
"""

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from assets.freshness import SNAPSHOTS_FRESHNESS
from assets.jobs import POOL_ANALYSIS
from assets.metadata import CODE_VERSIONS, OWNERS, png_markdown, table
from assets.partitions import declared_topic, topics_partitions
from resources.media_tags import link_map_tag_set_default
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap import settings
from topicmap.snapshots.names import (
    CHECK_DATES,
    CHECK_LINK_COUNTS,
    CHECK_TOPIC_STORIES,
    DEFAULT_PICTURE_PERIODS,
    PERIODS,
)
from topicmap.store.names import StoreError, topicmap_home

if TYPE_CHECKING:
    from topicmap.snapshots.foci import Focus
    from topicmap.snapshots.results import TimespanSnapshot
    from topicmap.snapshots.store import BuiltSnapshot

# topicmap.snapshots' modules (pandas, pyarrow, matplotlib, networkx) are imported inside the functions that run a
# snapshot: loading the code location does not pay for it.

SNAPSHOTS_GROUP = "snapshots"
SNAPSHOTS_TAGS = {"topicmap/stage": "snapshots"}
TOP_MEDIA = 10
#: rows of the top media / top stories tables and words shown per section in the UI (the files hold 20 / 100)
SHOWN_TOP = 10
SHOWN_WORDS = 25

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
    word_sample: int = Field(
        default=1000,
        ge=0,
        description=(
            "Stories per timespan whose words are counted for the top words (Media Cloud's default sample: "
            "1000; always the same stories for the same inputs). 0 counts every story."
        ),
    )
    focus_pictures: bool = Field(
        default=False,
        description=(
            "Draw each focus's link maps too (for its timespans of picture_periods; about a second each). Every "
            "focus timespan gets its GEXF and each focus its attention chart either way."
        ),
    )
    link_map_tag_set: str = Field(
        default=link_map_tag_set_default(),
        description=(
            "A media tag set (e.g. media_type) whose tags colour the media of the link maps instead of their "
            f"link communities; empty: communities. Default: {settings.LINK_MAP_TAG_SET.name}."
        ),
    )


def _cell(value: object, width: int = 70) -> str:
    """A markdown table cell: one line, pipes escaped, long text shortened, unknown values as '-'."""
    if value is None or (isinstance(value, float) and value != value) or str(value) in ("<NA>", "NaT", "nan"):
        return "-"
    text = " ".join(str(value).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def _top_table(rows: "object", columns: list[tuple[str, str]]) -> str:
    """Rows (a DataFrame) as a markdown table of ``(header, column)`` pairs, numbered."""
    text_columns = {"name", "title", "media_name", "publish_day_local"}
    aligned = "".join("---|" if c in text_columns else "---:|" for _, c in columns)  # numbers to the right
    lines = ["| # | " + " | ".join(h for h, _ in columns) + " |", "|---:|" + aligned]
    for rank, record in enumerate(rows.to_dict("records"), start=1):  # type: ignore[attr-defined]
        lines.append(f"| {rank} | " + " | ".join(_cell(record[c]) for _, c in columns) + " |")
    return "\n".join(lines) if len(lines) > 2 else "_none_"


def summary_markdown(heading: str, snap: "TimespanSnapshot", chart: "Path | None") -> str:
    """One overall timespan (of the whole topic or a focus) as a data engineer reads it in the UI: its counts,
    top media and stories by media inlinks, top words, and its attention over time."""
    counts, summary = snap.counts, snap.summary
    lines = [
        f"### {heading}",
        f"{snap.timespan.start_date} to {snap.timespan.last_date}: **{counts.story_count}** stories, "
        f"**{counts.story_link_count}** cross-media story links, **{counts.medium_count}** media, "
        f"**{counts.medium_link_count}** medium links",
    ]
    if summary is None or snap.empty:
        return "\n\n".join([*lines, "_no stories_"])
    media = summary.top_media[summary.top_media["metric"] == "media_inlink_count"].head(SHOWN_TOP)
    stories = summary.top_stories[summary.top_stories["metric"] == "media_inlink_count"].head(SHOWN_TOP)
    stories = stories.assign(publish_day_local=stories["publish_day_local"].dt.strftime("%Y-%m-%d"))
    stats = [("Facebook shares", "facebook_share_count"), ("Bit.ly clicks (30 d)", "bitly_clicks_30d")]
    words = summary.top_words.head(SHOWN_WORDS)
    lines += [
        "**Top media** by media inlinks",
        _top_table(
            media,
            [
                ("medium", "name"),
                ("media inlinks", "media_inlink_count"),
                ("inlinks", "inlink_count"),
                ("stories", "story_count"),
                *stats,
            ],
        ),
        "**Top stories** by media inlinks",
        _top_table(
            stories,
            [
                ("story", "title"),
                ("medium", "media_name"),
                ("day", "publish_day_local"),
                ("media inlinks", "media_inlink_count"),
                ("inlinks", "inlink_count"),
                *stats,
            ],
        ),
        f"**Top words** (share of the {summary.words_sampled} stories whose words were counted): "
        + (
            " · ".join(f"{w} {share:.0%}" for w, share in zip(words["word"], words["share"], strict=True))
            or "_none_"
        ),
    ]
    if chart is not None and (picture := png_markdown(chart, f"stories per day: {heading}")) is not None:
        lines.append(picture.value)
    return "\n\n".join(lines)


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
    metadata.update(_summaries_metadata(built))
    return metadata


def _summaries_metadata(built: "BuiltSnapshot") -> dict[str, object]:
    """The overall timespan of the whole topic and of each focus, as markdown sections (``summary_overall``,
    ``summary_focus_<focal set>_<focus>``), and a table of the foci."""
    from topicmap.snapshots.files import timespan_folder
    from topicmap.snapshots.folder import ATTENTION_NAME

    def chart(focus: "Focus | None", snap: "TimespanSnapshot") -> Path | None:
        path = built.folder / timespan_folder(focus, snap.timespan) / ATTENTION_NAME
        return path if not snap.empty and path.is_file() else None

    result = built.result
    metadata: dict[str, object] = {}
    overall = next((snap for snap in result.timespans if snap.timespan.period == "overall"), None)
    if overall is not None:
        heading = f"{built.inputs.topic_name}: the whole topic"
        metadata["summary_overall"] = dg.MetadataValue.md(
            summary_markdown(heading, overall, chart(None, overall))
        )
    rows = []
    for found in result.foci:
        focus = found.focus
        focus_overall = next((s for s in found.timespans if s.timespan.period == "overall"), None)
        words = (
            focus_overall.summary.top_words["word"].head(5).tolist()
            if focus_overall and focus_overall.summary
            else []
        )
        rows.append(
            {
                "focus": focus.key,
                "kind": focus.kind,
                "definition": focus.describe(),
                "stories": found.story_count,
                "story links (overall)": focus_overall.counts.story_link_count if focus_overall else 0,
                "top words": ", ".join(words),
            }
        )
        if focus_overall is not None:
            heading = f"focus {focus.focal_set} / {focus.name} ({focus.kind}: {_cell(focus.describe(), 120)})"
            metadata[f"summary_focus_{focus.key.replace('/', '_').replace('-', '_')}"] = dg.MetadataValue.md(
                summary_markdown(heading, focus_overall, chart(focus, focus_overall))
            )
    if rows:
        metadata["foci"] = table(rows, list(rows[0]), limit=len(rows))
    return metadata


@dg.asset(
    partitions_def=topics_partitions,
    group_name=SNAPSHOTS_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["snapshots"],
    freshness_policy=SNAPSHOTS_FRESHNESS,
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
                "media_tags",
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
        "PNG picture (the overall one shown on the asset page). Every timespan again for each focus (subtopic) "
        "declared with the topic. Per timespan: top words, stories per day, top 20 media and stories by each "
        "metric; the overall timespan of the topic and of each focus is summed up on the asset page with its "
        "attention over time. Written once per distinct input to "
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
    from topicmap.snapshots.foci import topic_foci
    from topicmap.snapshots.key import SnapshotOptions
    from topicmap.snapshots.store import build_snapshot

    topic = declared_topic(topics_file, context.partition_key)
    topic_store = store.open()
    topic_store.upsert_topic(topic)  # the snapshot records the declaration as it is now
    try:
        options = SnapshotOptions(
            count_syndicated_once=config.count_syndicated_once,
            picture_periods=tuple(config.picture_periods),
            word_sample=config.word_sample,
            link_map_tag_set=config.link_map_tag_set or None,
            focus_pictures=config.focus_pictures,
        )
        built = build_snapshot(
            topic_store,
            topic.name,
            options,
            home=topicmap_home(),
            log=context.log.info,
            foci=topic_foci(topic),
        )
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
    from topicmap.snapshots.folder import verify_snapshot_files
    from topicmap.snapshots.store import latest_snapshot_ids, snapshot_paths

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
