"""Topic versions, as Media Cloud keeps them: a topic's settings (query, dates, seed lists) from one change to the
next, numbered from 1 per topic (table ``topic_versions``).

The seeds asset records the declaration's settings each time it seeds a topic (``record_version``): the same
settings as the latest version change nothing, other settings start the next version. A new version's stories are
judged again under its settings (``topicmap.spider.rejudge``): those that no longer match are marked outside it
(``topic_stories.left_version``), nothing is deleted. A snapshot reads only the current version's stories and
records the version it was built from (``snapshots.topic_version``), so an earlier snapshot stays what it was.

What a version covers: the query, the start date, the end date as declared (``open`` for an open-ended topic,
whose last day moves every day without changing its settings) and the seed URL lists (each file's name, its
``assume_match`` flag and its bytes). Post dumps are not part of it: they grow like the archive does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import Connection, select, update

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig


@dataclass(frozen=True)
class TopicVersion:
    """One row of ``topic_versions``."""

    topics_id: int
    version: int
    settings_sha256: str
    query: str
    start_date: date
    end_date: date | None  # None: open-ended
    seeds_sha256: str
    created_at: datetime
    judged_at: datetime | None = None
    stories_left: int | None = None

    def describe(self) -> str:
        end = self.end_date.isoformat() if self.end_date else "open"
        return f"version {self.version}: {self.query!r}, {self.start_date}..{end}, seeds {self.seeds_sha256[:12]}"


def seeds_sha256(topic: TopicConfig) -> str:
    """sha256 over the topic's seed URL lists in declaration order: each file's name, flag and bytes (a file that
    cannot be read counts as missing, so it changes the digest when it appears)."""
    digest = hashlib.sha256()
    for seed_list in topic.seed_urls:
        try:
            content = hashlib.sha256(seed_list.path.read_bytes()).hexdigest()
        except OSError:
            content = "missing"
        digest.update(json.dumps([seed_list.path.name, seed_list.assume_match, content]).encode() + b"\n")
    return digest.hexdigest()


def settings_sha256(query: str, start_date: date, end_date: date | None, seeds_digest: str) -> str:
    settings = {
        "query": query,
        "start_date": start_date.isoformat(),
        "end_date": end_date.isoformat() if end_date else "open",
        "seeds_sha256": seeds_digest,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def latest_version(conn: Connection, topics_id: int) -> TopicVersion | None:
    """The topic's current version (None: none recorded yet)."""
    tv = s.topic_versions
    row = (
        conn.execute(select(tv).where(tv.c.topics_id == topics_id).order_by(tv.c.version.desc()).limit(1))
        .mappings()
        .first()
    )
    return _version(row) if row is not None else None


def topic_versions(store: TopicStore, topics_id: int) -> list[TopicVersion]:
    """Every version of the topic, oldest first."""
    tv = s.topic_versions
    with store.engine.connect() as conn:
        rows = conn.execute(select(tv).where(tv.c.topics_id == topics_id).order_by(tv.c.version)).mappings()
        return [_version(row) for row in rows]


def _version(row: dict) -> TopicVersion:
    return TopicVersion(**{k: v for k, v in dict(row).items() if k != "topic_versions_id"})


def record_version(store: TopicStore, topics_id: int, topic: TopicConfig) -> tuple[TopicVersion, bool]:
    """The topic's version for the declaration ``topic``, and whether it is new: the latest version when its
    settings are the same, else the next one (the first is 1). Safe to repeat and to run twice at once: the
    unique (topics_id, version) key lets one writer win, and the loser reads what it wrote."""
    seeds = seeds_sha256(topic)
    digest = settings_sha256(topic.query, topic.start_date, topic.end_date, seeds)
    for _ in range(3):
        with store.engine.begin() as conn:
            latest = latest_version(conn, topics_id)
            if latest is not None and latest.settings_sha256 == digest:
                return latest, False
            row = {
                "topics_id": topics_id,
                "version": (latest.version if latest else 0) + 1,
                "settings_sha256": digest,
                "query": topic.query,
                "start_date": topic.start_date,
                "end_date": topic.end_date,
                "seeds_sha256": seeds,
                "created_at": now_utc(),
                # the first version's stories are judged by the spider as they join
                "judged_at": now_utc() if latest is None else None,
                "stories_left": 0 if latest is None else None,
            }
            inserted = store.insert_ignore(conn, s.topic_versions, [row], ["topics_id", "version"])
        if inserted:
            with store.engine.connect() as conn:
                current = latest_version(conn, topics_id)
            assert current is not None
            return current, True
    raise RuntimeError(f"topic {topic.name!r}: could not record its version (written concurrently)")


def mark_judged(conn: Connection, topics_id: int, version: int, stories_left: int) -> None:
    tv = s.topic_versions
    conn.execute(
        update(tv)
        .where(tv.c.topics_id == topics_id, tv.c.version == version)
        .values(judged_at=now_utc(), stories_left=stories_left)
    )
