"""Topic-store reads and writes for the social metrics: Bit.ly click totals and Facebook statistics.

Click totals are kept per story in ``bitly_clicks_total`` and partitioned by *publication day*: the UTC day of
:func:`topicmap.social.clicks.story_timestamp` (the publish date, or the collect date when the publish date is missing,
before 2008 or in the future). Only topic stories are measured: those in the current version of at least one
topic (``topicmap.store.version_stories``; a story that left every topic's version keeps its figures, no longer
fetched or exported).
The same timestamp rule is written once in Python (:func:`topicmap.social.clicks.story_timestamp`) and once in SQL
(:func:`story_timestamp_sql`) so the sensors can group a whole table by day without loading it; the Python rule
re-checks every row the SQL selects.

Merged stories (dedup, ``topic_merged_stories_map``) count towards their survivor, as Media Cloud's bitly totals
were per story over all its URL variants, merged stories' URLs included: a survivor's variants are its own plus
those of every story merged into it (through chains too), a merged-away story is no longer measured or exported,
and a survivor whose figures predate a merge into it lacks its stage again (the sensors re-request its day).
A stored figure never goes down: each window keeps the largest figure any fetch observed, with the time of that
fetch (:func:`upsert_click_totals`), so a re-run that found fewer bitlinks (a lookup that failed, a URL no longer
known) cannot lower it.

Facebook engagement goes to ``story_statistics`` (one row per story, upserted), soft failures in
``facebook_api_error``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from sqlalchemy import Connection, Date, and_, case, cast, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from topicmap.social.bitly import StoryClicks
from topicmap.social.clicks import (
    EARLIEST_VALID_PUBLISH_DATE,
    STAGE_3D,
    STAGE_30D,
    STAGE_DELAYS,
    as_utc,
    check_stage,
    clicks_until,
    story_timestamp,
)
from topicmap.social.facebook import EngagementResult, never_works_reason
from topicmap.social.refetch import DayCandidate, day_start
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, decompress_page, topicmap_home, utc
from topicmap.store.version_stories import any_version_story_ids, in_current_version, version_story_ids
from topicmap.web.urls import (
    fix_common_url_mistakes,
    is_homepage_url,
    is_http_url,
    normalize_url,
    url_variants,
)

CANONICAL_HTML_BYTES = 300_000
"""Only the start of a page is searched for ``<link rel=canonical>`` (it belongs in ``<head>``)."""


# ---------------------------------------------------------------------------------------------- story timestamps
def story_timestamp_sql(now: datetime) -> ColumnElement[Any]:
    """SQL twin of :func:`topicmap.social.clicks.story_timestamp` for ``stories`` rows."""
    published = s.stories.c.publish_date
    rejected = or_(
        published.is_(None),
        published < EARLIEST_VALID_PUBLISH_DATE,
        published > as_utc(now, "now"),
    )
    return case((rejected, s.stories.c.collect_date), else_=published)


def _day_sql(dialect: str, timestamp: ColumnElement[Any]) -> ColumnElement[Any]:
    """The UTC day of a stored timestamp. PostgreSQL's ``date(timestamptz)`` would use the session time zone."""
    if dialect == "postgresql":
        return cast(func.timezone("UTC", timestamp), Date)
    return func.date(timestamp)  # SQLite stores UTC as 'YYYY-MM-DD HH:MM:SS.ffffff'


def _as_date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _in_days(timestamp: ColumnElement[Any], first_day: date, last_day: date) -> ColumnElement[bool]:
    if first_day > last_day:
        raise ValueError(f"day range is empty: {first_day} is after {last_day}")
    return and_(timestamp >= day_start(first_day), timestamp < day_start(last_day + timedelta(days=1)))


def _latest_merges() -> Any:
    """Per story that others were merged into: its newest merge (time and id), in any topic."""
    m = s.topic_merged_stories_map
    return (
        select(
            m.c.target_stories_id.label("target"),
            func.max(m.c.merged_at).label("merged_at"),
            func.max(m.c.topic_merged_stories_map_id).label("merge_id"),
        )
        .group_by(m.c.target_stories_id)
        .subquery("latest_merges")
    )


def days_lacking_stage(
    store: TopicStore, stage: str, first_day: date, last_day: date, now: datetime, limit: int
) -> list[DayCandidate]:
    """Publication days in ``[first_day, last_day]`` with topic stories still lacking ``stage``, oldest first:
    stories without the stage's figure, and survivors whose stage was last fetched before a story was merged into
    them (it does not count that story's URLs yet). A fetch after the merge settles the survivor even when it saw
    no more clicks than stored (``checked_*_at``), so a day is not requested again and again."""
    st, b = s.stories, s.bitly_clicks_total
    fetched = b.c.fetched_3d_at if check_stage(stage) == STAGE_3D else b.c.fetched_30d_at
    # the newest fetch of the stage, also one that saw no more clicks (a store older than the column: the figure's)
    checked = func.coalesce(
        b.c.checked_3d_at if check_stage(stage) == STAGE_3D else b.c.checked_30d_at, fetched
    )
    merges = _latest_merges()
    merged_since = and_(fetched.is_not(None), merges.c.merged_at.is_not(None), merges.c.merged_at > checked)
    timestamp = story_timestamp_sql(now)
    day = _day_sql(store.dialect, timestamp).label("day")
    query = (
        select(
            day,
            func.count().label("stories"),
            func.max(st.c.stories_id).label("max_id"),
            func.max(case((merged_since, merges.c.merge_id), else_=0)).label("merge_id"),
        )
        .select_from(
            st.outerjoin(b, b.c.stories_id == st.c.stories_id).outerjoin(
                merges, merges.c.target == st.c.stories_id
            )
        )
        .where(
            st.c.stories_id.in_(any_version_story_ids()),
            _in_days(timestamp, first_day, last_day),
            or_(b.c.stories_id.is_(None), fetched.is_(None), merged_since),
        )
        .group_by(day)
        .order_by(day)
        .limit(limit)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return [DayCandidate(_as_date(r.day), int(r.stories), int(r.max_id), int(r.merge_id or 0)) for r in rows]


def topic_story_days(store: TopicStore, now: datetime) -> list[date]:
    """Every publication day that has topic stories, oldest first (what a full backfill would cover)."""
    timestamp = story_timestamp_sql(now)
    day = _day_sql(store.dialect, timestamp).label("day")
    query = select(day).where(s.stories.c.stories_id.in_(any_version_story_ids())).group_by(day).order_by(day)
    with store.engine.connect() as conn:
        return [_as_date(value) for value in conn.execute(query).scalars()]


def topic_story_timestamps(store: TopicStore, now: datetime) -> dict[str, datetime]:
    """Story URL → story timestamp for every topic story and every story merged into one (the demo seeds its API
    stand-in with these: Bit.ly knows a merged story's URL as well as before the merge)."""
    st, m = s.stories, s.topic_merged_stories_map
    query = select(st.c.url, st.c.publish_date, st.c.collect_date).where(
        or_(
            st.c.stories_id.in_(any_version_story_ids()),
            st.c.stories_id.in_(select(m.c.source_stories_id).distinct()),
        )
    )
    with store.engine.connect() as conn:
        return {
            row.url: story_timestamp(utc(row.publish_date), utc(row.collect_date), now)
            for row in conn.execute(query.order_by(st.c.stories_id))
        }


# ---------------------------------------------------------------------------------------------- stories to measure
@dataclass(frozen=True)
class ClickStory:
    """A topic story to fetch clicks for."""

    stories_id: int
    url: str
    story_ts: datetime
    day: date
    url_variants: tuple[str, ...]
    merged_stories_ids: tuple[int, ...] = ()
    """Stories merged into this one (dedup, any topic, chains followed): their URL variants are in ``url_variants``."""


def canonical_link(html: bytes | str | None, page_url: str) -> str | None:
    """The page's ``<link rel="canonical" href>`` as an absolute http(s) URL, or None."""
    if not html:
        return None
    from lxml import html as lxml_html  # lxml is heavy to import; only needed when pages are stored
    from lxml.etree import ParserError

    chunk = html[:CANONICAL_HTML_BYTES]
    try:
        document = lxml_html.document_fromstring(chunk)
    except (ParserError, ValueError):
        return None
    for link in document.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        href = (link.get("href") or "").strip()
        if "canonical" in rel and href:
            absolute = urljoin(page_url, href)
            return absolute if is_http_url(absolute) else None
    return None


def story_url_variants(
    url: str, redirect_urls: Sequence[str], canonical_url: str | None, known_urls: Sequence[str]
) -> list[str]:
    """Every URL a story is known by, for Bit.ly lookups (Media Cloud's ``all_url_variants``): the story URL, each
    redirect target and the canonical link with their normalized forms (:func:`topicmap.web.urls.url_variants`), plus
    the story's ``story_urls`` rows (its guid and the forms it was found under). Homepages are dropped unless the story URL
    itself is one; order is first seen first."""
    redirects = [r for r in dict.fromkeys(redirect_urls) if r and r != url]
    variants = url_variants(url, redirects[0] if redirects else None, canonical_url)
    for other in redirects[1:]:
        variants.extend(url_variants(other))
    keep_homepages = is_homepage_url(url)
    variants.extend(
        u for u in known_urls if u and is_http_url(u) and (keep_homepages or not is_homepage_url(u))
    )
    return list(dict.fromkeys(variants))


def merged_into(conn: Connection, survivors: Iterable[int]) -> dict[int, list[int]]:
    """Survivor → the stories merged into it (``topic_merged_stories_map``, any topic), directly or through a chain
    (A merged into B, B later into C: both count for C), in the order they were found."""
    m = s.topic_merged_stories_map
    root: dict[int, int] = {sid: sid for sid in survivors}
    found: dict[int, list[int]] = {}
    frontier = list(root)
    while frontier:
        sources: list[tuple[int, int]] = []
        for start in range(0, len(frontier), 500):
            chunk = frontier[start : start + 500]
            sources += conn.execute(
                select(m.c.source_stories_id, m.c.target_stories_id)
                .where(m.c.target_stories_id.in_(chunk))
                .order_by(m.c.topic_merged_stories_map_id)
            ).all()
        frontier = []
        for source, target in sources:
            if source in root:
                continue  # already counted (merged in two topics), or a cycle, which dedup never writes
            root[source] = root[target]
            found.setdefault(root[target], []).append(source)
            frontier.append(source)
    return found


def _variants_by_story(conn: Connection, urls: dict[int, str]) -> dict[int, list[str]]:
    """Each story's URL variants (:func:`story_url_variants`) from its URL, redirect targets, canonical link and
    ``story_urls`` rows; ``urls`` maps stories_id → stories.url. Pages are read and let go 500 stories at a time."""
    ts, su, dl = s.topic_stories, s.story_urls, s.downloads
    ids = sorted(urls)
    variants: dict[int, list[str]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        redirects: dict[int, list[str]] = {}
        known: dict[int, list[str]] = {}
        for sid, redirect in conn.execute(
            select(ts.c.stories_id, ts.c.redirect_url)
            .where(ts.c.stories_id.in_(chunk), ts.c.redirect_url.is_not(None))
            .order_by(ts.c.topic_stories_id)
        ):
            redirects.setdefault(sid, []).append(redirect)
        for sid, known_url in conn.execute(
            select(su.c.stories_id, su.c.url).where(su.c.stories_id.in_(chunk)).order_by(su.c.story_urls_id)
        ):
            known.setdefault(sid, []).append(known_url)
        pages = {
            sid: decompress_page(content)[:CANONICAL_HTML_BYTES]
            for sid, content in conn.execute(
                select(dl.c.stories_id, dl.c.content_gz).where(dl.c.stories_id.in_(chunk))
            )
        }
        for sid in chunk:
            url = urls[sid]
            variants[sid] = story_url_variants(
                url, redirects.get(sid, []), canonical_link(pages.get(sid), url), known.get(sid, [])
            )
    return variants


def click_stories(store: TopicStore, first_day: date, last_day: date, now: datetime) -> list[ClickStory]:
    """Topic stories whose publication day is in ``[first_day, last_day]``, by id, each with its URL variants and
    those of the stories merged into it (a merged story's bitlinks count towards its survivor)."""
    st = s.stories
    timestamp = story_timestamp_sql(now)
    query = (
        select(st.c.stories_id, st.c.url, st.c.publish_date, st.c.collect_date)
        .where(st.c.stories_id.in_(any_version_story_ids()), _in_days(timestamp, first_day, last_day))
        .order_by(st.c.stories_id)
    )
    stories: list[ClickStory] = []
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
        merged = merged_into(conn, [row.stories_id for row in rows])
        urls = {row.stories_id: row.url for row in rows}
        sources = sorted({sid for ids in merged.values() for sid in ids} - set(urls))
        for start in range(0, len(sources), 500):
            urls |= dict(
                conn.execute(
                    select(st.c.stories_id, st.c.url).where(st.c.stories_id.in_(sources[start : start + 500]))
                ).all()
            )
        variants = _variants_by_story(conn, urls)
    for row in rows:
        story_ts = story_timestamp(utc(row.publish_date), utc(row.collect_date), now)
        day = story_ts.date()
        if not first_day <= day <= last_day:
            continue  # cannot happen unless the SQL and Python rules disagree; Python wins
        own = merged.get(row.stories_id, [])
        every = [*variants[row.stories_id], *(url for sid in own for url in variants[sid])]
        stories.append(
            ClickStory(row.stories_id, row.url, story_ts, day, tuple(dict.fromkeys(every)), tuple(own))
        )
    return stories


# ---------------------------------------------------------------------------------------------- click totals
def click_total_row(stage: str, story: ClickStory, clicks: StoryClicks) -> dict[str, Any]:
    """The ``bitly_clicks_total`` values one fetch yields. A 30-day fetch carries the 3-day figure too (computed
    from the same daily clicks, which by then are complete for the first three days)."""
    fetched_at = as_utc(clicks.fetched_at, "fetched_at")
    row: dict[str, Any] = {
        "stories_id": story.stories_id,
        "publish_day": story.day,
        "bitlinks_found": len(clicks.bitlinks),
        "clicks_3d": clicks_until(clicks.daily, story.story_ts + STAGE_DELAYS[STAGE_3D]),
        "fetched_3d_at": fetched_at,
        "clicks_30d": None,
        "fetched_30d_at": None,
        "checked_3d_at": fetched_at,
        "checked_30d_at": None,
    }
    if check_stage(stage) == STAGE_30D:
        row["clicks_30d"] = clicks_until(clicks.daily, story.story_ts + STAGE_DELAYS[STAGE_30D])
        row["fetched_30d_at"] = fetched_at
        row["checked_30d_at"] = fetched_at
    return row


def _figures_kept(stage: str, stored: dict[int, Any], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored figures that stay because this fetch saw fewer clicks (see :func:`upsert_click_totals`)."""
    windows = ("clicks_3d",) if check_stage(stage) == STAGE_3D else ("clicks_3d", "clicks_30d")
    kept = []
    for row in rows:
        old = stored.get(row["stories_id"])
        for column in windows:
            if old is not None and old[column] is not None and row[column] < old[column]:
                kept.append(
                    {
                        "stories_id": row["stories_id"],
                        "window": column.removeprefix("clicks_"),
                        "stored": old[column],
                        "fetched_now": row[column],
                        "stored_fetched_at": utc(old[f"fetched_{column.removeprefix('clicks_')}_at"]),
                        "bitlinks_now": row["bitlinks_found"],
                        "bitlinks_stored": old["bitlinks_found"],
                    }
                )
    return kept


def upsert_click_totals(
    store: TopicStore, stage: str, rows: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Write one stage's totals; a figure never goes down. Returns the stored figures kept over lower new ones.

    Per story and window (3 days, 30 days) the stored figure is the largest any fetch observed, with the time of
    that fetch (``fetched_3d_at`` / ``fetched_30d_at``): clicks only accumulate, so a lower figure means the fetch
    saw less (a bitlink lookup that failed, a URL variant no longer known, Bit.ly revising a day down), not that
    clicks went away. A tie keeps the stored figure and its time. A 3d fetch sets the 3-day window only; a 30d
    fetch both (its 3-day figure comes from the same complete daily clicks, and for a survivor of a merge counts
    the merged stories' bitlinks too). ``bitlinks_found`` belongs to the stored 30-day figure, else to the 3-day
    one. The same fetches in any order give the same figures (a tie keeps the time of whichever came first).
    """
    if not rows:
        return []
    table = s.bitly_clicks_total
    insert = (postgresql.insert if store.dialect == "postgresql" else sqlite.insert)(table)
    new = insert.excluded

    def higher(window: str) -> ColumnElement[bool]:
        return or_(
            table.c[f"clicks_{window}"].is_(None), new[f"clicks_{window}"] > table.c[f"clicks_{window}"]
        )

    def take(window: str) -> dict[str, Any]:
        wins = higher(window)
        return {
            f"clicks_{window}": case((wins, new[f"clicks_{window}"]), else_=table.c[f"clicks_{window}"]),
            f"fetched_{window}_at": case(
                (wins, new[f"fetched_{window}_at"]), else_=table.c[f"fetched_{window}_at"]
            ),
        }

    def newest_check(window: str) -> dict[str, Any]:
        stored, fetched = table.c[f"checked_{window}_at"], new[f"checked_{window}_at"]
        return {
            f"checked_{window}_at": case((or_(stored.is_(None), fetched > stored), fetched), else_=stored)
        }

    updates: dict[str, Any] = {"publish_day": new.publish_day, **take("3d"), **newest_check("3d")}
    if check_stage(stage) == STAGE_3D:
        without_30d = and_(table.c.clicks_30d.is_(None), higher("3d"))
        updates["bitlinks_found"] = case((without_30d, new.bitlinks_found), else_=table.c.bitlinks_found)
    else:
        updates |= take("30d") | newest_check("30d")
        updates["bitlinks_found"] = case((higher("30d"), new.bitlinks_found), else_=table.c.bitlinks_found)
    statement = insert.on_conflict_do_update(index_elements=["stories_id"], set_=updates)
    kept: list[dict[str, Any]] = []
    with store.engine.begin() as conn:
        for start in range(0, len(rows), 500):
            batch = list(rows[start : start + 500])
            stored = {
                row.stories_id: row._mapping
                for row in conn.execute(
                    select(table).where(table.c.stories_id.in_([r["stories_id"] for r in batch]))
                )
            }
            kept += _figures_kept(stage, stored, batch)
            conn.execute(statement, batch)
    return kept


CLICK_COLUMNS = (
    "publish_day",
    "stories_id",
    "url",
    "bitlinks_found",
    "clicks_3d",
    "clicks_30d",
    "fetched_3d_at",
    "fetched_30d_at",
)


def click_rows(store: TopicStore, first_day: date, last_day: date) -> list[dict[str, Any]]:
    """The stored click totals of the topic stories of ``[first_day, last_day]`` with each story's URL, by day
    then story (a story merged into another is counted in its survivor's figures, not again on its own)."""
    b, st = s.bitly_clicks_total, s.stories
    query = (
        select(*(b.c[c] for c in CLICK_COLUMNS if c != "url"), st.c.url)
        .join(st, st.c.stories_id == b.c.stories_id)
        .where(
            b.c.publish_day >= first_day,
            b.c.publish_day <= last_day,
            # a story merged into another counts there (its row stays, as the story does, but is not exported)
            b.c.stories_id.in_(any_version_story_ids()),
        )
        .order_by(b.c.publish_day, b.c.stories_id)
    )
    with store.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query).mappings()]
    for row in rows:
        row["publish_day"] = _as_date(row["publish_day"])
        row["fetched_3d_at"] = utc(row["fetched_3d_at"])
        row["fetched_30d_at"] = utc(row["fetched_30d_at"])
    return [{c: row[c] for c in CLICK_COLUMNS} for row in rows]


def click_parquet_schema():  # noqa: ANN201 - a pyarrow.Schema; pyarrow is imported when a file is written
    """The click export's columns. pyarrow loads here, not with this module (which the sensors import)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("publish_day", pa.date32(), nullable=False),
            pa.field("stories_id", pa.int64(), nullable=False),
            pa.field("url", pa.string(), nullable=False),
            pa.field("bitlinks_found", pa.int32()),
            pa.field("clicks_3d", pa.int64()),
            pa.field("clicks_30d", pa.int64()),
            pa.field("fetched_3d_at", pa.timestamp("us", tz="UTC")),
            pa.field("fetched_30d_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def write_click_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write click rows to ``path`` atomically (temp file in the same folder, then rename); the same rows give the
    same bytes, so a re-run that changes nothing rewrites an identical file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = click_parquet_schema()
    ordered = sorted(rows, key=lambda r: (r["publish_day"], r["stories_id"]))
    table = pa.Table.from_pylist([{c: r[c] for c in schema.names} for r in ordered], schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp_name, compression="zstd")
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def click_exports_dir(home: Path | None = None) -> Path:
    """``TOPICMAP_HOME/exports/click_totals``: one Parquet file per publication day."""
    return (home or topicmap_home()) / "exports" / "click_totals"


def write_click_exports(
    store: TopicStore, first_day: date, last_day: date, folder: Path | None = None
) -> dict[date, Path]:
    """One ``<day>.parquet`` per day of the range that has stored totals (days without stories get no file)."""
    folder = folder or click_exports_dir()
    by_day: dict[date, list[dict[str, Any]]] = {}
    for row in click_rows(store, first_day, last_day):
        by_day.setdefault(row["publish_day"], []).append(row)
    return {
        day: write_click_parquet(rows, folder / f"{day.isoformat()}.parquet") for day, rows in by_day.items()
    }


def clicks_30d_below_3d(store: TopicStore, limit: int = 50) -> tuple[int, list[dict[str, Any]]]:
    """Topic stories whose 30-day total is below their 3-day total: (how many, the first ``limit`` of them)."""
    b, st = s.bitly_clicks_total, s.stories
    condition = and_(
        b.c.clicks_30d.is_not(None),
        b.c.clicks_3d.is_not(None),
        b.c.clicks_30d < b.c.clicks_3d,
        b.c.stories_id.in_(any_version_story_ids()),
    )
    with store.engine.connect() as conn:
        count = int(conn.execute(select(func.count()).select_from(b).where(condition)).scalar_one())
        rows = conn.execute(
            select(b.c.stories_id, b.c.publish_day, st.c.url, b.c.clicks_3d, b.c.clicks_30d)
            .join(st, st.c.stories_id == b.c.stories_id)
            .where(condition)
            .order_by(b.c.publish_day, b.c.stories_id)
            .limit(limit)
        ).mappings()
        return count, [dict(r) for r in rows]


# ---------------------------------------------------------------------------------------------- Facebook
def facebook_url_never_works(url: str | None) -> bool:
    """True when the Graph API can never measure ``url`` (not http, not canonical, or a known never-working kind);
    the same checks :class:`topicmap.social.facebook.FacebookClient` makes before any request, so retrying is pointless."""
    fixed = fix_common_url_mistakes(url)
    if not fixed or not is_http_url(fixed):
        return True
    canonical = normalize_url(fixed)
    return not canonical or not is_http_url(canonical) or never_works_reason(canonical) is not None


def stories_needing_statistics(
    store: TopicStore, topics_id: int, retry_errors_before: datetime
) -> list[dict[str, Any]]:
    """The stories of the topic's current version to ask Facebook about: those without statistics, and those
    whose last attempt was a soft failure collected before ``retry_errors_before`` (a URL nobody had shared may
    be shared since) — unless the URL can never work. Rows ``{"stories_id", "url"}`` by id."""
    st, ss = s.stories, s.story_statistics
    retry = and_(
        ss.c.facebook_api_error.is_not(None),
        or_(ss.c.facebook_api_collect_date.is_(None), ss.c.facebook_api_collect_date < retry_errors_before),
    )
    query = (
        select(st.c.stories_id, st.c.url, ss.c.stories_id.label("has_row"))
        .select_from(st.outerjoin(ss, ss.c.stories_id == st.c.stories_id))
        .where(
            st.c.stories_id.in_(version_story_ids(topics_id)),
            or_(ss.c.stories_id.is_(None), retry),
        )
        .order_by(st.c.stories_id)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        {"stories_id": r.stories_id, "url": r.url}
        for r in rows
        if r.has_row is None or not facebook_url_never_works(r.url)
    ]


def stories_awaiting_statistics(store: TopicStore, topics_id: int) -> tuple[int, int | None]:
    """(how many, the newest stories_id) of the topic's stories without a statistics row: joined since the last
    Facebook fetch (``topicmap.social.joining``)."""
    ts, ss = s.topic_stories, s.story_statistics
    query = (
        select(func.count(), func.max(ts.c.stories_id))
        .select_from(ts.outerjoin(ss, ss.c.stories_id == ts.c.stories_id))
        .where(in_current_version(topics_id), ss.c.stories_id.is_(None))
    )
    with store.engine.connect() as conn:
        count, newest = conn.execute(query).one()
    return int(count), newest


def upsert_story_statistics(store: TopicStore, results: Iterable[tuple[int, EngagementResult]]) -> int:
    """Upsert one ``story_statistics`` row per (stories_id, result); a soft failure clears the counts and records
    the error, a success clears the error. Returns rows written."""
    rows = [
        {
            "stories_id": stories_id,
            "facebook_share_count": result.share_count,
            "facebook_comment_count": result.comment_count,
            "facebook_reaction_count": result.reaction_count,
            "facebook_api_collect_date": as_utc(result.collected_at, "collected_at"),
            "facebook_api_error": result.error,
        }
        for stories_id, result in results
    ]
    if rows:
        with store.engine.begin() as conn:
            store.upsert(
                conn, s.story_statistics, rows, ["stories_id"], [k for k in rows[0] if k != "stories_id"]
            )
    return len(rows)


def statistics_summary(store: TopicStore, topics_id: int) -> dict[str, int]:
    """Counts and totals of the topic's Facebook statistics."""
    ts, ss = s.topic_stories, s.story_statistics
    in_topic = ss.c.stories_id.in_(version_story_ids(topics_id))
    with store.engine.connect() as conn:
        row = conn.execute(
            select(
                func.count().label("stories_with_row"),
                func.count(ss.c.facebook_api_error).label("stories_with_error"),
                func.coalesce(func.sum(ss.c.facebook_share_count), 0).label("share_count"),
                func.coalesce(func.sum(ss.c.facebook_comment_count), 0).label("comment_count"),
                func.coalesce(func.sum(ss.c.facebook_reaction_count), 0).label("reaction_count"),
            ).where(in_topic)
        ).one()
        topic_stories = conn.execute(
            select(func.count(func.distinct(ts.c.stories_id))).where(in_current_version(topics_id))
        ).scalar_one()
    summary = {key: int(value) for key, value in row._mapping.items()}
    summary["topic_stories"] = int(topic_stories)
    return summary


def statistics_rows(store: TopicStore, topics_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """The topic's statistics with story URLs, most shared first (a preview)."""
    ss, st = s.story_statistics, s.stories
    query = (
        select(
            ss.c.stories_id,
            st.c.url,
            ss.c.facebook_share_count,
            ss.c.facebook_comment_count,
            ss.c.facebook_reaction_count,
            ss.c.facebook_api_error,
        )
        .join(st, st.c.stories_id == ss.c.stories_id)
        .where(ss.c.stories_id.in_(version_story_ids(topics_id)))
        .order_by(ss.c.facebook_share_count.desc().nulls_last(), ss.c.stories_id)
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def error_kind(error: str) -> str:
    """A soft-failure message without its URL or details in parentheses, for counting errors by kind."""
    kind = re.sub(r":\s*'.*'$|\s*\([^)]*\)", "", error).strip()
    return kind[:120] or "unknown"
