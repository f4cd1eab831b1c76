"""The stories of a topic's current version: what every stage reads as "the topic's stories".

A topic's settings change in versions (``topicmap.topics.versions``); a story that a new version's settings no
longer accept keeps its ``topic_stories`` row, marked with the version it left (``left_version``), and stays in
the archive with its links. Snapshots, clusters, dedup, the WARC export, the social metrics and the integrity
checks read only the stories of the current version, through these helpers, so that they agree on which ones
those are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Select, and_, func, select

from topicmap.store import schema as s

if TYPE_CHECKING:
    from topicmap.store.topic_store import TopicStore


def in_current_version(topics_id: Any) -> ColumnElement[bool]:
    """The ``topic_stories`` rows of topic ``topics_id`` (an id, or a column to correlate with) that are in its
    current version."""
    ts = s.topic_stories
    return and_(ts.c.topics_id == topics_id, ts.c.left_version.is_(None))


def version_story_ids(topics_id: Any) -> Select[Any]:
    """The ids of topic ``topics_id``'s stories in its current version (a subquery for ``IN``)."""
    return select(s.topic_stories.c.stories_id).where(in_current_version(topics_id))


def any_version_story_ids() -> Select[Any]:
    """The ids of the stories in the current version of at least one topic (what the social metrics measure)."""
    ts = s.topic_stories
    return select(ts.c.stories_id).where(ts.c.left_version.is_(None)).distinct()


def version_story_count(store: TopicStore, topics_id: int) -> int:
    """How many stories topic ``topics_id``'s current version holds."""
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(in_current_version(topics_id))).scalar_one())
