"""Snapshots: a topic's cross-media link network per timespan (Media Cloud's topics-snapshot).

Pure library: the caller reads the deduplicated topic from the store into DataFrames and passes them in.

Timespans (``build_timespans``)
    overall, monthly (starting on the 1st), weekly (starting on Monday) and custom ranges, as in Media Cloud's
    ``Snapshot.pm``. Dates are whole UTC days. Internally every timespan is the half-open interval
    ``[start_date, end_date)``: ``end_date`` is EXCLUSIVE (``last_date`` is the inclusive last day), whereas the
    topic's own ``end_date`` and custom ranges are given inclusive, as users write them. Media Cloud lets the first
    week start before the topic and the last week/month run past it; here the first and last monthly/weekly
    timespans are CLIPPED to the topic's dates so that no timespan ever lies outside the topic. Their ``key``
    still names the calendar period (``weekly_2026-01-26`` is the week starting Monday 2026-01-26, even if the
    topic only starts on the Wednesday), so weeks and months line up across topics.

Period stories and links (``compute_snapshot``), following Media Cloud's topics-snapshot:
    * Only cross-media links count: a link whose two stories are in the same medium never counts. Links are
      distinct (source story, ref story) pairs; links whose source or ref is not a topic story are dropped.
    * A timespan's ``story_links`` are the cross-media links whose SOURCE story was published in the window;
      its period stories are the stories published in the window plus every story such a link points to
      ("linked by a story from another medium published in the window").
    * overall: Media Cloud takes all topic stories and all cross-media links between them. We use the same
      rule as the other periods with the topic's date range as the window, except that undated stories
      (NaT) count as "in the window" (their date cannot place them outside). So a story dated outside the
      topic's dates is in the overall timespan only if a story inside links to it, and its own outlinks do
      not count. This makes overall the union of the dated timespans plus the undated stories, which Media
      Cloud's version is not when the spider added stories outside the dates.
    * Media Cloud's window is ``[start, end - 1 s]``; ours is ``[start, end)`` and loses no second.
    * Media Cloud deletes every link whose source is AP-syndicated. Instead ``count_syndicated_once`` counts
      links from the copies of one near-duplicate (syndication) group to the same ref story once, keeping the
      earliest copy, within each timespan; the number of such repeated links is always reported.

Foci (``topicmap.snapshots.foci``): every timespan is computed again for each focus, with the same rules, on the
    focus's stories alone and the links among them (the topic's arrays restricted, nothing sorted again), and
    every timespan gets a summary (``topicmap.snapshots.summaries``: stories per day, top media and stories by
    each metric; ``topicmap.snapshots.words``: top words on a fixed sample).

Everything is vectorized with numpy, and the cost follows the data, not the date range: the stories are sorted
by publish date once and the distinct cross-media links (made distinct by a sort) are indexed by source story
once; a timespan's stories are then a binary-searched slice of the date-sorted stories, its links the runs of
those stories in the index (already in (source id, ref id) order), and its counts sorts and ``np.bincount`` over
its own stories and links only. A timespan without stories (most weeks of a topic declared over decades) costs a
binary search; it is recorded with zero counts and, by ``write_snapshot_files``, gets no files. Nothing loops
over stories or links in Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from topicmap.snapshots.foci import Focus, FrameTexts, StoryTexts, check_foci, focus_story_masks
from topicmap.snapshots.names import PERIODS
from topicmap.snapshots.summaries import (
    StoryInfo,
    TimespanSummary,
    empty_summary,
    summarize_timespan,
    summary_tables,
)
from topicmap.snapshots.words import (
    DEFAULT_WORD_SAMPLE,
    count_words,
    sample_order,
    sample_positions,
    top_words,
)

STAT_COLUMNS: tuple[str, ...] = ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d")

_DAY = timedelta(days=1)
_NAT = np.iinfo(np.int64).min  # numpy's NaT as int64 nanoseconds
_SORT_LAST = np.iinfo(np.int64).max  # undated stories sort after every date

# Column names of Media Cloud's stories and media lists (web-tools topic stories.csv / media.csv), with our
# Bit.ly split into the 3-day and 30-day totals instead of the single bitly_click_count, and Media Cloud's
# publish_date (a time without a zone) split in two that say what they are: the UTC instant, written with its
# zone, and the publisher's calendar day (the day the timespans count). "2019-11-19T00:05:00Z" and
# "2019-11-18" for a story of 19:05 EST on 18 November.
STORY_DATE_COLUMNS: tuple[str, ...] = ("publish_date_utc", "publish_day_local")
STORY_CSV_COLUMNS: tuple[str, ...] = (
    "stories_id",
    *STORY_DATE_COLUMNS,
    "title",
    "url",
    "media_id",
    "media_name",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)
MEDIA_CSV_COLUMNS: tuple[str, ...] = (
    "media_id",
    "name",
    "url",
    "story_count",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "sum_media_inlink_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)

# ----------------------------------------------------------------------------------------------- timespans


@dataclass(frozen=True)
class Timespan:
    """One timespan: the half-open UTC day range ``[start_date, end_date)`` (``end_date`` is exclusive)."""

    period: str
    start_date: date
    end_date: date
    key: str  # unique, file-name safe: "overall", "monthly_2026-02-01", "weekly_2026-01-26", "custom_<slug>"
    name: str  # human label: "overall", "2026-02", "week of 2026-01-26", or the custom range's own name

    @property
    def last_date(self) -> date:
        """The inclusive last day of the timespan."""
        return self.end_date - _DAY

    def window_ns(self) -> tuple[int, int]:
        """The window as UTC nanosecond timestamps ``[lo, hi)``, comparable with publish dates."""
        return _day_ns(self.start_date), _day_ns(self.end_date)


def _day_ns(day: date) -> int:
    return int(pd.Timestamp(day.year, day.month, day.day, tz="UTC").value)


def _as_date(value: Any, what: str) -> date:
    """Accept a date, a datetime / Timestamp (its UTC day) or an ISO string; reject anything else clearly."""
    if isinstance(value, pd.Timestamp | datetime):
        ts = pd.Timestamp(value)
        if ts.tzinfo is not None:
            ts = ts.tz_convert("UTC")
        return ts.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            pass
    raise ValueError(f"{what}: expected a date (YYYY-MM-DD), got {value!r}")


def _custom_range(item: Any) -> tuple[str, date, date]:
    """A custom range is ``(name, start, end)`` or a mapping with name / start_date / end_date (end inclusive)."""
    if isinstance(item, Mapping):
        try:
            name, start, end = item["name"], item["start_date"], item["end_date"]
        except KeyError as missing:
            raise ValueError(f"custom timespan {dict(item)!r} lacks {missing}") from None
    else:
        try:
            name, start, end = item
        except (TypeError, ValueError):
            raise ValueError(f"custom timespan must be (name, start_date, end_date), got {item!r}") from None
    name = str(name).strip()
    start_day = _as_date(start, f"custom timespan {name!r} start")
    end_day = _as_date(end, f"custom timespan {name!r} end")
    if end_day < start_day:
        raise ValueError(f"custom timespan {name!r} ends ({end_day}) before it starts ({start_day})")
    return name, start_day, end_day


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def build_timespans(
    start_date: Any,
    end_date: Any,
    periods: Sequence[str] = PERIODS,
    custom: Iterable[Any] = (),
) -> list[Timespan]:
    """The topic's timespans, in the order of ``periods`` and by start date within a period.

    ``start_date`` and ``end_date`` are the topic's dates, both INCLUSIVE. Weekly timespans step +7 days from
    the Monday on or before the start while the week starts before the end; monthly ones step from the 1st of
    the start's month to the 1st of the month of (start + 32 days), as Media Cloud does. The first and last of
    them are clipped to the topic's dates. Custom ranges partly outside the topic are clipped; one entirely
    outside is a configuration error and raises ``ValueError``.
    """
    topic_start = _as_date(start_date, "topic start_date")
    topic_last = _as_date(end_date, "topic end_date")
    if topic_last < topic_start:
        raise ValueError(f"topic end_date {topic_last} is before its start_date {topic_start}")
    if isinstance(periods, str):
        periods = periods.split()  # Media Cloud's topics.snapshot_periods is space separated
    unknown = [p for p in periods if p not in PERIODS]
    if unknown:
        raise ValueError(f"unknown snapshot period(s) {unknown}; expected some of {list(PERIODS)}")
    if len(set(periods)) != len(periods):
        raise ValueError(f"snapshot periods repeat: {list(periods)}")
    topic_end = topic_last + _DAY

    def clipped(period: str, start: date, end: date, key: str, name: str) -> Timespan:
        return Timespan(period, max(start, topic_start), min(end, topic_end), key, name)

    timespans: list[Timespan] = []
    for period in periods:
        if period == "overall":
            timespans.append(Timespan("overall", topic_start, topic_end, "overall", "overall"))
        elif period == "monthly":
            month = topic_start.replace(day=1)
            while month < topic_end:
                following = (month + timedelta(days=32)).replace(day=1)
                timespans.append(
                    clipped(
                        "monthly", month, following, f"monthly_{month.isoformat()}", month.strftime("%Y-%m")
                    )
                )
                month = following
        elif period == "weekly":
            monday = topic_start - timedelta(days=topic_start.weekday())
            while monday < topic_end:
                following = monday + timedelta(days=7)
                key = f"weekly_{monday.isoformat()}"
                timespans.append(clipped("weekly", monday, following, key, f"week of {monday.isoformat()}"))
                monday = following
        else:
            ranges = sorted((_custom_range(item) for item in custom), key=lambda r: (r[1], r[2], r[0]))
            seen: dict[str, str] = {}
            for name, start, last in ranges:
                if last < topic_start or start > topic_last:
                    raise ValueError(
                        f"custom timespan {name!r} ({start}..{last}) lies entirely outside the topic's dates "
                        f"({topic_start}..{topic_last})"
                    )
                slug = _slug(name) or f"{start.isoformat()}_{last.isoformat()}"
                key = f"custom_{slug}"
                if key in seen:
                    raise ValueError(f"custom timespans {seen[key]!r} and {name!r} have the same key {key!r}")
                seen[key] = name
                timespans.append(clipped("custom", start, last + _DAY, key, name or key))
    return timespans


# ----------------------------------------------------------------------------------------------- results


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


_COUNT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TimespanCounts))
#: a timespan's tables, as TimespanSnapshot attributes and file names
_TABLES: tuple[str, ...] = ("story_links", "story_link_counts", "medium_links", "medium_link_counts")


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

    @property
    def empty(self) -> bool:
        """No story was published in the timespan (so it has no links either): recorded, but no files."""
        return self.counts.story_count == 0

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
        topic), key, period, name, start_date, end_date (exclusive), last_date, counts, words_sampled."""
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
                    **asdict(snap.counts),
                    "words_sampled": snap.summary.words_sampled if snap.summary is not None else 0,
                }
            )
        columns = ["focus", "key", "period", "name", "start_date", "end_date", "last_date", *_COUNT_COLUMNS]
        table = pd.DataFrame(rows, columns=[*columns, "words_sampled"])
        for column in (*_COUNT_COLUMNS, "words_sampled"):
            table[column] = table[column].astype("int64")
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


# ----------------------------------------------------------------------------------------------- inputs


def _require(frame: Any, name: str, columns: Sequence[str]) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name}: expected a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; has {list(frame.columns)}")
    return frame


def _int_ids(series: pd.Series, what: str) -> np.ndarray:
    if series.isna().any():
        raise ValueError(f"{what} has {int(series.isna().sum())} missing value(s)")
    try:
        values = series.to_numpy(dtype=np.int64)
        exact = series.dtype.kind in "iu" or bool((series.to_numpy(dtype=np.float64) == values).all())
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be integer ids: {err}") from None
    if not exact:
        raise ValueError(f"{what} must be integer ids, found fractional values")
    return values


def _utc_ns(series: pd.Series) -> np.ndarray:
    """A datetime64[ns, UTC] column as int64 nanoseconds, NaT as numpy's NaT integer."""
    return series.dt.tz_convert(None).to_numpy(dtype="datetime64[ns]").view(np.int64)


@dataclass
class _Topic:
    """The validated topic as aligned numpy arrays; story position = rank of stories_id."""

    stories: pd.DataFrame
    media: pd.DataFrame
    story_ids: np.ndarray
    story_medium: np.ndarray  # position of the story's medium in media_ids
    story_date: np.ndarray  # int64 ns, _NAT when undated
    media_ids: np.ndarray
    stat_values: dict[str, np.ndarray]  # int64, 0 where unknown
    stat_known: dict[str, np.ndarray]  # bool
    story_group: np.ndarray | None  # dense syndication group per story (singletons get their own)
    n_groups: int  # story_group < n_groups: a real near-duplicate group (singletons are numbered after them)
    # Stories by publish date, once: a timespan's stories are a binary-searched slice of them, so a timespan
    # costs its own stories, never a pass over all of them (a topic over decades has thousands of weeks).
    date_order: np.ndarray  # story positions sorted by (date, position); undated last
    sorted_dates: np.ndarray  # story dates in that order, undated as _SORT_LAST
    date_rank: np.ndarray  # each story's rank in date_order (earliest syndicated copy)
    # a focus's stories' positions among the whole topic's (None: this is the whole topic)
    whole_position: np.ndarray | None = None


class _IdIndex:
    """Positions of ids in a sorted id array: a dense lookup table when the ids are compact (a gather per id),
    a binary search otherwise (a topic's stories can be a sparse subset of the global story ids)."""

    def __init__(self, sorted_ids: np.ndarray) -> None:
        self.ids = sorted_ids
        self.table: np.ndarray | None = None
        if len(sorted_ids):
            self.low = int(sorted_ids[0])
            span = int(sorted_ids[-1]) - self.low + 1
            if span <= 8 * len(sorted_ids) + (1 << 16):
                self.table = np.full(span, -1, dtype=np.int32 if len(sorted_ids) < 2**31 else np.int64)
                self.table[sorted_ids - self.low] = np.arange(len(sorted_ids), dtype=self.table.dtype)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id, -1 where absent (int64)."""
        if self.table is None:
            return _positions(self.ids, ids)
        offset = ids - self.low
        inside = (offset >= 0) & (offset < len(self.table))
        pos = np.full(len(ids), -1, dtype=np.int64)
        pos[inside] = self.table[offset[inside]]
        return pos


def _prepare_topic(
    stories: pd.DataFrame,
    media: pd.DataFrame,
    story_stats: pd.DataFrame | None,
    near_dup_groups: pd.DataFrame | None,
) -> _Topic:
    _require(stories, "stories", ["stories_id", "media_id", "publish_date", "url", "title"])
    _require(media, "media", ["media_id", "name", "url"])

    media_frame = media[["media_id", "name", "url"]].copy()
    media_frame["media_id"] = _int_ids(media_frame["media_id"], "media.media_id")
    media_frame = media_frame.sort_values("media_id", kind="mergesort").reset_index(drop=True)
    media_ids = media_frame["media_id"].to_numpy()
    repeated = media_ids[1:][media_ids[1:] == media_ids[:-1]]
    if repeated.size:
        raise ValueError(
            f"media.media_id repeats (merge duplicate media first): {np.unique(repeated)[:10].tolist()}"
        )

    columns = ["stories_id", "media_id", "url", "title", "publish_date"]
    has_offsets = "publish_utc_offset" in stories.columns
    frame = stories[columns + (["publish_utc_offset"] if has_offsets else [])].copy()
    frame["stories_id"] = _int_ids(frame["stories_id"], "stories.stories_id")
    frame["media_id"] = _int_ids(frame["media_id"], "stories.media_id")
    try:  # naive datetimes are taken as UTC, aware ones converted to it
        dates = frame["publish_date"]
        # strings must be ISO 8601 (what the store writes); anything else is rejected, not guessed at
        iso = {} if pd.api.types.is_datetime64_any_dtype(dates) else {"format": "ISO8601"}
        frame["publish_date"] = pd.to_datetime(dates, utc=True, **iso).astype("datetime64[ns, UTC]")
    except (TypeError, ValueError) as err:
        raise ValueError(f"stories.publish_date is not a date/time column: {err}") from None
    frame = frame.sort_values("stories_id", kind="mergesort").reset_index(drop=True)
    story_ids = frame["stories_id"].to_numpy()
    repeated = story_ids[1:][story_ids[1:] == story_ids[:-1]]
    if repeated.size:
        raise ValueError(
            f"stories.stories_id repeats (merge duplicate stories first): {np.unique(repeated)[:10].tolist()}"
        )
    story_medium = _positions(media_ids, frame["media_id"].to_numpy())
    if (story_medium < 0).any():
        unknown = np.unique(frame["media_id"].to_numpy()[story_medium < 0])
        raise ValueError(f"stories refer to media_id(s) not in media: {unknown[:10].tolist()}")
    story_date = _utc_ns(frame["publish_date"])
    if has_offsets:
        # Timespans count the publisher's calendar day, as dedup does: the UTC time moved by the page's own UTC
        # offset (minutes; unknown = 0), so a story of 23:30+09:00 is in that day's week in Tokyo, not the day's
        # before. The exports carry both: the UTC instant and this day (publish_day_local).
        offsets = pd.to_numeric(frame["publish_utc_offset"], errors="coerce").fillna(0).to_numpy(np.int64)
        dated = story_date != _NAT
        story_date = np.where(dated, story_date + offsets * 60_000_000_000, story_date)
        frame = frame.drop(columns="publish_utc_offset")
    frame["publish_day_local"] = (
        story_date.view("datetime64[ns]").astype("datetime64[D]").astype("datetime64[ns]")
    )

    n = len(story_ids)
    index = _IdIndex(story_ids)
    stat_values: dict[str, np.ndarray] = {}
    stat_known: dict[str, np.ndarray] = {}
    if story_stats is not None:
        _require(story_stats, "story_stats", ["stories_id"])
        stat_ids = _int_ids(story_stats["stories_id"], "story_stats.stories_id")
        if len(_sorted_distinct(np.sort(stat_ids))) != len(stat_ids):
            raise ValueError("story_stats.stories_id repeats: one statistics row per story")
        pos = index.positions(stat_ids)
        inside = pos >= 0  # statistics of stories outside the topic are ignored
    for column in STAT_COLUMNS:
        values = np.zeros(n, dtype=np.int64)
        known = np.zeros(n, dtype=bool)
        if story_stats is not None and column in story_stats.columns:
            try:
                stat = pd.array(story_stats[column], dtype="Int64")
            except (TypeError, ValueError) as err:
                raise ValueError(f"story_stats.{column} must hold whole numbers: {err}") from None
            present = ~stat.isna()
            take = inside & present
            values[pos[take]] = stat.to_numpy(dtype=np.int64, na_value=0)[take]
            known[pos[take]] = True
        stat_values[column] = values
        stat_known[column] = known

    story_group, n_groups = None, 0
    if near_dup_groups is not None:
        _require(near_dup_groups, "near_dup_groups", ["stories_id", "group_id"])
        group_ids = _int_ids(near_dup_groups["stories_id"], "near_dup_groups.stories_id")
        if len(_sorted_distinct(np.sort(group_ids))) != len(group_ids):
            raise ValueError("near_dup_groups.stories_id repeats: a story belongs to one group at most")
        if near_dup_groups["group_id"].isna().any():
            raise ValueError("near_dup_groups.group_id has missing values")
        codes, _ = pd.factorize(near_dup_groups["group_id"], sort=True)
        pos = index.positions(group_ids)
        # Stories outside any group are their own group: ids after the real groups, so they never collide.
        n_groups = int(codes.max()) + 1 if len(codes) else 0
        story_group = np.arange(n, dtype=np.int64) + n_groups
        story_group[pos[pos >= 0]] = codes[pos >= 0]

    date_key = np.where(story_date == _NAT, _SORT_LAST, story_date)
    date_order = np.argsort(date_key, kind="stable")
    date_rank = np.empty(n, dtype=np.int64)
    date_rank[date_order] = np.arange(n, dtype=np.int64)
    return _Topic(
        stories=frame,
        media=media_frame,
        story_ids=story_ids,
        story_medium=story_medium,
        story_date=story_date,
        media_ids=media_ids,
        stat_values=stat_values,
        stat_known=stat_known,
        story_group=story_group,
        n_groups=n_groups,
        date_order=date_order,
        sorted_dates=date_key[date_order],
        date_rank=date_rank,
    )


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each id in ``sorted_ids``, -1 where absent."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, ids)
    pos[pos >= len(sorted_ids)] = 0
    found = sorted_ids[pos] == ids
    return np.where(found, pos, -1).astype(np.int64)


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a SORTED array. ``np.unique`` is avoided on purpose: numpy 2.3+ hashes first
    (``_unique_hash``), which on millions of mostly-distinct link keys is several times slower than a sort
    (it was 62 % of a 300k-story snapshot)."""
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


def _run_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array (empty for an empty array)."""
    if len(sorted_values) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], sorted_values[1:] != sorted_values[:-1])))


def _run_lengths(starts: np.ndarray, total: int) -> np.ndarray:
    return np.diff(np.append(starts, total)).astype(np.int64)


def _concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``[starts[0], starts[0] + lengths[0]) + [starts[1], ...) + ...`` as one index array, vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(total, dtype=np.int64)


@dataclass
class _Links:
    """Distinct cross-media links as story positions, sorted by (source, ref) = (source id, ref id), with an
    index by source story: the links of story ``s`` are ``[by_source[s], by_source[s + 1])``."""

    source: np.ndarray
    ref: np.ndarray
    source_medium: np.ndarray
    ref_medium: np.ndarray
    by_source: np.ndarray  # n + 1 offsets
    dropped: dict[str, int]


def _cross_media_links(topic: _Topic, links: pd.DataFrame) -> _Links:
    _require(links, "links", ["stories_id", "ref_stories_id"])
    index = _IdIndex(topic.story_ids)
    source = index.positions(_int_ids(links["stories_id"], "links.stories_id"))
    ref = index.positions(_int_ids(links["ref_stories_id"], "links.ref_stories_id"))
    dropped = {"source_not_in_topic": int((source < 0).sum())}
    keep = (source >= 0) & (ref >= 0)
    dropped["ref_not_in_topic"] = int(((source >= 0) & (ref < 0)).sum())
    source, ref = source[keep], ref[keep]
    cross = topic.story_medium[source] != topic.story_medium[ref]
    dropped["same_medium"] = int((~cross).sum())
    source, ref = source[cross], ref[cross]
    n = max(len(topic.story_ids), 1)
    pair = source * n + ref
    if len(pair) > 1 and not (pair[1:] >= pair[:-1]).all():  # the store hands them over sorted already
        pair.sort()
    pair = _sorted_distinct(pair)  # distinct (source, ref), sorted by source id then ref id
    dropped["duplicate"] = int(len(source) - len(pair))
    source, ref = pair // n, pair % n
    by_source = np.zeros(len(topic.story_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(source, minlength=len(topic.story_ids)), out=by_source[1:])
    return _Links(
        source=source,
        ref=ref,
        source_medium=topic.story_medium[source],
        ref_medium=topic.story_medium[ref],
        by_source=by_source,
        dropped=dropped,
    )


# ----------------------------------------------------------------------------------------------- compute


def compute_snapshot(
    stories: pd.DataFrame,
    media: pd.DataFrame,
    links: pd.DataFrame,
    timespans: Sequence[Timespan],
    story_stats: pd.DataFrame | None = None,
    near_dup_groups: pd.DataFrame | None = None,
    count_syndicated_once: bool = False,
    foci: Sequence[Focus] = (),
    media_tags: pd.DataFrame | None = None,
    texts: StoryTexts | None = None,
    word_sample: int = DEFAULT_WORD_SAMPLE,
    files: SnapshotFilesWriter | None = None,
) -> SnapshotResult:
    """Compute story_links, story_link_counts, medium_links, medium_link_counts and counts per timespan, for the
    whole topic and for each focus, and each timespan's summary (``TimespanSnapshot.summary``).

    ``stories`` (stories_id, media_id, publish_date, url, title) and ``media`` (media_id, name, url) must be
    deduplicated already: a repeated id raises ``ValueError``. ``links`` (stories_id → ref_stories_id) may hold
    duplicates, same-medium links and links to stories outside the topic; those are dropped and tallied in
    ``SnapshotResult.dropped_links``. ``story_stats`` (stories_id + any of facebook_share_count,
    bitly_clicks_3d, bitly_clicks_30d) fills the statistics (null where unknown). ``near_dup_groups``
    (stories_id, group_id) enables the syndication report and ``count_syndicated_once``.

    ``foci`` (``topicmap.snapshots.foci``): each focus's timespans are the whole topic's rules applied to its
    stories alone (the focus's stories and the links among them), as if the topic held no other story.
    ``media_tags`` (media_id, tag_set, tag; media_id the final medium) serves media-tag foci. ``texts`` gives
    each story's title, text and language (query foci, top words); by default the ``title``, ``text`` and
    ``language`` columns of ``stories``. ``word_sample``: stories per timespan whose words are counted (0: all).
    ``files``: a writer that starts writing each group of timespans (the whole topic's, each focus's) as soon
    as it is computed; its ``finish`` writes the rest.

    Cost: one pass over the stories and links, then per timespan work in proportion to its own stories and
    links; a timespan without stories costs a binary search and shares one set of empty tables (treat the
    tables as read-only). A focus costs a pass over the topic's links to select its own, then its timespans in
    proportion to its stories and links; a query focus also costs its query on every story.
    """
    if count_syndicated_once and near_dup_groups is None:
        raise ValueError("count_syndicated_once needs near_dup_groups")
    keys = [ts.key for ts in timespans]
    if len(set(keys)) != len(keys):
        raise ValueError(f"timespan keys repeat: {keys}")
    check_foci(foci)
    if isinstance(word_sample, bool) or not isinstance(word_sample, int) or word_sample < 0:
        raise ValueError(f"word_sample must be a whole number >= 0 (0: every story), got {word_sample!r}")
    if media_tags is not None:
        _require(media_tags, "media_tags", ["media_id", "tag_set", "tag"])
    topic = _prepare_topic(stories, media, story_stats, near_dup_groups)
    cross = _cross_media_links(topic, links)
    texts = texts if texts is not None else FrameTexts(stories)
    if files is not None:
        files.start(topic.stories, topic.media)
    snaps = _timespan_snapshots(topic, cross, timespans, count_syndicated_once, files, None)
    focus_snaps = []
    if foci:
        final_media = topic.media_ids[topic.story_medium]
        masks = focus_story_masks(foci, topic.story_ids, final_media, media_tags, texts)
        for focus, mask in zip(foci, masks, strict=True):
            sub_topic, sub_cross = _restrict(topic, cross, mask)
            focus_snaps.append(
                FocusSnapshot(
                    focus=focus,
                    stories_id=sub_topic.story_ids,
                    timespans=_timespan_snapshots(
                        sub_topic, sub_cross, timespans, count_syndicated_once, files, focus
                    ),
                )
            )
    result = SnapshotResult(
        timespans=snaps,
        stories=topic.stories,
        media=topic.media,
        count_syndicated_once=count_syndicated_once,
        dropped_links=cross.dropped,
        foci=focus_snaps,
        word_sample=word_sample,
    )
    _summarize(result, texts)
    return result


def _timespan_snapshots(
    topic: _Topic,
    cross: _Links,
    timespans: Sequence[Timespan],
    syndicated_once: bool,
    files: SnapshotFilesWriter | None = None,
    focus: Focus | None = None,
) -> list[TimespanSnapshot]:
    """Every timespan of ``topic``; each one with stories goes to ``files`` as soon as it is computed."""
    empty: TimespanSnapshot | None = None
    snaps = []
    for ts in timespans:
        window = _window_stories(topic, ts)
        if len(window) == 0:  # no story published in it, hence no link either: nothing to count
            if empty is None:
                empty = _timespan_snapshot(topic, cross, ts, window, syndicated_once)
            snaps.append(replace(empty, timespan=ts))
        else:
            snaps.append(_timespan_snapshot(topic, cross, ts, window, syndicated_once))
            if files is not None:
                files.submit(focus, snaps[-1:])
    return snaps


def _restrict(topic: _Topic, cross: _Links, mask: np.ndarray) -> tuple[_Topic, _Links]:
    """The topic of the stories in ``mask`` alone, and the links among them: what the whole topic's arrays
    become when the other stories are dropped (positions renumbered in the same order, nothing sorted again)."""
    keep = np.flatnonzero(mask)
    new_position = np.full(len(mask), -1, dtype=np.int64)
    new_position[keep] = np.arange(len(keep), dtype=np.int64)
    in_dates = mask[topic.date_order]
    sub = _Topic(
        stories=topic.stories,  # the whole topic's frame: only the arrays below are read per timespan
        media=topic.media,
        story_ids=topic.story_ids[keep],
        story_medium=topic.story_medium[keep],
        story_date=topic.story_date[keep],
        media_ids=topic.media_ids,
        stat_values={k: v[keep] for k, v in topic.stat_values.items()},
        stat_known={k: v[keep] for k, v in topic.stat_known.items()},
        story_group=topic.story_group[keep] if topic.story_group is not None else None,
        n_groups=topic.n_groups,
        date_order=new_position[topic.date_order[in_dates]],
        sorted_dates=topic.sorted_dates[in_dates],
        date_rank=topic.date_rank[keep],  # the same order among the kept stories: enough for "earliest copy"
        whole_position=keep,
    )
    both = mask[cross.source] & mask[cross.ref]
    source = new_position[cross.source[both]]
    by_source = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(np.bincount(source, minlength=len(keep)), out=by_source[1:])
    links = _Links(
        source=source,
        ref=new_position[cross.ref[both]],
        source_medium=cross.source_medium[both],
        ref_medium=cross.ref_medium[both],
        by_source=by_source,
        dropped={},
    )
    return sub, links


def _positions_of(snap: TimespanSnapshot, story_ids: np.ndarray) -> np.ndarray:
    """The counted stories' positions among the topic's (known from the computation, else looked up)."""
    if snap.story_positions is not None:
        return snap.story_positions
    return np.searchsorted(story_ids, snap.story_link_counts["stories_id"].to_numpy(dtype=np.int64))


def _summarize(result: SnapshotResult, texts: StoryTexts) -> None:
    """Every timespan's summary (whole topic and foci); the words of all samples are read in one pass."""
    stories = result.stories
    info = StoryInfo(
        story_ids=stories["stories_id"].to_numpy(dtype=np.int64),
        story_days=stories["publish_day_local"].to_numpy(dtype="datetime64[ns]").view(np.int64),
        title=stories["title"].to_numpy(dtype=object),
        url=stories["url"].to_numpy(dtype=object),
        publish_day_local=stories["publish_day_local"].to_numpy(dtype="datetime64[ns]"),
        media_ids=result.media["media_id"].to_numpy(dtype=np.int64),
        media_names=result.media["name"].to_numpy(dtype=object),
    )
    sample_keys = sample_order(info.story_ids)
    busy = [snap for _, snap in result.all_timespans() if not snap.empty]
    shared_empty = empty_summary()
    for _, snap in result.all_timespans():
        snap.summary = shared_empty if snap.empty else summarize_timespan(snap, info, shared_empty.top_words)
    samples = [
        info.story_ids[sample_positions(_positions_of(snap, info.story_ids), sample_keys, result.word_sample)]
        for snap in busy
    ]
    if not samples:
        return
    union = np.unique(np.concatenate(samples))
    words = count_words(texts, union)
    stop_cache: dict[tuple[str, ...], np.ndarray] = {}
    for snap, sample in zip(busy, samples, strict=True):
        assert snap.summary is not None
        snap.summary = replace(
            snap.summary, top_words=top_words(words, sample, stop_cache=stop_cache), words_sampled=len(sample)
        )


def _window_stories(topic: _Topic, ts: Timespan) -> np.ndarray:
    """Positions (ascending) of the stories published in the timespan; undated ones count for overall only."""
    lo, hi = ts.window_ns()
    first, last = np.searchsorted(topic.sorted_dates, [lo, hi], side="left")
    window = topic.date_order[first:last]
    if ts.period == "overall":
        undated_from = int(np.searchsorted(topic.sorted_dates, _SORT_LAST, side="left"))
        window = np.concatenate([window, topic.date_order[undated_from:]])
    return np.sort(window)


def _timespan_snapshot(
    topic: _Topic, cross: _Links, ts: Timespan, window: np.ndarray, syndicated_once: bool
) -> TimespanSnapshot:
    n = max(len(topic.story_ids), 1)
    n_media = max(len(topic.media_ids), 1)

    # The links whose source was published in the window: each window story's run of the source-sorted
    # links, concatenated in story order, so they stay sorted by (source id, ref id).
    starts = cross.by_source[window]
    selected = _concat_ranges(starts, cross.by_source[window + 1] - starts)

    syndicated_repeats = 0
    if topic.story_group is not None and len(selected):
        # Copies of one syndicated story linking the same ref: the earliest copy (by publish date, then story
        # id) stands for the group. Only links from a story in a real group can repeat.
        group = topic.story_group[cross.source[selected]]
        grouped = np.flatnonzero(group < topic.n_groups)
        if len(grouped):
            group_ref = group[grouped] * n + cross.ref[selected[grouped]]
            order = np.lexsort((topic.date_rank[cross.source[selected[grouped]]], group_ref))
            repeat = np.zeros(len(grouped), dtype=bool)
            repeat[order[1:]] = group_ref[order[1:]] == group_ref[order[:-1]]
            syndicated_repeats = int(repeat.sum())
            if syndicated_once and syndicated_repeats:
                keep = np.ones(len(selected), dtype=bool)
                keep[grouped[repeat]] = False
                selected = selected[keep]

    source, ref = cross.source[selected], cross.ref[selected]
    source_medium, ref_medium = cross.source_medium[selected], cross.ref_medium[selected]

    # Inlinks and media inlinks per linked story: sort the (ref, source medium) pairs once; runs of a ref
    # are its inlinks (the links are distinct pairs: one per linking story), distinct pairs its media.
    ref_medium_pairs = np.sort(ref * n_media + source_medium)
    refs_sorted = ref_medium_pairs // n_media
    ref_runs = _run_starts(refs_sorted)
    linked = refs_sorted[ref_runs]
    inlinks_of_linked = _run_lengths(ref_runs, len(refs_sorted))
    distinct_pair = np.ones(len(ref_medium_pairs), dtype=np.int64)
    if len(ref_medium_pairs) > 1:
        distinct_pair[1:] = ref_medium_pairs[1:] != ref_medium_pairs[:-1]
    media_inlinks_of_linked = (
        np.add.reduceat(distinct_pair, ref_runs) if len(ref_runs) else np.zeros(0, dtype=np.int64)
    )
    source_runs = _run_starts(source)  # source is sorted
    linking = source[source_runs]
    outlinks_of_linking = _run_lengths(source_runs, len(source))

    # The period's stories: published in the window, plus every story such a link points to.
    period_pos = np.concatenate([window, linked])
    period_pos.sort()
    period_pos = _sorted_distinct(period_pos)  # ascending stories_id
    inlinks = np.zeros(len(period_pos), dtype=np.int64)
    media_inlinks = np.zeros(len(period_pos), dtype=np.int64)
    outlinks = np.zeros(len(period_pos), dtype=np.int64)
    at_linked = np.searchsorted(period_pos, linked)
    inlinks[at_linked] = inlinks_of_linked
    media_inlinks[at_linked] = media_inlinks_of_linked
    outlinks[np.searchsorted(period_pos, linking)] = outlinks_of_linking

    story_links = pd.DataFrame(
        {"source_stories_id": topic.story_ids[source], "ref_stories_id": topic.story_ids[ref]}
    )
    # Every frame is built in one constructor call from int64 arrays (no per-column assignment afterwards):
    # pandas' per-call overhead, not the data, is most of the cost of a small timespan.
    story_link_counts = pd.DataFrame(
        {
            "stories_id": topic.story_ids[period_pos],
            "media_id": topic.media_ids[topic.story_medium[period_pos]],
            "inlink_count": inlinks,
            "outlink_count": outlinks,
            "media_inlink_count": media_inlinks,
            **{
                column: pd.arrays.IntegerArray(
                    topic.stat_values[column][period_pos], ~topic.stat_known[column][period_pos]
                )
                for column in STAT_COLUMNS
            },
        }
    )

    pair_key = source_medium * n_media + ref_medium
    if n_media * n_media <= 4 * len(pair_key) + (1 << 16):  # a dense count beats sorting the links
        pair_links = np.bincount(pair_key, minlength=n_media * n_media)
        medium_pair = np.flatnonzero(pair_links)
        pair_links = pair_links[medium_pair]
    else:
        pair_key = np.sort(pair_key)
        pair_runs = _run_starts(pair_key)
        medium_pair, pair_links = pair_key[pair_runs], _run_lengths(pair_runs, len(pair_key))
    medium_links = pd.DataFrame(
        {
            "source_media_id": topic.media_ids[medium_pair // n_media],
            "ref_media_id": topic.media_ids[medium_pair % n_media],
            "link_count": pair_links.astype(np.int64),
        }
    )

    # Per medium of the period's stories (ascending media_id): a medium's stories are a run once sorted.
    medium_of_story = topic.story_medium[period_pos]
    by_medium = np.argsort(medium_of_story, kind="stable")
    medium_runs = _run_starts(medium_of_story[by_medium])
    media_with_stories = medium_of_story[by_medium][medium_runs]
    run_marker = np.zeros(len(period_pos), dtype=np.int64)
    run_marker[medium_runs] = 1
    story_code = np.empty(len(period_pos), dtype=np.int64)  # each story's medium as 0..n_codes-1
    story_code[by_medium] = np.cumsum(run_marker) - 1
    n_codes = len(media_with_stories)

    def medium_sum(values: np.ndarray) -> np.ndarray:
        # float weights are exact below 2**53, far above any count here
        return np.rint(np.bincount(story_code, weights=values, minlength=n_codes)).astype(np.int64)

    # a medium linked in this timespan has a story in it (the ref story), so its code exists
    media_inlink_count = np.bincount(
        np.searchsorted(media_with_stories, medium_pair % n_media), minlength=n_codes
    ).astype(np.int64)
    medium_link_counts = pd.DataFrame(
        {
            "media_id": topic.media_ids[media_with_stories],
            "name": topic.media["name"].to_numpy()[media_with_stories],
            "url": topic.media["url"].to_numpy()[media_with_stories],
            "story_count": np.bincount(story_code, minlength=n_codes).astype(np.int64),
            "media_inlink_count": media_inlink_count,
            "inlink_count": medium_sum(inlinks),
            "outlink_count": medium_sum(outlinks),
            "sum_media_inlink_count": medium_sum(media_inlinks),
            # SQL sum semantics: unknown values are skipped; a medium with no known value sums to null.
            **{
                column: pd.arrays.IntegerArray(
                    medium_sum(topic.stat_values[column][period_pos]),
                    medium_sum(topic.stat_known[column][period_pos].astype(np.int64)) == 0,
                )
                for column in STAT_COLUMNS
            },
        }
    )

    counts = TimespanCounts(
        story_count=len(period_pos),
        story_link_count=len(story_links),
        medium_count=len(media_with_stories),
        medium_link_count=len(medium_links),
        syndicated_repeat_link_count=int(syndicated_repeats),
    )
    positions = period_pos if topic.whole_position is None else topic.whole_position[period_pos]
    return TimespanSnapshot(
        ts,
        story_links,
        story_link_counts,
        medium_links,
        medium_link_counts,
        counts,
        story_positions=positions,
    )


# ----------------------------------------------------------------------------------------------- checks


def snapshot_problems(result: SnapshotResult, topic_start: Any, topic_end: Any) -> list[str]:
    """Consistency problems of a snapshot (empty when consistent), for the asset checks.

    Checks, per timespan of the whole topic and of each focus (named by its folder, ``foci/<focus>/<key>``):
    the timespan lies within the topic's dates (``topic_end`` inclusive); the medium link counts sum to the
    number of story links and every story link joins two different media; every counted story is a topic story
    (and, in a focus, one of the focus's); the counters match the tables.
    """
    start = _as_date(topic_start, "topic start_date")
    end = _as_date(topic_end, "topic end_date") + _DAY
    index = _IdIndex(result.stories["stories_id"].to_numpy())
    story_media = result.stories["media_id"].to_numpy()
    problems: list[str] = []
    focus_index = {found.focus.key: _IdIndex(found.stories_id) for found in result.foci}
    for focus, snap in result.all_timespans():
        ts, key = snap.timespan, timespan_folder(focus, snap.timespan)
        if ts.start_date < start or ts.end_date > end or ts.start_date >= ts.end_date:
            problems.append(f"{key}: {ts.start_date}..{ts.last_date} is outside the topic's dates")
        if snap.empty and not any(len(getattr(snap, table)) for table in _TABLES):
            continue  # nothing counted, nothing to contradict (most timespans of a topic over decades)
        link_sum = int(snap.medium_links["link_count"].sum())
        if link_sum != len(snap.story_links):
            problems.append(
                f"{key}: medium link counts sum to {link_sum}, but there are {len(snap.story_links)} story links"
            )
        source_pos = index.positions(snap.story_links["source_stories_id"].to_numpy())
        ref_pos = index.positions(snap.story_links["ref_stories_id"].to_numpy())
        if (source_pos < 0).any() or (ref_pos < 0).any():
            problems.append(f"{key}: story links name stories that are not topic stories")
        elif (story_media[source_pos] == story_media[ref_pos]).any():
            problems.append(
                f"{key}: {int((story_media[source_pos] == story_media[ref_pos]).sum())} same-medium story links"
            )
        counted = snap.story_link_counts["stories_id"].to_numpy()
        if (index.positions(counted) < 0).any():
            problems.append(f"{key}: story_link_counts counts stories that are not topic stories")
        elif focus is not None and (focus_index[focus.key].positions(counted) < 0).any():
            problems.append(
                f"{key}: story_link_counts counts stories that are not topic stories of the focus"
            )
        expected = (
            len(snap.story_link_counts),
            len(snap.story_links),
            len(snap.medium_link_counts),
            len(snap.medium_links),
        )
        actual = (
            snap.counts.story_count,
            snap.counts.story_link_count,
            snap.counts.medium_count,
            snap.counts.medium_link_count,
        )
        if expected != actual:
            problems.append(f"{key}: counts {actual} do not match the tables {expected}")
    return problems


# ----------------------------------------------------------------------------------------------- files

_NULLABLE_INT = pa.int64()
_SCHEMAS: dict[str, pa.Schema] = {
    "story_links": pa.schema([("source_stories_id", pa.int64()), ("ref_stories_id", pa.int64())]),
    "story_link_counts": pa.schema(
        [
            ("stories_id", pa.int64()),
            ("media_id", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            ("media_inlink_count", pa.int64()),
            *((column, _NULLABLE_INT) for column in STAT_COLUMNS),
            # the stories.csv dates, typed: the instant with its zone in the schema, the publisher's day
            ("publish_date_utc", pa.timestamp("s", tz="UTC")),
            ("publish_day_local", pa.date32()),
        ]
    ),
    "medium_links": pa.schema(
        [("source_media_id", pa.int64()), ("ref_media_id", pa.int64()), ("link_count", pa.int64())]
    ),
    "medium_link_counts": pa.schema(
        [
            ("media_id", pa.int64()),
            ("name", pa.string()),
            ("url", pa.string()),
            ("story_count", pa.int64()),
            ("media_inlink_count", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            ("sum_media_inlink_count", pa.int64()),
            *((column, _NULLABLE_INT) for column in STAT_COLUMNS),
        ]
    ),
    "timespans": pa.schema(
        [
            ("focus", pa.string()),
            ("key", pa.string()),
            ("period", pa.string()),
            ("name", pa.string()),
            ("start_date", pa.date32()),
            ("end_date", pa.date32()),
            ("last_date", pa.date32()),
            *((column, pa.int64()) for column in _COUNT_COLUMNS),
            ("words_sampled", pa.int64()),
        ]
    ),
    "foci": pa.schema(
        [
            ("focus", pa.string()),
            ("focal_set", pa.string()),
            ("name", pa.string()),
            ("kind", pa.string()),
            ("definition", pa.string()),
            ("description", pa.string()),
            ("story_count", pa.int64()),
        ]
    ),
}


def _atomic_write(path: Path, write: Any) -> Path:
    """Write through ``write(tmp_path)`` to a temporary sibling, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _write_parquet(
    frame: pd.DataFrame, schema: pa.Schema, path: Path, joined: pa.Table | None = None
) -> Path:
    """``frame``'s columns of ``schema``, plus the columns of ``joined`` (row-aligned with ``frame``)."""
    # An explicit schema and no pandas metadata keep the bytes a function of the data alone (the pandas
    # metadata would embed library versions); nullable integers read back as Int64 with
    # pd.read_parquet(..., dtype_backend="numpy_nullable"). Integer columns are delta-encoded without a
    # dictionary: ids and counts rarely repeat enough for one, and delta encoding of the sorted ids is about
    # twice as fast to write and half the size (every Parquet reader supports it); text keeps its dictionary.
    extra = joined.column_names if joined is not None else []
    own = pa.schema([f for f in schema if f.name not in extra])
    table = pa.Table.from_pandas(frame[own.names], schema=own, preserve_index=False)
    for name in extra:
        table = table.append_column(schema.field(name), joined.column(name))
    return _write_arrow(table.select(schema.names), path)


def _write_arrow(table: pa.Table, path: Path) -> Path:
    """An Arrow table as Parquet, integers delta-encoded, text with its dictionary, no schema metadata."""
    table = table.replace_schema_metadata(None)
    integers = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    others = [f.name for f in table.schema if f.name not in integers]
    return _atomic_write(
        path,
        lambda tmp: pq.write_table(
            table,
            tmp,
            compression="snappy",
            store_schema=False,
            use_dictionary=others or False,
            column_encoding=dict.fromkeys(integers, "DELTA_BINARY_PACKED"),
        ),
    )


def _write_csv(frame: pd.DataFrame | pa.Table, path: Path) -> Path:
    """CSV via pyarrow (several times faster than DataFrame.to_csv): an unquoted header, nulls as empty
    fields, values quoted where pyarrow's "needed" style quotes them; every CSV reader reads it the same."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    header = (",".join(table.column_names) + "\n").encode("utf-8")
    # Numbers never need quotes: the "none" style writes the same bytes for them, a third faster.
    numeric = all(pa.types.is_integer(column.type) for column in table.columns)
    # Batches of 64k rows rather than pyarrow's 1,024: the same bytes, a third less CPU on the link lists.
    options = pacsv.WriteOptions(
        include_header=False, quoting_style="none" if numeric else "needed", batch_size=1 << 16
    )

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            handle.write(header)
            pacsv.write_csv(table, handle, options)

    return _atomic_write(path, write)


def _story_dates(stories: pd.DataFrame) -> pa.Table:
    """Every story's ``publish_date_utc`` (timestamp, seconds, zone UTC) and ``publish_day_local`` (date), in
    the order of ``stories``; null for undated stories."""
    return pa.table(
        {
            "publish_date_utc": pa.array(
                stories["publish_date"].dt.tz_convert(None).to_numpy(dtype="datetime64[s]"),
                type=pa.timestamp("s", tz="UTC"),
                from_pandas=True,
            ),
            "publish_day_local": pa.array(
                stories["publish_day_local"].to_numpy(dtype="datetime64[D]"),
                type=pa.date32(),
                from_pandas=True,
            ),
        }
    )


def _date_strings(dates: pa.Table) -> pa.Table:
    """The story dates as CSV text: ISO 8601 with its zone ("2019-11-19T00:05:00Z") and the day
    ("2019-11-18"). Arrow's cast of a zone-less timestamp to text ("2019-11-19 00:05:00") and two string
    kernels make the first, some fifteen times cheaper than its strftime or its cast of a zoned timestamp."""
    wall = dates["publish_date_utc"].cast(pa.timestamp("s")).cast(pa.string())
    instant = pc.binary_join_element_wise(
        pc.replace_substring(wall, " ", "T", max_replacements=1), pa.scalar("Z"), ""
    )
    return pa.table(
        {"publish_date_utc": instant, "publish_day_local": dates["publish_day_local"].cast(pa.string())}
    )


#: threads writing a snapshot's files: pyarrow encodes and hashlib hashes without holding the GIL
WRITE_THREADS = min(4, os.cpu_count() or 1)


def write_snapshot_files(
    result: SnapshotResult, folder: str | os.PathLike[str], csv: bool = True
) -> dict[str, list[Path]]:
    """Write each non-empty timespan's tables under ``folder/<timespan folder>/`` and return the paths per
    timespan folder (``timespan_folder``: ``<key>`` for the whole topic, ``foci/<focal set>/<focus>/<key>`` for
    a focus; an empty list for a timespan without stories: it is listed in ``timespans.parquet`` and the
    manifest, marked ``"empty": true``, and gets no folder).

    Per timespan: ``story_links``, ``story_link_counts``, ``medium_links``, ``medium_link_counts`` as Parquet
    and, with ``csv``, Media Cloud style ``stories.csv`` / ``media.csv`` lists (sorted by media inlinks, as
    the web tools list them) plus ``story_links.csv`` / ``medium_links.csv``. A story's dates, in
    ``story_link_counts.parquet`` and ``stories.csv`` alike, are ``publish_date_utc`` (the instant, zone
    UTC: a zoned timestamp, "2019-11-19T00:05:00Z" in CSV) and ``publish_day_local`` (the publisher's
    calendar day, the one its timespans count: "2019-11-18"); both empty for an undated story. The key
    ``"snapshot"`` lists the snapshot's own tables (``timespans``, ``foci``, and the summary tables ``top_words``,
    ``stories_per_day``, ``media_stories_per_day``, ``top_media``, ``top_stories``, each keyed by focus and
    timespan; Parquet + CSV) and ``manifest.json`` (sizes and sha256 of every file).
    Files are written atomically, by a few threads, and byte-identical for identical inputs; existing files
    are replaced, so the caller gives every snapshot its own folder.
    """
    with SnapshotFilesWriter(folder, csv) as files:
        return files.finish(result)


class SnapshotFilesWriter:
    """Writes a snapshot's files on a few threads (pyarrow and hashlib release the GIL), each timespan's as
    soon as it is computed: ``compute_snapshot(..., files=writer)`` hands over the whole topic's timespans
    while the foci are still being computed, so the second core writes while the first computes.
    ``finish`` writes whatever was not handed over yet, then the snapshot's tables and the manifest. Use it as a
    context manager: on an error the pending writes are cancelled and the running ones waited for.

    While the computation runs, one thread writes (a big timespan's files take a few hundred MB on their way to
    disk, and the computation is at its peak too); ``finish`` moves what is still waiting to WRITE_THREADS
    threads."""

    def __init__(self, folder: str | os.PathLike[str], csv: bool = True) -> None:
        self.root = Path(folder)
        self.csv = csv
        self._early = ThreadPoolExecutor(max_workers=1)
        self._pool = ThreadPoolExecutor(max_workers=WRITE_THREADS)
        self._jobs: dict[str, Future[dict[Path, dict[str, Any]]]] = {}
        self._args: dict[str, tuple[Any, ...]] = {}
        self._context: tuple[pa.Table, pa.Table | None, _IdIndex] | None = None

    def __enter__(self) -> SnapshotFilesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        for pool in (self._early, self._pool):
            pool.shutdown(wait=True, cancel_futures=True)

    def start(self, stories: pd.DataFrame, media: pd.DataFrame) -> None:
        """The per-story columns every timespan's files take rows of (``SnapshotResult.stories`` / ``media``)."""
        story_dates = _story_dates(stories)
        story_info: pa.Table | None = None
        if self.csv:
            text_dates = _date_strings(story_dates)
            story_info = pa.table(
                {
                    **{name: text_dates.column(name) for name in STORY_DATE_COLUMNS},
                    "title": pa.array(stories["title"], type=pa.string(), from_pandas=True),
                    "url": pa.array(stories["url"], type=pa.string(), from_pandas=True),
                    "media_name": pa.array(
                        media["name"].to_numpy()[
                            _positions(media["media_id"].to_numpy(), stories["media_id"].to_numpy())
                        ],
                        type=pa.string(),
                        from_pandas=True,
                    ),
                }
            )
        self._context = (story_dates, story_info, _IdIndex(stories["stories_id"].to_numpy()))

    def submit(self, focus: Focus | None, snaps: Sequence[TimespanSnapshot]) -> None:
        """Start writing the files of these timespans (of the whole topic, or of ``focus``)."""
        if self._context is None:
            raise RuntimeError("SnapshotFilesWriter.start must be called before submit")
        story_dates, story_info, story_index = self._context
        # Biggest first, so the threads finish together.
        busy = sorted(
            (snap for snap in snaps if not snap.empty),
            key=lambda snap: -(snap.counts.story_link_count + snap.counts.story_count),
        )
        for snap in busy:
            name = timespan_folder(focus, snap.timespan)
            if name not in self._jobs:
                self._args[name] = (snap, self.root / name, story_dates, story_info, story_index)
                self._jobs[name] = self._early.submit(_write_timespan, *self._args[name])

    def finish(self, result: SnapshotResult) -> dict[str, list[Path]]:
        """Write what is left, wait for every file, then the snapshot's tables and the manifest."""
        if self._context is None:
            self.start(result.stories, result.media)
        self.submit(None, result.timespans)
        for found in result.foci:
            self.submit(found.focus, found.timespans)
        for name, job in self._jobs.items():
            if job.cancel():  # not started yet: to the pool of WRITE_THREADS
                self._jobs[name] = self._pool.submit(_write_timespan, *self._args[name])
        root = self.root
        written: dict[str, list[Path]] = {
            timespan_folder(focus, snap.timespan): [] for focus, snap in result.all_timespans()
        }
        top_job = self._pool.submit(_write_snapshot_tables, result, root, self.csv)
        entries: dict[str, dict[str, Any]] = {}
        for name, job in self._jobs.items():
            files = job.result()
            written[name] = list(files)
            entries.update({path.relative_to(root).as_posix(): entry for path, entry in files.items()})
        top = top_job.result()
        entries.update({path.relative_to(root).as_posix(): _file_entry(path) for path in top})
        manifest = _manifest(result, entries)
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        top.append(_atomic_write(root / "manifest.json", lambda tmp: tmp.write_text(text, encoding="utf-8")))
        written["snapshot"] = top
        return written


def _manifest(result: SnapshotResult, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "count_syndicated_once": result.count_syndicated_once,
        "dropped_links": result.dropped_links,
        "timespans": [
            {
                "key": snap.timespan.key,
                "period": snap.timespan.period,
                "name": snap.timespan.name,
                "start_date": snap.timespan.start_date.isoformat(),
                "last_date": snap.timespan.last_date.isoformat(),
                "counts": asdict(snap.counts),
                "empty": snap.empty,
            }
            for snap in result.timespans
        ],
        "foci": [
            {
                "key": found.focus.key,
                **found.focus.definition(),
                "story_count": found.story_count,
                "timespans": [
                    {
                        "key": snap.timespan.key,
                        "folder": timespan_folder(found.focus, snap.timespan),
                        "counts": asdict(snap.counts),
                        "empty": snap.empty,
                    }
                    for snap in found.timespans
                ],
            }
            for found in result.foci
        ],
        "word_sample": result.word_sample,
        "files": dict(sorted(entries.items())),
    }


#: "topicmap-snapshot/2": a timespan without stories is in the manifest ("empty": true) but has no files.
#: "topicmap-snapshot/3": foci (their timespans under "foci", folders under foci/) and the summary tables.
MANIFEST_FORMAT = "topicmap-snapshot/3"
#: the snapshot's folder of foci: foci/<focal set>/<focus>/<timespan key>/
FOCI_FOLDER = "foci"


def timespan_folder(focus: Focus | None, timespan: Timespan) -> str:
    """A timespan's folder, relative to the snapshot's: ``<timespan key>`` for the whole topic,
    ``foci/<focal set>/<focus>/<timespan key>`` for a focus."""
    return timespan.key if focus is None else f"{FOCI_FOLDER}/{focus.key}/{timespan.key}"


def _write_snapshot_tables(result: SnapshotResult, root: Path, csv: bool) -> list[Path]:
    """The tables of the whole snapshot: timespans (every one, the foci's too), foci, and the summary tables
    (top words, stories per day, top media and stories) of every timespan with stories, if any."""
    tables: dict[str, pa.Table] = {
        "timespans": pa.Table.from_pandas(
            result.timespan_table(), schema=_SCHEMAS["timespans"], preserve_index=False
        )
    }
    if result.foci:
        tables["foci"] = pa.Table.from_pandas(
            result.foci_table(), schema=_SCHEMAS["foci"], preserve_index=False
        )
    summaries = [
        (focus.key if focus is not None else None, snap.timespan.key, snap.summary)
        for focus, snap in result.all_timespans()
        if not snap.empty and snap.summary is not None
    ]
    if summaries:  # a topic without any story has nothing to sum up (and no file but its timespans)
        tables.update(summary_tables(summaries))
    written = []
    for name, table in tables.items():
        written.append(_write_arrow(table, root / f"{name}.parquet"))
        if csv:
            written.append(_write_csv(table, root / f"{name}.csv"))
    return written


def _file_entry(path: Path) -> dict[str, Any]:
    """A file's manifest entry: its size and sha256."""
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def _write_timespan(
    snap: TimespanSnapshot,
    out: Path,
    story_dates: pa.Table,
    story_info: pa.Table | None,
    story_index: _IdIndex,
) -> dict[Path, dict[str, Any]]:
    """One timespan's Parquet (and, with ``story_info``, CSV) files in ``out``, each with its manifest entry."""
    positions = snap.story_positions
    if positions is None:
        positions = story_index.positions(snap.story_link_counts["stories_id"].to_numpy())
    dates = story_dates.take(pa.array(positions))
    paths = [
        _write_parquet(
            getattr(snap, table),
            _SCHEMAS[table],
            out / f"{table}.parquet",
            joined=dates if table == "story_link_counts" else None,
        )
        for table in _TABLES
    ]
    if story_info is not None:
        counts = snap.story_link_counts
        # Media Cloud's web tools list stories by media inlinks, then inlinks, most first.
        order = np.lexsort(
            (
                counts["stories_id"].to_numpy(),
                -counts["inlink_count"].to_numpy(),
                -counts["media_inlink_count"].to_numpy(),
            )
        )
        info = story_info.take(pa.array(positions[order]))
        ordered = pa.Table.from_pandas(counts.iloc[order], preserve_index=False)
        columns = {name: ordered.column(name) for name in ordered.column_names}
        columns.update({name: info.column(name) for name in info.column_names})
        stories_list = pa.table({name: columns[name] for name in STORY_CSV_COLUMNS})
        media_list = snap.medium_link_counts.sort_values(
            ["media_inlink_count", "inlink_count", "media_id"],
            ascending=[False, False, True],
            kind="mergesort",
        )
        paths += [
            _write_csv(stories_list, out / "stories.csv"),
            _write_csv(media_list[list(MEDIA_CSV_COLUMNS)], out / "media.csv"),
            _write_csv(snap.story_links, out / "story_links.csv"),
            _write_csv(snap.medium_links, out / "medium_links.csv"),
        ]
    return {path: _file_entry(path) for path in paths}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
