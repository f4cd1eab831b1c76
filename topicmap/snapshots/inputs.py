"""What a snapshot is computed from, read from the topic store as dedup left it (no Dagster here).

``read_snapshot_inputs`` reads the stories of the topic's current version (``topicmap.topics.versions``: minus
those that left it when the topic changed; minus any story dedup merged away, should one have been re-added
since), each story's medium mapped through the ``media.dup_media_id`` chain to its final medium (vectorized, so
a duplicate medium never counts as a medium of its own), the topic's resolved links (both ends mapped through
``topic_merged_stories_map``, for links mined after dedup ran), Facebook and Bit.ly statistics, near-duplicate
groups, the media tags, the iteration the spider reached and the dedup state, in one consistent read. The
stories' texts are read later, a chunk at a time (``StoreTexts``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, func, select

from topicmap.snapshots.engine_input import TopicSource
from topicmap.snapshots.foci import Focus, TextChunk
from topicmap.snapshots.ids import int64_ids, positions, to_finals
from topicmap.snapshots.names import PERIODS
from topicmap.snapshots.post_counts import PostShares, read_post_shares
from topicmap.snapshots.timespans import Timespan, build_timespans
from topicmap.store import schema as s
from topicmap.store.media_tags import declared_media_tags
from topicmap.store.topic_store import StoreError, TopicStore, utc
from topicmap.store.version_stories import in_current_version

#: ids per IN list (one every database takes)
_CHUNK = 500


@dataclass
class SnapshotInputs:
    """The deduplicated topic as ``compute_snapshot`` wants it, plus what the snapshot records about it."""

    topic_name: str
    topics_id: int
    config_json: str
    start_date: date  # inclusive
    end_date: date  # inclusive
    timespans: list[Timespan]
    # stories_id, media_id (final medium), publish_date (UTC), url, title, publish_utc_offset (the page's own
    # offset in minutes, None if unknown: it gives the publisher's calendar day), date_method (how the date
    # was found: stories.date_guess_method), language, time_known / zone_known (did the page give a time of day,
    # a zone: stories.publish_time_known / publish_zone_known; None when unknown)
    stories: pd.DataFrame
    media: pd.DataFrame  # media_id, name, url (final media only)
    links: pd.DataFrame  # stories_id, ref_stories_id (merged stories mapped to their survivors)
    story_stats: pd.DataFrame  # stories_id, facebook_share_count, bitly_clicks_3d, bitly_clicks_30d (Int64)
    near_dup_groups: pd.DataFrame  # stories_id, group_id
    iteration: int
    dedup_state: dict[str, Any] = field(default_factory=dict)
    # media_id (final medium), tag_set, tag: the tags of the topic's media, distinct, sorted
    media_tags: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["media_id", "tag_set", "tag"])
    )
    foci: tuple[Focus, ...] = ()
    #: the stories' titles, texts and languages (query foci, top words); None: the ``stories`` frame's columns
    texts: StoreTexts | None = None
    #: ``web`` or ``url_sharing`` (``topicmap.snapshots.post_counts``)
    mode: str = "web"
    #: the posts sharing the topic's stories, after the topic's bot policy
    posts: PostShares = field(default_factory=PostShares)
    #: the topic version (``topicmap.topics.versions``) whose stories these are; None: no version recorded
    topic_version: int | None = None
    #: the topic as bounded record batches for the out-of-core engine (``topicmap.snapshots.engine``); when
    #: given, it is what the snapshot is computed from, and the frames above may be empty
    source: TopicSource | None = None
    #: rows per input when ``source`` is given (``row_counts``); None: the frames' lengths
    source_rows: dict[str, int] | None = None

    def frames(self) -> Iterator[tuple[str, pd.DataFrame]]:
        yield "stories", self.stories
        yield "media", self.media
        yield "links", self.links
        yield "story_stats", self.story_stats
        yield "near_dup_groups", self.near_dup_groups
        yield "media_tags", self.media_tags
        yield "post_shares", self.posts.shares

    def row_counts(self) -> dict[str, int]:
        counted = {name: len(frame) for name, frame in self.frames()}
        return counted if self.source_rows is None else {**counted, **self.source_rows}


def resolve_chains(sources: np.ndarray, targets: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Follow ``source -> target`` chains to their ends, vectorized (pointer doubling: log2(longest chain)
    rounds of array lookups instead of one query per medium as ``TopicStore.media.final_medium`` does).

    Returns ``(sorted sources, final target of each)``. A target that is not itself a source is final. A
    repeated source or a cycle raises ``StoreError`` naming the ids (``what`` says which map it is).
    """
    sources = np.asarray(sources, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    order = np.argsort(sources, kind="stable")
    sources, final = sources[order], targets[order]
    repeated = sources[1:][sources[1:] == sources[:-1]]
    if repeated.size:
        raise StoreError(f"{what}: id(s) {np.unique(repeated)[:10].tolist()} point at more than one target")
    for _ in range(max(int(np.ceil(np.log2(max(len(sources), 2)))) + 2, 3)):
        pos = positions(sources, final)
        moving = pos >= 0
        if not moving.any():
            return sources, final
        final = np.where(moving, final[np.where(moving, pos, 0)], final)
    # Still moving after enough doublings for the longest possible chain: some chain ends in a cycle.
    start = int(sources[positions(sources, final) >= 0][0])
    step = dict(zip(sources.tolist(), targets[order].tolist(), strict=True))
    seen: list[int] = []
    node = start
    while node not in seen:
        seen.append(node)
        node = step[node]
    cycle = [*seen[seen.index(node) :], node]
    raise StoreError(f"{what} cycle: {' -> '.join(str(i) for i in cycle)}")


def snapshot_media_tags(
    tags: Sequence[tuple[int, str, str]],
    media_ids: np.ndarray,
    dup_sources: np.ndarray,
    dup_finals: np.ndarray,
) -> pd.DataFrame:
    """The (media_id, tag_set, tag) rows of the snapshot's media (sorted ``media_ids``), once each and sorted.
    A tag of a duplicate medium is its final medium's, as its stories are."""
    tag_media = to_finals(int64_ids([m for m, _, _ in tags]), dup_sources, dup_finals)
    media_tags = pd.DataFrame(
        {"media_id": tag_media, "tag_set": [t[1] for t in tags], "tag": [t[2] for t in tags]}
    )
    media_tags = media_tags[positions(media_ids, tag_media) >= 0]
    return (
        media_tags.drop_duplicates()
        .sort_values(["media_id", "tag_set", "tag"], kind="mergesort")
        .reset_index(drop=True)
    )


def _utc_dates(values: list[Any]) -> pd.Series:
    # SQLite hands back naive datetimes (UTC by the store's convention), PostgreSQL aware ones.
    return pd.Series(
        pd.to_datetime([utc(v) for v in values], utc=True), dtype="datetime64[ns, UTC]", name="publish_date"
    )


class StoreTexts:
    """The titles, texts and languages of a topic's stories, read from the store a chunk at a time (a topic's
    texts are never all in memory). A pass over every story (query foci) also hashes them for the snapshot key
    (``digest``), so the key covers what the foci and the words were computed from."""

    def __init__(self, store: TopicStore, stories_ids: np.ndarray) -> None:
        self.store = store
        self.stories_ids = np.asarray(stories_ids, dtype=np.int64)
        self._digest: str | None = None

    def chunks(self, stories_ids: np.ndarray) -> Iterator[TextChunk]:
        st = s.stories
        every = np.array_equal(stories_ids, self.stories_ids)
        digest = hashlib.sha256() if every and self._digest is None else None
        with self.store.engine.connect() as conn:
            for start in range(0, len(stories_ids), _CHUNK):  # an IN list every database takes
                ids = stories_ids[start : start + _CHUNK]
                rows = conn.execute(
                    select(st.c.stories_id, st.c.title, st.c.text, st.c.language)
                    .where(st.c.stories_id.in_(ids.tolist()))
                    .order_by(st.c.stories_id)
                ).all()
                chunk = TextChunk(
                    stories_id=int64_ids([r[0] for r in rows]),
                    title=[r[1] for r in rows],
                    text=[r[2] for r in rows],
                    language=[r[3] for r in rows],
                )
                if digest is not None:
                    digest.update(_text_bytes(chunk))
                yield chunk
        if digest is not None:
            self._digest = digest.hexdigest()

    def digest(self) -> str:
        """sha256 of every story's id, title, text and language (one pass over the texts, unless done)."""
        if self._digest is None:
            for _ in self.chunks(self.stories_ids):
                pass
        assert self._digest is not None
        return self._digest


def _text_bytes(chunk: TextChunk) -> bytes:
    values = list(zip(chunk.stories_id.tolist(), chunk.title, chunk.text, chunk.language, strict=True))
    return json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def read_snapshot_inputs(store: TopicStore, topic_name: str, foci: Sequence[Focus] = ()) -> SnapshotInputs:
    """Read the topic ``topic_name`` from the store, deduplicated, in one consistent read; ``foci`` are the
    topic's foci (``topicmap.snapshots.foci.topic_foci``: the declarations parse them with the topic).
    The texts are read later, a chunk at a time (``StoreTexts``)."""
    row = store.topic_row(topic_name)
    topics_id = int(row["topics_id"])
    config = json.loads(row["config_json"])
    start_date, end_date = row["start_date"], row["end_date"]
    timespans = build_timespans(
        start_date,
        end_date,
        periods=config.get("snapshot_periods") or PERIODS,
        custom=config.get("timespans") or (),
    )
    options = {"isolation_level": "REPEATABLE READ"} if store.dialect == "postgresql" else {}
    with store.engine.connect().execution_options(**options) as conn, conn.begin():
        frames = _read_topic(conn, topics_id, config)
        # the topic's current version (topicmap.topics.versions), read with its stories
        version = conn.execute(
            select(func.max(s.topic_versions.c.version)).where(s.topic_versions.c.topics_id == topics_id)
        ).scalar_one_or_none()
    return SnapshotInputs(
        topic_name=topic_name,
        topics_id=topics_id,
        config_json=row["config_json"],
        mode=config.get("mode") or "web",
        start_date=start_date,
        end_date=end_date,
        timespans=timespans,
        foci=tuple(foci),
        texts=StoreTexts(store, frames["stories"]["stories_id"].to_numpy()),
        topic_version=int(version) if version is not None else None,
        **frames,
    )


def _read_topic(conn: Connection, topics_id: int, config: dict[str, Any]) -> dict[str, Any]:
    ts, st, md = s.topic_stories, s.stories, s.media

    merges = conn.execute(
        select(
            s.topic_merged_stories_map.c.source_stories_id,
            s.topic_merged_stories_map.c.target_stories_id,
            s.topic_merged_stories_map.c.reason,
        ).where(s.topic_merged_stories_map.c.topics_id == topics_id)
    ).all()
    merge_sources, merge_finals = resolve_chains(
        int64_ids([m[0] for m in merges]), int64_ids([m[1] for m in merges]), "merged-stories map"
    )

    story_rows = conn.execute(
        select(
            st.c.stories_id,
            st.c.media_id,
            st.c.url,
            st.c.title,
            st.c.publish_date,
            st.c.publish_utc_offset,
            st.c.date_guess_method,
            st.c.language,
            st.c.publish_time_known,
            st.c.publish_zone_known,
        )
        .join(ts, ts.c.stories_id == st.c.stories_id)
        # the stories of the topic's current version: one that left it when the topic changed is not counted
        .where(in_current_version(topics_id))
        .order_by(st.c.stories_id)
    ).all()
    story_ids = int64_ids([r[0] for r in story_rows])
    # A story dedup merged away but found again by a later spider iteration is its survivor, not a second copy.
    live = positions(merge_sources, story_ids) < 0
    story_rows = [r for r, keep in zip(story_rows, live.tolist(), strict=True) if keep]
    story_ids = story_ids[live]
    story_media = int64_ids([r[1] for r in story_rows])

    dup_edges = conn.execute(
        select(md.c.media_id, md.c.dup_media_id).where(md.c.dup_media_id.is_not(None))
    ).all()
    dup_sources, dup_finals = resolve_chains(
        int64_ids([e[0] for e in dup_edges]), int64_ids([e[1] for e in dup_edges]), "duplicate-media"
    )
    final_media = to_finals(story_media, dup_sources, dup_finals)
    moved = final_media != story_media

    media_ids = np.unique(final_media)
    media_rows: list[Any] = []
    for start in range(0, len(media_ids), _CHUNK):
        chunk = media_ids[start : start + _CHUNK].tolist()
        media_rows += conn.execute(
            select(md.c.media_id, md.c.name, md.c.url).where(md.c.media_id.in_(chunk))
        ).all()
    media = pd.DataFrame(
        {
            "media_id": int64_ids([m[0] for m in media_rows]),
            "name": [m[1] for m in media_rows],
            "url": [m[2] for m in media_rows],
        }
    )
    media = media.sort_values("media_id", kind="mergesort").reset_index(drop=True)
    stories = pd.DataFrame(
        {
            "stories_id": story_ids,
            "media_id": final_media,
            "publish_date": _utc_dates([r[4] for r in story_rows]),
            "url": [r[2] for r in story_rows],
            "title": [r[3] for r in story_rows],
            "publish_utc_offset": [r[5] for r in story_rows],
            "date_method": [r[6] for r in story_rows],
            "language": [r[7] for r in story_rows],
            "time_known": [r[8] for r in story_rows],
            "zone_known": [r[9] for r in story_rows],
        }
    )

    tl = s.topic_links
    link_rows = conn.execute(
        select(tl.c.stories_id, tl.c.ref_stories_id).where(
            tl.c.topics_id == topics_id, tl.c.ref_stories_id.is_not(None)
        )
    ).all()
    link_source = int64_ids([r[0] for r in link_rows])
    link_ref = int64_ids([r[1] for r in link_rows])
    mapped_source = to_finals(link_source, merge_sources, merge_finals)
    mapped_ref = to_finals(link_ref, merge_sources, merge_finals)
    links = pd.DataFrame({"stories_id": mapped_source, "ref_stories_id": mapped_ref})
    links = links.sort_values(["stories_id", "ref_stories_id"], kind="mergesort").reset_index(drop=True)

    story_stats = _read_statistics(conn, topics_id, story_ids)

    nd = s.topic_near_dup_groups
    group_rows = conn.execute(
        select(nd.c.stories_id, nd.c.group_stories_id).where(nd.c.topics_id == topics_id)
    ).all()
    groups = pd.DataFrame(
        {
            "stories_id": int64_ids([g[0] for g in group_rows]),
            "group_id": int64_ids([g[1] for g in group_rows]),
        }
    )
    groups = groups[positions(story_ids, groups["stories_id"].to_numpy()) >= 0]
    groups = groups.sort_values("stories_id", kind="mergesort").reset_index(drop=True)

    iteration = conn.execute(
        select(func.max(s.topic_spider_metrics.c.iteration)).where(
            s.topic_spider_metrics.c.topics_id == topics_id
        )
    ).scalar_one_or_none()
    if iteration is None:  # spidered by hand or not yet: the deepest iteration a topic story came from
        iteration = conn.execute(
            select(func.max(ts.c.iteration)).where(ts.c.topics_id == topics_id)
        ).scalar_one()

    reasons: dict[str, int] = {}
    for merge in merges:
        reasons[merge[2]] = reasons.get(merge[2], 0) + 1
    media_tags = snapshot_media_tags(declared_media_tags(conn), media_ids, dup_sources, dup_finals)
    posts = read_post_shares(
        conn, topics_id, story_ids, (merge_sources, merge_finals), config.get("bot_policy") or "all"
    )
    dedup_state = {
        "merged_stories": len(merges),
        "merged_stories_by_reason": dict(sorted(reasons.items())),
        "merged_stories_still_listed": int((~live).sum()),
        "duplicate_media_merged": int(len(np.unique(story_media[moved]))),
        "stories_on_duplicate_media": int(moved.sum()),
        "links_pointing_at_merged_stories": int(
            ((mapped_source != link_source) | (mapped_ref != link_ref)).sum()
        ),
        "near_dup_groups": int(groups["group_id"].nunique()),
        "stories_in_near_dup_groups": len(groups),
    }
    return {
        "posts": posts,
        "stories": stories,
        "media": media,
        "links": links,
        "story_stats": story_stats,
        "near_dup_groups": groups,
        "iteration": int(iteration or 0),
        "dedup_state": dedup_state,
        "media_tags": media_tags,
    }


def _read_statistics(conn: Connection, topics_id: int, story_ids: np.ndarray) -> pd.DataFrame:
    """Facebook shares and Bit.ly clicks of the topic stories; null where never measured."""
    ts, ss, bc = s.topic_stories, s.story_statistics, s.bitly_clicks_total
    facebook = conn.execute(
        select(ss.c.stories_id, ss.c.facebook_share_count)
        .join(ts, ts.c.stories_id == ss.c.stories_id)
        .where(in_current_version(topics_id))
    ).all()
    clicks = conn.execute(
        select(bc.c.stories_id, bc.c.clicks_3d, bc.c.clicks_30d)
        .join(ts, ts.c.stories_id == bc.c.stories_id)
        .where(in_current_version(topics_id))
    ).all()
    shares = pd.DataFrame(
        {
            "stories_id": int64_ids([r[0] for r in facebook]),
            "facebook_share_count": pd.array([r[1] for r in facebook], dtype="Int64"),
        }
    )
    totals = pd.DataFrame(
        {
            "stories_id": int64_ids([r[0] for r in clicks]),
            "bitly_clicks_3d": pd.array([r[1] for r in clicks], dtype="Int64"),
            "bitly_clicks_30d": pd.array([r[2] for r in clicks], dtype="Int64"),
        }
    )
    stats = shares.merge(totals, on="stories_id", how="outer", sort=True)
    stats = stats[positions(story_ids, stats["stories_id"].to_numpy(dtype=np.int64)) >= 0]
    stats["stories_id"] = stats["stories_id"].astype(np.int64)
    for column in ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d"):
        stats[column] = stats[column].astype("Int64")
    return stats.reset_index(drop=True)
