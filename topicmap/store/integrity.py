"""Integrity queries over the topic store: what each stage's output must satisfy, and what breaks it.

Each function runs real queries against the store (and, where a stage's output is files, reads those files) and
returns a :class:`Finding`: how many things break the rule, the first of them as rows a person can read, and how
much was looked at. The asset checks (``assets/checks.py``) turn findings into check results; nothing here knows
about Dagster.

``topics``: the topic names to look at (a run's partition), or None for every topic in the store. A name the store
does not know is reported in ``Finding.notes`` and otherwise skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, and_, case, func, or_, select

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, now_utc, utc
from topicmap.store.version_stories import in_current_version

#: rows of each finding kept as examples (all are counted)
MAX_EXAMPLES = 50
#: open states of topic_fetch_urls (topicmap.spider.claims.OPEN_STATES; named here so this module stays light)
OPEN_FETCH_STATES = ("pending",)
#: a CC-NEWS file still "loading" with no progress committed for this long has no loader any more
CCNEWS_STALL = timedelta(hours=1)


@dataclass
class Finding:
    """What one integrity rule found."""

    problems: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    """How many things were looked at (rows, files, timespans), so "0 problems" can be told from "nothing seen"."""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def add(self, example: dict[str, Any]) -> None:
        self.problems += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)


def topic_ids(conn: Connection, topics: Sequence[str] | None, finding: Finding) -> dict[int, str]:
    """topics_id → name of the topics in scope (all when ``topics`` is None); unknown names go to the notes."""
    t = s.topics
    query = select(t.c.topics_id, t.c.name).order_by(t.c.name)
    if topics is not None:
        query = query.where(t.c.name.in_(list(topics)))
    found = dict(conn.execute(query).all())
    for name in sorted(set(topics or ()) - set(found.values())):
        finding.notes.append(f"topic {name!r} is not in the store (never seeded)")
    return found


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return utc(value).isoformat()
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------- spider
def claimed_urls_left(store: TopicStore, topics: Sequence[str] | None, now: float) -> Finding:
    """Open (pending) URLs still claimed although no holder will finish them: the claim expired (its
    holder died) or their iteration is recorded as done. A claim ends when the URL's outcome is written, and a
    holder that stops releases what it did not finish, so after an iteration none should be left."""
    finding = Finding()
    f, m = s.topic_fetch_urls, s.topic_spider_metrics
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        if not names:
            return finding
        done = (
            select(m.c.topics_id, m.c.iteration)
            .where(m.c.topics_id == f.c.topics_id, m.c.iteration == f.c.iteration)
            .exists()
        )
        claimed = and_(
            f.c.topics_id.in_(list(names)), f.c.claimed_by.is_not(None), f.c.state.in_(OPEN_FETCH_STATES)
        )
        finding.checked = int(conn.execute(select(func.count()).where(claimed)).scalar_one())
        rows = conn.execute(
            select(
                f.c.topics_id,
                f.c.url,
                f.c.iteration,
                f.c.state,
                f.c.claimed_by,
                f.c.claim_expires_at,
                done.label("iteration_done"),
            )
            .where(claimed, or_(f.c.claim_expires_at < now, f.c.claim_expires_at.is_(None), done))
            .order_by(f.c.topics_id, f.c.iteration, f.c.topic_fetch_urls_id)
        ).all()
    for row in rows:
        finding.add(
            {
                "topic": names[row.topics_id],
                "url": row.url,
                "iteration": row.iteration,
                "state": row.state,
                "claimed_by": row.claimed_by,
                "why": "its iteration is done" if row.iteration_done else "the claim expired (holder gone)",
            }
        )
    return finding


# ---------------------------------------------------------------------------------------------- dedup
def stories_merged_into_merged(store: TopicStore, topics: Sequence[str] | None) -> Finding:
    """Merges whose target was itself merged later in the same topic (A into B, then B into C): the record should
    name the final survivor C. Readers that follow chains still count A in C, but the map is no longer final."""
    finding = Finding()
    first, then = s.topic_merged_stories_map.alias("first"), s.topic_merged_stories_map.alias("then")
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        if not names:
            return finding
        finding.checked = int(
            conn.execute(select(func.count()).where(first.c.topics_id.in_(list(names)))).scalar_one()
        )
        rows = conn.execute(
            select(
                first.c.topics_id,
                first.c.source_stories_id,
                first.c.target_stories_id,
                then.c.target_stories_id.label("target_merged_into"),
                first.c.reason,
                then.c.reason.label("then_reason"),
            )
            .join(
                then,
                and_(
                    then.c.topics_id == first.c.topics_id,
                    then.c.source_stories_id == first.c.target_stories_id,
                ),
            )
            .where(first.c.topics_id.in_(list(names)))
            .order_by(first.c.topics_id, first.c.source_stories_id)
        ).all()
    for row in rows:
        finding.add(
            {
                "topic": names[row.topics_id],
                "stories_id": row.source_stories_id,
                "merged_into": row.target_stories_id,
                "which_was_merged_into": row.target_merged_into,
                "reasons": f"{row.reason}; then {row.then_reason}",
            }
        )
    return finding


def merged_stories_left_in_topic(store: TopicStore, topics: Sequence[str] | None) -> Finding:
    """Stories recorded as merged away that the topic still holds: a ``topic_stories`` row, or a topic link from
    or to them (dedup moves both to the survivor)."""
    finding = Finding()
    m, ts, tl = s.topic_merged_stories_map, s.topic_stories, s.topic_links
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        if not names:
            return finding
        scope = m.c.topics_id.in_(list(names))
        finding.checked = int(conn.execute(select(func.count()).where(scope)).scalar_one())
        still_story = (
            select(ts.c.topic_stories_id)
            .where(ts.c.topics_id == m.c.topics_id, ts.c.stories_id == m.c.source_stories_id)
            .exists()
        )
        links = (
            select(func.count())
            .where(
                tl.c.topics_id == m.c.topics_id,
                or_(tl.c.stories_id == m.c.source_stories_id, tl.c.ref_stories_id == m.c.source_stories_id),
            )
            .scalar_subquery()
        )
        rows = conn.execute(
            select(
                m.c.topics_id,
                m.c.source_stories_id,
                m.c.target_stories_id,
                still_story.label("topic_story"),
                links.label("links"),
            )
            .where(scope, or_(still_story, links > 0))
            .order_by(m.c.topics_id, m.c.source_stories_id)
        ).all()
    for row in rows:
        finding.add(
            {
                "topic": names[row.topics_id],
                "stories_id": row.source_stories_id,
                "merged_into": row.target_stories_id,
                "still_a_topic_story": bool(row.topic_story),
                "topic_links": int(row.links),
            }
        )
    return finding


def media_pointing_to_duplicates(store: TopicStore) -> Finding:
    """Media whose ``dup_media_id`` names a medium that is itself a duplicate (or itself): the final medium is
    then found only by following a chain, and a cycle has none. The duplicate-media list should name the final
    medium directly."""
    finding = Finding()
    media, target = s.media, s.media.alias("target")
    with store.engine.connect() as conn:
        finding.checked = int(
            conn.execute(select(func.count()).where(media.c.dup_media_id.is_not(None))).scalar_one()
        )
        rows = conn.execute(
            select(
                media.c.media_id,
                media.c.name,
                media.c.dup_media_id,
                target.c.name.label("target_name"),
                target.c.dup_media_id.label("target_dup_media_id"),
            )
            .join(target, target.c.media_id == media.c.dup_media_id)
            .where(or_(target.c.dup_media_id.is_not(None), media.c.dup_media_id == media.c.media_id))
            .order_by(media.c.media_id)
        ).all()
    for row in rows:
        finding.add(
            {
                "media_id": row.media_id,
                "medium": row.name,
                "dup_media_id": row.dup_media_id,
                "points_to": row.target_name,
                "which_is_a_duplicate_of": row.target_dup_media_id,
            }
        )
    return finding


def topic_stories_in_duplicate_media(store: TopicStore, topics: Sequence[str] | None) -> Finding:
    """Stories of a topic's current version whose medium is a duplicate (``dup_media_id`` set): media dedup merges
    or moves every one of them into the final medium, so after it none is left (a story that left the version is
    not deduplicated)."""
    finding = Finding()
    ts, st, media = s.topic_stories, s.stories, s.media
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        if not names:
            return finding
        scope = and_(ts.c.topics_id.in_(list(names)), in_current_version(ts.c.topics_id))
        finding.checked = int(conn.execute(select(func.count()).where(scope)).scalar_one())
        rows = conn.execute(
            select(ts.c.topics_id, st.c.stories_id, st.c.url, media.c.name, media.c.dup_media_id)
            .join(st, st.c.stories_id == ts.c.stories_id)
            .join(media, media.c.media_id == st.c.media_id)
            .where(scope, media.c.dup_media_id.is_not(None))
            .order_by(ts.c.topics_id, st.c.stories_id)
        ).all()
    for row in rows:
        finding.add(
            {
                "topic": names[row.topics_id],
                "stories_id": row.stories_id,
                "url": row.url,
                "medium": row.name,
                "dup_media_id": row.dup_media_id,
            }
        )
    return finding


def near_duplicate_groups_inconsistent(store: TopicStore, topics: Sequence[str] | None) -> Finding:
    """Near-duplicate groups whose recorded size is not their number of members, whose representative is not a
    member, or that hold a story no longer in the topic (merged away since)."""
    finding = Finding()
    g, ts = s.topic_near_dup_groups, s.topic_stories
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        if not names:
            return finding
        scope = g.c.topics_id.in_(list(names))
        in_topic = (
            select(ts.c.topic_stories_id)
            .where(ts.c.topics_id == g.c.topics_id, ts.c.stories_id == g.c.stories_id)
            .exists()
        )
        groups = conn.execute(
            select(
                g.c.topics_id,
                g.c.group_stories_id,
                func.count().label("members"),
                func.min(g.c.group_size).label("min_size"),
                func.max(g.c.group_size).label("max_size"),
                func.sum(case((g.c.stories_id == g.c.group_stories_id, 1), else_=0)).label("representative"),
                func.sum(case((in_topic, 0), else_=1)).label("outside_topic"),
            )
            .where(scope)
            .group_by(g.c.topics_id, g.c.group_stories_id)
            .order_by(g.c.topics_id, g.c.group_stories_id)
        ).all()
    finding.checked = len(groups)
    for row in groups:
        problems = []
        if not row.min_size == row.max_size == row.members:
            problems.append(f"size recorded {row.min_size}..{row.max_size}, {row.members} members")
        if not row.representative:
            problems.append("the representative is not a member")
        if row.outside_topic:
            problems.append(f"{row.outside_topic} members are no longer topic stories")
        if problems:
            finding.add(
                {
                    "topic": names[row.topics_id],
                    "group_stories_id": row.group_stories_id,
                    "members": row.members,
                    "problem": "; ".join(problems),
                }
            )
    return finding


def stories_without_cluster(
    store: TopicStore, topics: Sequence[str] | None, min_stories: int, home: Path
) -> Finding:
    """Per topic clustered at once (``exports/clusters/{topic}/overall``): stories of the topic's current version
    missing from its ``stories.parquet``, stories there without a cluster or with a cluster ``clusters.parquet``
    does not list, and a topic with at least ``min_stories`` stories but no clustering written. Stories missing
    mean the clustering predates the topic's latest stories (re-materialize ``clusters``); a bad label means a
    broken file."""
    import pyarrow.parquet as pq  # with the check, not with the module

    finding = Finding()
    ts = s.topic_stories
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        members = {
            topics_id: set(
                conn.execute(select(ts.c.stories_id).where(in_current_version(topics_id))).scalars()
            )
            for topics_id in names
        }
    for topics_id, name in names.items():
        folder = home / "exports" / "clusters" / name / "overall"
        stories_file, clusters_file = folder / "stories.parquet", folder / "clusters.parquet"
        in_topic = members[topics_id]
        if not stories_file.is_file():
            if len(in_topic) >= min_stories and topics is not None:
                finding.add(
                    {"topic": name, "stories_id": "", "problem": f"no clustering written in {folder}"}
                )
            continue
        table = pq.read_table(stories_file, columns=["stories_id", "cluster"]).to_pydict()
        known_clusters = (
            set(pq.read_table(clusters_file, columns=["cluster"]).column("cluster").to_pylist())
            if clusters_file.is_file()
            else set()
        )
        finding.checked += len(in_topic)
        labelled = dict(zip(table["stories_id"], table["cluster"], strict=True))
        for sid in sorted(in_topic - set(labelled)):
            finding.add({"topic": name, "stories_id": sid, "problem": "a topic story without a cluster"})
        for sid, cluster in sorted(labelled.items()):
            if sid in in_topic and (cluster is None or cluster not in known_clusters):
                finding.add(
                    {"topic": name, "stories_id": sid, "problem": f"cluster {cluster!r} is not listed"}
                )
    return finding


# ---------------------------------------------------------------------------------------------- archive
def ccnews_files_stuck(store: TopicStore, now: datetime | None = None) -> Finding:
    """CC-NEWS files left "loading" with no batch committed for ``CCNEWS_STALL``: their loader died mid-file (a
    re-run of the day resumes them)."""
    finding = Finding()
    f = s.cc_news_files
    stale = (now or now_utc()) - CCNEWS_STALL
    with store.engine.connect() as conn:
        finding.checked = int(conn.execute(select(func.count()).select_from(f)).scalar_one())
        rows = conn.execute(
            select(f.c.path, f.c.day, f.c.records_done, f.c.updated_at)
            .where(f.c.state == "loading", f.c.updated_at < stale)
            .order_by(f.c.day, f.c.path)
        ).all()
    for row in rows:
        finding.add(
            {
                "day": _iso(row.day),
                "path": row.path,
                "records_done": row.records_done,
                "last_progress": _iso(row.updated_at),
            }
        )
    return finding


def cc_outlets_stuck(store: TopicStore, lease_seconds: float, now: datetime | None = None) -> Finding:
    """Common Crawl outlets left "running" whose worker stopped renewing its heartbeat for longer than the lease
    (presumed killed): the next loader run takes them over and resumes from their cursor."""
    finding = Finding()
    q = s.cc_outlet_queue
    stale = (now or now_utc()) - timedelta(seconds=lease_seconds)
    with store.engine.connect() as conn:
        finding.checked = int(conn.execute(select(func.count()).select_from(q)).scalar_one())
        rows = conn.execute(
            select(q.c.domain, q.c.collection, q.c.claimed_by, q.c.heartbeat_at, q.c.next_page)
            .where(q.c.state == "running", or_(q.c.heartbeat_at < stale, q.c.heartbeat_at.is_(None)))
            .order_by(q.c.domain, q.c.collection)
        ).all()
    for row in rows:
        finding.add(
            {
                "domain": row.domain,
                "collection": row.collection,
                "claimed_by": row.claimed_by,
                "last_heartbeat": _iso(row.heartbeat_at),
                "next_page": row.next_page,
            }
        )
    return finding


# ---------------------------------------------------------------------------------------------- snapshots
COUNT_COLUMNS = ("story_count", "story_link_count", "medium_count", "medium_link_count")


def timespan_counts_inconsistent(
    store: TopicStore, topics: Sequence[str] | None, manifests: dict[str, dict[str, Any] | None]
) -> Finding:
    """The ``timespans`` rows of each topic's newest snapshot against each other and against its manifest.

    Per timespan: no count below 0; at most as many media as stories and medium links as story links; no link
    without a story; no more stories or story links than the overall timespan. Across timespans: the monthly and
    the weekly timespans both cover the topic's dates once, so their story links (counted by the source story's
    date) add up to the same number, at most the overall one. Against the files: the store's counts are the
    manifest's. ``manifests``: topic name → the newest snapshot's manifest (None when unreadable)."""
    finding = Finding()
    sn, tsp = s.snapshots, s.timespans
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        latest = dict(
            conn.execute(
                select(sn.c.topics_id, func.max(sn.c.snapshots_id))
                .where(sn.c.topics_id.in_(list(names)))
                .group_by(sn.c.topics_id)
            ).all()
        )
        rows = conn.execute(
            select(tsp, sn.c.topics_id)
            .join(sn, sn.c.snapshots_id == tsp.c.snapshots_id)
            .where(tsp.c.snapshots_id.in_(list(latest.values())))
            .order_by(tsp.c.snapshots_id, tsp.c.period, tsp.c.start_date)
        ).mappings()
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_topic.setdefault(names[row["topics_id"]], []).append(dict(row))
    for name, timespans in sorted(by_topic.items()):
        finding.checked += len(timespans)
        check_files = name in manifests
        for timespan, text in _timespan_problems(timespans, manifests.get(name), check_files):
            where = f"{timespan['period']} {as_date(timespan['start_date'])}" if timespan else "snapshot"
            finding.add(
                {
                    "topic": name,
                    "snapshots_id": timespans[0]["snapshots_id"],
                    "timespan": where,
                    "problem": text,
                }
            )
    return finding


def _timespan_problems(
    timespans: list[dict[str, Any]], manifest: dict[str, Any] | None, check_files: bool
) -> list[tuple[dict[str, Any] | None, str]]:
    """(timespan or None for the whole snapshot, what is wrong) for one snapshot's ``timespans`` rows."""
    problems: list[tuple[dict[str, Any] | None, str]] = []
    overall = next((t for t in timespans if t["period"] == "overall"), None)
    for t in timespans:
        counts = {c: t[c] for c in COUNT_COLUMNS}
        if min(counts.values()) < 0:
            problems.append((t, f"a negative count: {counts}"))
        if t["medium_count"] > t["story_count"]:
            problems.append((t, f"{t['medium_count']} media but {t['story_count']} stories"))
        if t["medium_link_count"] > t["story_link_count"]:
            problems.append(
                (t, f"{t['medium_link_count']} medium links but {t['story_link_count']} story links")
            )
        if t["story_count"] == 0 and t["story_link_count"]:
            problems.append((t, f"{t['story_link_count']} story links but no story"))
        if overall is not None and t is not overall:
            for column in ("story_count", "story_link_count"):
                if t[column] > overall[column]:
                    problems.append(
                        (t, f"{column} {t[column]} exceeds the overall timespan's {overall[column]}")
                    )
    sums = {
        period: sum(t["story_link_count"] for t in timespans if t["period"] == period)
        for period in ("monthly", "weekly")
        if any(t["period"] == period for t in timespans)
    }
    if len(sums) == 2 and sums["monthly"] != sums["weekly"]:
        problems.append(
            (None, f"story links: monthly timespans add up to {sums['monthly']}, weekly to {sums['weekly']}")
        )
    if overall is not None and sums and max(sums.values()) > overall["story_link_count"]:
        problems.append(
            (overall, f"story links of the periods {sums} exceed the overall {overall['story_link_count']}")
        )
    if not check_files:
        return problems
    if manifest is None:
        return [*problems, (None, "the snapshot's manifest is missing or unreadable")]
    in_files = {
        (entry["period"], str(entry["start_date"]), str(entry["last_date"])): entry.get("counts", {})
        for entry in manifest.get("timespans", [])
    }
    for t in timespans:
        last_day = as_date(t["end_date"]) - timedelta(days=1)  # the store's end_date is exclusive
        counts = in_files.get((t["period"], as_date(t["start_date"]).isoformat(), last_day.isoformat()))
        if counts is None:
            problems.append((t, "not in the snapshot's manifest"))
        elif any(counts.get(c) != t[c] for c in COUNT_COLUMNS):
            stored = {c: t[c] for c in COUNT_COLUMNS}
            problems.append((t, f"store {stored} != files { ({c: counts.get(c) for c in COUNT_COLUMNS}) }"))
    if len(in_files) != len(timespans):
        problems.append((None, f"{len(in_files)} timespans in the manifest, {len(timespans)} in the store"))
    return problems


def as_date(value: Any) -> date:
    """A stored DATE (a date, or its ISO text on some drivers) as a date."""
    if isinstance(value, datetime):
        return value.date()
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])
