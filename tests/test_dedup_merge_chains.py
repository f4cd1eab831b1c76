"""The merge map always names the final survivor: a story merged into one that is merged later (a duplicate
medium's story, then a same-title copy) is recorded as merged into the last one."""

from __future__ import annotations

from sqlalchemy import select

from tests.test_dedup_store import build_topic
from topicmap.dedup.store import MergeReport, _apply_merges
from topicmap.store import schema as s
from topicmap.store.integrity import stories_merged_into_merged
from topicmap.store.topic_store import TopicStore


def test_a_story_merged_into_a_later_merged_story_is_recorded_against_the_survivor(store: TopicStore) -> None:
    topics_id, ids = build_topic(store)
    first, middle, last = ids["old_plan"], ids["new_plan"], ids["reply"]
    with store.engine.begin() as conn:
        _apply_merges(store, conn, topics_id, {first: middle}, "duplicate medium", MergeReport())
    with store.engine.begin() as conn:
        _apply_merges(store, conn, topics_id, {middle: last}, "same title and day", MergeReport())
    m = s.topic_merged_stories_map
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(m.c.source_stories_id, m.c.target_stories_id, m.c.reason).where(m.c.topics_id == topics_id)
        ).all()
    mapped = {row.source_stories_id: row.target_stories_id for row in rows}
    reasons = {row.source_stories_id: row.reason for row in rows}
    assert mapped == {first: last, middle: last}
    assert reasons[first] == "duplicate medium"  # why it was merged stays as recorded
    assert stories_merged_into_merged(store, None).ok
