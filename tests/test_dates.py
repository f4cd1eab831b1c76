"""topicmap.web.dates.guess_date: date_guesser's order (undateable URLs, markup, URL, visible bylines), the page's
own day kept, and how each date was found."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.date_cases import DATE_GUESSER_CASES, DateCase
from tests.shared_data import NEWS_HTML, require_shared
from topicmap.web.dates import DateGuess, UrlDate, guess_date, undateable_reason, url_date

PROSE = "<p>The council met on Tuesday to debate the transit plan, officials said after the meeting.</p>" * 4


def page(head: str = "", body: str = "") -> str:
    return f"<html><head>{head}</head><body><article>{body}{PROSE}</article></body></html>"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://www.example.com/", "front page"),
        ("https://www.example.com", "front page"),
        ("https://en.wikipedia.org/wiki/2020_in_science", "wikipedia"),
        ("https://twitter.com/someone", "twitter page that is not a tweet"),
        ("https://www.example.com/tag/climate", "search or tag page"),
        ("https://www.example.com/search?q=x", "search or tag page"),
        ("not a url", "no hostname"),
    ],
)
def test_undateable_urls_get_no_date_even_with_a_dated_page(url: str, reason: str) -> None:
    dated = page('<meta property="article:published_time" content="2020-04-13T10:00:00Z">')
    result = guess_date(dated, url)
    assert result == DateGuess(None, f"undateable: {reason}")
    assert not result.found
    assert undateable_reason(url) == reason


def test_a_tweet_is_dateable() -> None:
    assert undateable_reason("https://twitter.com/someone/status/123") is None


def test_markup_date_keeps_the_publishers_offset_and_day() -> None:
    late_evening = page('<meta property="article:published_time" content="2020-04-13T23:30:00+09:00">')
    result = guess_date(late_evening, "https://www.example.jp/news/article-1")
    assert result.method == "meta article:published_time"
    assert result.date == datetime(2020, 4, 13, 14, 30, tzinfo=UTC)  # the instant, unchanged
    assert result.day == date(2020, 4, 13)  # in UTC it would be the 13th too; the next case is not
    early_morning = page('<meta property="article:published_time" content="2020-04-14T01:00:00+04:00">')
    assert guess_date(early_morning, "https://www.example.ae/news/article-2").day == date(2020, 4, 14)


def test_json_ld_and_time_element_are_named_in_the_method() -> None:
    ld = page(
        '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":"2019-11-18"}</script>'
    )
    assert guess_date(ld, "https://www.example.com/a/b").method == "json-ld datePublished"
    timed = page(body='<time itemprop="datePublished" datetime="2019-11-18T08:00:00-05:00">Nov 18</time>')
    result = guess_date(timed, "https://www.example.com/a/b")
    assert (result.method, result.day) == ("time itemprop=datePublished", date(2019, 11, 18))


def test_url_date_alone_and_over_disagreeing_markup() -> None:
    assert guess_date(page(), "https://www.example.com/2019/11/18/story.html") == DateGuess(
        datetime(2019, 11, 18, tzinfo=UTC), "url", time_known=False, zone_known=False
    )
    # date_guesser: a later guess more than two days from the URL's is some other date (a template's)
    modified = page('<meta property="article:published_time" content="2021-06-01T10:00:00Z">')
    result = guess_date(modified, "https://www.example.com/2019/11/18/story.html")
    assert (result.day, result.method) == (date(2019, 11, 18), "url (markup disagrees)")
    # the same day in both: the markup's time is kept
    agreeing = page('<meta property="article:published_time" content="2019-11-18T10:00:00-05:00">')
    assert guess_date(agreeing, "https://www.example.com/2019/11/18/story.html").method.startswith("meta")


@pytest.mark.parametrize(
    ("head", "url", "known"),
    [
        ('<meta property="article:published_time" content="2020-08-24T21:10:00-04:00">', "a", (True, True)),
        ('<meta property="article:published_time" content="2020-08-25T01:10:00Z">', "a", (True, True)),
        ('<meta property="article:published_time" content="2020-08-24T21:10:00">', "a", (True, False)),
        ('<meta name="date" content="August 24, 2020 9:10 PM EDT">', "a", (True, True)),
        ('<meta name="date" content="2020-08-24">', "a", (False, False)),
        ('<meta name="date" content="August 24, 2020">', "a", (False, False)),
        ('<meta name="date" content="1598317800">', "a", (True, True)),  # a Unix timestamp
        ("", "2020/08/24/story.html", (False, False)),  # the URL gives a day
        ('<meta name="date" content="2021-06-01T10:00:00Z">', "2020/08/24/story.html", (False, False)),
    ],
)
def test_a_date_says_whether_the_page_gave_a_time_and_a_zone(head: str, url: str, known: tuple) -> None:
    """A page that gives a day only is not a midnight instant: the guess says what the page stated."""
    result = guess_date(page(head), f"https://www.example.ca/news/{url}")
    assert result.found and (result.time_known, result.zone_known) == known, result


@pytest.mark.parametrize("case", DATE_GUESSER_CASES, ids=lambda case: case.name)
def test_media_clouds_date_guesser_cases(case: DateCase) -> None:
    result = guess_date(case.html, case.url)
    assert result.day == case.expected, result
    # a day-less date says so: its 15th is not a known day
    assert ("month" in (result.method or "")) == case.month_only, result.method


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.example.com/world/2013/jan/05/slug", UrlDate(date(2013, 1, 5), False, "2013/jan/05")),
        ("https://www.example.com/news/12/17/2013/slug", UrlDate(date(2013, 12, 17), False, "12/17/2013")),
        ("https://www.example.com/story-2020-04-13-slug", UrlDate(date(2020, 4, 13), False, "2020-04-13")),
        ("https://www.example.com/2014/September/slug", UrlDate(date(2014, 9, 15), True, "2014/September")),
        ("https://www.example.com/archive/sep-2013", UrlDate(date(2013, 9, 15), True, "sep-2013")),
        # impossible dates are refused, and their digits are not read again as a month
        ("https://www.example.com/2015/26/26/slug", None),
        ("https://www.example.com/2015/02/30/slug", None),
        ("https://www.example.com/17/12/2013/slug", None),  # day first: month 17
        # a month in a slug or a page number is no date
        ("https://www.example.com/trump-may-2020-run", None),
        ("https://www.example.com/page/2/2015", None),
        ("https://www.example.com/2016/election-results", None),
    ],
)
def test_url_date_forms(url: str, expected: UrlDate | None) -> None:
    assert url_date(url) == expected


def test_a_url_month_takes_the_pages_day_only_within_that_month() -> None:
    url = "https://www.example.com/2019/11/politics/story.html"
    same_month = page('<meta property="article:published_time" content="2019-11-18T19:05:00-05:00">')
    result = guess_date(same_month, url)
    assert (result.day, result.method) == (date(2019, 11, 18), "meta article:published_time")
    other_month = page('<meta property="article:published_time" content="2021-06-01T10:00:00Z">')
    result = guess_date(other_month, url)
    assert result == DateGuess(
        datetime(2019, 11, 15, tzinfo=UTC),
        "url (month; markup disagrees)",
        time_known=False,
        zone_known=False,
    )
    byline = page(body='<p class="byline">By A. Writer, <span class="date">November 4, 2019</span></p>')
    assert guess_date(byline, url).day == date(2019, 11, 4)
    assert guess_date(page(), url) == DateGuess(
        datetime(2019, 11, 15, tzinfo=UTC), "url (month)", False, False
    )


def test_a_month_only_date_is_never_in_the_future() -> None:
    today = datetime.now(UTC).date()
    result = guess_date(page(), f"https://www.example.com/{today:%Y/%m}/story.html")
    assert result.method == "url (month)"
    assert result.day == min(today, today.replace(day=15))


def test_an_impossible_time_datetime_is_read_from_its_text() -> None:
    timed = page(
        body='<time datetime="2015-26-26T04:03:40Z" pubdate>Thursday, Mar. 26 2015, 12:26 AM EDT</time>'
    )
    result = guess_date(timed, "https://www.example.com/opinion/story.html")
    assert result.method == "time pubdate text"
    assert result.date == datetime(2015, 3, 26, 4, 26, tzinfo=UTC)  # 00:26 EDT
    valid = page(body='<time datetime="2015-03-25T22:00:00-04:00" pubdate>Wednesday night</time>')
    assert guess_date(valid, "https://www.example.com/opinion/story.html").method == "time pubdate"


def test_visible_byline_is_found_by_the_page_search() -> None:
    byline = page(body='<p class="byline">By A. Writer, <span class="date">March 4, 2019</span></p>')
    result = guess_date(byline, "https://www.example.com/news/story")
    assert (result.day, result.method) == (date(2019, 3, 4), "htmldate search")


def test_undateable_content_gives_none_rather_than_a_guess() -> None:
    assert guess_date(page(), "https://www.example.com/news/story") == DateGuess(None, None)
    for nothing in (None, "", b"", b"%PDF-1.7\n%\xe2\xe3", "<<<>>>"):
        assert guess_date(nothing, "https://www.example.com/news/story").date is None  # type: ignore[arg-type]
    assert guess_date(None, "https://www.example.com/2020/01/02/x").day == date(2020, 1, 2)


def test_dates_before_2008_or_in_the_future_are_refused() -> None:
    old = page('<meta property="article:published_time" content="2005-05-05T10:00:00Z">')
    assert guess_date(old, "https://www.example.com/news/story").date is None
    future = (datetime.now(UTC) + timedelta(days=5)).isoformat()
    ahead = page(f'<meta property="article:published_time" content="{future}">')
    assert guess_date(ahead, "https://www.example.com/news/story").date is None
    assert url_date("https://www.example.com/2013/02/29/x") is None  # not a date


def test_without_a_url_the_page_alone_is_judged() -> None:
    dated = page('<meta property="article:published_time" content="2020-04-13T10:00:00Z">')
    assert guess_date(dated).day == date(2020, 4, 13)


def test_real_pages_with_human_annotated_days() -> None:
    expected = require_shared(NEWS_HTML / "expected.jsonl")
    rows = [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines()]
    annotated = [row for row in rows if row.get("date_kind") == "day_human_annotated"][:8]
    hits = 0
    for row in annotated:
        html = gzip.decompress((NEWS_HTML / row["file"]).read_bytes())
        result = guess_date(html, row["url"])
        assert result.date is None or result.method  # every date says how it was found
        hits += result.day == date.fromisoformat(row["date"][:10])
    assert hits >= len(annotated) - 2, f"{hits} of {len(annotated)} days right"


def test_the_store_keeps_how_a_story_was_read_and_its_pages_offset(tmp_path) -> None:
    from sqlalchemy import select

    from topicmap.store import schema as s
    from topicmap.store.topic_store import NewStory, TopicStore
    from topicmap.web.extract import extract_story

    html = page(
        '<meta property="article:published_time" content="2020-04-13T23:30:00+09:00">'
        "<title>Council debates transit plan | Daily Example</title>"
    )
    story = extract_story(html, "https://www.example.jp/news/article-1")
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    try:
        store.add_stories(
            [
                NewStory(
                    "https://www.example.jp/news/article-1",
                    story.title,
                    story.text,
                    story.publish_date,
                    language=story.language,
                    date_guess_method=story.date_method,
                    title_method=story.title_method,
                    language_method=story.language_method,
                    publish_time_known=story.date_time_known,
                    publish_zone_known=story.date_zone_known,
                ),
                NewStory.from_extracted(
                    "https://www.example.jp/news/2020/04/13/article-2",
                    extract_story(page(), "https://www.example.jp/news/2020/04/13/article-2"),
                ),
            ],
            "spider",
        )
        with store.engine.connect() as conn:
            row, by_url = conn.execute(select(s.stories).order_by(s.stories.c.stories_id)).all()
    finally:
        store.dispose()
    assert row.date_guess_method == "meta article:published_time"
    assert row.title_method == "<title>, site name removed" and row.title == "Council debates transit plan"
    assert row.language == "en" and row.language_method == "text"
    assert row.publish_utc_offset == 540  # 23:30+09:00: the 13th for the publisher, the 13th 14:30 UTC
    assert (row.publish_time_known, row.publish_zone_known) == (True, True)
    # a day from the URL: neither a time nor a zone
    assert (by_url.date_guess_method, by_url.publish_time_known, by_url.publish_zone_known) == (
        "url",
        False,
        False,
    )
