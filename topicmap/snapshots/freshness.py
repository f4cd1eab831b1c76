"""Which topics' snapshots are stale: the newest snapshot of a topic against the newest change of what it reads.

A snapshot reads the stories of the topic's current version, the merges dedup recorded, the stories' Bit.ly
clicks and their Facebook statistics. When any of them changed after the topic's newest completed snapshot, the snapshot is stale (the
``weekly_snapshots`` schedule and the ``snapshot_refresh`` sensor request a new one); a topic with no snapshot
yet needs one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.store.version_stories import version_story_ids


@dataclass(frozen=True)
class TopicFreshness:
    """When a topic's data and its newest snapshot last changed (None: never)."""

    topic: str
    state: str
    removed: bool
    snapshot_at: datetime | None
    data_at: datetime | None
    """The newest change of anything the snapshot reads."""
    metrics_at: datetime | None
    """The newest click or Facebook figure of the topic's stories."""

    def stale(self, metrics_only: bool) -> bool:
        """The newest snapshot predates the data (with ``metrics_only``: the figures); no snapshot at all is stale
        unless only the figures count."""
        changed = self.metrics_at if metrics_only else self.data_at
        if self.snapshot_at is None:
            return not metrics_only
        return changed is not None and changed > self.snapshot_at


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    value = datetime.fromisoformat(value) if isinstance(value, str) else value
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def topic_freshness(store: TopicStore, topic: str) -> TopicFreshness | None:
    """The newest snapshot of ``topic`` against the newest change of what it reads: its stories, merges, clicks
    and Facebook statistics (``metrics_at``: clicks and statistics only). None for an unknown topic."""
    t, ts, snap = s.topics, s.topic_stories, s.snapshots
    with store.engine.connect() as conn:
        row = conn.execute(
            select(t.c.topics_id, t.c.state, t.c.updated_at, t.c.removed_from_config).where(t.c.name == topic)
        ).first()
        if row is None:
            return None
        story_ids = version_story_ids(row.topics_id)
        clicks = s.bitly_clicks_total
        stats = s.story_statistics
        merged = s.topic_merged_stories_map
        versions = s.topic_versions
        snapshot_at = conn.execute(
            select(func.max(snap.c.snapshot_date)).where(
                snap.c.topics_id == row.topics_id, snap.c.state == "completed"
            )
        ).scalar_one()
        metrics = [
            conn.execute(select(func.max(clicks.c.fetched_3d_at)).where(clicks.c.stories_id.in_(story_ids))),
            conn.execute(select(func.max(clicks.c.fetched_30d_at)).where(clicks.c.stories_id.in_(story_ids))),
            conn.execute(
                select(func.max(stats.c.facebook_api_collect_date)).where(stats.c.stories_id.in_(story_ids))
            ),
        ]
        metric_times = [_utc(result.scalar_one()) for result in metrics]
        other_times = [
            _utc(row.updated_at),
            _utc(
                conn.execute(
                    select(func.max(ts.c.added_at)).where(ts.c.topics_id == row.topics_id)
                ).scalar_one()
            ),
            _utc(
                conn.execute(
                    select(func.max(merged.c.merged_at)).where(merged.c.topics_id == row.topics_id)
                ).scalar_one()
            ),
            # a new version's stories judged again: some left it, or came back
            _utc(
                conn.execute(
                    select(func.max(versions.c.judged_at)).where(versions.c.topics_id == row.topics_id)
                ).scalar_one()
            ),
        ]
    metrics_at = max((v for v in metric_times if v is not None), default=None)
    data_at = max((v for v in [*metric_times, *other_times] if v is not None), default=None)
    return TopicFreshness(
        topic, row.state, bool(row.removed_from_config), _utc(snapshot_at), data_at, metrics_at
    )


def snapshotted_topics(store: TopicStore) -> list[str]:
    """The names of the topics that have a snapshot, sorted."""
    with store.engine.connect() as conn:
        names = conn.execute(
            select(s.topics.c.name)
            .where(s.topics.c.topics_id.in_(select(s.snapshots.c.topics_id)))
            .distinct()
        ).scalars()
        return sorted(names)
