"""robots.txt rules per RFC 9309: longest match wins, Allow wins ties, wildcards, agent groups; the answers kept in
the topic store for every process."""

from __future__ import annotations

import pytest

from topicmap.store.robots_txt import SqlRobots
from topicmap.store.topic_store import TopicStore
from topicmap.web.robots import ROBOTS_READ_HOLD, RobotsRules, StoredRobots, product_token


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_longest_match_wins_regardless_of_order() -> None:
    # urllib.robotparser applies the first matching line and would block /news/ here.
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\nAllow: /news/\n")
    assert rules.allows("http://example.com/news/story.html", "topicmap")
    assert not rules.allows("http://example.com/shop/", "topicmap")


def test_allow_wins_a_tie_and_empty_disallow_allows_everything() -> None:
    tie = RobotsRules.parse("User-agent: *\nDisallow: /page\nAllow: /page\n")
    assert tie.allows("http://example.com/page", "topicmap")
    empty = RobotsRules.parse("User-agent: *\nDisallow:\n")
    assert empty.allows("http://example.com/anything", "topicmap")


def test_wildcards_and_end_anchor() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /*.pdf$\nDisallow: /search*q=\n")
    assert not rules.allows("http://example.com/files/report.pdf", "topicmap")
    assert rules.allows("http://example.com/files/report.pdf?download=1", "topicmap")
    assert not rules.allows("http://example.com/search?x=1&q=cats", "topicmap")
    assert rules.allows("http://example.com/searching", "topicmap")


def test_our_group_replaces_the_star_group_and_groups_merge() -> None:
    text = (
        "User-agent: *\nDisallow: /\n\n"
        "User-agent: TopicMap\nUser-agent: otherbot\nDisallow: /private/\n\n"
        "User-agent: topicmap\nDisallow: /drafts/\n"
    )
    rules = RobotsRules.parse(text)
    assert rules.allows("http://example.com/story", "topicmap")
    assert not rules.allows("http://example.com/private/x", "topicmap")
    assert not rules.allows("http://example.com/drafts/x", "topicmap")
    assert not rules.allows("http://example.com/story", "somebot")


def test_percent_encoding_is_compared_canonically_and_robots_txt_is_always_allowed() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /caf%C3%A9/\nDisallow: /\n")
    assert not rules.allows("http://example.com/café/menu", "topicmap")
    assert rules.allows("http://example.com/robots.txt", "topicmap")


def test_comments_and_unknown_lines_are_ignored() -> None:
    rules = RobotsRules.parse(
        "# hello\nUser-agent: * # everyone\nCrawl-delay: 5\nSitemap: http://x/s.xml\nDisallow: /tmp/ # no\n"
    )
    assert not rules.allows("http://example.com/tmp/a", "topicmap")
    assert rules.allows("http://example.com/tmpfoo", "topicmap")


def test_product_token_from_user_agent() -> None:
    assert product_token("topicmap/0.1 (+https://github.com/topicmap; research crawler)") == "topicmap"
    with pytest.raises(ValueError, match="product token"):
        product_token("  /0.1")


def test_stored_answers_read_back_as_the_same_rules() -> None:
    parsed = RobotsRules.parse("User-agent: *\nDisallow: /private/\n")
    for rules, body in (
        (parsed, "User-agent: *\nDisallow: /private/\n"),
        (RobotsRules.allowing_all("answered HTTP 404: no rules"), None),
        (RobotsRules.disallowing_all("answered HTTP 503: unreachable"), None),
    ):
        again = StoredRobots.of(rules, body, expires_at=1.0).rules()
        assert [again.allows(path, "topicmap") for path in ("/a", "/private/b")] == [
            rules.allows(path, "topicmap") for path in ("/a", "/private/b")
        ]
        assert again.note == rules.note
    with pytest.raises(
        ValueError, match="verdict must be 'rules', 'allow-all' or 'disallow-all', got 'maybe'"
    ):
        StoredRobots("maybe", None, None, 1.0).rules()


def test_the_store_lets_one_reader_at_a_time_read_an_origin_once_per_period(store: TopicStore) -> None:
    clock = FakeClock()
    robots = SqlRobots(store.engine, clock=clock)
    origin = "http://example.test"
    assert robots.lookup(origin) is None
    assert robots.claim(origin, "first", hold=ROBOTS_READ_HOLD)
    assert not robots.claim(origin, "second", hold=ROBOTS_READ_HOLD)  # the first is reading it
    robots.put(origin, StoredRobots("rules", "User-agent: *\nDisallow: /x\n", None, clock.now + 100.0))
    assert not robots.lookup(origin).rules().allows("/x", "topicmap")
    assert not robots.claim(origin, "second", hold=ROBOTS_READ_HOLD)  # kept: nothing to read for 100 s
    clock.now += 100.0
    assert robots.lookup(origin) is None  # the period is over: read it again, once
    assert robots.claim(origin, "second", hold=ROBOTS_READ_HOLD)
    clock.now += ROBOTS_READ_HOLD - 1
    assert not robots.claim(origin, "third", hold=ROBOTS_READ_HOLD)
    clock.now += 1  # the second reader died reading: its claim lapses
    assert robots.claim(origin, "third", hold=ROBOTS_READ_HOLD)
    robots.release(origin, "second")  # a lapsed reader's release frees nothing
    assert not robots.claim(origin, "first", hold=ROBOTS_READ_HOLD)
    robots.release(origin, "third")  # the reader gave up: another may read it
    assert robots.claim(origin, "first", hold=ROBOTS_READ_HOLD)
