"""Respidering, as Media Cloud's ``set_stories_respidering``: topic stories whose links are mined again.

A topic story's links are mined once (``topic_stories.link_mined``). Two things mine them again:

- a ``respider`` declaration in ``topics.yaml`` (``all``, or ``{start_date, end_date}``: the stories published
  in those days), applied once: the store records the declaration it applied (``topics.respider_done``), as
  Media Cloud cleared its respider fields once done; declaring another (or removing it and declaring it again)
  applies it again;
- the topic's dates widening. Only stories published within the dates ± 7 days have their links mined
  (``mining_window``); one outside is marked mined without being mined. The store records the window the
  stories were mined under (``topics.mined_window``); the stories of the days a new window gains are mined
  again, as Media Cloud's respider dates did for the days a topic gained.

Nothing is fetched here: the flags are reset and the spider's next iteration mines those stories from their
stored pages (``LinkMiner.mine_topic_stories``); a link the topic already has is never fetched twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Protocol

from sqlalchemy import Connection

from topicmap.spider.store import SpiderStore
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig

#: Media Cloud mines the links of stories dated within the topic's dates and this many days either side
MINING_MARGIN_DAYS = 7
OPEN = "open"

Window = tuple[date, date | None]  # first and last day; None: no end (an open-ended topic)
Days = tuple[date | None, date | None]  # inclusive; None: no bound on that side


class Dated(Protocol):
    """A topic's dates: its declaration (``TopicConfig``) or one of its versions (``TopicVersion``)."""

    @property
    def start_date(self) -> date: ...

    @property
    def end_date(self) -> date | None: ...  # None: open-ended


def mining_window(topic: Dated) -> Window:
    """The days whose stories have their links mined: the topic's dates ± 7 days (no end if open-ended)."""
    margin = timedelta(days=MINING_MARGIN_DAYS)
    return topic.start_date - margin, None if topic.end_date is None else topic.end_date + margin


def within_window(day: date, window: Window) -> bool:
    return window[0] <= day and (window[1] is None or day <= window[1])


def window_text(window: Window) -> str:
    return f"{window[0].isoformat()}..{window[1].isoformat() if window[1] else OPEN}"


def parse_window(text: str) -> Window:
    first, _, last = text.partition("..")
    return date.fromisoformat(first), None if last == OPEN else date.fromisoformat(last)


def gained_days(old: Window, new: Window) -> list[Days]:
    """The parts of ``new`` outside ``old``, as inclusive day ranges (None: no end)."""
    one = timedelta(days=1)
    gained: list[Days] = []
    if new[0] < old[0]:
        last = old[0] - one if new[1] is None else min(old[0] - one, new[1])
        gained.append((new[0], last))
    if old[1] is not None and (new[1] is None or new[1] > old[1]):
        gained.append((max(old[1] + one, new[0]), new[1]))
    return gained


@dataclass
class RespiderReport:
    """What one ``apply_respider`` reset."""

    topic: str
    window: str  # the mining window now
    gained: list[Days] = field(default_factory=list)  # days the window gained since it was recorded
    applied: str | None = None  # the respider declaration applied now
    stories: int = 0  # stories whose links are to be mined again

    def summary(self) -> str:
        causes = []
        if self.applied:
            causes.append(f"respider {self.applied}")
        for first, last in self.gained:
            causes.append(f"dates gained {first or ''}..{last or OPEN}")
        if not causes:
            return f"{self.topic}: nothing to respider (mining window {self.window})"
        return f"{self.topic}: {self.stories} stories to mine again ({'; '.join(causes)})"


def apply_respider(store: TopicStore, topic: TopicConfig) -> RespiderReport:
    """Reset ``link_mined`` of the stories the topic's respider declaration or its widened dates name, and
    record what was applied; idempotent (a second call with the same declaration resets nothing). The topic
    must be in the store (``TopicStore.upsert_topic``). A topic seen for the first time (or a store from before
    these records) has its window recorded without a reset."""
    spider_store = SpiderStore(store, int(store.topic_row(topic.name)["topics_id"]))
    window = mining_window(topic)
    report = RespiderReport(topic.name, window_text(window))
    declared = topic.respider.key if topic.respider is not None else None

    def apply(conn: Connection) -> None:
        report.stories, report.applied = 0, None  # (run again after a deadlock)
        recorded_window, done = spider_store.respider_state(conn)
        if recorded_window is not None:
            report.gained = gained_days(parse_window(recorded_window), window)
        for days in report.gained:
            report.stories += spider_store.unmark_mined(conn, days)
        if declared is not None and declared != done:
            report.applied = declared
            days = (topic.respider.start_date, topic.respider.end_date)
            report.stories += spider_store.unmark_mined(conn, None if days == (None, None) else days)
        spider_store.set_respider_state(conn, report.window, declared)

    spider_store.in_transaction(apply)
    return report
