"""Judging a topic's stories again when its settings change (``topicmap.topics.versions``): Media Cloud's topic
versions, where a new version holds the stories its own settings accept.

Every story of the topic (those outside an earlier version too) is judged under the new version's query as the
spider judges a story it meets: the query on its title, description, URL and redirect URL (``fields_match``),
then on its text, then on all of them together as the seeding reads an archive story; a story fetched for a seed URL that the current seed lists take as relevant (``assume_match``)
stays without a test. The text is read whole here, where the spider reads the sentences new in the story's medium
and week: a story kept under the new query may be one the spider would not have added (its matching sentences
first seen in another story), never the reverse.

Then its date, by Media Cloud's rule for a topic's stories (the one that decides whose links are mined,
``topicmap.spider.respider.mining_window``): a story with no publish date stays; a dated one is within the
version's dates when its day is within them ± 7 days. A story dated outside leaves when some version of the
topic reached its day (the dates narrowed or moved away from it); one dated on a day no version ever reached
stays, judged by the query only: the spider takes a linked story whatever its date, as Media Cloud's did, so
the old pages it found through the topic's links are not the dates' to remove. Widening the dates back brings a
story that left by its date back, when the query still matches it.

A story that no longer matches gets ``topic_stories.left_version`` (the version it left in); one that matches
again is back (the mark cleared). Nothing is deleted: the story, its links and the earlier snapshots stay.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from topicmap.spider.judging import fields_match
from topicmap.spider.respider import Window, mining_window, within_window
from topicmap.spider.store import SpiderStore
from topicmap.store.topic_store import TopicStore, chunks, utc
from topicmap.topics.query import parse
from topicmap.topics.versions import TopicVersion, mark_judged, topic_versions


@dataclass(frozen=True)
class RejudgeReport:
    version: int
    judged: int = 0  # topic stories judged
    left: int = 0  # no longer matching: outside this version
    back: int = 0  # outside an earlier version, matching this one
    outside: int = 0  # outside this version in all
    outside_dates: int = 0  # of those, matching the query but dated outside the version's dates

    def summary(self) -> str:
        return (
            f"version {self.version}: {self.judged} topic stories judged again, {self.left} no longer match, "
            f"{self.back} match again; {self.outside} outside this version "
            f"({self.outside_dates} of them by their date)"
        )


def rejudge_topic(
    store: TopicStore, version: TopicVersion, assumed_urls: Collection[str] = ()
) -> RejudgeReport:
    """Judge every story of ``version``'s topic under its settings and mark the version judged, in one
    transaction (a run killed before the end changes nothing; running it again gives the same marks).
    ``assumed_urls``: the seed URLs the topic's current seed lists take as relevant."""
    query = parse(version.query)
    spider_store = SpiderStore(store, version.topics_id)
    dates = DateRule(
        mining_window(version), [mining_window(v) for v in topic_versions(store, version.topics_id)]
    )
    with spider_store.begin() as conn:
        assumed = spider_store.fetched_stories_of(conn, assumed_urls)
        members = spider_store.topic_members(conn)
        leaving: list[int] = []
        back: list[int] = []
        outside = outside_dates = 0
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
                if keep and story is not None and dates.excludes(story.publish_date):
                    keep = False
                    outside_dates += 1
                if keep and member.left_version is not None:
                    back.append(member.stories_id)
                elif not keep:
                    outside += 1
                    if member.left_version is None:
                        leaving.append(member.stories_id)
        spider_store.set_left_version(conn, leaving, version.version)
        spider_store.set_left_version(conn, back, None)
        mark_judged(conn, version.topics_id, version.version, len(leaving))
    return RejudgeReport(version.version, len(members), len(leaving), len(back), outside, outside_dates)


@dataclass(frozen=True)
class DateRule:
    """Whether a story's date puts it outside a version: the version's window (its dates ± 7 days) and those of
    every version of the topic (the days the topic ever reached)."""

    window: Window
    reached: list[Window]

    def excludes(self, publish_date: datetime | None) -> bool:
        if publish_date is None:  # undated: Media Cloud keeps it
            return False
        day = utc(publish_date).date()
        return not within_window(day, self.window) and any(within_window(day, w) for w in self.reached)
