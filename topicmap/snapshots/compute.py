"""Snapshots: a topic's cross-media link network per timespan (Media Cloud's topics-snapshot).

Pure library: the caller reads the deduplicated topic from the store into DataFrames and passes them in.

Timespans: ``topicmap.snapshots.timespans`` (``build_timespans``); results: ``topicmap.snapshots.results``;
files: ``topicmap.snapshots.files``; consistency checks: ``topicmap.snapshots.checks``.

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
binary search; it is recorded with zero counts and gets no files. Nothing loops over stories or links in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from topicmap.snapshots.foci import Focus, FrameTexts, StoryTexts, check_foci, focus_story_masks
from topicmap.snapshots.ids import IdIndex, positions, sorted_distinct
from topicmap.snapshots.results import (
    STAT_COLUMNS,
    FocusSnapshot,
    SnapshotResult,
    TimespanCounts,
    TimespanSnapshot,
)
from topicmap.snapshots.summaries import StoryInfo, empty_summary, summarize_timespan
from topicmap.snapshots.timespans import Timespan
from topicmap.snapshots.words import (
    DEFAULT_WORD_SAMPLE,
    count_words,
    sample_order,
    sample_positions,
    top_words,
)

if TYPE_CHECKING:
    from topicmap.snapshots.files import SnapshotFilesWriter

_NAT = np.iinfo(np.int64).min  # numpy's NaT as int64 nanoseconds
#: optional story columns the exports carry as given (stories tables): how the date was found, the language
STORY_EXPORT_COLUMNS: tuple[str, ...] = ("date_method", "time_known", "zone_known", "language")
_SORT_LAST = np.iinfo(np.int64).max  # undated stories sort after every date

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

    # date_method and language, when given, pass through to the exports' stories tables
    columns = ["stories_id", "media_id", "url", "title", "publish_date"]
    columns += [c for c in STORY_EXPORT_COLUMNS if c in stories.columns]
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
    story_medium = positions(media_ids, frame["media_id"].to_numpy())
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
        frame["utc_offset"] = offsets
    frame["publish_day_local"] = (
        story_date.view("datetime64[ns]").astype("datetime64[D]").astype("datetime64[ns]")
    )

    n = len(story_ids)
    index = IdIndex(story_ids)
    stat_values: dict[str, np.ndarray] = {}
    stat_known: dict[str, np.ndarray] = {}
    if story_stats is not None:
        _require(story_stats, "story_stats", ["stories_id"])
        stat_ids = _int_ids(story_stats["stories_id"], "story_stats.stories_id")
        if len(sorted_distinct(np.sort(stat_ids))) != len(stat_ids):
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
        if len(sorted_distinct(np.sort(group_ids))) != len(group_ids):
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
    index = IdIndex(topic.story_ids)
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
    pair = sorted_distinct(pair)  # distinct (source, ref), sorted by source id then ref id
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


def check_compute_arguments(timespans: Sequence[Timespan], foci: Sequence[Focus], word_sample: int) -> None:
    """The arguments both engines take, checked alike: distinct timespan keys, valid foci, a word sample that
    is a whole number >= 0."""
    keys = [ts.key for ts in timespans]
    if len(set(keys)) != len(keys):
        raise ValueError(f"timespan keys repeat: {keys}")
    check_foci(foci)
    if isinstance(word_sample, bool) or not isinstance(word_sample, int) or word_sample < 0:
        raise ValueError(f"word_sample must be a whole number >= 0 (0: every story), got {word_sample!r}")


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
    timespan_stories: Mapping[str, np.ndarray] | None = None,
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
    as it is computed; its ``finish`` writes the rest. ``timespan_stories`` (timespan key -> stories_id): each
    timespan's own stories in place of those published in it (URL-sharing topics:
    ``topicmap.snapshots.post_counts``); the links they make and receive are counted as usual.

    Cost: one pass over the stories and links, then per timespan work in proportion to its own stories and
    links; a timespan without stories costs a binary search and shares one set of empty tables (treat the
    tables as read-only). A focus costs a pass over the topic's links to select its own, then its timespans in
    proportion to its stories and links; a query focus also costs its query on every story.
    """
    if count_syndicated_once and near_dup_groups is None:
        raise ValueError("count_syndicated_once needs near_dup_groups")
    check_compute_arguments(timespans, foci, word_sample)
    if media_tags is not None:
        _require(media_tags, "media_tags", ["media_id", "tag_set", "tag"])
    topic = _prepare_topic(stories, media, story_stats, near_dup_groups)
    cross = _cross_media_links(topic, links)
    texts = texts if texts is not None else FrameTexts(stories)
    if files is not None:
        files.start(topic.stories, topic.media)
    snaps = _timespan_snapshots(topic, cross, timespans, count_syndicated_once, files, None, timespan_stories)
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
                        sub_topic, sub_cross, timespans, count_syndicated_once, files, focus, timespan_stories
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
    selection: Mapping[str, np.ndarray] | None = None,
) -> list[TimespanSnapshot]:
    """Every timespan of ``topic``; each one with stories goes to ``files`` as soon as it is computed."""
    empty: TimespanSnapshot | None = None
    snaps = []
    for ts in timespans:
        window = (
            _window_stories(topic, ts) if selection is None else _selected_stories(topic, selection[ts.key])
        )
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
        snap.summary = (
            shared_empty
            if snap.empty
            else summarize_timespan(
                snap.timespan,
                snap.story_link_counts,
                snap.medium_link_counts,
                snap.story_positions,
                info,
                shared_empty.top_words,
            )
        )
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


def _selected_stories(topic: _Topic, story_ids: np.ndarray) -> np.ndarray:
    """Positions (ascending) of the given stories that are in ``topic`` (a focus holds some only)."""
    found = positions(topic.story_ids, np.asarray(story_ids, dtype=np.int64))
    return np.sort(found[found >= 0])


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
    period_pos = sorted_distinct(period_pos)  # ascending stories_id
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
    whole_positions = period_pos if topic.whole_position is None else topic.whole_position[period_pos]
    return TimespanSnapshot(
        ts,
        story_links,
        story_link_counts,
        medium_links,
        medium_link_counts,
        counts,
        story_positions=whole_positions,
    )
