"""Media Cloud's URL rules (normalization, "same story" matching, URL variants for Bit.ly), including the Media
Cloud bugs fixed in topicmap.web.urls."""

from __future__ import annotations

import pytest

from topicmap.web.urls import (
    MAX_URL_LENGTH,
    distinctive_domain,
    fix_common_url_mistakes,
    is_homepage_url,
    is_http_url,
    is_shortened_url,
    normalize_url,
    normalize_url_lossy,
    url_variants,
)

# --------------------------------------------------------------------------------------------------
# fix_common_url_mistakes


@pytest.mark.parametrize(
    ("raw", "fixed"),
    [
        ("  http://example.com/a  ", "http://example.com/a"),
        ("http://http://www.al-monitor.com/pulse", "http://www.al-monitor.com/pulse"),
        ("https://http//example.com/", "https://example.com/"),
        ("http:/www.example.com/x", "http://www.example.com/x"),
        ("//cdn.example.com/x.js", "http://cdn.example.com/x.js"),
        ("http://example.com\\a\\b", "http://example.com/a/b"),
        ("https://www.gpo.gov:/fdsys/pkg/x", "https://www.gpo.gov/fdsys/pkg/x"),
        ("http://newsmachete.com?page=2", "http://newsmachete.com/?page=2"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://exa\nmple.com/\tx", "http://example.com/x"),
    ],
)
def test_fix_common_url_mistakes(raw: str, fixed: str) -> None:
    assert fix_common_url_mistakes(raw) == fixed


def test_fix_host_query_does_not_cut_inside_the_query() -> None:
    # Media Cloud's `[^/]+\?` matched up to the *last* '?' before a '/', mangling this one.
    assert fix_common_url_mistakes("http://host.com?a=1?b=2") == "http://host.com/?a=1?b=2"


@pytest.mark.parametrize("blank", [None, "", "   ", "\n"])
def test_fix_common_url_mistakes_blank(blank: str | None) -> None:
    assert fix_common_url_mistakes(blank) is None


# --------------------------------------------------------------------------------------------------
# is_http_url


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "https://www.example.com/path?q=1#x",
        "HTTP://EXAMPLE.COM/",
        "http://user:secret@example.com:8080/x",
        "http://[2001:db8::1]/x",
        "http://192.168.0.1/",
        "http://пример.рф/путь",
        "http://xn--e1afmkfd.xn--p1ai/",
        "http://under_score.example.com/",
    ],
)
def test_is_http_url_accepts(url: str) -> None:
    assert is_http_url(url)


@pytest.mark.parametrize(
    "url",
    [
        None,
        "",
        "example.com",
        "ftp://example.com/file",
        "mailto:someone@example.com",
        "javascript:void(0)",
        "http://",
        "http://.com",
        "http:///path",
        "http://exa mple.com/",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://" + "a" * 64 + ".com/",  # a DNS label is at most 63 characters
        "http://" + ".".join(["abcdefghij"] * 25) + ".com/",  # a host is at most 253
        "http://[not-an-ip]/",
        "//example.com/x",
    ],
)
def test_is_http_url_rejects(url: str | None) -> None:
    assert not is_http_url(url)


# --------------------------------------------------------------------------------------------------
# normalize_url (strict)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),  # path case kept
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a#section-2", "http://example.com/a"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/%7euser/%e2%82%ac", "http://example.com/~user/%E2%82%AC"),
        ("http://example.com/100%", "http://example.com/100%25"),
        ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
        ("http://пример.рф/", "http://xn--e1afmkfd.xn--p1ai/"),
        ("http://BÜCHER.de/", "http://xn--bcher-kva.de/"),
        ("http://user:pw@Example.com/", "http://user:pw@example.com/"),
        ("http://[2001:DB8:0:0::1]:80/", "http://[2001:db8::1]/"),
    ],
)
def test_normalize_url_canonical_form(raw: str, normalized: str) -> None:
    assert normalize_url(raw) == normalized


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (
            "http://example.com/a?utm_source=tw&utm_medium=x&id=5&fbclid=abc",
            "http://example.com/a?id=5",
        ),
        ("http://example.com/a?_cid=1&ga_campaign=2&keep=yes", "http://example.com/a?keep=yes"),
        ("http://example.com/a?PHPSESSID=1&sid=2&ref=home&page=3", "http://example.com/a?page=3"),
        ("http://example.com/a?fb_action_ids=1&fb_source=x&yclid=9&q=1", "http://example.com/a?q=1"),
        ("http://example.com/a?nk=deadbeef01&b=1", "http://example.com/a?b=1"),
        ("http://example.com/a?nk=not-hex&b=1", "http://example.com/a?nk=not-hex&b=1"),
        ("http://example.com/a?=_r%3D6&b=1", "http://example.com/a?b=1"),  # the empty-name parameter
        ("http://bash.org/?244321=", "http://bash.org/?244321"),  # empty values dropped
        ("http://example.com/a?x=&y=2", "http://example.com/a?x&y=2"),
        ("http://example.com/a?utm_source=x", "http://example.com/a"),
    ],
)
def test_normalize_url_drops_tracking_parameters(raw: str, normalized: str) -> None:
    assert normalize_url(raw) == normalized


def test_normalize_url_host_specific_parameters() -> None:
    nyt = "https://www.nytimes.com/2020/01/01/us/x.html?smid=tw-share&_r=0&partner=rss&emc=rss&page=2"
    assert normalize_url(nyt) == "https://www.nytimes.com/2020/01/01/us/x.html?page=2"
    # `partner` is only cruft on nytimes.com
    assert normalize_url("http://example.com/x?partner=rss") == "http://example.com/x?partner=rss"
    assert normalize_url("https://www.facebook.com/page?fref=ts&hc_location=x&id=1") == (
        "https://www.facebook.com/page?id=1"
    )
    assert normalize_url("https://www.google.com/search?q=a&ei=xyz&gws_rd=ssl") == (
        "https://www.google.com/search?q=a"
    )
    assert (
        normalize_url("http://x.livejournal.com/1.html?thread=5&nojs=1") == "http://x.livejournal.com/1.html"
    )


def test_normalize_url_parameter_names_compare_case_insensitively() -> None:
    # furl's lookup in Media Cloud was case-sensitive, so "phpsessid" or "UTM_source" survived.
    assert normalize_url("http://example.com/?phpsessid=1&UTM_Source=x&a=1") == "http://example.com/?a=1"


def test_normalize_url_fixes_mistakes_first() -> None:
    assert normalize_url("http://http://example.com/a b") == "http://example.com/a%20b"
    assert normalize_url("//example.com/x") == "http://example.com/x"


@pytest.mark.parametrize("bad", [None, "", "not a url", "ftp://example.com/", "http://exa mple.com/"])
def test_normalize_url_returns_none_for_non_urls(bad: str | None) -> None:
    assert normalize_url(bad) is None


def test_normalize_url_is_idempotent_on_examples() -> None:
    for url in [
        "HTTP://www.Example.com:80/a/../b?utm_source=x&q=%7e#f",
        "http://пример.рф/путь?q=значение",
        "https://user@host.example.org:8080/x?y=1&&z=",
    ]:
        once = normalize_url(url)
        assert once is not None
        assert normalize_url(once) == once


def test_normalize_url_keeps_very_long_urls_whole() -> None:
    long_url = "http://example.com/" + "a" * 5000
    assert normalize_url(long_url) == long_url
    assert MAX_URL_LENGTH == 1024


# --------------------------------------------------------------------------------------------------
# normalize_url_lossy (the matching key)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("https://www.Example.com/Story.HTML", "http://example.com/story.html"),
        ("http://m.example.com/a", "http://example.com/a"),
        ("http://www3.nytimes.com/x", "http://nytimes.com/x"),
        ("http://news.bbc.co.uk/1/hi/x.stm", "http://bbc.co.uk/1/hi/x.stm"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a#comments", "http://example.com/a"),
        ("http://example.com//a///b", "http://example.com/a/b"),
        ("http://example.com/a?ab=cd", "http://example.com/a?ab=cd"),  # the query is kept
        ("example.com/a", "http://example.com/a"),
        ("http://543.r2.ly/x", "http://543.r2.ly/x"),  # r2.ly redirects through its host names
        ("http://pronkraymond83483.podomatic.com/entry", "http://pronkpops.podomatic.com/entry"),
        ("https://www.example.com:443/a", "http://example.com/a"),
        ("http://user:pw@www.example.com/a", "http://example.com/a"),  # credentials are not identity
        ("http://example.com:8080/a", "http://example.com:8080/a"),
    ],
)
def test_normalize_url_lossy(raw: str, key: str) -> None:
    assert normalize_url_lossy(raw) == key


def test_lossy_key_drops_tracking_parameters() -> None:
    # Media Cloud's lossy key kept them, so a shared copy never matched the story.
    assert normalize_url_lossy("https://www.example.com/a?utm_source=twitter") == normalize_url_lossy(
        "http://example.com/a"
    )


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        # only strip a site-variant label when a registrable domain remains
        ("http://archive.org/details/x.pdf", "http://archive.org/details/x.pdf"),
        ("http://m.archive.org/details/x", "http://archive.org/details/x"),
        ("http://www.co.uk/", "http://www.co.uk/"),
        ("http://blog.github.io/", "http://blog.github.io/"),  # github.io is a public suffix
        # the extra character after a label must be a digit: "me" is not "m" + something
        ("http://me.example.com/", "http://me.example.com/"),
        ("http://webb.com/x.html", "http://webb.com/x.html"),
        ("http://mobile.example.com/", "http://mobile.example.com/"),
        # IP addresses are never shortened
        ("http://192.168.10.1/x.html", "http://192.168.10.1/x.html"),
        # stacked variant labels all go (Media Cloud stripped one: www.m.example.com never matched
        # m.example.com), down to the registrable domain and no further
        ("http://www.m.example.com/a", "http://example.com/a"),
        ("http://www.news.bbc.co.uk/x", "http://bbc.co.uk/x"),
        ("http://www.m.co.uk/", "http://m.co.uk/"),
        (
            "http://00.0.0.0/",
            "http://0.0/",
        ),  # not an IP (leading zeros): numeric labels (found by Hypothesis)
    ],
)
def test_lossy_host_prefix_strip_fixed(raw: str, key: str) -> None:
    assert normalize_url_lossy(raw) == key


@pytest.mark.parametrize(
    "raw",
    [
        "https://www.youtube.com/watch?v=AbCdEf12345",
        "http://youtube.com/watch?v=AbCdEf12345&feature=share",
        "https://m.youtube.com/watch?feature=youtu.be&v=AbCdEf12345",
        "https://www.youtube.com/embed/AbCdEf12345?autoplay=1",
        "https://www.youtube-nocookie.com/embed/AbCdEf12345",
        "https://youtu.be/AbCdEf12345?t=42",
        "https://www.youtube.com/shorts/AbCdEf12345",
    ],
)
def test_youtube_video_urls_share_one_key(raw: str) -> None:
    assert normalize_url_lossy(raw) == "http://youtube.com/watch?v=abcdef12345"


def test_youtube_channels_and_lookalikes() -> None:
    assert (
        normalize_url_lossy("https://www.youtube.com/channel/UCabc?view=1")
        == "http://youtube.com/channel/ucabc"
    )
    assert normalize_url_lossy("https://www.youtube.com/user/someone") == "http://youtube.com/user/someone"
    # Media Cloud's `[^/]*youtube.com` also rewrote other sites.
    assert normalize_url_lossy("http://notyoutube.com/watch?v=1&x=2") == "http://notyoutube.com/watch?v=1&x=2"


def test_archive_is_links_match_their_target() -> None:
    assert normalize_url_lossy("https://archive.is/o/AbCd/https://www.example.com/story") == (
        "http://example.com/story"
    )


@pytest.mark.parametrize(
    "bad", [None, "", "   ", "mailto:a@b.com", "javascript:void(0)", "http://exa mple.com"]
)
def test_lossy_none_for_non_urls(bad: str | None) -> None:
    assert normalize_url_lossy(bad) is None


def test_lossy_key_is_stable() -> None:
    for url in ["https://www.Example.com/A?utm_x=1&b=2#f", "http://пример.рф/Путь", "https://youtu.be/xYz"]:
        key = normalize_url_lossy(url)
        assert key is not None
        assert normalize_url_lossy(key) == key


# --------------------------------------------------------------------------------------------------
# distinctive_domain


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://www.nytimes.com/2020/x.html", "nytimes.com"),
        ("https://WWW.NYTIMES.COM/", "nytimes.com"),
        ("http://www.dailymail.co.uk/news/x", "dailymail.co.uk"),
        ("http://stat.gov.lt/", "stat.gov.lt"),
        ("http://www.abc.com.au/news/", "abc.com.au"),
        ("http://www.ox.ac.uk/news", "ox.ac.uk"),  # Media Cloud: "ac.uk" for every British university
        ("http://kardashian.blogspot.com/2010/x.html", "kardashian.blogspot.com"),
        ("http://someone.blogspot.co.uk/", "someone.blogspot.co.uk"),
        ("http://www.blogspot.com/", "blogspot.com"),
        ("http://abcnews.go.com/Politics/x", "abcnews.go.com"),
        ("http://foo.wordpress.com/", "foo.wordpress.com"),
        ("http://someone.tumblr.com/post/1", "someone.tumblr.com"),
        ("http://someone.github.io/x", "someone.github.io"),
        ("http://192.168.1.1:8080/x", "192.168.1.1"),
        ("http://localhost/x", "localhost"),
        ("nytimes.com", "nytimes.com"),
        ("http://пример.рф/", "xn--e1afmkfd.xn--p1ai"),
    ],
)
def test_distinctive_domain(url: str, domain: str) -> None:
    assert distinctive_domain(url) == domain


@pytest.mark.parametrize("bad", [None, "", "mailto:x@y.com", "http://"])
def test_distinctive_domain_none(bad: str | None) -> None:
    assert distinctive_domain(bad) is None


# --------------------------------------------------------------------------------------------------
# is_shortened_url / is_homepage_url


@pytest.mark.parametrize(
    "url",
    [
        "http://bit.ly/2abcDEF",
        "https://t.co/AbC123",
        "https://www.bit.ly/xyz",
        "https://wapo.st/4FGH5Re3",  # also in the list
        "https://trib.al/AbCdEfG",  # added: Media Cloud's throttling treats it as a shortener
        "https://abc.de/xyz123",  # the generic short form https?://[a-z]{1,4}.[a-z]{2}/[a-z0-9]{3,12}
        "http://➡.ws/abc",
        "http://xn--hgi.ws/abc",
    ],
)
def test_is_shortened_url(url: str) -> None:
    assert is_shortened_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://bit.ly/",
        "http://bit.ly",
        "https://www.nytimes.com/2020/01/01/x.html",
        "https://www.hulu.com/watch/123",  # a site, not a shortener (dropped from Media Cloud's list)
        "https://abcde.de/xyz123",  # host label too long for the short form
        "bit.ly/abc",  # not an http URL
        None,
        "",
    ],
)
def test_is_not_shortened_url(url: str | None) -> None:
    assert not is_shortened_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://www.wired.com",
        "http://www.wired.com/",
        "http://m.wired.com///",
        "http://www.example.com/en/",
        "http://www.example.com/US",
        "http://www.example.com/global/",
        "https://trends.google.com/trends/explore",
        "http://www.example.com/#top",
        "http://www.example.com/?utm_source=x",  # the query is only tracking
    ],
)
def test_is_homepage_url(url: str) -> None:
    assert is_homepage_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://www.example.com/oKyFAMiZMbU",  # mixed case: an id
        "http://www.example.com/1uSjCJp",
        "http://www.example.com/2020/01/01/story.html",
        "http://www.example.com/?page=2",
        "http://www.example.com/a-very-long-section-name-here/",
        "http://bit.ly/abc",  # shortened: may lead anywhere
        "not a url",
        None,
    ],
)
def test_is_not_homepage_url(url: str | None) -> None:
    assert not is_homepage_url(url)


# --------------------------------------------------------------------------------------------------
# url_variants


def test_url_variants_lists_every_form_once() -> None:
    variants = url_variants(
        "http://m.wired.com/threatlevel/2011/12/sopa/?utm_source=rss",
        redirect_url="https://www.wired.com/2011/12/sopa/?utm_source=rss",
        canonical_url="https://www.wired.com/2011/12/sopa/",
    )
    assert variants == [
        "http://m.wired.com/threatlevel/2011/12/sopa/?utm_source=rss",
        "http://m.wired.com/threatlevel/2011/12/sopa/",
        "http://wired.com/threatlevel/2011/12/sopa/",
        "https://www.wired.com/2011/12/sopa/?utm_source=rss",
        "https://www.wired.com/2011/12/sopa/",
        "http://wired.com/2011/12/sopa/",
    ]


def test_url_variants_drop_homepage_redirects() -> None:
    # A story that redirects to the front page is not that front page.
    variants = url_variants(
        "http://m.wired.com/threatlevel/2011/12/sopa/", redirect_url="http://www.wired.com/"
    )
    assert "http://www.wired.com/" not in variants
    assert "http://wired.com/" not in variants
    assert "http://m.wired.com/threatlevel/2011/12/sopa/" in variants


def test_url_variants_keep_homepages_of_a_homepage() -> None:
    assert url_variants("http://www.wired.com/", redirect_url="https://www.wired.com/") == [
        "http://www.wired.com/",
        "http://wired.com/",
        "https://www.wired.com/",
    ]


def test_url_variants_drop_suspended_twitter_accounts() -> None:
    variants = url_variants("https://twitter.com/someone/status/1", "https://twitter.com/account/suspended")
    assert not any("suspended" in variant for variant in variants)


def test_url_variants_of_nothing() -> None:
    assert url_variants(None) == []
    assert url_variants("") == []
    assert url_variants("not a url") == ["not%20a%20url"]
