"""Snapshots: a topic's cross-media link network per timespan, written once per distinct input and recorded.

The rules live in topicmap.snapshots.compute (counting), topicmap.snapshots.linkmap (GEXF and picture) and
topicmap.snapshots.store (reading the deduplicated topic, keying, the immutable folder, the store rows, through
topicmap.snapshots.inputs, .key and .folder).
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from assets.jobs import POOL_ANALYSIS
from assets.metadata import CODE_VERSIONS, MARKDOWN_INLINE_LIMIT, OWNERS, page_picture, table
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
    import pandas as pd

    from topicmap.snapshots.foci import Focus
    from topicmap.snapshots.results import TimespanSnapshot
    from topicmap.snapshots.store import BuiltSnapshot

# topicmap.snapshots' modules (pandas, pyarrow, matplotlib, networkx) are imported inside the functions that run a
# snapshot: loading the code location does not pay for it.

SNAPSHOTS_GROUP = "snapshots"
SNAPSHOTS_TAGS = {"topicmap/stage": "snapshots"}
#: rows of the top media / top stories tables and words shown per timespan in the UI (the files hold 20 / 100)
SHOWN_TOP = 10
SHOWN_WORDS = 25
#: what the asset page shows of the overall timespan of the topic and of each focus, and the labels of the topic's
#: (a focus's are ``focus <focal set>/<focus> <part>``)
SHOWN_PARTS = ("summary", "link_map", "attention", "top_media", "top_stories")
OVERALL_LABELS = ("summary_overall", "link_map_preview", "attention", "top_media", "top_stories")
#: the counts per timespan: header -> column of the timespan rows
COUNTS = {
    "stories": "story_count",
    "story links": "story_link_count",
    "media": "medium_count",
    "medium links": "medium_link_count",
    "posts": "post_count",
}
TIMESPAN_COLUMNS = {
    "timespan": "the timespan's key: its period, and for monthly and weekly ones its first day",
    "stories": "Media Cloud's story_count: the stories published in it, the stories they link to from outside it and "
    "the undated ones",
    "story links": "cross-media story links between its stories",
    "media": "media with a story in it",
    "medium links": "medium-to-medium links (pairs of media linked by a story link)",
    "posts": "posts published in it sharing one of its stories (after the topic's bot_policy)",
    "repeats": "links repeated by the syndicated copies of a story (syndicated_repeat_link_count)",
    "dates": "its first and last day",
    "days": "the days it covers; 'partial': a first or last week or month cut by the topic's dates, fewer days "
    "than a whole one, so its counts are not comparable with a whole one's",
    "top media": "its three media with the most media inlinks (their media inlinks)",
}
FOCUS_COLUMNS = {
    "focus": "<focal set>/<focus>: its folder under foci/",
    "definition": "what selects its stories (kind: the query, or the media tags)",
    "stories": "its stories",
    "story links": "cross-media story links among its stories, over the whole topic's dates",
    "top words": "its first five top words",
}

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


def _text(value: object, width: int = 60, word: int = 14) -> str:
    """Text for a cell of the asset page: one line, at most ``width`` characters and no word over ``word`` ('…'
    where cut: the UI wraps a cell between words only, so one long word would widen the table past the page),
    unknown values as '-'."""
    if value is None or (isinstance(value, float) and value != value) or str(value) in ("<NA>", "NaT", "nan"):
        return "-"
    words = [w if len(w) <= word else w[: word - 1] + "…" for w in str(value).split()]
    text = " ".join(words)
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


#: the statistics both top lists show, as (header, column, what it is)
_STATISTICS = [
    ("media inlinks", "media_inlink_count", "links from stories of other media (the ranking)"),
    ("inlinks", "inlink_count", "cross-media story links in"),
    ("shares", "facebook_share_count", "Facebook shares"),
    ("clicks", "bitly_clicks_30d", "Bit.ly clicks in the 30 days after publication"),
]


def _top_list(
    frame: "pd.DataFrame",
    first: tuple[str, str],
    cells: Callable[[dict], str],
    statistics: list[tuple[str, str, str]],
) -> dg.TableMetadataValue:
    """The rows of a top list (ranked by media inlinks) as a narrow table: one text column ``first`` (header,
    what it is) made by ``cells`` from each record, then the ``statistics``."""
    records = frame[frame["metric"] == "media_inlink_count"].head(SHOWN_TOP).to_dict("records")
    rows = [
        {first[0]: cells(record), **{header: _text(record[column]) for header, column, _ in statistics}}
        for record in records
    ]
    descriptions = {first[0]: first[1], **{header: about for header, _, about in statistics}}
    return table(rows, list(descriptions), limit=len(rows), descriptions=descriptions)


#: why a top list ranked by media inlinks is empty (the UI says so instead of an empty table)
EMPTY_TOP_LIST = (
    "_none ranked_: no {what} of this timespan has a link from a story of another medium, and only values above "
    "zero rank (top_media / top_stories in the snapshot folder hold the other metrics, each only above zero)"
)


def top_media_table(snap: "TimespanSnapshot") -> dg.TableMetadataValue | dg.MarkdownMetadataValue:
    """The timespan's top media by media inlinks: name (id), then their counts; a line saying why when none
    ranks."""
    assert snap.summary is not None
    if not (snap.summary.top_media["metric"] == "media_inlink_count").any():
        return dg.MetadataValue.md(EMPTY_TOP_LIST.format(what="medium"))
    return _top_list(
        snap.summary.top_media,
        ("medium", "the medium's name (media_id)"),
        lambda record: f"{_text(record['name'], 40, 12)} ({record['media_id']})",
        [*_STATISTICS[:2], ("stories", "story_count", "stories of the medium"), *_STATISTICS[2:]],
    )


def top_stories_table(snap: "TimespanSnapshot") -> dg.TableMetadataValue | dg.MarkdownMetadataValue:
    """The timespan's top stories by media inlinks: title, medium and day in one cell, then their counts; a
    line saying why when none ranks."""
    assert snap.summary is not None
    if not (snap.summary.top_stories["metric"] == "media_inlink_count").any():
        return dg.MetadataValue.md(EMPTY_TOP_LIST.format(what="story"))

    def story(record: dict) -> str:
        day = record["publish_day_local"]
        day = day.strftime("%Y-%m-%d") if hasattr(day, "strftime") and day == day else "-"
        return f"{_text(record['title'])} · {_text(record['media_name'], 30)}, {day}"

    return _top_list(
        snap.summary.top_stories,
        ("story", "title · medium, day of publication (its local day)"),
        story,
        _STATISTICS,
    )


def summary_markdown(heading: str, snap: "TimespanSnapshot") -> str:
    """One overall timespan (of the whole topic or a focus) in a few lines: its dates, counts and top words (as
    many as keep it short enough for the UI to show it inline; the files hold 100)."""
    counts, summary = snap.counts, snap.summary
    text = (
        f"### {heading}\n\n{snap.timespan.start_date} to {snap.timespan.last_date}: **{counts.story_count}** "
        f"stories, **{counts.story_link_count}** cross-media story links, **{counts.medium_count}** media, "
        f"**{counts.medium_link_count}** directed medium links"
    )
    if summary is None or snap.empty:
        return f"{text}\n\n_no stories_"
    published = counts.story_count - summary.outside_stories - summary.undated_stories
    text += (
        f" (stories as Media Cloud counts them: {published} published in the timespan, "
        f"{summary.outside_stories} linked from it, {summary.undated_stories} undated)"
    )
    words = summary.top_words.head(SHOWN_WORDS)
    shown = [
        f"{_text(w, 24, 24)} {share:.0%}" for w, share in zip(words["word"], words["share"], strict=True)
    ]
    lead = (
        f"{text}\n\n**Top words** (share of the {summary.words_sampled} stories whose words were counted): "
    )
    while shown:
        line = (
            lead
            + " · ".join(shown)
            + (f" · … {len(words) - len(shown)} more" if len(shown) < len(words) else "")
        )
        if len(line) < MARKDOWN_INLINE_LIMIT:
            return line
        shown.pop()
    return lead + "_none_"


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


def _shown_timespan(
    built: "BuiltSnapshot", instance: dg.DagsterInstance, snap: "TimespanSnapshot", focus: "Focus | None"
) -> dict[str, object]:
    """The overall timespan of the whole topic (``focus`` None) or of a focus as the asset page shows it: a short
    summary, the link map (if drawn) and attention over time as pictures, the top media and stories as tables."""
    from topicmap.snapshots.files import timespan_folder
    from topicmap.snapshots.folder import ATTENTION_NAME, PNG_NAME

    topic = built.inputs.topic_name
    if focus is None:
        heading = whose = f"{topic}: the whole topic"
        labels = dict(zip(SHOWN_PARTS, OVERALL_LABELS, strict=True))
    else:
        whose = f"focus {focus.focal_set} / {focus.name}"
        heading = f"{whose} ({focus.kind}: {_text(focus.describe(), 120, 40)})"
        labels = {part: f"focus {focus.key} {part}" for part in SHOWN_PARTS}
    shown: dict[str, object] = {labels["summary"]: dg.MetadataValue.md(summary_markdown(heading, snap))}
    if snap.empty or snap.summary is None:  # an empty timespan has no files
        return shown
    folder = built.folder / timespan_folder(focus, snap.timespan)
    pictures = {
        "link_map": (folder / PNG_NAME, f"media link map of {topic if focus is None else whose}"),
        "attention": (folder / ATTENTION_NAME, f"stories per day: {heading}"),
    }
    for part, (path, alt) in pictures.items():
        # served as snapshots/<topic>/<the snapshot's folder>/<the picture's path in it>
        served_as = ["snapshots", topic, *path.relative_to(built.folder.parent).parts]
        if path.is_file() and (picture := page_picture(instance, path, served_as, alt)) is not None:
            shown[labels[part]] = picture
    shown[labels["top_media"]] = top_media_table(snap)
    shown[labels["top_stories"]] = top_stories_table(snap)
    return shown


def _metadata(built: "BuiltSnapshot", instance: dg.DagsterInstance) -> dict[str, object]:
    """What the asset page shows of a snapshot, the pictures and top lists first; every value narrow enough for
    the page (tables of few columns, text cells that wrap, no long unbroken word)."""
    from topicmap.snapshots.store import timespan_rows

    result = built.result
    overall = next((snap for snap in result.timespans if snap.timespan.period == "overall"), None)
    metadata: dict[str, object] = {"snapshot_folder": dg.MetadataValue.path(str(built.folder))}
    if overall is not None:
        metadata.update(_shown_timespan(built, instance, overall, None))
    # a topic over decades has thousands of empty weeks: only counted (timespan_totals)
    rows = [row for row in timespan_rows(result) if not row["empty"]]
    counts = [
        {"timespan": row["key"], **{header: row[column] for header, column in COUNTS.items()}} for row in rows
    ]
    top_media = {snap.timespan.key: snap.top_media(3) for snap in result.timespans if not snap.empty}
    timespans = [
        {
            "timespan": row["key"],
            "dates": f"{row['start_date']} to {row['last_date']}",
            "days": f"{row['day_count']}, partial" if row["partial"] else str(row["day_count"]),
            "repeats": row["syndicated_repeat_link_count"],
            "top media": ", ".join(
                f"{_text(name, 40)} ({inlinks})"
                for name, inlinks in top_media[row["key"]][["name", "media_inlink_count"]].itertuples(
                    index=False
                )
            )
            or "-",
        }
        for row in rows
    ]
    empty = [snap.timespan for snap in result.timespans if snap.empty]
    metadata.update(
        {
            "snapshot_id": built.snapshots_id,
            # in groups of 16 hex digits, the first naming the folder: 64 digits in one piece would widen the page
            "snapshot_key": dg.MetadataValue.text(
                " ".join(built.snapshot_key[i : i + 16] for i in range(0, len(built.snapshot_key), 16))
            ),
            "written_now": built.written,
            "iteration": built.inputs.iteration,
            # the topic version (topicmap.topics.versions) whose settings and stories the snapshot was built from
            "topic_version": built.inputs.topic_version if built.inputs.topic_version is not None else 0,
            "dagster/row_count": overall.counts.story_count if overall else 0,
            "timespan_counts": table(
                counts, ["timespan", *COUNTS], limit=len(counts), descriptions=TIMESPAN_COLUMNS
            ),
            "timespans": table(
                timespans,
                ["timespan", "dates", "days", "repeats", "top media"],
                limit=len(timespans),
                descriptions=TIMESPAN_COLUMNS,
            ),
            # Timespans without stories are recorded (store, manifest) but get no files, maps or pictures.
            "timespan_totals": dg.MetadataValue.json(
                {
                    "recorded": len(result.timespans),
                    "empty": len(empty),
                    "empty_by_period": {
                        period: sum(ts.period == period for ts in empty)
                        for period in PERIODS
                        if any(ts.period == period for ts in empty)
                    },
                }
            ),
        }
    )
    metadata.update(_foci_metadata(built, instance))
    metadata.update(
        {
            "dedup_state": dg.MetadataValue.json(built.inputs.dedup_state),
            "input_rows": dg.MetadataValue.json(built.inputs.row_counts()),
            "dropped_links": dg.MetadataValue.json(result.dropped_links),
            # the run config's choices that change the files (count_syndicated_once, picture_periods, ...)
            "options": dg.MetadataValue.json(built.provenance["options"]),
        }
    )
    if overall is not None and not overall.empty:  # an empty timespan has no files
        metadata["link_map_gexf"] = dg.MetadataValue.path(str(built.gexf(overall.timespan.key)))
        picture = built.picture(overall.timespan.key)
        if picture is not None:
            metadata["link_map"] = dg.MetadataValue.path(str(picture))
    return metadata


def _foci_metadata(built: "BuiltSnapshot", instance: dg.DagsterInstance) -> dict[str, object]:
    """A table of the foci, then the overall timespan of each focus as the asset page shows it (labels
    ``focus <focal set>/<focus> <part>``)."""
    metadata: dict[str, object] = {}
    rows = []
    shown: dict[str, object] = {}
    for found in built.result.foci:
        focus = found.focus
        focus_overall = next((s for s in found.timespans if s.timespan.period == "overall"), None)
        words = (
            focus_overall.summary.top_words["word"].head(5) if focus_overall and focus_overall.summary else []
        )
        rows.append(
            {
                "focus": focus.key,
                "definition": f"{focus.kind}: {_text(focus.describe(), 120)}",
                "stories": found.story_count,
                "story links": focus_overall.counts.story_link_count if focus_overall else 0,
                "top words": ", ".join(_text(word) for word in words),
            }
        )
        if focus_overall is not None:
            shown.update(_shown_timespan(built, instance, focus_overall, focus))
    if rows:
        metadata["foci"] = table(rows, list(rows[0]), limit=len(rows), descriptions=FOCUS_COLUMNS)
    metadata.update(shown)
    return metadata


@dg.asset(
    partitions_def=topics_partitions,
    group_name=SNAPSHOTS_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["snapshots"],
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
    yield dg.MaterializeResult(metadata=_metadata(built, context.instance))
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
