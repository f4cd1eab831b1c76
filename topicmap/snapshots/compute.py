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

Period stories and links (``compute_snapshot``), following fact sheet section 11:
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

Everything is vectorized with numpy: cross-media distinct links are computed once, sorted by the source
story's date, and each timespan takes a contiguous slice of them (a binary search), then counts with
``np.bincount``/``np.unique``. Nothing loops over stories or links in Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from topicmap.snapshots.names import PERIODS

STAT_COLUMNS: tuple[str, ...] = ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d")

_DAY = timedelta(days=1)
_NAT = np.iinfo(np.int64).min  # numpy's NaT as int64 nanoseconds
_SORT_LAST = np.iinfo(np.int64).max  # undated stories sort after every date

# Column names of Media Cloud's stories and media lists (web-tools topic stories.csv / media.csv), with our
# Bit.ly split into the 3-day and 30-day totals instead of the single bitly_click_count.
STORY_CSV_COLUMNS: tuple[str, ...] = (
    "stories_id",
    "publish_date",
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


@dataclass
class TimespanSnapshot:
    """The four tables of one timespan (sorted by their ids) and its counts."""

    timespan: Timespan
    story_links: pd.DataFrame
    story_link_counts: pd.DataFrame
    medium_links: pd.DataFrame
    medium_link_counts: pd.DataFrame
    counts: TimespanCounts

    def top_media(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` media with the most media inlinks (ties: more inlinks, more stories, lower id)."""
        return self.medium_link_counts.sort_values(
            ["media_inlink_count", "inlink_count", "story_count", "media_id"],
            ascending=[False, False, False, True],
            kind="mergesort",
        ).head(n)


@dataclass
class SnapshotResult:
    """Every timespan's tables, plus the validated topic stories and media (for the CSV lists)."""

    timespans: list[TimespanSnapshot]
    stories: pd.DataFrame  # stories_id, media_id, url, title, publish_date; sorted by stories_id
    media: pd.DataFrame  # media_id, name, url; sorted by media_id
    count_syndicated_once: bool
    dropped_links: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, key: str) -> TimespanSnapshot:
        for snap in self.timespans:
            if snap.timespan.key == key:
                return snap
        raise KeyError(f"no timespan {key!r}; have {[s.timespan.key for s in self.timespans]}")

    def timespan_table(self) -> pd.DataFrame:
        """One row per timespan: key, period, name, start_date, end_date (exclusive), last_date, counts."""
        rows = []
        for snap in self.timespans:
            ts = snap.timespan
            rows.append(
                {
                    "key": ts.key,
                    "period": ts.period,
                    "name": ts.name,
                    "start_date": ts.start_date,
                    "end_date": ts.end_date,
                    "last_date": ts.last_date,
                    **asdict(snap.counts),
                }
            )
        columns = ["key", "period", "name", "start_date", "end_date", "last_date", *_COUNT_COLUMNS]
        table = pd.DataFrame(rows, columns=columns)
        for column in _COUNT_COLUMNS:
            table[column] = table[column].astype("int64")
        return table


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

    frame = stories[["stories_id", "media_id", "url", "title", "publish_date"]].copy()
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

    n = len(story_ids)
    stat_values: dict[str, np.ndarray] = {}
    stat_known: dict[str, np.ndarray] = {}
    if story_stats is not None:
        _require(story_stats, "story_stats", ["stories_id"])
        stat_ids = _int_ids(story_stats["stories_id"], "story_stats.stories_id")
        if len(np.unique(stat_ids)) != len(stat_ids):
            raise ValueError("story_stats.stories_id repeats: one statistics row per story")
        pos = _positions(story_ids, stat_ids)
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

    story_group = None
    if near_dup_groups is not None:
        _require(near_dup_groups, "near_dup_groups", ["stories_id", "group_id"])
        group_ids = _int_ids(near_dup_groups["stories_id"], "near_dup_groups.stories_id")
        if len(np.unique(group_ids)) != len(group_ids):
            raise ValueError("near_dup_groups.stories_id repeats: a story belongs to one group at most")
        if near_dup_groups["group_id"].isna().any():
            raise ValueError("near_dup_groups.group_id has missing values")
        codes, _ = pd.factorize(near_dup_groups["group_id"], sort=True)
        pos = _positions(story_ids, group_ids)
        # Stories outside any group are their own group: ids after the real groups, so they never collide.
        story_group = np.arange(n, dtype=np.int64) + (int(codes.max()) + 1 if len(codes) else 0)
        story_group[pos[pos >= 0]] = codes[pos >= 0]

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
    )


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each id in ``sorted_ids``, -1 where absent."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, ids)
    pos[pos >= len(sorted_ids)] = 0
    found = sorted_ids[pos] == ids
    return np.where(found, pos, -1).astype(np.int64)


@dataclass
class _CrossLinks:
    """Distinct cross-media links as story positions, sorted by (source date, source id, ref id)."""

    source: np.ndarray
    ref: np.ndarray
    source_date: np.ndarray  # sort key: undated sources carry _SORT_LAST
    id_rank: np.ndarray  # each link's rank in (source id, ref id) order, to sort a selection cheaply
    dropped: dict[str, int]


def _cross_media_links(topic: _Topic, links: pd.DataFrame) -> _CrossLinks:
    _require(links, "links", ["stories_id", "ref_stories_id"])
    source = _positions(topic.story_ids, _int_ids(links["stories_id"], "links.stories_id"))
    ref = _positions(topic.story_ids, _int_ids(links["ref_stories_id"], "links.ref_stories_id"))
    dropped = {"source_not_in_topic": int((source < 0).sum())}
    keep = (source >= 0) & (ref >= 0)
    dropped["ref_not_in_topic"] = int(((source >= 0) & (ref < 0)).sum())
    source, ref = source[keep], ref[keep]
    cross = topic.story_medium[source] != topic.story_medium[ref]
    dropped["same_medium"] = int((~cross).sum())
    source, ref = source[cross], ref[cross]
    n = max(len(topic.story_ids), 1)
    pair = np.unique(source * n + ref)  # distinct (source, ref), sorted by source id then ref id
    dropped["duplicate"] = int(len(source) - len(pair))
    source, ref = pair // n, pair % n
    date_key = topic.story_date[source]
    date_key = np.where(date_key == _NAT, _SORT_LAST, date_key)
    order = np.argsort(date_key, kind="stable")
    return _CrossLinks(
        source=source[order], ref=ref[order], source_date=date_key[order], id_rank=order, dropped=dropped
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
) -> SnapshotResult:
    """Compute story_links, story_link_counts, medium_links, medium_link_counts and counts per timespan.

    ``stories`` (stories_id, media_id, publish_date, url, title) and ``media`` (media_id, name, url) must be
    deduplicated already: a repeated id raises ``ValueError``. ``links`` (stories_id → ref_stories_id) may hold
    duplicates, same-medium links and links to stories outside the topic; those are dropped and tallied in
    ``SnapshotResult.dropped_links``. ``story_stats`` (stories_id + any of facebook_share_count,
    bitly_clicks_3d, bitly_clicks_30d) fills the statistics (null where unknown). ``near_dup_groups``
    (stories_id, group_id) enables the syndication report and ``count_syndicated_once``.
    """
    if count_syndicated_once and near_dup_groups is None:
        raise ValueError("count_syndicated_once needs near_dup_groups")
    keys = [ts.key for ts in timespans]
    if len(set(keys)) != len(keys):
        raise ValueError(f"timespan keys repeat: {keys}")
    topic = _prepare_topic(stories, media, story_stats, near_dup_groups)
    cross = _cross_media_links(topic, links)
    snaps = [_timespan_snapshot(topic, cross, ts, count_syndicated_once) for ts in timespans]
    return SnapshotResult(
        timespans=snaps,
        stories=topic.stories,
        media=topic.media,
        count_syndicated_once=count_syndicated_once,
        dropped_links=cross.dropped,
    )


def _timespan_snapshot(
    topic: _Topic, cross: _CrossLinks, ts: Timespan, syndicated_once: bool
) -> TimespanSnapshot:
    n, n_media = len(topic.story_ids), len(topic.media_ids)
    lo, hi = ts.window_ns()
    overall = ts.period == "overall"

    # Links whose source was published in the window: a contiguous run of the date-sorted links.
    first, last = np.searchsorted(cross.source_date, [lo, hi], side="left")
    selected = np.arange(first, last)
    if overall:  # undated sources sort last and belong to the overall timespan only
        undated_from = np.searchsorted(cross.source_date, _SORT_LAST, side="left")
        selected = np.concatenate([selected, np.arange(undated_from, len(cross.source_date))])

    syndicated_repeats = 0
    if topic.story_group is not None and len(selected):
        # Copies of one syndicated story linking the same ref: the earliest copy (the runs are date sorted,
        # and np.unique keeps the first occurrence) stands for the group.
        group_ref = topic.story_group[cross.source[selected]] * max(n, 1) + cross.ref[selected]
        _, first_copy = np.unique(group_ref, return_index=True)
        syndicated_repeats = len(selected) - len(first_copy)
        if syndicated_once:
            selected = selected[np.sort(first_copy)]

    source, ref = cross.source[selected], cross.ref[selected]
    source_medium, ref_medium = topic.story_medium[source], topic.story_medium[ref]

    in_window = (topic.story_date >= lo) & (topic.story_date < hi)
    if overall:
        in_window |= topic.story_date == _NAT
    in_period = in_window
    in_period[ref] = True
    period_pos = np.flatnonzero(in_period)  # ascending stories_id

    inlinks = np.bincount(ref, minlength=n)  # the links are distinct pairs: one per linking story
    outlinks = np.bincount(source, minlength=n)
    ref_from_medium = np.unique(ref * max(n_media, 1) + source_medium)
    media_inlinks = np.bincount(ref_from_medium // max(n_media, 1), minlength=n)

    by_id = np.argsort(cross.id_rank[selected])  # one int sort instead of a two-key lexsort
    story_links = pd.DataFrame(
        {
            "source_stories_id": topic.story_ids[source[by_id]],
            "ref_stories_id": topic.story_ids[ref[by_id]],
        }
    )

    story_link_counts = pd.DataFrame(
        {
            "stories_id": topic.story_ids[period_pos],
            "media_id": topic.media_ids[topic.story_medium[period_pos]],
            "inlink_count": inlinks[period_pos],
            "outlink_count": outlinks[period_pos],
            "media_inlink_count": media_inlinks[period_pos],
        }
    )
    for column in STAT_COLUMNS:
        story_link_counts[column] = pd.arrays.IntegerArray(
            topic.stat_values[column][period_pos], ~topic.stat_known[column][period_pos]
        )

    pair_key = source_medium * max(n_media, 1) + ref_medium
    if n_media * n_media <= 1 << 24:  # a dense count over all medium pairs beats hashing the links
        pair_links = np.bincount(pair_key, minlength=n_media * n_media)
        medium_pair = np.flatnonzero(pair_links)
        pair_links = pair_links[medium_pair]
    else:
        medium_pair, pair_links = np.unique(pair_key, return_counts=True)
    medium_links = pd.DataFrame(
        {
            "source_media_id": topic.media_ids[medium_pair // max(n_media, 1)],
            "ref_media_id": topic.media_ids[medium_pair % max(n_media, 1)],
            "link_count": pair_links.astype(np.int64),
        }
    )

    medium_of_story = topic.story_medium[period_pos]
    story_count = np.bincount(medium_of_story, minlength=n_media)
    media_with_stories = np.flatnonzero(story_count)  # ascending media_id

    def medium_sum(values: np.ndarray) -> np.ndarray:
        # float weights are exact below 2**53, far above any count here
        return np.rint(np.bincount(medium_of_story, weights=values, minlength=n_media)).astype(np.int64)

    medium_link_counts = pd.DataFrame(
        {
            "media_id": topic.media_ids[media_with_stories],
            "name": topic.media["name"].to_numpy()[media_with_stories],
            "url": topic.media["url"].to_numpy()[media_with_stories],
            "story_count": story_count[media_with_stories].astype(np.int64),
            "media_inlink_count": np.bincount(medium_pair % max(n_media, 1), minlength=n_media)[
                media_with_stories
            ],
            "inlink_count": medium_sum(inlinks[period_pos])[media_with_stories],
            "outlink_count": medium_sum(outlinks[period_pos])[media_with_stories],
            "sum_media_inlink_count": medium_sum(media_inlinks[period_pos])[media_with_stories],
        }
    )
    for column in STAT_COLUMNS:
        # SQL sum semantics: unknown values are skipped; a medium with no known value sums to null.
        total = medium_sum(topic.stat_values[column][period_pos])[media_with_stories]
        known = medium_sum(topic.stat_known[column][period_pos].astype(np.int64))[media_with_stories]
        medium_link_counts[column] = pd.arrays.IntegerArray(total, known == 0)
    for frame in (story_link_counts, medium_link_counts, medium_links):
        for column in frame.columns:
            if isinstance(frame[column].dtype, np.dtype) and frame[column].dtype.kind in "iu":
                frame[column] = frame[column].astype(np.int64)

    counts = TimespanCounts(
        story_count=len(period_pos),
        story_link_count=len(story_links),
        medium_count=len(media_with_stories),
        medium_link_count=len(medium_links),
        syndicated_repeat_link_count=int(syndicated_repeats),
    )
    return TimespanSnapshot(ts, story_links, story_link_counts, medium_links, medium_link_counts, counts)


# ----------------------------------------------------------------------------------------------- checks


def snapshot_problems(result: SnapshotResult, topic_start: Any, topic_end: Any) -> list[str]:
    """Consistency problems of a snapshot (empty when consistent), for the asset checks.

    Checks, per timespan: the timespan lies within the topic's dates (``topic_end`` inclusive); the medium
    link counts sum to the number of story links and every story link joins two different media; every
    counted story is a topic story; the counters match the tables.
    """
    start = _as_date(topic_start, "topic start_date")
    end = _as_date(topic_end, "topic end_date") + _DAY
    story_ids = result.stories["stories_id"].to_numpy()
    story_media = result.stories["media_id"].to_numpy()
    problems: list[str] = []
    for snap in result.timespans:
        ts, key = snap.timespan, snap.timespan.key
        if ts.start_date < start or ts.end_date > end or ts.start_date >= ts.end_date:
            problems.append(f"{key}: {ts.start_date}..{ts.last_date} is outside the topic's dates")
        link_sum = int(snap.medium_links["link_count"].sum())
        if link_sum != len(snap.story_links):
            problems.append(
                f"{key}: medium link counts sum to {link_sum}, but there are {len(snap.story_links)} story links"
            )
        source_pos = _positions(story_ids, snap.story_links["source_stories_id"].to_numpy())
        ref_pos = _positions(story_ids, snap.story_links["ref_stories_id"].to_numpy())
        if (source_pos < 0).any() or (ref_pos < 0).any():
            problems.append(f"{key}: story links name stories that are not topic stories")
        elif (story_media[source_pos] == story_media[ref_pos]).any():
            problems.append(
                f"{key}: {int((story_media[source_pos] == story_media[ref_pos]).sum())} same-medium story links"
            )
        if (_positions(story_ids, snap.story_link_counts["stories_id"].to_numpy()) < 0).any():
            problems.append(f"{key}: story_link_counts counts stories that are not topic stories")
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
            ("key", pa.string()),
            ("period", pa.string()),
            ("name", pa.string()),
            ("start_date", pa.date32()),
            ("end_date", pa.date32()),
            ("last_date", pa.date32()),
            *((column, pa.int64()) for column in _COUNT_COLUMNS),
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


def _write_parquet(frame: pd.DataFrame, schema: pa.Schema, path: Path) -> Path:
    # An explicit schema and no pandas metadata keep the bytes a function of the data alone (the pandas
    # metadata would embed library versions); nullable integers read back as Int64 with
    # pd.read_parquet(..., dtype_backend="numpy_nullable").
    table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    table = table.replace_schema_metadata(None)
    return _atomic_write(
        path, lambda tmp: pq.write_table(table, tmp, compression="snappy", store_schema=False)
    )


def _write_csv(frame: pd.DataFrame | pa.Table, path: Path) -> Path:
    """CSV via pyarrow (several times faster than DataFrame.to_csv): an unquoted header, nulls as empty
    fields, values quoted where pyarrow's "needed" style quotes them; every CSV reader reads it the same."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    header = (",".join(table.column_names) + "\n").encode("utf-8")
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")

    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            handle.write(header)
            pacsv.write_csv(table, handle, options)

    return _atomic_write(path, write)


def _date_strings(dates: pd.Series) -> pa.Array:
    """Media Cloud's 'YYYY-MM-DD HH:MM:SS' (UTC) as an Arrow string array; null for undated stories."""
    seconds = pa.array(
        dates.dt.tz_convert(None).to_numpy(dtype="datetime64[s]"), type=pa.timestamp("s"), from_pandas=True
    )
    return pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S")


def write_snapshot_files(
    result: SnapshotResult, folder: str | os.PathLike[str], csv: bool = True
) -> dict[str, list[Path]]:
    """Write each timespan's tables under ``folder/<timespan key>/`` and return the paths per timespan key.

    Per timespan: ``story_links``, ``story_link_counts``, ``medium_links``, ``medium_link_counts`` as Parquet
    and, with ``csv``, Media Cloud style ``stories.csv`` / ``media.csv`` lists (sorted by media inlinks, as
    the web tools list them) plus ``story_links.csv`` / ``medium_links.csv``. The key ``"snapshot"`` lists
    ``timespans.parquet`` (+ ``timespans.csv``) and ``manifest.json`` (sizes and sha256 of every file).
    Files are written atomically and byte-identical for identical inputs; existing files are replaced, so
    the caller gives every snapshot its own folder.
    """
    root = Path(folder)
    written: dict[str, list[Path]] = {}
    story_ids = result.stories["stories_id"].to_numpy()
    if csv:
        # Per-story text columns as one Arrow table, built once and taken by position per timespan.
        story_info = pa.table(
            {
                "publish_date": _date_strings(result.stories["publish_date"]),
                "title": pa.array(result.stories["title"], type=pa.string(), from_pandas=True),
                "url": pa.array(result.stories["url"], type=pa.string(), from_pandas=True),
                "media_name": pa.array(
                    result.media["name"].to_numpy()[
                        _positions(result.media["media_id"].to_numpy(), result.stories["media_id"].to_numpy())
                    ],
                    type=pa.string(),
                    from_pandas=True,
                ),
            }
        )
    for snap in result.timespans:
        out = root / snap.timespan.key
        paths = [
            _write_parquet(getattr(snap, table), _SCHEMAS[table], out / f"{table}.parquet")
            for table in ("story_links", "story_link_counts", "medium_links", "medium_link_counts")
        ]
        if csv:
            counts = snap.story_link_counts
            # Media Cloud's web tools list stories by media inlinks, then inlinks, most first.
            order = np.lexsort(
                (
                    counts["stories_id"].to_numpy(),
                    -counts["inlink_count"].to_numpy(),
                    -counts["media_inlink_count"].to_numpy(),
                )
            )
            info = story_info.take(pa.array(_positions(story_ids, counts["stories_id"].to_numpy())[order]))
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
        written[snap.timespan.key] = paths

    table = result.timespan_table()
    top = [_write_parquet(table, _SCHEMAS["timespans"], root / "timespans.parquet")]
    if csv:
        top.append(_write_csv(table, root / "timespans.csv"))
    manifest = {
        "format": "topicmap-snapshot/1",
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
            }
            for snap in result.timespans
        ],
        "files": {
            path.relative_to(root).as_posix(): {"bytes": path.stat().st_size, "sha256": _sha256(path)}
            for path in sorted([*top, *(p for paths in written.values() for p in paths)])
        },
    }
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    top.append(_atomic_write(root / "manifest.json", lambda tmp: tmp.write_text(text, encoding="utf-8")))
    written["snapshot"] = top
    return written


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
