"""A topic read from the store in bounded batches, for the out-of-core engine (``topicmap.snapshots.engine``).

``store_source`` is ``read_snapshot_inputs``'s read (``topicmap.snapshots.inputs``) without the DataFrames: the
topic's stories (minus any story merged away), each on its final medium, the resolved links mapped through the
merged-stories map, the statistics and the near-duplicate groups, each streamed from SQLite or PostgreSQL
(``stream_results``: a server-side cursor on PostgreSQL) ``batch_rows`` rows at a time as Arrow record
batches. Only the maps that resolve ids (merged stories, duplicate media: one entry per merge, not per story)
are held whole; no reader ever holds more than one batch of rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy import Connection, Select, and_, func, select

from topicmap.snapshots.engine_input import BATCH_ROWS, INPUT_SCHEMAS, TopicSource
from topicmap.snapshots.foci import Focus
from topicmap.snapshots.ids import int64_ids, positions, to_finals
from topicmap.snapshots.inputs import SnapshotInputs, resolve_chains, snapshot_media_tags
from topicmap.snapshots.names import PERIODS
from topicmap.snapshots.post_counts import read_post_shares
from topicmap.snapshots.timespans import build_timespans
from topicmap.store import schema as s
from topicmap.store.media_tags import declared_media_tags
from topicmap.store.topic_store import TopicStore, utc
from topicmap.store.version_stories import in_current_version


def stream_rows(
    store: TopicStore, query: Select[Any], batch_rows: int = BATCH_ROWS
) -> Iterator[Sequence[Sequence[Any]]]:
    """The rows of ``query``, ``batch_rows`` at a time (a server-side cursor where the database has one)."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    with store.engine.connect().execution_options(stream_results=True, yield_per=batch_rows) as conn:
        result = conn.execute(query)
        yield from result.partitions(batch_rows)


def _nullable(values: Sequence[Any]) -> pa.Array:
    return pa.array([None if v is None else int(v) for v in values], type=pa.int64())


def store_source(store: TopicStore, topics_id: int, batch_rows: int = BATCH_ROWS) -> TopicSource:
    """The topic ``topics_id`` as the engine reads it, streamed from the store ``batch_rows`` rows at a time."""
    ts, st, md = s.topic_stories, s.stories, s.media
    with store.engine.connect() as conn:
        merges = conn.execute(
            select(
                s.topic_merged_stories_map.c.source_stories_id, s.topic_merged_stories_map.c.target_stories_id
            ).where(s.topic_merged_stories_map.c.topics_id == topics_id)
        ).all()
        dup_edges = conn.execute(
            select(md.c.media_id, md.c.dup_media_id).where(md.c.dup_media_id.is_not(None))
        ).all()
    merge_sources, merge_finals = resolve_chains(
        int64_ids([m[0] for m in merges]), int64_ids([m[1] for m in merges]), "merged-stories map"
    )
    dup_sources, dup_finals = resolve_chains(
        int64_ids([e[0] for e in dup_edges]), int64_ids([e[1] for e in dup_edges]), "duplicate-media"
    )

    # the stories of the topic's current version (topicmap.topics.versions), as read_snapshot_inputs reads them
    current = in_current_version(topics_id)

    def stories() -> Iterator[pa.RecordBatch]:
        query = (
            select(
                st.c.stories_id,
                st.c.media_id,
                st.c.publish_date,
                st.c.publish_utc_offset,
                st.c.url,
                st.c.title,
                st.c.text,
                st.c.language,
                st.c.date_guess_method,
                st.c.publish_time_known,
                st.c.publish_zone_known,
            )
            .join(ts, ts.c.stories_id == st.c.stories_id)
            .where(current)
            .order_by(st.c.stories_id)
        )
        for rows in stream_rows(store, query, batch_rows):
            ids = int64_ids([r[0] for r in rows])
            live = positions(merge_sources, ids) < 0 if merge_sources.size else np.ones(len(ids), dtype=bool)
            kept = [r for r, keep in zip(rows, live.tolist(), strict=True) if keep]
            dates = [utc(r[2]) for r in kept]
            yield pa.record_batch(
                {
                    "stories_id": pa.array(ids[live], type=pa.int64()),
                    "media_id": pa.array(to_finals(int64_ids([r[1] for r in kept]), dup_sources, dup_finals)),
                    "utc_ns": pa.array([None if d is None else _ns(d) for d in dates], type=pa.int64()),
                    "offset_min": _nullable([r[3] for r in kept]),
                    "url": pa.array([r[4] for r in kept], type=pa.string()),
                    "title": pa.array([r[5] for r in kept], type=pa.string()),
                    "text": pa.array([r[6] for r in kept], type=pa.string()),
                    "language": pa.array([r[7] for r in kept], type=pa.string()),
                    "date_method": pa.array([r[8] for r in kept], type=pa.string()),
                    "time_known": _nullable([r[9] for r in kept]),
                    "zone_known": _nullable([r[10] for r in kept]),
                },
                schema=INPUT_SCHEMAS["stories"],
            )

    def media() -> Iterator[pa.RecordBatch]:
        # the final media of the topic's stories (the engine keeps those its stories name)
        query = (
            select(md.c.media_id, md.c.name, md.c.url)
            .where(md.c.dup_media_id.is_(None))
            .order_by(md.c.media_id)
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [
                    pa.array(int64_ids([r[0] for r in rows])),
                    pa.array([r[1] for r in rows], type=pa.string()),
                    pa.array([r[2] for r in rows], type=pa.string()),
                ],
                schema=INPUT_SCHEMAS["media"],
            )

    def links() -> Iterator[pa.RecordBatch]:
        tl = s.topic_links
        query = select(tl.c.stories_id, tl.c.ref_stories_id).where(
            tl.c.topics_id == topics_id, tl.c.ref_stories_id.is_not(None)
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [
                    pa.array(to_finals(int64_ids([r[0] for r in rows]), merge_sources, merge_finals)),
                    pa.array(to_finals(int64_ids([r[1] for r in rows]), merge_sources, merge_finals)),
                ],
                schema=INPUT_SCHEMAS["links"],
            )

    def story_stats() -> Iterator[pa.RecordBatch]:
        ss, bc = s.story_statistics, s.bitly_clicks_total
        query = (
            select(ts.c.stories_id, ss.c.facebook_share_count, bc.c.clicks_3d, bc.c.clicks_30d)
            .select_from(ts)
            .outerjoin(ss, ss.c.stories_id == ts.c.stories_id)
            .outerjoin(bc, bc.c.stories_id == ts.c.stories_id)
            .where(current, and_(ss.c.stories_id.is_not(None) | bc.c.stories_id.is_not(None)))
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [
                    pa.array(int64_ids([r[0] for r in rows])),
                    *(_nullable([r[i] for r in rows]) for i in (1, 2, 3)),
                ],
                schema=INPUT_SCHEMAS["story_stats"],
            )

    def near_dup_groups() -> Iterator[pa.RecordBatch]:
        nd = s.topic_near_dup_groups
        query = (
            select(nd.c.stories_id, nd.c.group_stories_id)
            .join(ts, and_(ts.c.stories_id == nd.c.stories_id, ts.c.topics_id == nd.c.topics_id))
            .where(nd.c.topics_id == topics_id, in_current_version(topics_id))
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [pa.array(int64_ids([r[0] for r in rows])), pa.array(int64_ids([r[1] for r in rows]))],
                schema=INPUT_SCHEMAS["near_dup_groups"],
            )

    return TopicSource(
        stories=stories, media=media, links=links, story_stats=story_stats, near_dup_groups=near_dup_groups
    )


def topic_rows(store: TopicStore, topics_id: int) -> int:
    """The topic's stories + resolved links: what decides whether it is read in batches."""
    with store.engine.connect() as conn:
        stories = conn.execute(select(func.count()).where(in_current_version(topics_id))).scalar_one()
        links = conn.execute(
            select(func.count()).where(
                s.topic_links.c.topics_id == topics_id, s.topic_links.c.ref_stories_id.is_not(None)
            )
        ).scalar_one()
    return int(stories) + int(links)


def source_digest(source: TopicSource) -> str:
    """sha256 over every batch of every input, in order: the streamed topic's part of the snapshot key (the
    batches come in a fixed order and size, so the same topic gives the same digest). Integers and dates as
    little-endian int64 plus a null mask, text as JSON, as the key serializes frames."""
    digest = hashlib.sha256()
    for name, batches in source.inputs():
        digest.update(f"input:{name}".encode())
        if batches is None:
            continue
        for batch in batches():
            for field, column in zip(batch.schema, batch.columns, strict=True):
                digest.update(f"{field.name}:{len(column)}".encode())
                if pa.types.is_integer(field.type):
                    digest.update(column.fill_null(0).to_numpy().astype("<i8").tobytes())
                    digest.update(column.is_null().to_numpy(zero_copy_only=False).astype(np.uint8).tobytes())
                else:
                    text = json.dumps(column.to_pylist(), ensure_ascii=False, separators=(",", ":"))
                    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def read_streamed_inputs(
    store: TopicStore, topic_name: str, foci: Sequence[Focus] = (), batch_rows: int = BATCH_ROWS
) -> SnapshotInputs:
    """``read_snapshot_inputs`` for a topic too big to read whole: the same topic, declaration, iteration, dedup
    state and media tags, the tables as a ``TopicSource`` streamed from the store (its frames are empty; the
    texts come with the stories)."""
    row = store.topic_row(topic_name)
    topics_id = int(row["topics_id"])
    config = json.loads(row["config_json"])
    timespans = build_timespans(
        row["start_date"],
        row["end_date"],
        periods=config.get("snapshot_periods") or PERIODS,
        custom=config.get("timespans") or (),
    )
    source = store_source(store, topics_id, batch_rows)
    facts = _streamed_facts(store, topics_id)
    with store.engine.connect() as conn:
        posts = read_post_shares(
            conn,
            topics_id,
            _live_story_ids(store, topics_id, batch_rows),
            _merges(conn, topics_id),
            config.get("bot_policy") or "all",
        )
        version = conn.execute(
            select(func.max(s.topic_versions.c.version)).where(s.topic_versions.c.topics_id == topics_id)
        ).scalar_one_or_none()
    empty = pd.DataFrame()
    return SnapshotInputs(
        topic_name=topic_name,
        topics_id=topics_id,
        config_json=row["config_json"],
        mode=config.get("mode") or "web",
        start_date=row["start_date"],
        end_date=row["end_date"],
        timespans=timespans,
        stories=empty,
        media=empty,
        links=empty,
        story_stats=empty,
        near_dup_groups=empty,
        iteration=facts.pop("iteration"),
        dedup_state=facts.pop("dedup_state"),
        media_tags=facts.pop("media_tags"),
        foci=tuple(foci),
        source=source,
        source_rows=facts.pop("rows"),
        posts=posts,
        topic_version=int(version) if version is not None else None,
    )


def _merges(conn: Connection, topics_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Each merged story -> its final survivor."""
    mg = s.topic_merged_stories_map
    merges = conn.execute(
        select(mg.c.source_stories_id, mg.c.target_stories_id).where(mg.c.topics_id == topics_id)
    ).all()
    return resolve_chains(
        int64_ids([m[0] for m in merges]), int64_ids([m[1] for m in merges]), "merged-stories map"
    )


def _live_story_ids(store: TopicStore, topics_id: int, batch_rows: int) -> np.ndarray:
    """The ids (ascending) of the topic's current stories not merged away: what the post shares map to."""
    ts, mg = s.topic_stories, s.topic_merged_stories_map
    merged = select(mg.c.source_stories_id).where(mg.c.topics_id == topics_id)
    query = (
        select(ts.c.stories_id)
        .where(in_current_version(topics_id), ts.c.stories_id.not_in(merged))
        .order_by(ts.c.stories_id)
    )
    parts = [int64_ids([r[0] for r in rows]) for rows in stream_rows(store, query, batch_rows)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _streamed_facts(store: TopicStore, topics_id: int) -> dict[str, Any]:
    """The iteration, dedup state, media tags and row counts of a topic, by aggregates in the store."""
    ts, st, md, mg, nd = (
        s.topic_stories,
        s.stories,
        s.media,
        s.topic_merged_stories_map,
        s.topic_near_dup_groups,
    )
    merged = select(mg.c.source_stories_id).where(mg.c.topics_id == topics_id)
    live = and_(in_current_version(topics_id), ts.c.stories_id.not_in(merged))
    with store.engine.connect() as conn:
        reasons = dict(
            conn.execute(
                select(mg.c.reason, func.count()).where(mg.c.topics_id == topics_id).group_by(mg.c.reason)
            ).all()
        )
        still_listed = conn.execute(
            select(func.count()).where(in_current_version(topics_id), ts.c.stories_id.in_(merged))
        ).scalar_one()
        on_dups = conn.execute(
            select(func.count(), func.count(func.distinct(st.c.media_id)))
            .select_from(
                ts.join(st, st.c.stories_id == ts.c.stories_id).join(md, md.c.media_id == st.c.media_id)
            )
            .where(live, md.c.dup_media_id.is_not(None))
        ).one()
        tl = s.topic_links
        repointed = conn.execute(
            select(func.count()).where(
                tl.c.topics_id == topics_id,
                tl.c.ref_stories_id.is_not(None),
                tl.c.stories_id.in_(merged) | tl.c.ref_stories_id.in_(merged),
            )
        ).scalar_one()
        in_topic = and_(ts.c.stories_id == nd.c.stories_id, ts.c.topics_id == nd.c.topics_id)
        groups = conn.execute(
            select(func.count(func.distinct(nd.c.group_stories_id)), func.count())
            .select_from(nd.join(ts, in_topic))
            .where(nd.c.topics_id == topics_id, in_current_version(topics_id), nd.c.stories_id.not_in(merged))
        ).one()
        iteration = conn.execute(
            select(func.max(s.topic_spider_metrics.c.iteration)).where(
                s.topic_spider_metrics.c.topics_id == topics_id
            )
        ).scalar_one_or_none()
        if iteration is None:
            iteration = conn.execute(
                select(func.max(ts.c.iteration)).where(ts.c.topics_id == topics_id)
            ).scalar_one()
        story_media = int64_ids(
            conn.execute(
                select(st.c.media_id)
                .distinct()
                .select_from(ts.join(st, st.c.stories_id == ts.c.stories_id))
                .where(live)
            )
            .scalars()
            .all()
        )
        dup_edges = conn.execute(
            select(md.c.media_id, md.c.dup_media_id).where(md.c.dup_media_id.is_not(None))
        ).all()
        tags = declared_media_tags(conn)
        rows = {
            "stories": conn.execute(select(func.count()).select_from(ts).where(live)).scalar_one(),
            "links": conn.execute(
                select(func.count()).where(tl.c.topics_id == topics_id, tl.c.ref_stories_id.is_not(None))
            ).scalar_one(),
        }
    dup_sources, dup_finals = resolve_chains(
        int64_ids([e[0] for e in dup_edges]), int64_ids([e[1] for e in dup_edges]), "duplicate-media"
    )
    media_ids = np.unique(to_finals(story_media, dup_sources, dup_finals))
    media_tags = snapshot_media_tags(tags, media_ids, dup_sources, dup_finals)
    rows["media"] = len(media_ids)
    return {
        "iteration": int(iteration or 0),
        "dedup_state": {
            "merged_stories": sum(reasons.values()),
            "merged_stories_by_reason": dict(sorted(reasons.items())),
            "merged_stories_still_listed": int(still_listed),
            "duplicate_media_merged": int(on_dups[1]),
            "stories_on_duplicate_media": int(on_dups[0]),
            "links_pointing_at_merged_stories": int(repointed),
            "near_dup_groups": int(groups[0]),
            "stories_in_near_dup_groups": int(groups[1]),
        },
        "media_tags": media_tags,
        "rows": {name: int(count) for name, count in rows.items()},
    }


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(value: datetime) -> int:
    """An aware datetime as integer ns since the epoch (exact, no float)."""
    return (value - _EPOCH) // timedelta(microseconds=1) * 1000
