"""Snapshots against the topic store: read the deduplicated topic, key it, write its folder once, record it.

``topicmap.snapshots.compute`` computes a snapshot from DataFrames and ``topicmap.snapshots.linkmap`` draws it; this module is
the part that knows the store and the file layout (no Dagster here):

* ``read_snapshot_inputs`` reads a topic as dedup left it: topic stories (minus any story dedup merged away,
  should one have been re-added since), each story's medium mapped through the ``media.dup_media_id`` chain
  to its final medium (vectorized, so a duplicate medium never counts as a medium of its own), the topic's
  resolved links (both ends mapped through ``topic_merged_stories_map``, for links mined after dedup ran),
  Facebook and Bit.ly statistics, near-duplicate groups, the iteration the spider reached and the dedup state.
* ``snapshot_key`` is a sha256 over a canonical serialization of all of that plus the options and the code
  and library versions that shape the files: same inputs, same key.
* ``build_snapshot`` writes ``TOPICMAP_HOME/exports/snapshots/<topic>/<key[:16]>/`` (tables per timespan,
  GEXF link maps, PNG pictures, ``provenance.json`` and a ``manifest.json`` listing every file with its
  sha256) into a staging folder and renames it into place, so a snapshot folder is either complete or absent.
  An existing complete folder for the key is never rewritten; another key gets another folder, so an older
  snapshot is never overwritten. Then one ``snapshots`` row (+ ``timespans`` rows) is recorded, idempotently
  on ``(topics_id, snapshot_key)``.
* ``snapshot_paths`` says where a recorded snapshot's files are (for ``python -m topicmap.snapshots.cli``).

Media Cloud's snapshot ids were database sequence numbers and its dumps were regenerated in place; here the
id is still the ``snapshots_id`` row, but the folder is named by content, which is what makes re-runs safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import matplotlib
import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy import Connection, func, select

from topicmap.snapshots.charts import render_attention_chart
from topicmap.snapshots.compute import (
    PERIODS,
    SnapshotFilesWriter,
    SnapshotResult,
    Timespan,
    build_timespans,
    compute_snapshot,
    snapshot_problems,
    timespan_folder,
)
from topicmap.snapshots.foci import Focus, TextChunk
from topicmap.snapshots.linkmap import render_link_map, tag_labels, write_gexf
from topicmap.snapshots.names import (  # noqa: F401 - re-exported: part of this module's public names
    CHECK_DATES,
    CHECK_LINK_COUNTS,
    CHECK_NAMES,
    CHECK_TOPIC_STORIES,
    DEFAULT_PICTURE_PERIODS,
)
from topicmap.snapshots.words import DEFAULT_WORD_SAMPLE
from topicmap.store import schema as s
from topicmap.store.media_tags import declared_media_tags
from topicmap.store.tag_names import tag_set_problem
from topicmap.store.topic_store import StoreError, TopicStore, now_utc, topicmap_home, utc

#: Bumped whenever this code would write different files from the same inputs: part of every snapshot key.
# 2: no files for empty timespans, delta-encoded Parquet integers; 3: timespans by the publisher's calendar day;
# 4: story exports name their dates (publish_date_utc with its zone, publish_day_local) instead of publish_date;
# 5: foci, summary tables (top words, stories per day, top media and stories), attention charts, media tags
SNAPSHOT_CODE_VERSION = 5
MANIFEST_NAME = "manifest.json"
PROVENANCE_NAME = "provenance.json"
GEXF_NAME = "link_map.gexf"
PNG_NAME = "link_map.png"
ATTENTION_NAME = "attention.png"
SNAPSHOT_STATE = "completed"
#: state of a snapshot whose consistency checks failed: kept for inspection, rebuilt by the next run
INCONSISTENT_STATE = "inconsistent"


_SAFE_TOPIC = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,62}$")
_CHUNK = 500


# ----------------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class SnapshotOptions:
    """Choices that change a snapshot's files, hence part of its key."""

    #: count links from the copies of one near-duplicate (syndicated) story to the same story once
    count_syndicated_once: bool = False
    #: periods whose timespans get a PNG link map (every timespan gets a GEXF)
    picture_periods: tuple[str, ...] = DEFAULT_PICTURE_PERIODS
    #: media named on each picture (the ones linked from the most other media)
    top_labels: int = 15
    #: stories per timespan whose words are counted (Media Cloud's default sample; 0: every story)
    word_sample: int = DEFAULT_WORD_SAMPLE
    #: the tag set whose tags colour the media of the link maps (None: link communities)
    link_map_tag_set: str | None = None
    #: draw each focus's pictures too (for its timespans of ``picture_periods``): about a second each
    focus_pictures: bool = False

    def __post_init__(self) -> None:
        periods = tuple(self.picture_periods)
        unknown = [p for p in periods if p not in PERIODS]
        if unknown:
            raise ValueError(
                f"picture_periods: unknown period(s) {unknown}; expected some of {list(PERIODS)}"
            )
        if isinstance(self.top_labels, bool) or not isinstance(self.top_labels, int) or self.top_labels < 0:
            raise ValueError(f"top_labels must be a whole number >= 0, got {self.top_labels!r}")
        # canonical order, so ("monthly", "overall") and ("overall", "monthly") give the same key
        object.__setattr__(self, "picture_periods", tuple(p for p in PERIODS if p in periods))
        if (
            isinstance(self.word_sample, bool)
            or not isinstance(self.word_sample, int)
            or self.word_sample < 0
        ):
            raise ValueError(
                f"word_sample must be a whole number >= 0 (0: every story), got {self.word_sample!r}"
            )
        tag_set = (self.link_map_tag_set or "").strip() or None
        if tag_set is not None and (problem := tag_set_problem(tag_set)):
            raise ValueError(f"link_map_tag_set: {problem}")
        object.__setattr__(self, "link_map_tag_set", tag_set)

    def as_dict(self) -> dict[str, Any]:
        return {
            "count_syndicated_once": bool(self.count_syndicated_once),
            "picture_periods": list(self.picture_periods),
            "top_labels": self.top_labels,
            "word_sample": self.word_sample,
            "link_map_tag_set": self.link_map_tag_set,
            "focus_pictures": bool(self.focus_pictures),
        }


def code_versions() -> dict[str, Any]:
    """What shapes the bytes besides the data: Parquet files name the pyarrow version that wrote them, and
    the pictures depend on matplotlib and networkx's layout. A new version means a new key, a new folder."""
    return {
        "snapshot_code": SNAPSHOT_CODE_VERSION,
        "pyarrow": pa.__version__,
        "matplotlib": matplotlib.__version__,
        "networkx": nx.__version__,
    }


# ----------------------------------------------------------------------------------------------- reading


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
    # offset in minutes, None if unknown: it gives the publisher's calendar day)
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

    def frames(self) -> Iterator[tuple[str, pd.DataFrame]]:
        yield "stories", self.stories
        yield "media", self.media
        yield "links", self.links
        yield "story_stats", self.story_stats
        yield "near_dup_groups", self.near_dup_groups
        yield "media_tags", self.media_tags

    def row_counts(self) -> dict[str, int]:
        return {name: len(frame) for name, frame in self.frames()}


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each id in ``sorted_ids``, -1 where absent."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, ids)
    pos[pos >= len(sorted_ids)] = 0
    return np.where(sorted_ids[pos] == ids, pos, -1).astype(np.int64)


def resolve_chains(sources: np.ndarray, targets: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Follow ``source -> target`` chains to their ends, vectorized (pointer doubling: log2(longest chain)
    rounds of array lookups instead of one query per medium as ``TopicStore.final_medium`` does).

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
        pos = _positions(sources, final)
        moving = pos >= 0
        if not moving.any():
            return sources, final
        final = np.where(moving, final[np.where(moving, pos, 0)], final)
    # Still moving after enough doublings for the longest possible chain: some chain ends in a cycle.
    start = int(sources[_positions(sources, final) >= 0][0])
    step = dict(zip(sources.tolist(), targets[order].tolist(), strict=True))
    seen: list[int] = []
    node = start
    while node not in seen:
        seen.append(node)
        node = step[node]
    cycle = [*seen[seen.index(node) :], node]
    raise StoreError(f"{what} cycle: {' -> '.join(str(i) for i in cycle)}")


def _map_ids(ids: np.ndarray, sources: np.ndarray, finals: np.ndarray) -> np.ndarray:
    if sources.size == 0:  # no duplicate media / no merges: every id is its own final id
        return ids
    pos = _positions(sources, ids)
    return np.where(pos >= 0, finals[np.where(pos >= 0, pos, 0)], ids)


def _utc_dates(values: list[Any]) -> pd.Series:
    # SQLite hands back naive datetimes (UTC by the store's convention), PostgreSQL aware ones.
    return pd.Series(
        pd.to_datetime([utc(v) for v in values], utc=True), dtype="datetime64[ns, UTC]", name="publish_date"
    )


def _int64(values: list[Any]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


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
                    stories_id=_int64([r[0] for r in rows]),
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
    topic's foci (``topicmap.topics.declarations`` parses them with the topic: this package parses no query).
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
        frames = _read_topic(conn, topics_id)
    return SnapshotInputs(
        topic_name=topic_name,
        topics_id=topics_id,
        config_json=row["config_json"],
        start_date=start_date,
        end_date=end_date,
        timespans=timespans,
        foci=tuple(foci),
        texts=StoreTexts(store, frames["stories"]["stories_id"].to_numpy()),
        **frames,
    )


def _read_topic(conn: Connection, topics_id: int) -> dict[str, Any]:
    ts, st, md = s.topic_stories, s.stories, s.media

    merges = conn.execute(
        select(
            s.topic_merged_stories_map.c.source_stories_id,
            s.topic_merged_stories_map.c.target_stories_id,
            s.topic_merged_stories_map.c.reason,
        ).where(s.topic_merged_stories_map.c.topics_id == topics_id)
    ).all()
    merge_sources, merge_finals = resolve_chains(
        _int64([m[0] for m in merges]), _int64([m[1] for m in merges]), "merged-stories map"
    )

    story_rows = conn.execute(
        select(
            st.c.stories_id, st.c.media_id, st.c.url, st.c.title, st.c.publish_date, st.c.publish_utc_offset
        )
        .join(ts, ts.c.stories_id == st.c.stories_id)
        .where(ts.c.topics_id == topics_id)
        .order_by(st.c.stories_id)
    ).all()
    story_ids = _int64([r[0] for r in story_rows])
    # A story dedup merged away but found again by a later spider iteration is its survivor, not a second copy.
    live = _positions(merge_sources, story_ids) < 0
    story_rows = [r for r, keep in zip(story_rows, live.tolist(), strict=True) if keep]
    story_ids = story_ids[live]
    story_media = _int64([r[1] for r in story_rows])

    dup_edges = conn.execute(
        select(md.c.media_id, md.c.dup_media_id).where(md.c.dup_media_id.is_not(None))
    ).all()
    dup_sources, dup_finals = resolve_chains(
        _int64([e[0] for e in dup_edges]), _int64([e[1] for e in dup_edges]), "duplicate-media"
    )
    final_media = _map_ids(story_media, dup_sources, dup_finals)
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
            "media_id": _int64([m[0] for m in media_rows]),
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
        }
    )

    tl = s.topic_links
    link_rows = conn.execute(
        select(tl.c.stories_id, tl.c.ref_stories_id).where(
            tl.c.topics_id == topics_id, tl.c.ref_stories_id.is_not(None)
        )
    ).all()
    link_source = _int64([r[0] for r in link_rows])
    link_ref = _int64([r[1] for r in link_rows])
    mapped_source = _map_ids(link_source, merge_sources, merge_finals)
    mapped_ref = _map_ids(link_ref, merge_sources, merge_finals)
    links = pd.DataFrame({"stories_id": mapped_source, "ref_stories_id": mapped_ref})
    links = links.sort_values(["stories_id", "ref_stories_id"], kind="mergesort").reset_index(drop=True)

    story_stats = _read_statistics(conn, topics_id, story_ids)

    nd = s.topic_near_dup_groups
    group_rows = conn.execute(
        select(nd.c.stories_id, nd.c.group_stories_id).where(nd.c.topics_id == topics_id)
    ).all()
    groups = pd.DataFrame(
        {"stories_id": _int64([g[0] for g in group_rows]), "group_id": _int64([g[1] for g in group_rows])}
    )
    groups = groups[_positions(story_ids, groups["stories_id"].to_numpy()) >= 0]
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
    # A tag of a duplicate medium is its final medium's, as its stories are.
    tags = declared_media_tags(conn)
    tag_media = _map_ids(_int64([m for m, _, _ in tags]), dup_sources, dup_finals)
    media_tags = pd.DataFrame(
        {"media_id": tag_media, "tag_set": [t[1] for t in tags], "tag": [t[2] for t in tags]}
    )
    media_tags = media_tags[_positions(media_ids, tag_media) >= 0]
    media_tags = (
        media_tags.drop_duplicates()
        .sort_values(["media_id", "tag_set", "tag"], kind="mergesort")
        .reset_index(drop=True)
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
        .where(ts.c.topics_id == topics_id)
    ).all()
    clicks = conn.execute(
        select(bc.c.stories_id, bc.c.clicks_3d, bc.c.clicks_30d)
        .join(ts, ts.c.stories_id == bc.c.stories_id)
        .where(ts.c.topics_id == topics_id)
    ).all()
    shares = pd.DataFrame(
        {
            "stories_id": _int64([r[0] for r in facebook]),
            "facebook_share_count": pd.array([r[1] for r in facebook], dtype="Int64"),
        }
    )
    totals = pd.DataFrame(
        {
            "stories_id": _int64([r[0] for r in clicks]),
            "bitly_clicks_3d": pd.array([r[1] for r in clicks], dtype="Int64"),
            "bitly_clicks_30d": pd.array([r[2] for r in clicks], dtype="Int64"),
        }
    )
    stats = shares.merge(totals, on="stories_id", how="outer", sort=True)
    stats = stats[_positions(story_ids, stats["stories_id"].to_numpy(dtype=np.int64)) >= 0]
    stats["stories_id"] = stats["stories_id"].astype(np.int64)
    for column in ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d"):
        stats[column] = stats[column].astype("Int64")
    return stats.reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- key


def _column_bytes(series: pd.Series) -> bytes:
    """Canonical bytes of a column: little-endian int64 (+ null mask) for numbers and dates, JSON for text."""
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert(None)  # naive UTC
    if pd.api.types.is_datetime64_dtype(series.dtype):
        return series.to_numpy(dtype="datetime64[ns]").view(np.int64).astype("<i8").tobytes()
    if pd.api.types.is_integer_dtype(series.dtype):
        array = pd.array(series, dtype="Int64")
        data = array.to_numpy(dtype=np.int64, na_value=0).astype("<i8").tobytes()
        return data + np.asarray(array.isna(), dtype=np.uint8).tobytes()
    values = [None if pd.isna(v) else str(v) for v in series.tolist()]
    return json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def snapshot_key(inputs: SnapshotInputs, options: SnapshotOptions) -> str:
    """sha256 over everything a snapshot is built from: the topic's config, the iteration and dedup state,
    the input frames (sorted by their ids; the media tags among them), the foci, the stories' texts (whose
    words are counted and which query foci match), the options and the code versions. Same inputs, same key."""
    digest = hashlib.sha256()

    def part(label: str, payload: bytes) -> None:
        # length-prefixed, so no two different sequences of parts can serialize to the same bytes
        head = label.encode("utf-8")
        digest.update(len(head).to_bytes(8, "little") + head + len(payload).to_bytes(8, "little"))
        digest.update(payload)

    def canonical(value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")

    part("format", b"topicmap-snapshot-key/1")
    part("code", canonical(code_versions()))
    part("topic", canonical({"name": inputs.topic_name, "config": json.loads(inputs.config_json)}))
    part("options", canonical(options.as_dict()))
    part("iteration", canonical(inputs.iteration))
    part("dedup", canonical(inputs.dedup_state))
    for name, frame in inputs.frames():
        part(f"frame:{name}", canonical(list(frame.columns)))
        for column in frame.columns:
            part(f"{name}.{column}", _column_bytes(frame[column]))
    part("foci", canonical([focus.definition() for focus in inputs.foci]))
    if inputs.texts is not None:
        part("texts", inputs.texts.digest().encode("ascii"))
    return digest.hexdigest()


def snapshot_provenance(inputs: SnapshotInputs, options: SnapshotOptions, key: str) -> dict[str, Any]:
    """What the snapshot was built from. Everything here is part of the key, so the file is reproducible."""
    return {
        "format": "topicmap-snapshot-provenance/1",
        "snapshot_key": key,
        "topic": {
            "name": inputs.topic_name,
            "start_date": inputs.start_date.isoformat(),
            "end_date": inputs.end_date.isoformat(),
            "config": json.loads(inputs.config_json),
        },
        "iteration": inputs.iteration,
        "dedup": dict(inputs.dedup_state),
        "input_rows": inputs.row_counts(),
        "foci": [focus.definition() for focus in inputs.foci],
        "texts_sha256": inputs.texts.digest() if inputs.texts is not None else None,
        "options": options.as_dict(),
        "code": code_versions(),
    }


# ----------------------------------------------------------------------------------------------- files


def snapshots_dir(topic_name: str, home: Path | None = None) -> Path:
    """``TOPICMAP_HOME/exports/snapshots/<topic>``: one sub-folder per snapshot key."""
    if not _SAFE_TOPIC.match(topic_name):
        raise ValueError(f"topic name {topic_name!r} cannot name a folder (expected [a-z0-9_-], 1-63 chars)")
    return (home or topicmap_home()) / "exports" / "snapshots" / topic_name


def snapshot_folder(topic_name: str, key: str, home: Path | None = None) -> Path:
    if not re.fullmatch(r"[0-9a-f]{64}", key):
        raise ValueError(f"snapshot key must be 64 hex digits, got {key!r}")
    return snapshots_dir(topic_name, home) / key[:16]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when it is missing or unreadable."""
    try:
        return json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def folder_is_complete(folder: Path, key: str) -> bool:
    """True when ``folder`` holds the snapshot ``key``: its manifest names the key, records no consistency
    problem, and every listed file is there with its listed size (cheap; ``verify_snapshot_files`` also
    compares the checksums)."""
    manifest = read_manifest(folder)
    if not manifest or manifest.get("snapshot_key") != key or not isinstance(manifest.get("files"), dict):
        return False
    if manifest.get("problems"):
        return False  # written by code that got it wrong: the next run rebuilds it (the old one is set aside)
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != entry.get("bytes"):
            return False
    return True


def verify_snapshot_files(folder: Path) -> list[str]:
    """Problems of a snapshot folder against its manifest (missing, resized or altered files); empty if intact."""
    manifest = read_manifest(folder)
    if manifest is None:
        return [f"{folder}: no readable {MANIFEST_NAME}"]
    problems = []
    for name, entry in sorted(manifest.get("files", {}).items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{folder.name}/{name}: missing")
        elif path.stat().st_size != entry.get("bytes") or _sha256(path) != entry.get("sha256"):
            problems.append(f"{folder.name}/{name}: changed since the snapshot was written")
    return problems


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _write_folder(
    result: SnapshotResult,
    inputs: SnapshotInputs,
    options: SnapshotOptions,
    key: str,
    provenance: dict[str, Any],
    staging: Path,
    log: Callable[[str], None],
    files: SnapshotFilesWriter,
) -> dict[str, list[str]]:
    """Everything of one snapshot into ``staging``; the manifest is written last and lists every file and the
    consistency problems found (returned per check).

    The tables are written and the checks run on background threads (pyarrow, hashlib and numpy's big loops
    release the GIL) while this thread draws the maps, so the pictures' cost overlaps the files' cost.
    """
    with ThreadPoolExecutor(max_workers=2) as background:
        tables = background.submit(files.finish, result)
        checks = background.submit(check_problems, result, inputs.start_date, inputs.end_date)
        try:
            extra = _write_maps(result, inputs, options, staging)
        finally:
            tables.result()  # wait (and raise its error) before anything reads the manifest
    found = checks.result()
    problems = [problem for check in found.values() for problem in check]
    _log_written(result, extra, log)
    _write_json(staging / PROVENANCE_NAME, provenance)
    extra.append(staging / PROVENANCE_NAME)
    manifest = read_manifest(staging)
    if manifest is None:
        raise StoreError(f"write_snapshot_files left no {MANIFEST_NAME} in {staging}")
    for path in extra:
        manifest["files"][path.relative_to(staging).as_posix()] = {
            "bytes": path.stat().st_size,
            "sha256": _sha256(path),
        }
    manifest["snapshot_key"] = key
    manifest["topic"] = inputs.topic_name
    manifest["provenance"] = PROVENANCE_NAME
    manifest["problems"] = problems
    tmp = staging / f".{MANIFEST_NAME}.tmp"
    _write_json(tmp, manifest)
    os.replace(tmp, staging / MANIFEST_NAME)
    return found


def _write_maps(
    result: SnapshotResult, inputs: SnapshotInputs, options: SnapshotOptions, staging: Path
) -> list[Path]:
    """A GEXF for every timespan with stories; a PNG link map for the timespans of ``options.picture_periods``
    (a focus's only with ``options.focus_pictures``); an attention chart for every overall timespan (the whole
    topic's and each focus's, the focus's with the topic's for comparison)."""
    extra: list[Path] = []
    tag_set = options.link_map_tag_set
    labels = tag_labels(inputs.media_tags)
    groups = labels.get(tag_set, {}) if tag_set else None
    overall = next((snap for snap in result.timespans if snap.timespan.period == "overall"), None)
    topic_days = overall.summary.days if overall is not None and overall.summary is not None else None
    for focus, snap in result.all_timespans():
        ts = snap.timespan
        if snap.empty:  # recorded in the manifest and the store, but no map of nothing
            continue
        folder = staging / timespan_folder(focus, ts)
        whose = (
            inputs.topic_name
            if focus is None
            else f"{inputs.topic_name} · focus {focus.focal_set} / {focus.name}"
        )
        label = f"{whose} · {ts.name} ({ts.start_date.isoformat()} to {ts.last_date.isoformat()})"
        extra.append(
            write_gexf(snap.medium_link_counts, snap.medium_links, folder / GEXF_NAME, label, labels)
        )
        if ts.period in options.picture_periods and (focus is None or options.focus_pictures):
            extra.append(
                render_link_map(
                    snap.medium_link_counts,
                    snap.medium_links,
                    folder / PNG_NAME,
                    title=f"Media link map · {label}",
                    top_labels=options.top_labels,
                    groups=groups,
                    groups_title=f"media by {tag_set}" if tag_set else "",
                )
            )
        if ts.period == "overall" and snap.summary is not None:
            summary = snap.summary
            apart = [
                f"{count} {what}"
                for count, what in (
                    (summary.undated_stories, "undated"),
                    (summary.outside_stories, "published outside the dates, linked from inside"),
                )
                if count
            ]
            extra.append(
                render_attention_chart(
                    summary.days,
                    folder / ATTENTION_NAME,
                    title=f"Stories per day · {whose}",
                    topic_days=topic_days if focus is not None else None,
                    note=f"not on a day: {', '.join(apart)}" if apart else "",
                )
            )
    return extra


def _log_written(result: SnapshotResult, extra: list[Path], log: Callable[[str], None]) -> None:
    spans = [snap for _, snap in result.all_timespans()]
    empty = sum(snap.empty for snap in spans)
    log(
        f"wrote {sum(p.suffix == '.gexf' for p in extra)} GEXF maps and {sum(p.suffix == '.png' for p in extra)} "
        f"pictures; {empty} of {len(spans)} timespans ({len(result.foci)} foci) have no stories "
        "(recorded, no files)"
    )


def _set_aside(folder: Path) -> Path:
    """Rename an incomplete or inconsistent folder out of the way (kept for inspection, never deleted)."""
    n = 1
    while (aside := folder.with_name(f"{folder.name}.set-aside-{n}")).exists():
        n += 1
    folder.rename(aside)
    return aside


@dataclass
class WrittenSnapshot:
    """A snapshot computed and, unless its folder was already complete, written."""

    result: SnapshotResult
    problems: dict[str, list[str]]  # per asset check (empty lists when consistent)
    written: bool  # False: the folder for this key already existed, complete, and was left alone


def write_snapshot_folder(
    inputs: SnapshotInputs,
    options: SnapshotOptions,
    key: str,
    folder: Path,
    log: Callable[[str], None] = lambda _msg: None,
) -> WrittenSnapshot:
    """Compute the snapshot ``key`` and write it to ``folder`` unless it is already there, complete.

    The consistency problems found are recorded in the manifest; such a folder does not count as complete, so
    once the code is fixed the next run sets it aside and writes the snapshot again.

    The files go to a staging sibling first, which is renamed to ``folder`` at the end: a reader, a crash or a
    concurrent run never sees half a snapshot. If another process finished the same key first, its folder is
    kept (same key, same bytes) and ours is discarded. The whole topic's files are written while the foci are
    computed (``SnapshotFilesWriter``).
    """
    if folder_is_complete(folder, key):
        result = compute_inputs(inputs, options)
        return WrittenSnapshot(result, check_problems(result, inputs.start_date, inputs.end_date), False)
    if folder.exists():
        log(f"{folder} is incomplete or inconsistent; moved to {_set_aside(folder)}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        with SnapshotFilesWriter(staging, csv=True) as files:
            result = compute_inputs(inputs, options, files)
            provenance = snapshot_provenance(inputs, options, key)
            problems = _write_folder(result, inputs, options, key, provenance, staging, log, files)
        try:
            staging.rename(folder)
        except OSError:
            if not folder_is_complete(folder, key):
                raise
            return WrittenSnapshot(result, problems, False)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return WrittenSnapshot(result, problems, True)


# ----------------------------------------------------------------------------------------------- recording


def _stored_path(folder: Path, home: Path) -> str:
    """Relative to TOPICMAP_HOME when inside it, so a moved home keeps its snapshots findable."""
    try:
        return folder.resolve().relative_to(home.resolve()).as_posix()
    except ValueError:
        return str(folder.resolve())


def record_snapshot(
    store: TopicStore,
    inputs: SnapshotInputs,
    result: SnapshotResult,
    key: str,
    folder: Path,
    provenance: dict[str, Any],
    home: Path | None = None,
    consistent: bool = True,
) -> int:
    """Insert the ``snapshots`` row and its ``timespans`` rows (idempotent on their unique keys); returns
    ``snapshots_id``. A re-run keeps the first row (its date and provenance) and only refreshes the path
    and the state (``completed``, or ``inconsistent`` when the consistency checks failed).

    ``timespans.end_date`` is exclusive (the day after the last day), as Media Cloud's was.
    """
    home = home or topicmap_home()
    row = {
        "topics_id": inputs.topics_id,
        "snapshot_key": key,
        "snapshot_date": now_utc(),
        "state": SNAPSHOT_STATE if consistent else INCONSISTENT_STATE,
        "iteration": inputs.iteration,
        "provenance_json": json.dumps(provenance, sort_keys=True),
        "path": _stored_path(folder, home),
    }
    with store.engine.begin() as conn:
        store.upsert(conn, s.snapshots, [row], ["topics_id", "snapshot_key"], ["path", "state"])
        snapshots_id = int(
            conn.execute(
                select(s.snapshots.c.snapshots_id).where(
                    s.snapshots.c.topics_id == inputs.topics_id, s.snapshots.c.snapshot_key == key
                )
            ).scalar_one()
        )
        rows = [
            {
                "snapshots_id": snapshots_id,
                "period": snap.timespan.period,
                "start_date": snap.timespan.start_date,
                "end_date": snap.timespan.end_date,
                "story_count": snap.counts.story_count,
                "story_link_count": snap.counts.story_link_count,
                "medium_count": snap.counts.medium_count,
                "medium_link_count": snap.counts.medium_link_count,
            }
            for snap in result.timespans
        ]
        store.insert_ignore(conn, s.timespans, rows, ["snapshots_id", "period", "start_date", "end_date"])
        _record_foci(store, conn, snapshots_id, result)
    return snapshots_id


def _record_foci(store: TopicStore, conn: Connection, snapshots_id: int, result: SnapshotResult) -> None:
    """The snapshot's focal sets, foci and focus timespans (Media Cloud's focal_sets / foci / timespans with a
    foci_id), idempotent on their unique keys."""
    if not result.foci:
        return
    set_names = list(dict.fromkeys(found.focus.focal_set for found in result.foci))
    store.insert_ignore(
        conn,
        s.focal_sets,
        [{"snapshots_id": snapshots_id, "name": n} for n in set_names],
        ["snapshots_id", "name"],
    )
    set_ids = dict(
        conn.execute(
            select(s.focal_sets.c.name, s.focal_sets.c.focal_sets_id).where(
                s.focal_sets.c.snapshots_id == snapshots_id
            )
        ).all()
    )
    store.insert_ignore(
        conn,
        s.foci,
        [
            {
                "focal_sets_id": set_ids[found.focus.focal_set],
                "name": found.focus.name,
                "arguments": json.dumps(found.focus.definition(), sort_keys=True),
                "story_count": found.story_count,
            }
            for found in result.foci
        ],
        ["focal_sets_id", "name"],
    )
    foci_ids = {
        (int(set_id), name): int(foci_id)
        for foci_id, set_id, name in conn.execute(
            select(s.foci.c.foci_id, s.foci.c.focal_sets_id, s.foci.c.name).where(
                s.foci.c.focal_sets_id.in_(list(set_ids.values()))
            )
        )
    }
    rows = [
        {
            "foci_id": foci_ids[(int(set_ids[found.focus.focal_set]), found.focus.name)],
            "period": snap.timespan.period,
            "start_date": snap.timespan.start_date,
            "end_date": snap.timespan.end_date,
            "story_count": snap.counts.story_count,
            "story_link_count": snap.counts.story_link_count,
            "medium_count": snap.counts.medium_count,
            "medium_link_count": snap.counts.medium_link_count,
        }
        for found in result.foci
        for snap in found.timespans
    ]
    store.insert_ignore(conn, s.focus_timespans, rows, ["foci_id", "period", "start_date", "end_date"])


# ----------------------------------------------------------------------------------------------- checks


def check_problems(result: SnapshotResult, topic_start: Any, topic_end: Any) -> dict[str, list[str]]:
    """``snapshot_problems`` sorted into the three asset checks (empty lists when consistent).

    A problem of an unforeseen kind goes to the link-count check rather than being lost.
    """
    sorted_problems: dict[str, list[str]] = {name: [] for name in CHECK_NAMES}
    for problem in snapshot_problems(result, topic_start, topic_end):
        if "outside the topic's dates" in problem:
            sorted_problems[CHECK_DATES].append(problem)
        elif "not topic stories" in problem:
            sorted_problems[CHECK_TOPIC_STORIES].append(problem)
        else:
            sorted_problems[CHECK_LINK_COUNTS].append(problem)
    return sorted_problems


# ----------------------------------------------------------------------------------------------- building


@dataclass
class BuiltSnapshot:
    """One materialization's outcome: the recorded snapshot, its result in memory and its checks."""

    snapshots_id: int
    snapshot_key: str
    folder: Path
    written: bool  # False: the folder for this key already existed, complete, and was left alone
    inputs: SnapshotInputs
    result: SnapshotResult
    provenance: dict[str, Any]
    problems: dict[str, list[str]]

    def gexf(self, timespan_key: str) -> Path:
        return self.folder / timespan_key / GEXF_NAME

    def picture(self, timespan_key: str) -> Path | None:
        path = self.folder / timespan_key / PNG_NAME
        return path if path.is_file() else None


def compute_inputs(
    inputs: SnapshotInputs, options: SnapshotOptions, files: SnapshotFilesWriter | None = None
) -> SnapshotResult:
    """``compute_snapshot`` of what was read, with the options' choices (``files``: write while computing)."""
    return compute_snapshot(
        inputs.stories,
        inputs.media,
        inputs.links,
        inputs.timespans,
        story_stats=inputs.story_stats,
        near_dup_groups=inputs.near_dup_groups,
        count_syndicated_once=options.count_syndicated_once,
        foci=inputs.foci,
        media_tags=inputs.media_tags,
        texts=inputs.texts,
        word_sample=options.word_sample,
        files=files,
    )


def build_snapshot(
    store: TopicStore,
    topic_name: str,
    options: SnapshotOptions | None = None,
    home: Path | None = None,
    log: Callable[[str], None] = lambda _msg: None,
    foci: Sequence[Focus] = (),
) -> BuiltSnapshot:
    """Read, key, compute, write (once) and record the snapshot of ``topic_name`` with its ``foci``."""
    options = options or SnapshotOptions()
    home = home or topicmap_home()
    inputs = read_snapshot_inputs(store, topic_name, foci)
    log(
        f"{topic_name}: {len(inputs.stories)} stories, {len(inputs.media)} media, {len(inputs.links)} links, "
        f"{len(inputs.timespans)} timespans, {len(inputs.foci)} foci, {len(inputs.media_tags)} media tags"
    )
    key = snapshot_key(inputs, options)
    log(f"{topic_name}: snapshot key {key[:16]}")
    folder = snapshot_folder(topic_name, key, home)
    done = write_snapshot_folder(inputs, options, key, folder, log)
    result, problems, written = done.result, done.problems, done.written
    flat = [problem for found in problems.values() for problem in found]
    if not written:
        log(f"{folder} already holds this snapshot: left as it is")
    provenance = snapshot_provenance(inputs, options, key)
    snapshots_id = record_snapshot(store, inputs, result, key, folder, provenance, home, consistent=not flat)
    return BuiltSnapshot(
        snapshots_id=snapshots_id,
        snapshot_key=key,
        folder=folder,
        written=written,
        inputs=inputs,
        result=result,
        provenance=provenance,
        problems=problems,
    )


# ----------------------------------------------------------------------------------------------- finding


def _snapshot_row(store: TopicStore, topics_id: int, snapshot_id: int | None) -> dict[str, Any] | None:
    sn = s.snapshots
    query = select(sn).where(sn.c.topics_id == topics_id)
    query = query.where(sn.c.snapshots_id == snapshot_id) if snapshot_id is not None else query
    with store.engine.connect() as conn:
        row = conn.execute(query.order_by(sn.c.snapshots_id.desc()).limit(1)).mappings().first()
    return dict(row) if row else None


def latest_snapshot_ids(store: TopicStore) -> dict[str, int]:
    """The newest snapshot id of every topic that has one."""
    sn, tp = s.snapshots, s.topics
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(tp.c.name, func.max(sn.c.snapshots_id))
            .join(sn, sn.c.topics_id == tp.c.topics_id)
            .group_by(tp.c.name)
            .order_by(tp.c.name)
        ).all()
    return {name: int(snapshots_id) for name, snapshots_id in rows}


def snapshot_paths(
    store: TopicStore, topic: str, snapshot_id: int | None = None, home: Path | None = None
) -> dict[str, Any]:
    """Where a snapshot's files are: the newest snapshot of ``topic``, or ``snapshot_id`` (of that topic).

    Returns ``snapshots_id``, ``snapshot_key``, ``snapshot_date``, ``iteration``, ``folder``, ``manifest``,
    ``provenance``, ``link_map_png`` / ``link_map_gexf`` / ``attention_png`` (of the overall timespan, None if
    absent), ``timespans``: one dict per timespan (key, period, name, start_date, last_date, counts, empty,
    folder, files, gexf, png, attention_png); an empty timespan (no stories) has no files and no folder; and
    ``foci``: one dict per focus (key, focal_set, name, story_count, link_map_png, attention_png, timespans). Raises ``StoreError`` for an unknown topic, a missing snapshot or a vanished folder.
    """
    home = home or topicmap_home()
    topics_id = int(store.topic_row(topic)["topics_id"])
    row = _snapshot_row(store, topics_id, snapshot_id)
    if row is None:
        which = f"no snapshot {snapshot_id}" if snapshot_id is not None else "no snapshot yet"
        raise StoreError(f"topic {topic!r} has {which}: materialize the snapshots asset for it")
    folder = Path(row["path"])
    folder = folder if folder.is_absolute() else home / folder
    manifest = read_manifest(folder)
    if manifest is None:
        raise StoreError(
            f"snapshot {row['snapshots_id']} of {topic!r}: {folder} has no readable {MANIFEST_NAME}"
        )
    files = sorted(manifest.get("files", {}))

    def timespan_entry(entry: dict[str, Any], described: dict[str, Any]) -> dict[str, Any]:
        where = entry.get("folder", entry["key"])  # a focus's timespans name their folder
        own = [folder / name for name in files if name.startswith(f"{where}/")]
        gexf, png, chart = (folder / where / name for name in (GEXF_NAME, PNG_NAME, ATTENTION_NAME))
        counts = entry.get("counts", {})
        return {
            **{k: described[k] for k in ("key", "period", "name", "start_date", "last_date")},
            "counts": counts,
            # format 1 wrote files for empty timespans too and had no flag
            "empty": bool(entry.get("empty", counts.get("story_count", 0) == 0)),
            "folder": None if not own else folder / where,
            "files": own,
            "gexf": gexf if gexf in own else None,
            "png": png if png in own else None,
            "attention_png": chart if chart in own else None,
        }

    timespans = [timespan_entry(entry, entry) for entry in manifest.get("timespans", [])]
    described = {t["key"]: t for t in manifest.get("timespans", [])}
    foci = []
    for entry in manifest.get("foci", []):
        spans = [timespan_entry(span, described[span["key"]]) for span in entry["timespans"]]
        focus_overall = next((t for t in spans if t["period"] == "overall"), None)
        foci.append(
            {
                "key": entry["key"],
                "focal_set": entry["focal_set"],
                "name": entry["name"],
                "story_count": entry["story_count"],
                "timespans": spans,
                "link_map_png": focus_overall["png"] if focus_overall else None,
                "attention_png": focus_overall["attention_png"] if focus_overall else None,
            }
        )
    overall = next((t for t in timespans if t["period"] == "overall"), None)
    return {
        "topic": topic,
        "snapshots_id": int(row["snapshots_id"]),
        "snapshot_key": row["snapshot_key"],
        "snapshot_date": utc(row["snapshot_date"]),
        "iteration": int(row["iteration"]),
        "folder": folder,
        "manifest": folder / MANIFEST_NAME,
        "provenance": folder / PROVENANCE_NAME,
        "link_map_png": overall["png"] if overall else None,
        "link_map_gexf": overall["gexf"] if overall else None,
        "attention_png": overall["attention_png"] if overall else None,
        "timespans": timespans,
        "foci": foci,
    }


def timespan_rows(result: SnapshotResult) -> list[dict[str, Any]]:
    """One plain dict per timespan (for metadata and reports): key, period, dates, counts, empty."""
    return [
        {
            "key": snap.timespan.key,
            "period": snap.timespan.period,
            "name": snap.timespan.name,
            "start_date": snap.timespan.start_date.isoformat(),
            "last_date": snap.timespan.last_date.isoformat(),
            **asdict(snap.counts),
            "empty": snap.empty,
        }
        for snap in result.timespans
    ]
