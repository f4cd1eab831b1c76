"""A snapshot's results in memory: each timespan's four tables and counts, for the whole topic and each focus.

``topicmap.snapshots.compute`` fills them, ``topicmap.snapshots.files`` writes them, ``topicmap.snapshots.checks``
checks them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pandas as pd

from topicmap.snapshots.foci import Focus
from topicmap.snapshots.summaries import TimespanSummary
from topicmap.snapshots.timespans import Timespan
from topicmap.snapshots.words import DEFAULT_WORD_SAMPLE

#: the story statistics every table carries (null where unknown)
STAT_COLUMNS: tuple[str, ...] = ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d")


@dataclass(frozen=True)
class TimespanCounts:
    """A timespan's own counters (Media Cloud's timespans row) plus the syndication report."""

    story_count: int
    story_link_count: int
    medium_count: int
    medium_link_count: int
    # Links from a second (third, ...) copy of one near-duplicate group to the same ref story in this
    # timespan: dropped when count_syndicated_once, otherwise counted and only reported here.
    syndicated_repeat_link_count: int = 0
    # Posts published in the timespan sharing one of its stories (``topicmap.snapshots.post_counts``).
    post_count: int = 0


COUNT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TimespanCounts))
#: what a timespan's ``story_count`` is made of (Media Cloud's count: the stories published in the timespan
#: plus the stories they link to): ``published_story_count`` (published in it: the sum of its
#: ``stories_per_day``), ``linked_story_count`` (published before or after it, in only through a link) and
#: ``undated_story_count`` (no publication date: the overall timespan takes them all, the others only through
#: a link). The three add up to ``story_count``.
STORY_COUNT_PARTS: tuple[str, ...] = ("published_story_count", "linked_story_count", "undated_story_count")
#: a timespan's tables, as TimespanSnapshot attributes and file names
TIMESPAN_TABLES: tuple[str, ...] = ("story_links", "story_link_counts", "medium_links", "medium_link_counts")


@dataclass(frozen=True)
class StreamedFacts:
    """What the consistency checks test of a timespan whose link tables were streamed to its files rather than
    kept (``topicmap.snapshots.engine``), taken from their rows as they were streamed (``stream_facts``)."""

    story_links: int
    medium_link_sum: int  # the medium links' link counts summed
    links_outside_topic: int  # story links naming a story that is not a topic story
    same_medium_links: int
    story_link_counts: int
    counted_outside_topic: int
    counted_outside_focus: int


@dataclass
class TimespanSnapshot:
    """The four tables of one timespan (sorted by their ids) and its counts."""

    timespan: Timespan
    story_links: pd.DataFrame
    story_link_counts: pd.DataFrame
    medium_links: pd.DataFrame
    medium_link_counts: pd.DataFrame
    counts: TimespanCounts
    #: attention over time, top media and stories, top words (``topicmap.snapshots.summaries``)
    summary: TimespanSummary | None = None
    #: each counted story's position in ``SnapshotResult.stories`` (row-aligned with story_link_counts)
    story_positions: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: out of core: the story tables went to the files (the frames above are empty); the checks' facts
    streamed: StreamedFacts | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """No story was published in the timespan (so it has no links either): recorded, but no files."""
        return self.counts.story_count == 0

    def story_count_parts(self) -> dict[str, int]:
        """``story_count`` in its parts (STORY_COUNT_PARTS): published in the timespan, linked from it, undated."""
        undated = self.summary.undated_stories if self.summary is not None else 0
        linked = self.summary.outside_stories if self.summary is not None else 0
        return {
            "published_story_count": self.counts.story_count - linked - undated,
            "linked_story_count": linked,
            "undated_story_count": undated,
        }

    def top_media(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` media with the most media inlinks (ties: more inlinks, more stories, lower id)."""
        return self.medium_link_counts.sort_values(
            ["media_inlink_count", "inlink_count", "story_count", "media_id"],
            ascending=[False, False, False, True],
            kind="mergesort",
        ).head(n)


@dataclass
class FocusSnapshot:
    """A focus's stories (``stories_id``, ascending) and every timespan of the topic computed on them alone."""

    focus: Focus
    stories_id: np.ndarray
    timespans: list[TimespanSnapshot]

    @property
    def story_count(self) -> int:
        return len(self.stories_id)

    def __getitem__(self, key: str) -> TimespanSnapshot:
        for snap in self.timespans:
            if snap.timespan.key == key:
                return snap
        raise KeyError(f"focus {self.focus.key!r} has no timespan {key!r}")


@dataclass
class SnapshotResult:
    """Every timespan's tables, plus the validated topic stories and media (for the CSV lists).

    ``timespans`` are the whole topic's; ``foci`` hold the same timespans computed on each focus's stories."""

    timespans: list[TimespanSnapshot]
    # stories_id, media_id, url, title, publish_date (UTC), publish_day_local (the publisher's calendar day, at
    # midnight, naive; NaT when undated); sorted by stories_id
    stories: pd.DataFrame
    media: pd.DataFrame  # media_id, name, url; sorted by media_id
    count_syndicated_once: bool
    dropped_links: dict[str, int] = field(default_factory=dict)
    foci: list[FocusSnapshot] = field(default_factory=list)
    #: stories per timespan whose words are counted (0: all)
    word_sample: int = DEFAULT_WORD_SAMPLE

    def focus(self, key: str) -> FocusSnapshot:
        for found in self.foci:
            if found.focus.key == key:
                return found
        raise KeyError(f"no focus {key!r}; have {[f.focus.key for f in self.foci]}")

    def all_timespans(self) -> Iterator[tuple[Focus | None, TimespanSnapshot]]:
        """Every timespan of the whole topic (focus None), then every timespan of each focus."""
        for snap in self.timespans:
            yield None, snap
        for found in self.foci:
            for snap in found.timespans:
                yield found.focus, snap

    def __getitem__(self, key: str) -> TimespanSnapshot:
        for snap in self.timespans:
            if snap.timespan.key == key:
                return snap
        raise KeyError(f"no timespan {key!r}; have {[s.timespan.key for s in self.timespans]}")

    def timespan_table(self) -> pd.DataFrame:
        """One row per timespan, the whole topic's then each focus's: focus (its key; None for the whole
        topic), key, period, name, start_date, end_date (exclusive), last_date, partial (a week or month cut by
        the topic's dates), day_count, counts, the parts of ``story_count`` (STORY_COUNT_PARTS), words_sampled."""
        rows = []
        for focus, snap in self.all_timespans():
            ts = snap.timespan
            rows.append(
                {
                    "focus": focus.key if focus is not None else None,
                    "key": ts.key,
                    "period": ts.period,
                    "name": ts.name,
                    "start_date": ts.start_date,
                    "end_date": ts.end_date,
                    "last_date": ts.last_date,
                    "partial": ts.partial,
                    "day_count": ts.day_count,
                    **asdict(snap.counts),
                    **snap.story_count_parts(),
                    "words_sampled": snap.summary.words_sampled if snap.summary is not None else 0,
                }
            )
        columns = [
            "focus",
            "key",
            "period",
            "name",
            "start_date",
            "end_date",
            "last_date",
            "partial",
            "day_count",
        ]
        columns += COUNT_COLUMNS
        table = pd.DataFrame(rows, columns=[*columns, *STORY_COUNT_PARTS, "words_sampled"])
        for column in ("day_count", *COUNT_COLUMNS, *STORY_COUNT_PARTS, "words_sampled"):
            table[column] = table[column].astype("int64")
        table["partial"] = table["partial"].astype(bool)
        return table

    def foci_table(self) -> pd.DataFrame:
        """One row per focus: focus (key), focal_set, name, kind, definition, description, story_count."""
        return pd.DataFrame(
            {
                "focus": [f.focus.key for f in self.foci],
                "focal_set": [f.focus.focal_set for f in self.foci],
                "name": [f.focus.name for f in self.foci],
                "kind": [f.focus.kind for f in self.foci],
                "definition": [f.focus.describe() for f in self.foci],
                "description": [f.focus.description for f in self.foci],
                "story_count": np.array([f.story_count for f in self.foci], dtype=np.int64),
            }
        )
