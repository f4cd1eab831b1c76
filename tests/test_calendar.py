"""The calendar of the declared topics (topicmap.topics.calendar): the days and weeks they span, and the changes
that keep a partition set equal to them in date order."""

from __future__ import annotations

from datetime import date

import pytest

from topicmap.topics.calendar import (
    ccnews_days,
    click_days,
    plan_key_sync,
    split_topic_week,
    topic_of_week_key,
    topic_week_keys,
    topic_week_pairs,
)
from topicmap.topics.declarations import TopicConfig

TODAY = date(2026, 11, 26)  # a Thursday
ENDED = TopicConfig(name="ended", query="a", start_date=date(2026, 1, 30), end_date=date(2026, 2, 2))
RUNNING = TopicConfig(name="running", query="a", start_date=date(2026, 11, 10), end_date=None)
FUTURE = TopicConfig(name="future", query="a", start_date=date(2026, 11, 24), end_date=date(2027, 1, 1))


def test_days_run_from_each_start_to_its_end_or_yesterday() -> None:
    days = click_days([ENDED, RUNNING, FUTURE], TODAY)
    assert days[:4] == ["2026-01-30", "2026-01-31", "2026-02-01", "2026-02-02"]
    assert (
        days[4] == "2026-11-10" and days[-1] == "2026-11-25" and len(days) == 4 + 16
    )  # overlap counted once
    assert click_days([ENDED], TODAY, first=date(2026, 2, 1)) == ["2026-02-01", "2026-02-02"]
    assert click_days([], TODAY) == []
    # CC-NEWS: the same days; a start setting adds every day from it to yesterday
    assert ccnews_days([ENDED], TODAY) == click_days([ENDED], TODAY)
    assert ccnews_days([], TODAY, start=date(2026, 11, 20)) == [f"2026-11-{d}" for d in range(20, 26)]


def test_a_week_is_a_topics_once_it_is_over() -> None:
    assert topic_week_keys(ENDED, TODAY) == ["2026-01-26", "2026-02-02"]
    # the current week (from Monday the 23rd) is not over: the running topic's weeks stop before it
    assert topic_week_keys(RUNNING, TODAY) == ["2026-11-09", "2026-11-16"]
    assert topic_week_keys(FUTURE, TODAY) == []


def test_a_topic_week_is_a_pair_of_the_topic_and_its_monday_each_topics_weeks_one_range() -> None:
    pairs = topic_week_pairs([RUNNING, ENDED, FUTURE], TODAY)
    assert pairs == ["ended|2026-01-26", "ended|2026-02-02", "running|2026-11-09", "running|2026-11-16"]
    # a topic's new week sorts among its own, before the next topic's: the set moves those after it
    zeta = TopicConfig(name="zeta", query="a", start_date=date(2026, 1, 5), end_date=date(2026, 1, 18))
    now = topic_week_pairs([RUNNING, ENDED, zeta], TODAY)
    plan = plan_key_sync(now, topic_week_pairs([RUNNING, ENDED, zeta], date(2026, 12, 3)))
    assert (
        plan.add == ("running|2026-11-23", "zeta|2026-01-05", "zeta|2026-01-12") and plan.move == plan.add[1:]
    )
    assert split_topic_week("ended|2026-01-26") == ("ended", "2026-01-26")
    # a key that is not TOPIC|MONDAY (one added by hand) has no topic; split, it is refused by name
    for key in ("ended", "ended|2026-01-27", "|2026-01-26", "ended|June"):
        assert topic_of_week_key(key) is None
        with pytest.raises(ValueError, match=f"TOPIC\\|MONDAY .* got {key!r}"):
            split_topic_week(key)


def test_keys_are_appended_moved_or_deleted_to_keep_date_order() -> None:
    later = plan_key_sync(["2026-01-01", "2026-01-02"], ["2026-01-01", "2026-01-02", "2026-01-03"])
    assert (later.add, later.delete, later.move) == (("2026-01-03",), (), ())
    # an earlier day: the days after it are removed and added again after it
    earlier = plan_key_sync(["2026-01-02", "2026-01-03"], ["2026-01-01", "2026-01-02", "2026-01-03"])
    assert earlier.move == ("2026-01-02", "2026-01-03")
    assert earlier.add == ("2026-01-01", "2026-01-02", "2026-01-03")
    # a day no longer declared goes, unless it holds data; nothing to do is falsy
    shorter = plan_key_sync(["2026-01-01", "2026-01-02", "2026-01-03"], ["2026-01-01"], keep=["2026-01-03"])
    assert (shorter.delete, shorter.kept, shorter.add) == (("2026-01-02",), ("2026-01-03",), ())
    assert not plan_key_sync(["2026-01-01"], ["2026-01-01"])
    # a set stored out of order (added by hand) is put back in order
    assert plan_key_sync(["b", "a"], ["a", "b"]).add == ("a", "b")
