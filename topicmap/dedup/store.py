"""Dedup applied to the topic store: duplicate media, duplicate stories, near-duplicates across media.

``topicmap.dedup.rules`` and ``topicmap.dedup.simhash`` decide (pure); this module reads the stories of a
topic's current version (a story that left it when the topic's settings changed is neither merged nor grouped),
asks them, and applies the answer in place, in one transaction per topic, idempotently (as Media Cloud's
``_merge_dup_story`` and ``merge_dup_media_stories`` do):

- a merged story leaves ``topic_stories``; its survivor joins the topic (and its current version) with the
  smaller iteration;
- its outgoing links are copied to the survivor, incoming links re-pointed, links that became self-loops
  only through the merge are dropped;
- ``topic_merged_stories_map`` records every merge (source → target, reason), seed and fetch rows are
  re-pointed, and the merged story stays in ``stories``, so nothing is lost and every merge is traceable.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Connection, delete, func, select, update

from topicmap.dedup.rules import (
    REASON_MEDIUM,
    find_duplicate_stories,
    plan_media_merges,
    resolve_dup_media,
    resolve_merge_map,
)
from topicmap.dedup.simhash import (
    DEFAULT_CANDIDATE_DISTANCE,
    FEATURE_VERSION,
    FINGERPRINT_BITS,
    fingerprints,
    near_duplicate_groups,
    verified_near_duplicate_pairs,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import StoreError, TopicStore, now_utc, utc
from topicmap.store.version_stories import in_current_version, version_story_ids
from topicmap.web.urls import normalize_url_lossy


@dataclass
class MergeReport:
    merges: list[dict] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    cross_media_links_before: int = 0
    cross_media_links_after: int = 0


def simhashes_to_db(values: np.ndarray) -> list[int]:
    """uint64 → two's-complement int64: BIGINT columns are signed on both databases."""
    return values.astype(np.uint64).view(np.int64).tolist()


def simhashes_from_db(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64).view(np.uint64)


# --------------------------------------------------------------------------------------------- reads


STORY_FRAME_COLUMNS = [
    "stories_id",
    "media_id",
    "url",
    "guid",
    "title",
    "publish_date",
    "text_length",
    "medium_name",
]


def _story_frame(
    conn: Connection, topics_id: int | None = None, media_ids: list[int] | None = None
) -> pd.DataFrame:
    """Stories as the dedup planners want them: the live stories of the topic's current version (with their
    iteration), or all
    stories of some media (the candidates a duplicate medium's stories may merge into)."""
    ts, st, media = s.topic_stories, s.stories, s.media
    columns = [
        st.c.stories_id,
        st.c.media_id,
        st.c.url,
        st.c.guid,
        st.c.title,
        st.c.publish_date,
        func.length(st.c.text).label("text_length"),
        media.c.name.label("medium_name"),
    ]
    query = select(*columns).join(media, media.c.media_id == st.c.media_id)
    names = list(STORY_FRAME_COLUMNS)
    if topics_id is not None:
        query = query.add_columns(ts.c.iteration).join(ts, ts.c.stories_id == st.c.stories_id)
        query = query.where(in_current_version(topics_id))
        names.append("iteration")
    if media_ids is not None:
        query = query.where(st.c.media_id.in_(media_ids))
    frame = pd.DataFrame(conn.execute(query.order_by(st.c.stories_id)).all(), columns=names)
    frame["publish_date"] = pd.to_datetime(frame["publish_date"].map(utc), utc=True)
    frame["text_length"] = frame["text_length"].fillna(0).astype("int64")
    return frame


def topic_stories_frame(conn: Connection, topics_id: int) -> pd.DataFrame:
    """The live stories of the topic's current version with their medium (as stored), title, url, date, text
    length, iteration."""
    return _story_frame(conn, topics_id=topics_id)


def cross_media_link_count(conn: Connection, topics_id: int) -> int:
    """Distinct (source, ref) topic links between stories of the topic's current version in different final
    media: what snapshots count."""
    tl, st = s.topic_links, s.stories
    ref = st.alias("ref")
    in_version = version_story_ids(topics_id)
    rows = conn.execute(
        select(tl.c.stories_id, tl.c.ref_stories_id, st.c.media_id, ref.c.media_id)
        .join(st, st.c.stories_id == tl.c.stories_id)
        .join(ref, ref.c.stories_id == tl.c.ref_stories_id)
        .where(
            tl.c.topics_id == topics_id, tl.c.stories_id.in_(in_version), tl.c.ref_stories_id.in_(in_version)
        )
    ).all()
    final = resolve_dup_media(dict(conn.execute(select(s.media.c.media_id, s.media.c.dup_media_id)).all()))
    return len({(a, b) for a, b, ma, mb in rows if final.get(ma, ma) != final.get(mb, mb)})


# --------------------------------------------------------------------------------------------- media


def read_media_dups_csv(path: str | Path) -> tuple[list[tuple[str, str]], list[str]]:
    """Duplicate media declared by a person: a CSV with ``medium_url`` and ``dup_of_medium_url`` columns."""
    text = Path(path).read_text(encoding="utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    if not {"medium_url", "dup_of_medium_url"} <= set(reader.fieldnames or []):
        return [], [f"{path}:1: expected columns medium_url, dup_of_medium_url (got {reader.fieldnames})"]
    pairs, errors = [], []
    for row in reader:
        left, right = (row.get("medium_url") or "").strip(), (row.get("dup_of_medium_url") or "").strip()
        if not left or not right:
            errors.append(f"{path}:{reader.line_num}: both medium_url and dup_of_medium_url are needed")
            continue
        pairs.append((left, right))
    return pairs, errors


def declare_duplicate_media(store: TopicStore, pairs: list[tuple[str, str]]) -> tuple[int, list[str]]:
    """Set ``media.dup_media_id`` for (duplicate medium URL, canonical medium URL) pairs.

    Media are found by their lossy-normalized URL. An unknown medium is reported, not created. A pair that
    would close a cycle is refused with an error naming the media; the store is left unchanged for it."""
    media = s.media
    changed, problems = 0, []
    with store.engine.begin() as conn:
        by_url = {
            row.normalized_url: row.media_id
            for row in conn.execute(select(media.c.media_id, media.c.normalized_url))
        }
        current = dict(conn.execute(select(media.c.media_id, media.c.dup_media_id)).all())
        for dup_url, canonical_url in pairs:
            dup_id = by_url.get(normalize_url_lossy(dup_url) or dup_url)
            canonical_id = by_url.get(normalize_url_lossy(canonical_url) or canonical_url)
            if dup_id is None or canonical_id is None:
                missing = dup_url if dup_id is None else canonical_url
                problems.append(f"unknown medium {missing!r} (no story of it in the store)")
                continue
            if dup_id == canonical_id or current.get(dup_id) == canonical_id:
                continue
            trial = {**current, dup_id: canonical_id}
            try:
                resolve_dup_media(trial)
            except ValueError as exc:
                problems.append(f"refused {dup_url} -> {canonical_url}: {exc}")
                continue
            current = trial
            conn.execute(update(media).where(media.c.media_id == dup_id).values(dup_media_id=canonical_id))
            changed += 1
    return changed, problems


def merge_duplicate_media(store: TopicStore, topics_id: int) -> MergeReport:
    """Every topic story in a duplicate medium is merged into a matching story of the final medium, or
    moved there (Media Cloud's ``merge_dup_media_stories``). A dup_media_id cycle raises an error naming the
    media."""
    report = MergeReport()
    with store.engine.begin() as conn:
        dup_of = dict(conn.execute(select(s.media.c.media_id, s.media.c.dup_media_id)).all())
        final = resolve_dup_media(dup_of)  # raises DuplicateMediaCycleError naming the media
        stories = topic_stories_frame(conn, topics_id)
        in_dup = stories[stories["media_id"].map(lambda m: final.get(m, m) != m)]
        if in_dup.empty:
            report.cross_media_links_before = report.cross_media_links_after = cross_media_link_count(
                conn, topics_id
            )
            return report
        report.cross_media_links_before = cross_media_link_count(conn, topics_id)
        targets = sorted({final[m] for m in in_dup["media_id"]})
        candidates = _story_frame(conn, media_ids=targets)
        plan = plan_media_merges(
            pd.concat([in_dup, candidates], ignore_index=True).drop_duplicates("stories_id"), dup_of
        )
        merges = {int(r.stories_id): int(r.keep_stories_id) for r in plan.itertuples() if r.action == "merge"}
        _apply_merges(store, conn, topics_id, merges, REASON_MEDIUM, report)
        for row in plan.itertuples():
            if row.action != "move":
                continue
            _move_story(conn, int(row.stories_id), int(row.final_media_id))
            report.moved.append(
                {
                    "stories_id": int(row.stories_id),
                    "from_media_id": int(row.media_id),
                    "to_media_id": int(row.final_media_id),
                }
            )
        report.cross_media_links_after = cross_media_link_count(conn, topics_id)
    return report


def _move_story(conn: Connection, stories_id: int, media_id: int) -> None:
    """The story belongs to the final medium: it moves there (its id, links and topic rows stay)."""
    st = s.stories
    guid = conn.execute(select(st.c.guid).where(st.c.stories_id == stories_id)).scalar_one()
    clash = conn.execute(select(st.c.stories_id).where(st.c.media_id == media_id, st.c.guid == guid)).first()
    if clash is not None:
        raise StoreError(
            f"cannot move story {stories_id} to medium {media_id}: story {clash[0]} has its guid"
        )
    conn.execute(update(st).where(st.c.stories_id == stories_id).values(media_id=media_id))


# --------------------------------------------------------------------------------------------- stories


def merge_duplicate_stories(store: TopicStore, topics_id: int) -> MergeReport:
    """Stories of one (final) medium with the same normalized title and day, or the same lossy URL."""
    report = MergeReport()
    with store.engine.begin() as conn:
        report.cross_media_links_before = cross_media_link_count(conn, topics_id)
        stories = topic_stories_frame(conn, topics_id)
        final = resolve_dup_media(
            dict(conn.execute(select(s.media.c.media_id, s.media.c.dup_media_id)).all())
        )
        stories["media_id"] = stories["media_id"].map(lambda m: final.get(m, m))
        plan = find_duplicate_stories(stories)
        for reason, group in plan.groupby("reason"):
            merges = dict(
                zip(group["stories_id"].astype(int), group["keep_stories_id"].astype(int), strict=True)
            )
            _apply_merges(store, conn, topics_id, merges, str(reason), report)
        report.cross_media_links_after = cross_media_link_count(conn, topics_id)
    return report


def _apply_merges(
    store: TopicStore,
    conn: Connection,
    topics_id: int,
    merges: dict[int, int],
    reason: str,
    report: MergeReport,
) -> None:
    if not merges:
        return
    ts, tl = s.topic_stories, s.topic_links
    final = resolve_merge_map(merges)
    rows = conn.execute(
        select(ts.c.stories_id, ts.c.iteration, ts.c.left_version).where(ts.c.topics_id == topics_id)
    ).all()
    iterations = {row.stories_id: row.iteration for row in rows}
    outside_version = {row.stories_id for row in rows if row.left_version is not None}
    now = now_utc()
    for source, target in sorted(final.items()):
        if source not in iterations:
            continue  # already merged by an earlier run
        iteration = min(iterations[source], iterations.get(target, iterations[source]))
        store.insert_ignore(
            conn,
            ts,
            [
                {
                    "topics_id": topics_id,
                    "stories_id": target,
                    "iteration": iteration,
                    "link_mined": True,
                    "added_at": now,
                }
            ],
            ["topics_id", "stories_id"],
        )
        conn.execute(
            update(ts)
            .where(ts.c.topics_id == topics_id, ts.c.stories_id == target, ts.c.iteration > iteration)
            .values(iteration=iteration)
        )
        if source not in outside_version and target in outside_version:
            # the survivor stands for a story of the current version: a copy that had left it is back in it
            conn.execute(
                update(ts)
                .where(ts.c.topics_id == topics_id, ts.c.stories_id == target)
                .values(left_version=None)
            )
            outside_version.discard(target)
        iterations[target] = iteration
        outgoing = (
            conn.execute(
                select(tl.c.url, tl.c.redirect_url, tl.c.ref_stories_id, tl.c.link_spidered).where(
                    tl.c.topics_id == topics_id, tl.c.stories_id == source
                )
            )
            .mappings()
            .all()
        )
        store.insert_ignore(
            conn,
            tl,
            [{**dict(link), "topics_id": topics_id, "stories_id": target} for link in outgoing],
            ["topics_id", "stories_id", "url"],
        )
        conn.execute(
            update(tl)
            .where(tl.c.topics_id == topics_id, tl.c.ref_stories_id == source)
            .values(ref_stories_id=target)
        )
        conn.execute(delete(tl).where(tl.c.topics_id == topics_id, tl.c.stories_id == source))
        # a story linking to its own duplicate now links to itself: that link is not a link
        conn.execute(
            delete(tl).where(
                tl.c.topics_id == topics_id, tl.c.stories_id == target, tl.c.ref_stories_id == target
            )
        )
        conn.execute(delete(ts).where(ts.c.topics_id == topics_id, ts.c.stories_id == source))
        del iterations[source]
        store.insert_ignore(
            conn,
            s.topic_merged_stories_map,
            [
                {
                    "topics_id": topics_id,
                    "source_stories_id": source,
                    "target_stories_id": target,
                    "reason": reason,
                    "merged_at": now,
                }
            ],
            ["topics_id", "source_stories_id"],
        )
        # stories merged into this one earlier (A into B, now B into C) are recorded as merged into C: the map
        # always names the final survivor, as the click totals and exports read it
        merged_map = s.topic_merged_stories_map
        conn.execute(
            update(merged_map)
            .where(merged_map.c.topics_id == topics_id, merged_map.c.target_stories_id == source)
            .values(target_stories_id=target)
        )
        for table in (s.topic_seed_urls, s.topic_fetch_urls):
            conn.execute(
                update(table)
                .where(table.c.topics_id == topics_id, table.c.stories_id == source)
                .values(stories_id=target)
            )
        report.merges.append({"source_stories_id": source, "target_stories_id": target, "reason": reason})
        report.reasons[reason] += 1


def merge_counts(store: TopicStore, topics_id: int) -> dict[str, int]:
    m = s.topic_merged_stories_map
    with store.engine.connect() as conn:
        return dict(
            conn.execute(
                select(m.c.reason, func.count()).where(m.c.topics_id == topics_id).group_by(m.c.reason)
            ).all()
        )


# --------------------------------------------------------------------------------------------- near-duplicates


@dataclass
class NearDuplicateReport:
    fingerprinted: int = 0
    stories: int = 0
    pairs: int = 0
    groups: list[dict] = field(default_factory=list)


def ensure_fingerprints(store: TopicStore, stories_ids: list[int], chunk: int = 2000) -> int:
    """Store a simhash for every story that has none (or one of an older feature version)."""
    sh, st = s.story_simhashes, s.stories
    computed = 0
    known: set[int] = set()
    with store.engine.connect() as conn:
        # Only the asked ids: the lookup service calls this for each batch of new stories of a large store.
        for start in range(0, len(stories_ids), chunk):
            asked = stories_ids[start : start + chunk]
            known.update(
                conn.execute(
                    select(sh.c.stories_id).where(
                        sh.c.stories_id.in_(asked), sh.c.feature_version == FEATURE_VERSION
                    )
                ).scalars()
            )
    todo = [i for i in stories_ids if i not in known]
    for start in range(0, len(todo), chunk):
        ids = todo[start : start + chunk]
        with store.engine.begin() as conn:
            texts = dict(
                conn.execute(select(st.c.stories_id, st.c.text).where(st.c.stories_id.in_(ids))).all()
            )
            values = fingerprints([texts.get(i) or "" for i in ids])
            store.upsert(
                conn,
                sh,
                [
                    {"stories_id": i, "simhash": v, "feature_version": FEATURE_VERSION}
                    for i, v in zip(ids, simhashes_to_db(values), strict=True)
                ],
                ["stories_id"],
                ["simhash", "feature_version"],
            )
        computed += len(ids)
    return computed


def find_near_duplicates(
    store: TopicStore, topics_id: int, max_distance: int = DEFAULT_CANDIDATE_DISTANCE
) -> NearDuplicateReport:
    """Near-duplicate groups among the topic's stories across media (simhash, then a shingle check).

    Candidate pairs are stories whose stored fingerprints (computed once per story) are within
    ``max_distance`` bits, kept when their word-bigram Jaccard reaches 0.7. The default 6 is wider than plain
    simhash's 3, which misses ~8% of 3%-edited copies of short texts (benchmarks/RESULTS.md "Near-duplicate
    quality"); a smaller value finds fewer copies, never more. The groups replace the topic's previous
    groups."""
    if isinstance(max_distance, bool) or not isinstance(max_distance, int):
        raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
    if not 0 <= max_distance <= FINGERPRINT_BITS:  # checked before any fingerprint is written
        raise ValueError(f"max_distance must be between 0 and {FINGERPRINT_BITS} bits, got {max_distance}")
    report = NearDuplicateReport()
    with store.engine.connect() as conn:
        stories = topic_stories_frame(conn, topics_id)
    ids = stories["stories_id"].astype(int).tolist()
    report.fingerprinted = ensure_fingerprints(store, ids)
    report.stories = len(ids)
    sh, st = s.story_simhashes, s.stories
    with store.engine.begin() as conn:
        stored = (
            dict(conn.execute(select(sh.c.stories_id, sh.c.simhash).where(sh.c.stories_id.in_(ids))).all())
            if ids
            else {}
        )
        texts = (
            dict(conn.execute(select(st.c.stories_id, st.c.text).where(st.c.stories_id.in_(ids))).all())
            if ids
            else {}
        )
        fps = simhashes_from_db([stored[i] for i in ids])
        pairs = verified_near_duplicate_pairs(
            [texts.get(i) or "" for i in ids], fps, candidate_distance=max_distance
        )
        report.pairs = len(pairs)
        labels = (
            near_duplicate_groups(pairs[["i", "j"]].to_numpy(dtype=np.int64), len(ids))
            if ids
            else np.zeros(0)
        )
        conn.execute(delete(s.topic_near_dup_groups).where(s.topic_near_dup_groups.c.topics_id == topics_id))
        frame = stories.assign(label=labels)
        sizes = frame.groupby("label")["stories_id"].transform("size")
        grouped = frame[sizes > 1].sort_values(["label", "publish_date", "stories_id"], na_position="last")
        rows = []
        for _label, group in grouped.groupby("label", sort=False):
            representative = int(group["stories_id"].iloc[0])  # the earliest published copy
            rows += [
                {
                    "topics_id": topics_id,
                    "stories_id": int(i),
                    "group_stories_id": representative,
                    "group_size": len(group),
                }
                for i in group["stories_id"]
            ]
            report.groups.append(
                {
                    "representative": representative,
                    "title": group["title"].iloc[0],
                    "size": len(group),
                    "media": sorted(set(group["medium_name"])),
                }
            )
        store.insert_ignore(conn, s.topic_near_dup_groups, rows, ["topics_id", "stories_id"])
    report.groups.sort(key=lambda g: (-g["size"], g["representative"]))
    return report
