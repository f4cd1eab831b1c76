"""A snapshot's consistency checks, and how they are sorted into the three blocking asset checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from topicmap.snapshots.files import timespan_folder
from topicmap.snapshots.ids import IdIndex
from topicmap.snapshots.names import CHECK_DATES, CHECK_LINK_COUNTS, CHECK_NAMES, CHECK_TOPIC_STORIES
from topicmap.snapshots.results import TIMESPAN_TABLES, SnapshotResult, StreamedFacts, TimespanSnapshot
from topicmap.snapshots.stream_facts import LinkTally, StoryTally, streamed_facts
from topicmap.snapshots.timespans import ONE_DAY, as_date


def snapshot_problems(result: SnapshotResult, topic_start: Any, topic_end: Any) -> list[str]:
    """Consistency problems of a snapshot (empty when consistent), for the asset checks.

    Checks, per timespan of the whole topic and of each focus (named by its folder, ``foci/<focus>/<key>``):
    the timespan lies within the topic's dates (``topic_end`` inclusive); the medium link counts sum to the
    number of story links and every story link joins two different media; every counted story is a topic story
    (and, in a focus, one of the focus's); the counters match the tables.
    """
    start = as_date(topic_start, "topic start_date")
    end = as_date(topic_end, "topic end_date") + ONE_DAY
    index = IdIndex(result.stories["stories_id"].to_numpy())
    story_media = result.stories["media_id"].to_numpy()
    problems: list[str] = []
    focus_index = {found.focus.key: IdIndex(found.stories_id) for found in result.foci}
    for focus, snap in result.all_timespans():
        ts, key = snap.timespan, timespan_folder(focus, snap.timespan)
        if ts.start_date < start or ts.end_date > end or ts.start_date >= ts.end_date:
            problems.append(f"{key}: {ts.start_date}..{ts.last_date} is outside the topic's dates")
        if snap.empty and not any(len(getattr(snap, table)) for table in TIMESPAN_TABLES):
            continue  # nothing counted, nothing to contradict (most timespans of a topic over decades)
        facts = snap.streamed or _table_facts(
            snap, index, story_media, focus_index[focus.key] if focus is not None else None
        )
        problems += _fact_problems(key, snap, facts, focus is not None)
    return problems


def _table_facts(
    snap: TimespanSnapshot, index: IdIndex, story_media: np.ndarray, focus: IdIndex | None
) -> StreamedFacts:
    """The facts of a timespan held in memory: its tables read by the tallies that read a streamed timespan's
    rows (``stream_facts``), so both are judged by the same tests."""
    links, stories = LinkTally(index, story_media), StoryTally(index, focus)
    links(pa.RecordBatch.from_pandas(snap.story_links, preserve_index=False))
    stories(pa.RecordBatch.from_pandas(snap.story_link_counts[["stories_id"]], preserve_index=False))
    return streamed_facts(links, stories, int(snap.medium_links["link_count"].sum()))


def _count_problems(key: str, snap: TimespanSnapshot, story_link_counts: int, story_links: int) -> list[str]:
    """The timespan's counters against the rows of its tables (the story tables' rows given, as a streamed
    timespan measures them without holding them)."""
    expected = (story_link_counts, story_links, len(snap.medium_link_counts), len(snap.medium_links))
    actual = (
        snap.counts.story_count,
        snap.counts.story_link_count,
        snap.counts.medium_count,
        snap.counts.medium_link_count,
    )
    if expected != actual:
        return [f"{key}: counts {actual} do not match the tables {expected}"]
    return []


def _fact_problems(key: str, snap: TimespanSnapshot, facts: StreamedFacts, in_focus: bool) -> list[str]:
    """The checks on the facts of a timespan's tables (streamed out of core, or held)."""
    problems = []
    link_sum = facts.medium_link_sum
    if int(snap.medium_links["link_count"].sum()) != link_sum or link_sum != facts.story_links:
        problems.append(
            f"{key}: medium link counts sum to {link_sum}, but there are {facts.story_links} story links"
        )
    if facts.links_outside_topic:
        problems.append(f"{key}: story links name stories that are not topic stories")
    elif facts.same_medium_links:
        problems.append(f"{key}: {facts.same_medium_links} same-medium story links")
    if facts.counted_outside_topic:
        problems.append(f"{key}: story_link_counts counts stories that are not topic stories")
    elif in_focus and facts.counted_outside_focus:
        problems.append(f"{key}: story_link_counts counts stories that are not topic stories of the focus")
    return problems + _count_problems(key, snap, facts.story_link_counts, facts.story_links)


def check_problems(result: SnapshotResult, topic_start: Any, topic_end: Any) -> dict[str, list[str]]:
    """``snapshot_problems`` sorted into the three asset checks (empty lists when consistent).

    A problem of an unforeseen kind goes to the link-count check rather than being lost.
    """
    sorted_problems: dict[str, list[str]] = {name: [] for name in CHECK_NAMES}
    for problem in snapshot_problems(result, topic_start, topic_end):
        if "outside the topic's dates" in problem:
            sorted_problems[CHECK_DATES].append(problem)
        elif "not topic stories" in problem:
            sorted_problems[CHECK_TOPIC_STORIES].append(problem)
        else:
            sorted_problems[CHECK_LINK_COUNTS].append(problem)
    return sorted_problems
