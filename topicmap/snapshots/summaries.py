"""What a researcher looks at first in a timespan, beside the link tables: attention over time, the top media and
stories by each metric, and the top words (``topicmap.snapshots.words``).

* ``days``: stories published on each day of the timespan (every day, zeros included, the publisher's calendar
  day as the timespans count it); ``media_days``: the same per medium (days with stories only). A story in the
  timespan only through a link (published before or after it) and an undated story are counted apart
  (``outside_stories``, ``undated_stories``), not on a day.
* ``top_media`` / ``top_stories``: the ``TOP_N`` media and stories with the highest value of each metric of
  ``TOP_METRICS`` (media inlinks, inlinks, Facebook shares, Bit.ly clicks at 30 days), one row per (metric,
  rank). Only values above zero rank (an unknown statistic never does); ties: more media inlinks, more inlinks,
  then the lower id. Media Cloud's web tools listed the same per metric, 20 at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from topicmap.snapshots.words import TOP_WORD_COLUMNS

if TYPE_CHECKING:
    from topicmap.snapshots.timespans import Timespan

TOP_METRICS: tuple[str, ...] = (
    "media_inlink_count",
    "inlink_count",
    "facebook_share_count",
    "bitly_clicks_30d",
)
TOP_N = 20
_NS_PER_DAY = 86_400 * 10**9

TOP_MEDIA_COLUMNS: tuple[str, ...] = (
    "metric",
    "rank",
    "media_id",
    "name",
    "url",
    "value",
    "story_count",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)
TOP_STORY_COLUMNS: tuple[str, ...] = (
    "metric",
    "rank",
    "stories_id",
    "title",
    "url",
    "publish_day_local",
    "media_id",
    "media_name",
    "value",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "facebook_share_count",
    "bitly_clicks_3d",
    "bitly_clicks_30d",
)


@dataclass
class TimespanSummary:
    """A timespan's attention over time, top media and stories, and top words."""

    days: pd.DataFrame  # day (datetime64[s] at midnight), story_count: every day of the timespan
    media_days: pd.DataFrame  # day, media_id, story_count: (day, medium) pairs with stories
    top_media: pd.DataFrame  # TOP_MEDIA_COLUMNS
    top_stories: pd.DataFrame  # TOP_STORY_COLUMNS
    top_words: pd.DataFrame  # TOP_WORD_COLUMNS
    words_sampled: int  # stories whose words were counted
    undated_stories: int
    outside_stories: int  # in the timespan through a link only, published outside it


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})


def empty_summary() -> TimespanSummary:
    """The summary of a timespan without stories (shared: treat as read-only)."""
    return TimespanSummary(
        days=pd.DataFrame({"day": pd.Series(dtype="datetime64[s]"), "story_count": pd.Series(dtype="int64")}),
        media_days=pd.DataFrame(
            {
                "day": pd.Series(dtype="datetime64[s]"),
                "media_id": pd.Series(dtype="int64"),
                "story_count": pd.Series(dtype="int64"),
            }
        ),
        top_media=_empty(TOP_MEDIA_COLUMNS),
        top_stories=_empty(TOP_STORY_COLUMNS),
        top_words=_empty(TOP_WORD_COLUMNS),
        words_sampled=0,
        undated_stories=0,
        outside_stories=0,
    )


def _values(table: pd.DataFrame, column: str) -> np.ndarray:
    """A count column as int64, an unknown statistic as 0 (which never ranks)."""
    return table[column].to_numpy(dtype=np.int64, na_value=0)


def _ranked(table: pd.DataFrame, id_column: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``table``'s top rows of every metric of TOP_METRICS, best first: (row positions, ranks, values), one
    block per metric. Only values above zero rank; ties: more media inlinks, more inlinks, then the lower id."""
    media_inlinks = _values(table, "media_inlink_count")
    inlinks = _values(table, "inlink_count")
    ids = _values(table, id_column)
    rows, ranks, values = [], [], []
    for metric in TOP_METRICS:
        value = _values(table, metric)
        candidates = np.flatnonzero(value > 0)
        if len(candidates) > n:  # only rows at least as high as the n-th can be listed: sort those alone
            threshold = np.partition(value[candidates], len(candidates) - n)[len(candidates) - n]
            candidates = candidates[value[candidates] >= threshold]
        order = np.lexsort(
            (ids[candidates], -inlinks[candidates], -media_inlinks[candidates], -value[candidates])
        )[:n]
        chosen = candidates[order]
        rows.append(chosen)
        ranks.append(np.arange(1, len(chosen) + 1, dtype=np.int64))
        values.append(value[chosen])
    return np.concatenate(rows), np.concatenate(ranks), np.concatenate(values)


def _metric_labels(ranks: np.ndarray) -> np.ndarray:
    """The metric of each ranked row (each metric's block starts at rank 1)."""
    block = np.cumsum(ranks == 1) - 1
    return np.asarray(TOP_METRICS, dtype=object)[block] if len(ranks) else np.zeros(0, dtype=object)


def _taken(table: pd.DataFrame, columns: Sequence[str], rows: np.ndarray) -> dict[str, object]:
    """``columns`` of ``table`` at ``rows`` (nullable statistics stay nullable)."""
    return {column: table[column].array[rows] for column in columns}


@dataclass
class StoryInfo:
    """What the top stories list shows of each topic story, aligned with the ascending story ids."""

    story_ids: np.ndarray
    story_days: np.ndarray  # int64 ns of the publisher's day, numpy's NaT integer when undated
    title: np.ndarray  # object
    url: np.ndarray  # object
    publish_day_local: np.ndarray  # datetime64[ns] at midnight, NaT when undated
    media_ids: np.ndarray  # sorted
    media_names: np.ndarray  # object, aligned with media_ids


def summarize_timespan(
    ts: Timespan,
    counts: pd.DataFrame,
    table: pd.DataFrame,
    positions: np.ndarray | None,
    info: StoryInfo,
    no_words: pd.DataFrame,
    n: int = TOP_N,
) -> TimespanSummary:
    """The summary of the timespan ``ts`` from its ``story_link_counts`` (``counts``), its
    ``medium_link_counts`` (``table``) and its counted stories' positions among the topic's (``positions``;
    None: looked up); its words ``no_words`` (an empty table: ``topicmap.snapshots.compute`` counts the words
    of all timespans at once, afterwards)."""
    if positions is None:
        positions = np.searchsorted(info.story_ids, counts["stories_id"].to_numpy(dtype=np.int64))
    days = info.story_days[positions]
    undated = days == np.iinfo(np.int64).min
    lo, hi = ts.window_ns()
    inside = ~undated & (days >= lo) & (days < hi)
    day_number = (days[inside] - lo) // _NS_PER_DAY
    n_days = (ts.end_date - ts.start_date).days
    first_day = np.datetime64(ts.start_date, "s")
    per_day = pd.DataFrame(
        {
            "day": first_day + np.arange(n_days, dtype=np.int64) * np.timedelta64(1, "D"),
            "story_count": np.bincount(day_number, minlength=n_days).astype(np.int64),
        }
    )
    media = counts["media_id"].to_numpy(dtype=np.int64)[inside]
    width = int(media.max(initial=0)) + 1
    pairs, pair_counts = np.unique(day_number * width + media, return_counts=True)  # sorted by day, medium
    media_days = pd.DataFrame(
        {
            "day": first_day + (pairs // width) * np.timedelta64(1, "D"),
            "media_id": pairs % width,
            "story_count": pair_counts.astype(np.int64),
        }
    )

    rows, ranks, values = _ranked(table, "media_id", n)
    top_media = pd.DataFrame(
        {
            "metric": _metric_labels(ranks),
            "rank": ranks,
            **_taken(table, ("media_id", "name", "url"), rows),
            "value": values,
            **_taken(table, TOP_MEDIA_COLUMNS[6:], rows),
        }
    )
    rows, ranks, values = _ranked(counts, "stories_id", n)
    at = positions[rows]
    media_of = counts["media_id"].to_numpy(dtype=np.int64)[rows]
    top_stories = pd.DataFrame(
        {
            "metric": _metric_labels(ranks),
            "rank": ranks,
            "stories_id": counts["stories_id"].to_numpy(dtype=np.int64)[rows],
            "title": info.title[at],
            "url": info.url[at],
            "publish_day_local": info.publish_day_local[at],
            "media_id": media_of,
            "media_name": info.media_names[np.searchsorted(info.media_ids, media_of)],
            "value": values,
            **_taken(counts, TOP_STORY_COLUMNS[9:], rows),
        }
    )
    return TimespanSummary(
        days=per_day,
        media_days=media_days,
        top_media=top_media,
        top_stories=top_stories,
        top_words=no_words,
        words_sampled=0,
        undated_stories=int(undated.sum()),
        outside_stories=int((~undated & ~inside).sum()),
    )


# ----------------------------------------------------------------------------------------------- tables

_FOCUS = pa.field("focus", pa.string())  # the focus key; null for the whole topic
_TIMESPAN = pa.field("timespan", pa.string())
_STATS = [pa.field(c, pa.int64()) for c in ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d")]

#: the snapshot's summary tables: one file each (Parquet + CSV), every timespan of the whole topic and the foci
SUMMARY_SCHEMAS: dict[str, pa.Schema] = {
    "top_words": pa.schema(
        [
            _FOCUS,
            _TIMESPAN,
            ("rank", pa.int64()),
            ("word", pa.string()),
            ("count", pa.int64()),
            ("stories", pa.int64()),
            ("share", pa.float64()),
        ]
    ),
    "stories_per_day": pa.schema([_FOCUS, _TIMESPAN, ("day", pa.date32()), ("story_count", pa.int64())]),
    "media_stories_per_day": pa.schema(
        [_FOCUS, _TIMESPAN, ("day", pa.date32()), ("media_id", pa.int64()), ("story_count", pa.int64())]
    ),
    "top_media": pa.schema(
        [
            _FOCUS,
            _TIMESPAN,
            ("metric", pa.string()),
            ("rank", pa.int64()),
            ("media_id", pa.int64()),
            ("name", pa.string()),
            ("url", pa.string()),
            ("value", pa.int64()),
            ("story_count", pa.int64()),
            ("media_inlink_count", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            *_STATS,
        ]
    ),
    "top_stories": pa.schema(
        [
            _FOCUS,
            _TIMESPAN,
            ("metric", pa.string()),
            ("rank", pa.int64()),
            ("stories_id", pa.int64()),
            ("title", pa.string()),
            ("url", pa.string()),
            ("publish_day_local", pa.date32()),
            ("media_id", pa.int64()),
            ("media_name", pa.string()),
            ("value", pa.int64()),
            ("media_inlink_count", pa.int64()),
            ("inlink_count", pa.int64()),
            ("outlink_count", pa.int64()),
            *_STATS,
        ]
    ),
}
_PARTS: dict[str, str] = {
    "top_words": "top_words",
    "stories_per_day": "days",
    "media_stories_per_day": "media_days",
    "top_media": "top_media",
    "top_stories": "top_stories",
}


def _column(values: pd.Series, field: pa.Field) -> pa.Array:
    if pa.types.is_date32(field.type) and pd.api.types.is_datetime64_any_dtype(values.dtype):
        return pa.array(values.to_numpy(dtype="datetime64[D]"), type=pa.date32(), from_pandas=True)
    return pa.array(values, type=field.type, from_pandas=True)


def summary_tables(summaries: Sequence[tuple[str | None, str, TimespanSummary]]) -> dict[str, pa.Table]:
    """The summary tables of ``(focus key or None, timespan key, summary)`` entries, in their order."""
    tables: dict[str, pa.Table] = {}
    for name, schema in SUMMARY_SCHEMAS.items():
        part = _PARTS[name]
        pieces = [getattr(summary, part) for _, _, summary in summaries]
        sizes = np.array([len(piece) for piece in pieces], dtype=np.int64)
        frame = pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame()
        columns = {
            "focus": pa.array(
                np.repeat(np.array([f for f, _, _ in summaries], dtype=object), sizes), type=pa.string()
            ),
            "timespan": pa.array(
                np.repeat(np.array([t for _, t, _ in summaries], dtype=object), sizes), type=pa.string()
            ),
        }
        for field in schema:
            if field.name not in columns:
                columns[field.name] = _column(
                    frame[field.name] if len(frame) else pd.Series([], dtype=object), field
                )
        tables[name] = pa.table(columns, schema=schema)
    return tables
