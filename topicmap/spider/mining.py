"""Link mining (Media Cloud's extract_story_links and spider_new_links): the links of a topic story become
``topic_links`` rows and, while the next iteration is within ``max_iterations``, URLs to fetch then.

Stories the spider generated are mined when their batch is written, from the links of the page it just parsed;
every other topic story (archive seeds, stories matched by URL) is mined from its stored page at the end of the
iteration (:meth:`LinkMiner.mine_topic_stories`). Media Cloud passed ``max_iterations`` itself as the iteration
bound to every ``spider_new_links`` call, so its bound was never applied; here a link found by a story at
iteration ``max_iterations`` is recorded but never queued.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Row

from topicmap.spider.respider import mining_window, within_window
from topicmap.spider.store import SpiderStore, error_text
from topicmap.store import schema as s
from topicmap.store.topic_store import chunks, utc
from topicmap.topics.declarations import TopicConfig
from topicmap.web.links import extract_content_links, is_self_link, skip_self_link
from topicmap.web.urls import distinctive_domain

#: stored stories whose links are mined in one transaction
MINE_BATCH = 100


@dataclass
class StoryLinks:
    """A topic story's links, ready to be mined (``links`` None: nothing to mine, e.g. out of the dates)."""

    stories_id: int
    url: str
    iteration: int
    publish_date: datetime | None
    links: list[str] | None
    error: str = ""


class LinkMiner:
    """Mines the links of one topic's stories into its topic links and its URLs to fetch."""

    def __init__(self, store: SpiderStore, topic: TopicConfig, log: Callable[[str], None]) -> None:
        self.store = store
        self.topic = topic
        self.log = log

    def mine_topic_stories(self) -> int:
        """Extract the links of every topic story not yet mined (archive seeds, stories matched by URL);
        queue them for the next iteration. Stories the spider generated were mined when they were written."""
        todo = self.store.unmined_stories()
        links_added = 0
        for chunk in chunks(todo, MINE_BATCH):
            batch = [self.stored_links(story) for story in chunk]
            links_added += self.store.in_transaction(lambda conn, batch=batch: self.mine_batch(conn, batch))
        return links_added

    def stored_links(self, story: Row) -> StoryLinks:
        """The links of a stored story, from its page (or its text when no page was kept)."""
        mined = StoryLinks(story.stories_id, story.url, story.iteration, story.publish_date, links=None)
        if not self.within_date_window(story.publish_date):
            return mined
        try:
            html, text = self.store.story_page(story.stories_id)
            page = html or f"<html><body><p>{text or ''}</p></body></html>"
            mined.links = extract_content_links(page, base_url=story.url)
        except Exception as exc:  # noqa: BLE001 - recorded per story, counted in the error rate
            mined.error = error_text(exc)
        return mined

    def within_date_window(self, publish_date: datetime | None) -> bool:
        """Media Cloud only mines stories with no date or dated within the topic dates ± 7 days (an open-ended
        topic's dates have no end)."""
        if publish_date is None:
            return True
        return within_window(utc(publish_date).date(), mining_window(self.topic))

    def mine_batch(self, conn: Connection, stories: list[StoryLinks]) -> int:
        """Record the stories' links as topic links, queue them for the next iteration (within
        max_iterations), count followed self links per site, and mark the stories mined. Returns links added.

        The stories are marked mined FIRST, by a conditional update: when two workers mine the same story at
        once (both found it), only the one whose update flips the flag records its links, so the self-link
        counts of its site are not counted twice."""
        if not stories:
            return 0
        won = self.store.mark_mined(conn, (story.stories_id for story in stories))
        stories = [story for story in stories if story.stories_id in won]
        if not stories:
            return 0
        domains = sorted({distinctive_domain(story.url) or "" for story in stories})
        self_links = self.store.self_links_followed(conn, domains)
        followed: Counter = Counter()
        link_rows: list[tuple[int, str]] = []
        fetch_rows: list[dict] = []
        for story in stories:
            if not story.links or not self.within_date_window(story.publish_date):
                continue
            domain = distinctive_domain(story.url) or ""
            next_iteration = story.iteration + 1
            too_long = [link for link in story.links if not s.url_fits(link)]
            if too_long:  # never cut (a cut URL is another URL): left out, and said so
                self.log(
                    f"{self.topic.name}: story {story.stories_id}: {len(too_long)} link(s) longer than the "
                    f"store's {s.MAX_URL_LENGTH} characters left out, e.g. {too_long[0][:80]}..."
                )
            for link in story.links:
                if not s.url_fits(link):
                    continue
                if is_self_link(story.url, link):
                    if skip_self_link(story.url, link, self_links.get(domain, 0) + followed[domain]):
                        continue
                    followed[domain] += 1
                link_rows.append((story.stories_id, link))
                if next_iteration <= self.topic.max_iterations:
                    fetch_rows.append(self.store.fetch_row(link, next_iteration))
        added = self.store.add_topic_links(conn, link_rows)
        self.store.add_fetch_urls(conn, fetch_rows)
        self.store.count_self_links(conn, followed)
        self.store.set_link_mine_errors(conn, [(story.stories_id, story.error) for story in stories])
        return added
