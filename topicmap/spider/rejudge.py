"""Judging a topic's stories again when its settings change (``topicmap.topics.versions``): Media Cloud's topic
versions, where a new version holds the stories its own settings accept.

Every story of the topic (those outside an earlier version too) is judged under the new version's query as the
spider judges a story it meets: the query on its title, description, URL and redirect URL (``fields_match``),
then on its text, then on all of them together as the seeding reads an archive story; a story fetched for a seed URL that the current seed lists take as relevant (``assume_match``)
stays without a test. The text is read whole here, where the spider reads the sentences new in the story's medium
and week: a story kept under the new query may be one the spider would not have added (its matching sentences
first seen in another story), never the reverse. Dates are not judged: a story outside the topic's new dates
stays a topic story and falls in none of the snapshot's timespans, as a spidered story outside them does.

A story that no longer matches gets ``topic_stories.left_version`` (the version it left in); one that matches
again is back (the mark cleared). Nothing is deleted: the story, its links and the earlier snapshots stay.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from topicmap.spider.judging import fields_match
from topicmap.spider.store import SpiderStore
from topicmap.store.topic_store import TopicStore, chunks
from topicmap.topics.query import parse
from topicmap.topics.versions import TopicVersion, mark_judged


@dataclass(frozen=True)
class RejudgeReport:
    version: int
    judged: int = 0  # topic stories judged
    left: int = 0  # no longer matching: outside this version
    back: int = 0  # outside an earlier version, matching this one
    outside: int = 0  # outside this version in all

    def summary(self) -> str:
        return (
            f"version {self.version}: {self.judged} topic stories judged again, {self.left} no longer match, "
            f"{self.back} match again; {self.outside} outside this version"
        )


def rejudge_topic(
    store: TopicStore, version: TopicVersion, assumed_urls: Collection[str] = ()
) -> RejudgeReport:
    """Judge every story of ``version``'s topic under its settings and mark the version judged, in one
    transaction (a run killed before the end changes nothing; running it again gives the same marks).
    ``assumed_urls``: the seed URLs the topic's current seed lists take as relevant."""
    query = parse(version.query)
    spider_store = SpiderStore(store, version.topics_id)
    with spider_store.begin() as conn:
        assumed = spider_store.fetched_stories_of(conn, assumed_urls)
        members = spider_store.topic_members(conn)
        leaving: list[int] = []
        back: list[int] = []
        outside = 0
        for chunk in chunks(members):
            stories = spider_store.stories_to_judge(conn, [m.stories_id for m in chunk])
            for member in chunk:
                story = stories.get(member.stories_id)
                keep = member.stories_id in assumed or (
                    story is not None
                    and (
                        fields_match(query, story, member.redirect_url)
                        or bool(story.text and query.matches(story.text))
                        # as the seeding's archive read judges a story: its fields and text together
                        or query.matches_story(story.title, story.text, story.url, story.description)
                    )
                )
                if keep and member.left_version is not None:
                    back.append(member.stories_id)
                elif not keep:
                    outside += 1
                    if member.left_version is None:
                        leaving.append(member.stories_id)
        spider_store.set_left_version(conn, leaving, version.version)
        spider_store.set_left_version(conn, back, None)
        mark_judged(conn, version.topics_id, version.version, len(leaving))
    return RejudgeReport(version.version, len(members), len(leaving), len(back), outside)
