"""robots.txt rules per RFC 9309: longest match wins, Allow wins ties, wildcards, agent groups."""

from __future__ import annotations

import pytest

from topicmap.web.robots import RobotsRules, product_token


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
