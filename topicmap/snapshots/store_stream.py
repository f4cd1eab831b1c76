"""A topic read from the store in bounded batches, for the out-of-core engine (``topicmap.snapshots.engine``).

``store_source`` is ``read_snapshot_inputs``'s read (``topicmap.snapshots.inputs``) without the DataFrames: the
topic's stories (minus any story merged away), each on its final medium, the resolved links mapped through the
merged-stories map, the statistics and the near-duplicate groups, each streamed from SQLite or PostgreSQL
(``stream_results``: a server-side cursor on PostgreSQL) ``batch_rows`` rows at a time as Arrow record
batches. Only the maps that resolve ids (merged stories, duplicate media: one entry per merge, not per story)
are held whole; no reader ever holds more than one batch of rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
from sqlalchemy import Select, and_, select

from topicmap.snapshots.engine import BATCH_ROWS, INPUT_SCHEMAS, TopicSource
from topicmap.snapshots.ids import positions
from topicmap.snapshots.inputs import resolve_chains
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, utc


def stream_rows(
    store: TopicStore, query: Select[Any], batch_rows: int = BATCH_ROWS
) -> Iterator[Sequence[Sequence[Any]]]:
    """The rows of ``query``, ``batch_rows`` at a time (a server-side cursor where the database has one)."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    with store.engine.connect().execution_options(stream_results=True, yield_per=batch_rows) as conn:
        result = conn.execute(query)
        for rows in result.partitions(batch_rows):
            yield rows


def _int64(values: Sequence[Any]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _map(ids: np.ndarray, sources: np.ndarray, finals: np.ndarray) -> np.ndarray:
    if sources.size == 0:
        return ids
    pos = positions(sources, ids)
    return np.where(pos >= 0, finals[np.where(pos >= 0, pos, 0)], ids)


def _nullable(values: Sequence[Any]) -> pa.Array:
    return pa.array([None if v is None else int(v) for v in values], type=pa.int64())


def store_source(store: TopicStore, topics_id: int, batch_rows: int = BATCH_ROWS) -> TopicSource:
    """The topic ``topics_id`` as the engine reads it, streamed from the store ``batch_rows`` rows at a time."""
    ts, st, md = s.topic_stories, s.stories, s.media
    with store.engine.connect() as conn:
        merges = conn.execute(
            select(s.topic_merged_stories_map.c.source_stories_id, s.topic_merged_stories_map.c.target_stories_id)
            .where(s.topic_merged_stories_map.c.topics_id == topics_id)
        ).all()
        dup_edges = conn.execute(select(md.c.media_id, md.c.dup_media_id).where(md.c.dup_media_id.is_not(None))).all()
    merge_sources, merge_finals = resolve_chains(
        _int64([m[0] for m in merges]), _int64([m[1] for m in merges]), "merged-stories map"
    )
    dup_sources, dup_finals = resolve_chains(
        _int64([e[0] for e in dup_edges]), _int64([e[1] for e in dup_edges]), "duplicate-media"
    )

    def stories() -> Iterator[pa.RecordBatch]:
        query = (
            select(
                st.c.stories_id, st.c.media_id, st.c.publish_date, st.c.publish_utc_offset, st.c.url, st.c.title,
                st.c.text, st.c.language,
            )
            .join(ts, ts.c.stories_id == st.c.stories_id)
            .where(ts.c.topics_id == topics_id)
            .order_by(st.c.stories_id)
        )
        for rows in stream_rows(store, query, batch_rows):
            ids = _int64([r[0] for r in rows])
            live = positions(merge_sources, ids) < 0 if merge_sources.size else np.ones(len(ids), dtype=bool)
            kept = [r for r, keep in zip(rows, live.tolist(), strict=True) if keep]
            dates = [utc(r[2]) for r in kept]
            yield pa.record_batch(
                {
                    "stories_id": pa.array(ids[live], type=pa.int64()),
                    "media_id": pa.array(_map(_int64([r[1] for r in kept]), dup_sources, dup_finals)),
                    "utc_ns": pa.array(
                        [None if d is None else _ns(d) for d in dates], type=pa.int64()
                    ),
                    "offset_min": _nullable([r[3] for r in kept]),
                    "url": pa.array([r[4] for r in kept], type=pa.string()),
                    "title": pa.array([r[5] for r in kept], type=pa.string()),
                    "text": pa.array([r[6] for r in kept], type=pa.string()),
                    "language": pa.array([r[7] for r in kept], type=pa.string()),
                },
                schema=INPUT_SCHEMAS["stories"],
            )

    def media() -> Iterator[pa.RecordBatch]:
        # the final media of the topic's stories (the engine keeps those its stories name)
        query = select(md.c.media_id, md.c.name, md.c.url).where(md.c.dup_media_id.is_(None)).order_by(md.c.media_id)
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [
                    pa.array(_int64([r[0] for r in rows])),
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
                    pa.array(_map(_int64([r[0] for r in rows]), merge_sources, merge_finals)),
                    pa.array(_map(_int64([r[1] for r in rows]), merge_sources, merge_finals)),
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
            .where(ts.c.topics_id == topics_id, and_(ss.c.stories_id.is_not(None) | bc.c.stories_id.is_not(None)))
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [pa.array(_int64([r[0] for r in rows])), *(_nullable([r[i] for r in rows]) for i in (1, 2, 3))],
                schema=INPUT_SCHEMAS["story_stats"],
            )

    def near_dup_groups() -> Iterator[pa.RecordBatch]:
        nd = s.topic_near_dup_groups
        query = (
            select(nd.c.stories_id, nd.c.group_stories_id)
            .join(ts, and_(ts.c.stories_id == nd.c.stories_id, ts.c.topics_id == nd.c.topics_id))
            .where(nd.c.topics_id == topics_id)
        )
        for rows in stream_rows(store, query, batch_rows):
            yield pa.record_batch(
                [pa.array(_int64([r[0] for r in rows])), pa.array(_int64([r[1] for r in rows]))],
                schema=INPUT_SCHEMAS["near_dup_groups"],
            )

    return TopicSource(
        stories=stories, media=media, links=links, story_stats=story_stats, near_dup_groups=near_dup_groups
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(value: datetime) -> int:
    """An aware datetime as integer ns since the epoch (exact, no float)."""
    return (value - _EPOCH) // timedelta(microseconds=1) * 1000
