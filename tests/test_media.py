"""Medium URL and name from a story URL (Media Cloud's generate_medium_url_and_name_from_url)."""

from __future__ import annotations

import pytest

from topicmap.web.media import host_like, medium_url_and_name


@pytest.mark.parametrize(
    ("story_url", "medium"),
    [
        ("https://www.nytimes.com/2020/01/01/us/story.html", ("http://nytimes.com/", "nytimes.com")),
        ("http://m.washingtonpost.com/x?utm_source=y", ("http://washingtonpost.com/", "washingtonpost.com")),
        ("http://news.bbc.co.uk/2/hi/x.stm", ("http://bbc.co.uk/", "bbc.co.uk")),
        (
            "http://kardashian.blogspot.com/2010/x.html",
            ("http://kardashian.blogspot.com/", "kardashian.blogspot.com"),
        ),
        ("https://www.example.com:8443/a", ("http://example.com/", "example.com")),
        ("http://user:pw@www.example.com/a", ("http://example.com/", "example.com")),
        ("http://пример.рф/новости/1", ("http://xn--e1afmkfd.xn--p1ai/", "xn--e1afmkfd.xn--p1ai")),
        ("https://youtu.be/AbC", ("http://youtube.com/", "youtube.com")),
        ("http://192.168.0.7/story", ("http://192.168.0.7/", "192.168.0.7")),
        ("http://[2001:db8::1]:8080/x", ("http://[2001:db8::1]/", "[2001:db8::1]")),
        ("example.com/story", ("http://example.com/", "example.com")),
        ("http://example.com/" + "x" * 3000, ("http://example.com/", "example.com")),
    ],
)
def test_medium_url_and_name(story_url: str, medium: tuple[str, str]) -> None:
    assert medium_url_and_name(story_url) == medium


def test_variants_of_a_site_share_one_medium() -> None:
    urls = ["https://www.theguardian.com/a", "http://theguardian.com/b", "https://amp.theguardian.com/c"]
    media = {medium_url_and_name(url) for url in urls[:2]}
    assert media == {("http://theguardian.com/", "theguardian.com")}
    # amp. is not one of Media Cloud's site-variant labels: a separate medium, as in Media Cloud
    assert medium_url_and_name(urls[2]) == ("http://amp.theguardian.com/", "amp.theguardian.com")


@pytest.mark.parametrize("bad", [None, "", "   ", "mailto:x@y.com", "http://", "http://exa mple.com/"])
def test_no_medium_without_a_host(bad: str | None) -> None:
    assert medium_url_and_name(bad) is None


@pytest.mark.parametrize(
    ("name", "host", "expected"),
    [
        ("riversidegazette.test", "riversidegazette.test", True),
        ("www.herald.test", "herald.test", True),
        ("http://herald.test/", "herald.test", True),
        ("nytimes.com", None, True),
        ("Riverside Gazette", "riversidegazette.test", False),
        ("BBC News", None, False),
        ("Riverside Gazette Mobile", "riversidegazette.test", False),
        ("", None, False),
        (None, None, False),
    ],
)
def test_a_host_name_is_told_from_a_site_name(name: str | None, host: str | None, expected: bool) -> None:
    assert host_like(name, host) is expected
