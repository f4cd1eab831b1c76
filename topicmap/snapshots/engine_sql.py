"""The SQL of the out-of-core engine's per-timespan tables (``topicmap.snapshots.engine``).

Each select reads the timespan's tables the engine builds (``period``: its counted stories with their counts,
``period_links``, ``period_medium_links``, ``period_posts``: its post counts per story) and ``media``, and names
its columns as ``topicmap.snapshots.files`` writes them, so the streams become the very files the in-memory path
writes. The stories tables' columns that do not depend on the timespan (``STORY_ROWS_SELECT``: title, url, dates
...) are not joined here: the engine holds them by story position and gathers them into each sorted batch.
"""

from __future__ import annotations

from datetime import date

from topicmap.snapshots.results import STAT_COLUMNS
from topicmap.snapshots.timespans import Timespan

_EPOCH = date(1970, 1, 1)

COUNTS_SELECT = f"""
    SELECT p.pos, p.stories_id, p.media_id, p.inlink_count, p.outlink_count, p.media_inlink_count,
           {", ".join(f"p.{c}" for c in STAT_COLUMNS)}
    FROM period p
"""
#: the publisher's day of a story as a date, and its instant (null when the page gave a day only)
_DAY = "CAST(DATE '1970-01-01' + CAST(s.local_day AS INTEGER) AS DATE)"
_INSTANT = "CASE WHEN s.time_known = 0 THEN NULL ELSE make_timestamp(s.utc_s * 1000000) END"
#: which day publish_day_local is (``topicmap.snapshots.files._day_basis``)
_DAY_BASIS = """CASE WHEN s.local_day IS NULL THEN NULL WHEN s.time_known = 0 THEN 'page day'
    WHEN s.zone_known = 1 AND s.offset_min <> 0 THEN 'page offset' WHEN s.zone_known = 1 THEN 'utc stated'
    WHEN s.time_known = 1 THEN 'utc assumed' ELSE 'unknown' END"""
#: the timespan's post counts per story (``period_posts``: stories_id and POST_COLUMNS)
_POST_EXPRESSIONS = {c: f"pp.{c}" for c in ("post_count", "author_count", "channel_count")}
#: the columns of a story's rows that do not depend on the timespan (the dates also as stories.csv's text):
#: computed once per snapshot rather than once per timespan
_STORY_COLUMNS = {
    "publish_date_utc": _INSTANT,
    "publish_day_local": _DAY,
    "publish_date_utc_text": f"strftime({_INSTANT}, '%Y-%m-%dT%H:%M:%SZ')",
    "publish_day_local_text": f"CAST({_DAY} AS VARCHAR)",
    "date_method": "t.date_method",
    "time_known": "s.time_known = 1",
    "zone_known": "s.zone_known = 1",
    "day_basis": _DAY_BASIS,
    "title": "t.title",
    "url": "t.url",
    "language": "t.language",
    "media_name": "m.name",
}
#: each story's ``_STORY_COLUMNS`` in story position order (``stories.pos``)
STORY_ROWS_SELECT = f"""
    SELECT {", ".join(f"{expr} AS {name}" for name, expr in _STORY_COLUMNS.items())}
    FROM stories s JOIN story_text t USING (stories_id) JOIN media m USING (media_id)
    ORDER BY s.pos
"""


def story_row_columns(csv: bool) -> dict[str, str]:
    """The stories table's columns taken from the story rows (``STORY_ROWS_SELECT``), each with its column there:
    with ``csv``, stories.csv's dates as text."""
    columns = {name: name for name in _STORY_COLUMNS if not name.endswith("_text")}
    if csv:
        columns["publish_date_utc"] = "publish_date_utc_text"
        columns["publish_day_local"] = "publish_day_local_text"
    return columns


def stories_select(ts: Timespan, csv: bool) -> str:
    """The timespan's stories table (``files.STORIES_SCHEMA``) but for its ``story_row_columns``, with each
    story's position ``pos`` first (the engine gathers those columns by it): by story id, or with ``csv`` in
    Media Cloud's stories.csv order (most media inlinks first). By id, its story_link_counts columns
    (``files.TIMESPAN_SCHEMAS``) are among them, so one stream writes both files."""
    from topicmap.snapshots.files import STORIES_SCHEMA

    lo = (ts.start_date - _EPOCH).days
    hi = (ts.end_date - _EPOCH).days
    exprs = {
        "in_timespan": f"CASE WHEN p.local_day IS NULL THEN 'undated' WHEN p.local_day >= {lo} "
        f"AND p.local_day < {hi} THEN 'published' ELSE 'linked' END",
        **_POST_EXPRESSIONS,
    }
    gathered = story_row_columns(csv)
    columns = [
        f"{exprs.get(f.name, f'p.{f.name}')} AS {f.name}" for f in STORIES_SCHEMA if f.name not in gathered
    ]
    order = "p.media_inlink_count DESC, p.inlink_count DESC, p.stories_id" if csv else "p.stories_id"
    return (
        f"SELECT p.pos, {', '.join(columns)} FROM period p "
        f"LEFT JOIN period_posts pp USING (stories_id) ORDER BY {order}"
    )


STORY_LINKS_SELECT = (
    "SELECT source AS source_stories_id, ref AS ref_stories_id FROM period_links ORDER BY 1, 2"
)
MEDIUM_LINK_COUNTS_SELECT = f"""
    SELECT m.media_id, m.name, m.url, count(*) AS story_count,
           coalesce(any_value(mi.n), 0) AS media_inlink_count,
           CAST(sum(p.inlink_count) AS BIGINT) AS inlink_count,
           CAST(sum(p.outlink_count) AS BIGINT) AS outlink_count,
           CAST(sum(p.media_inlink_count) AS BIGINT) AS sum_media_inlink_count,
           {", ".join(f"CAST(sum(p.{c}) AS BIGINT) AS {c}" for c in STAT_COLUMNS)}
    FROM period p JOIN media m USING (media_id)
    LEFT JOIN (SELECT ref_media_id, count(*) AS n FROM period_medium_links GROUP BY ref_media_id) mi
           ON mi.ref_media_id = m.media_id
    GROUP BY m.media_id, m.name, m.url
    ORDER BY m.media_id
"""
