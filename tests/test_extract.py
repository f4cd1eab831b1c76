"""Story extraction: decoding, title, date, language, text; robustness on hostile input; real pages."""

from __future__ import annotations

import codecs
import gzip
import json
import re
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.shared_data import NEWS_HTML, require_shared
from topicmap.web import article_text
from topicmap.web.article_text import tidy_text
from topicmap.web.extract import (
    MAX_HTML_BYTES,
    ExtractedStory,
    decode_html,
    extract_story,
    guess_language,
    page_title,
    parse_html,
)
from topicmap.web.links import extract_story_and_links
from topicmap.web.titles import clean_title, og_values

PROSE = (
    "The city council met on Tuesday evening to debate the new transit plan, which would add three bus lines "
    "and extend the light rail to the airport by the end of the decade, officials said after the meeting. "
)


MORE_PROSE = (
    "Supporters said the plan would cut commuting times in half for the eastern suburbs.",
    "Opponents questioned the cost, estimated at two billion dollars over ten years.",
    "A final vote is expected next month after a round of public hearings in each district.",
)


def page(head: str = "", body: str = "", lang: str = "en") -> str:
    paragraphs = "".join(f"<p>{text}</p>" for text in (PROSE, *MORE_PROSE))
    lang_attribute = f' lang="{lang}"' if lang else ""
    return f"<!DOCTYPE html><html{lang_attribute}><head>{head}</head><body>{body}<article>{paragraphs}</article></body></html>"


URL = "https://www.example.com/news/transit-plan"

# --------------------------------------------------------------------------------------------------
# decoding


def test_decode_utf8_without_declaration() -> None:
    assert decode_html("<p>Ça coûte 5 €</p>".encode()) == "<p>Ça coûte 5 €</p>"


def test_decode_declared_charset() -> None:
    text = "<p>Привет, мир</p>"
    assert decode_html(text.encode("cp1251"), declared_charset="windows-1251") == text


def test_decode_meta_charset() -> None:
    text = '<html><head><meta charset="windows-1251"></head><body>Новости дня</body></html>'
    assert decode_html(text.encode("cp1251")) == text
    http_equiv = (
        '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis"><p>日本語のニュース</p>'
    )
    assert decode_html(http_equiv.encode("shift_jis")) == http_equiv


def test_decode_latin1_label_means_windows_1252() -> None:
    # WHATWG: iso-8859-1 is decoded as windows-1252, where 0x93/0x94 are curly quotes.
    assert decode_html(b"<p>\x93quoted\x94</p>", declared_charset="ISO-8859-1") == "<p>\u201cquoted\u201d</p>"


def test_decode_misdeclared_latin1_that_is_utf8() -> None:
    content = "<p>Émile Zola à Paris</p>".encode()
    assert decode_html(content, declared_charset="iso-8859-1") == "<p>Émile Zola à Paris</p>"


def test_decode_declared_utf8_that_is_not_falls_back() -> None:
    content = '<meta charset="windows-1252"><p>caf\xe9</p>'.encode("cp1252")
    assert decode_html(content, declared_charset="utf-8") == '<meta charset="windows-1252"><p>café</p>'


def test_decode_byte_order_marks() -> None:
    assert decode_html(codecs.BOM_UTF8 + "<p>ü</p>".encode()) == "<p>ü</p>"
    assert decode_html(codecs.BOM_UTF16_LE + "<p>ü</p>".encode("utf-16-le")) == "<p>ü</p>"


def test_decode_guesses_undeclared_legacy_encoding() -> None:
    text = (
        "<html><body><p>Президент России подписал указ о новых мерах поддержки экономики и малого бизнеса. "
        "Правительство должно подготовить предложения в течение месяца, сообщила пресс-служба Кремля.</p>"
        "</body></html>"
    )
    assert decode_html(text.encode("cp1251")) == text


def test_decode_tolerates_a_character_cut_at_the_end() -> None:
    content = "<p>naïve €".encode()[:-1]  # the euro sign lost its last byte
    assert decode_html(content).startswith("<p>naïve ")


def test_decode_unknown_labels_and_empty() -> None:
    assert decode_html(b"", declared_charset="utf-8") == ""
    assert decode_html(b"<p>x</p>", declared_charset="no-such-charset") == "<p>x</p>"


# --------------------------------------------------------------------------------------------------
# page_title


def test_page_title() -> None:
    assert page_title("<html><head><title>\n  A &amp; B —   news\n</title></head></html>") == "A & B — news"
    assert page_title(b"<title>Caf\xc3\xa9</title>") == "Café"
    assert page_title("<html><body>no title</body></html>") is None
    assert page_title("<title></title>") is None
    assert page_title(None) is None
    assert len(page_title("<title>" + "x" * 5000 + "</title>") or "") == 1024


# --------------------------------------------------------------------------------------------------
# title


def story(head: str = "", body: str = "", url: str = URL, lang: str = "en") -> ExtractedStory:
    return extract_story(page(head, body, lang), url)


def test_title_strips_the_site_name() -> None:
    head = '<title>Council debates transit plan | Daily Example</title><meta property="og:site_name" content="Daily Example">'
    assert story(head).title == "Council debates transit plan"


def test_title_strips_a_site_name_that_is_the_domain() -> None:
    assert (
        story("<title>Council debates transit plan - Example.com</title>").title
        == "Council debates transit plan"
    )
    assert story("<title>EXAMPLE NEWS: Council debates transit plan</title>").title == (
        "EXAMPLE NEWS: Council debates transit plan"  # no separator with spaces around it: kept whole
    )


def test_title_prefers_the_headline_that_metadata_confirms() -> None:
    head = (
        "<title>Council debates transit plan | Daily Example</title>"
        '<meta property="og:title" content="Council debates transit plan">'
    )
    body = "<h1>Council debates transit plan</h1>"
    assert story(head, body).title == "Council debates transit plan"


def test_title_from_og_title_prefix_of_the_title_tag() -> None:
    head = (
        "<title>Council debates transit plan » Local » News » Example Herald</title>"
        '<meta name="twitter:title" content="Council debates transit plan">'
    )
    assert story(head).title == "Council debates transit plan"


def test_title_keeps_typographic_quotes_from_the_page_headline() -> None:
    head = '<meta property="og:title" content="Mayor\'s plan wins"><title>Transit | Example</title>'
    assert story(head, "<h1>Mayor’s plan wins</h1>").title == "Mayor’s plan wins"


def test_title_falls_back_to_json_ld_headline_and_h1() -> None:
    head = '<script type="application/ld+json">{"@type": "NewsArticle", "headline": "Council votes | BBC News"}</script>'
    assert story(head, url="https://www.bbc.com/news/x").title == "Council votes"
    assert story("", "<h1>Only a headline</h1>").title == "Only a headline"
    assert story("", "").title is None


def test_a_short_site_name_only_matches_at_the_edge_of_a_part() -> None:
    assert story("<title>Brexit | Soft border</title>", url="https://www.ft.com/content/x").title == (
        "Brexit | Soft border"
    )
    assert story(
        "<title>Brexit deal agreed | FT Markets</title>", url="https://www.ft.com/content/x"
    ).title == ("Brexit deal agreed")


def test_a_blog_name_in_h1_is_not_the_headline() -> None:
    head = "<title>Lost in JIT: PyPy and the road towards SciPy</title>"
    result = story(
        head, "<h1>Lost in JIT</h1>", url="http://lostinjit.blogspot.fr/2011/10/pypy-and-scipy.html"
    )
    assert result.title == "Lost in JIT: PyPy and the road towards SciPy"


def test_title_loses_stray_edge_separators() -> None:
    assert story("<title>| Some Title</title>").title == "Some Title"


def test_title_that_is_only_the_site_name_is_kept() -> None:
    head = '<title>Pradhvan</title><meta property="og:site_name" content="Pradhvan">'
    assert story(head).title == "Pradhvan"


# --------------------------------------------------------------------------------------------------
# publication date


def test_date_from_meta_keeps_the_pages_own_offset_and_day() -> None:
    head = '<meta property="article:published_time" content="2020-07-13T01:10:40+09:00">'
    result = story(head)
    assert result.publish_date == datetime(2020, 7, 12, 16, 10, 40, tzinfo=UTC)  # the same instant ...
    assert result.publish_date.date() == date(2020, 7, 13)  # ... on the publisher's own day
    assert result.publish_date.utcoffset() == timedelta(hours=9)
    assert result.date_method == "meta article:published_time"


def test_date_from_json_ld_string_and_unix_seconds() -> None:
    iso = '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":"2019-11-18T10:00:00Z"}</script>'
    assert story(iso).publish_date == datetime(2019, 11, 18, 10, 0, tzinfo=UTC)
    epoch = '<script type="application/ld+json">{"@type":"Article","datePublished":1676551869}</script>'
    assert story(epoch).publish_date == datetime(2023, 2, 16, 12, 51, 9, tzinfo=UTC)


def test_date_json_ld_in_a_graph() -> None:
    head = (
        '<script type="application/ld+json">{"@graph":[{"@type":"WebSite","name":"x"},'
        '{"@type":"BlogPosting","datePublished":"2021-05-04"}]}</script>'
    )
    assert story(head).publish_date == datetime(2021, 5, 4, tzinfo=UTC)


def test_date_with_us_zone_abbreviation() -> None:
    head = '<meta property="article:published_time" content="Sun Nov 23 16:00:00 EDT 2014">'
    assert story(head).publish_date == datetime(2014, 11, 23, 20, 0, tzinfo=UTC)


def test_naive_date_is_taken_as_utc() -> None:
    head = '<meta name="OriginalPublicationDate" content="2014-06-30 16:54:02">'
    assert story(head).publish_date == datetime(2014, 6, 30, 16, 54, 2, tzinfo=UTC)


def test_dates_before_2008_or_in_the_future_are_rejected() -> None:
    old = '<meta property="article:published_time" content="2007-12-31T23:00:00Z">'
    assert story(old, url="https://www.example.com/x").publish_date is None
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    head = f'<meta property="article:published_time" content="{future}">'
    assert story(head, url="https://www.example.com/x").publish_date is None


def test_rejected_declared_date_falls_through_to_the_next_one() -> None:
    head = (
        '<meta property="article:published_time" content="1999-01-01">'
        '<meta name="pubdate" content="2016-03-04">'
    )
    assert story(head).publish_date == datetime(2016, 3, 4, tzinfo=UTC)


def test_url_day_corrects_a_mislabelled_zone() -> None:
    # The site wrote 16:38 local time as "…T00:38:07Z" of the next day; its URL carries the real day.
    head = '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":"20200414T00:38:07Z"}</script>'
    result = story(head, url="https://www.registerguard.com/news/20200413/second-suspect")
    assert result.publish_date == datetime(2020, 4, 13, tzinfo=UTC)
    assert result.date_method == "url (markup disagrees)"


def test_title_method_says_where_the_title_came_from() -> None:
    head = '<title>Council debates transit plan | Daily Example</title><meta property="og:site_name" content="Daily Example">'
    assert story(head).title_method == "<title>, site name removed"
    confirmed = story(
        '<meta property="og:title" content="Council debates transit plan">',
        "<h1>Council debates transit plan</h1>",
    )
    assert confirmed.title_method == "<h1> = og:title"


def test_text_has_no_layout_whitespace_or_markup_remnants() -> None:
    body = "<div>\t\t  </div>"
    messy = (
        "<html><body><article>"
        f"<p>\t\t   {PROSE}   \t</p><p>{MORE_PROSE[0]}\t\t\t{MORE_PROSE[1]}</p><p>{MORE_PROSE[2]} --></p>"
        f"{body}</article></body></html>"
    )
    text = extract_story(messy, URL).text
    assert text == text.strip()
    assert "\t" not in text and "  " not in text
    assert not text.endswith("-->")
    assert all(line == line.strip() and line for line in text.split("\n"))


def test_date_from_the_url_when_the_page_states_none() -> None:
    result = story("", url="https://www.example.com/2019/11/18/council-transit-plan/")
    assert result.publish_date == datetime(2019, 11, 18, tzinfo=UTC)


def test_no_date_at_all() -> None:
    assert story("", url="https://www.example.com/news/transit").publish_date is None


# --------------------------------------------------------------------------------------------------
# text, language, description, canonical URL


def test_text_is_the_article_not_the_navigation() -> None:
    body = '<nav><a href="/">Home</a> <a href="/sports">Sports section with many words</a></nav>'
    result = story("<title>T</title>", body)
    assert PROSE.strip() in result.text
    assert "Sports section" not in result.text
    assert all(text in result.text for text in MORE_PROSE)


def test_language_is_read_from_the_text_not_the_declaration() -> None:
    assert (story(lang="en-US").language, story(lang="en-US").language_method) == ("en", "text = declared")
    assert story(lang="").language_method == "text"
    assert story(lang="x-klingon").language == "en"  # not a language tag
    # a template that declares Portuguese (or German) on an English story does not make it Portuguese
    wrong = story('<meta http-equiv="content-language" content="pt-BR">', lang="")
    assert (wrong.language, wrong.language_method) == ("en", "text (page declares pt)")
    assert story(lang="de").language == "en"
    german = "Der Stadtrat hat am Dienstag über den neuen Verkehrsplan beraten, der drei Buslinien vorsieht. "
    page_in_german = f'<html lang="en"><body><article><p>{german * 4}</p></article></body></html>'
    assert extract_story(page_in_german, URL).language == "de"


def test_declared_language_breaks_ties_and_covers_short_texts() -> None:
    short = extract_story('<html lang="fr"><body><p>Bonjour.</p></body></html>', URL)
    assert (short.language, short.language_method) == ("fr", "declared (text too short)")
    # Bokmål text declared as Danish: the two rank close, the page's word decides
    norwegian = (
        "Regjeringen la fram et nytt forslag om kollektivtransport i byene, og kommunene skal få mer penger. "
    )
    html = f'<html lang="da"><body><article><p>{norwegian * 3}</p></article></body></html>'
    result = extract_story(html, URL)
    assert result.language in ("da", "no")
    if result.language == "da":
        assert result.language_method == "declared (tie)"


def test_guess_language() -> None:
    assert guess_language(PROSE * 2) == "en"
    german = (
        "Der Stadtrat hat am Dienstag über den neuen Verkehrsplan beraten, der drei Buslinien vorsieht. " * 3
    )
    assert guess_language(german) == "de"
    spanish = (
        "El consejo de la ciudad se reunió el martes para debatir el nuevo plan de transporte de la región. "
        * 3
    )
    assert guess_language(spanish) == "es"
    assert (
        guess_language("東京で新しい交通計画が発表されました。市議会は火曜日に会合を開きました。" * 3) == "ja"
    )
    assert guess_language("short") is None
    assert guess_language("") is None


def test_description_and_canonical_url() -> None:
    head = (
        '<meta property="og:description" content="  Three new   bus lines &amp; more. ">'
        '<link rel="canonical" href="/news/transit-plan?ref=canonical">'
    )
    result = story(head)
    assert result.description == "Three new bus lines & more."
    assert result.canonical_url == "https://www.example.com/news/transit-plan?ref=canonical"
    assert story('<link rel="canonical" href="javascript:alert(1)">').canonical_url is None


def test_bytes_and_str_give_the_same_story() -> None:
    html = page("<title>Café crème | Example</title>", "", "fr")
    assert extract_story(html.encode("utf-8"), URL) == extract_story(html, URL)
    latin = extract_story(html.replace("<head>", '<head><meta charset="iso-8859-1">').encode("cp1252"), URL)
    assert latin.title == "Café crème"


# --------------------------------------------------------------------------------------------------
# robustness


EMPTY = ExtractedStory(None, "", None, None, None, None)


@pytest.mark.parametrize(
    "content",
    [
        None,
        "",
        b"",
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj",
        b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10,
        b"GIF89a\x01\x00\x01\x00\x00\xff\x00,",
        bytes(range(256)) * 50,
        "\x00\x01\x02\x03" * 1000,
    ],
)
def test_binary_or_empty_input_gives_an_empty_story(content: bytes | str | None) -> None:
    assert extract_story(content, URL) == EMPTY


def test_plain_text_is_kept_as_text() -> None:
    result = extract_story("Just a statement, no markup at all.\nSecond line.", URL)
    assert result == ExtractedStory(
        None, "Just a statement, no markup at all.\nSecond line.", None, None, None, None
    )


def test_garbage_markup_never_raises() -> None:
    for html in ["<", "<<<>>>", "<html", "<?xml version='1.0' encoding='utf-8'?><html><p>x</p></html>",
                 "<html><body>" + "<div>" * 5000 + "deep" + "</div>" * 5000 + "</body></html>",
                 "<p>\ud800 lone surrogate</p>", "<title>\x00\x0b</title><p>nul</p>"]:  # fmt: skip
        assert isinstance(extract_story(html, URL), ExtractedStory)
    assert isinstance(extract_story(page(), None), ExtractedStory)  # type: ignore[arg-type]


def test_characters_lxml_refuses_are_dropped_from_the_text() -> None:
    # NUL and other C0 controls, U+FFFE/U+FFFF and lone surrogates cannot stand in an lxml tree: they go,
    # the words around them stay.
    dirty = page(body="<h2>Trans\x00it\x0b plan\ufffe upd\ud800ate\uffff</h2>")
    result = extract_story(dirty, URL)
    assert PROSE.strip() in result.text
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]", result.text)
    tree = parse_html(dirty)
    assert tree is not None and tree.findtext(".//h2") == "Transit plan update"


def test_gigantic_page_is_truncated_and_bounded_in_time() -> None:
    huge = page() + "<p>" + "filler words " * 1_000_000 + "</p>"  # ~13 MB
    started = time.monotonic()
    result = extract_story(huge.encode(), URL)
    assert time.monotonic() - started < 15
    assert PROSE.strip() in result.text
    assert len(decode_html(huge.encode())) <= MAX_HTML_BYTES


def test_parse_html() -> None:
    tree = parse_html(b"<html><body><p>x</p></body></html>")
    assert tree is not None and tree.findtext(".//p") == "x"
    assert parse_html(b"\x89PNG\r\n\x1a\n\x00\x00\x00") is None
    assert parse_html("") is None


# --------------------------------------------------------------------------------------------------
# real pages


def _rows() -> list[dict]:
    expected = require_shared(NEWS_HTML / "expected.jsonl")
    return [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines()]


def _row(prefix: str) -> tuple[dict, bytes]:
    for row in _rows():
        if row["file"].startswith(prefix):
            return row, gzip.decompress((NEWS_HTML / row["file"]).read_bytes())
    pytest.skip(f"{prefix} not in the real page set")


def _f1(got: str, want: str) -> float:
    a, b = Counter(re.findall(r"\w+", got.lower())), Counter(re.findall(r"\w+", want.lower()))
    overlap = sum((a & b).values())
    return 0.0 if not overlap else 2 * overlap / (sum(a.values()) + sum(b.values()))


def test_tidy_text_collapses_every_kind_of_inline_whitespace() -> None:
    messy = (
        "  Council\u00a0\u00a0debates \t the\u2028plan \r\n\n\u3000\n<!-- Second -->\n//]]>\n -->Third line  "
    )
    assert tidy_text(messy) == "Council debates the plan\nSecond\nThird line"
    assert tidy_text(None) == tidy_text("") == tidy_text(" \n\t\n") == ""


def test_trafilatura_is_called_without_its_tree_copy_and_gives_the_same_stories(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # extract_story runs trafilatura's cascade on its own tree (no deep copy); the installed trafilatura must
    # still have that cascade, and every story must be what bare_extraction (which copies) gives.
    assert article_text._SEQUENCE is not None, "trafilatura.core.trafilatura_sequence changed: slower path"
    rows = _rows()[::7]  # a spread of sites, ~25 pages, including short fixtures that take the fallbacks
    pages = [(row, gzip.decompress((NEWS_HTML / row["file"]).read_bytes())) for row in rows]
    direct = [extract_story(html, row["url"]) for row, html in pages]
    direct_with_links = [extract_story_and_links(html, row["url"]) for row, html in pages]
    monkeypatch.setattr(article_text, "DIRECT_SEQUENCE", False)
    copied = [extract_story(html, row["url"]) for row, html in pages]
    assert direct == copied
    assert direct_with_links == [extract_story_and_links(html, row["url"]) for row, html in pages]
    assert sum(bool(result.text) for result in direct) >= len(direct) - 3


def test_a_short_article_full_of_links_is_the_same_story_with_its_links() -> None:
    # The spider reads each page's story and links in one call (extract_story_and_links). Its story must be
    # extract_story's, field for field: with links kept, trafilatura's passes judged a Markdown-laden text
    # ("[budget](https://…)") and chose differently; now the links are read beside the same text.
    target = "https://www.example.org/reports/2026/transit-authority-annual-budget-review-{}"
    words = ["budget", "bus lines", "survey", "audit", "cost estimate", "earlier delays", "vote", "hearings"]
    linked = [f'<a href="{target.format(number)}">{word}</a>' for number, word in enumerate(words, 1)]
    plain = [
        "The council approved the {} for the {} on Tuesday.",
        "Supporters cited the {} and the {} of last spring.",
        "Opponents pointed to the {} and {}.",
        "A final {} is expected after {} in each district.",
    ]
    html = "".join(f"<p>{s.format(*linked[2 * i : 2 * i + 2])}</p>" for i, s in enumerate(plain))
    html = f"<html><body><article>{html}</article></body></html>"
    story, links = extract_story_and_links(html, URL)
    assert story == extract_story(html, URL)
    kept = [i for i, s in enumerate(plain) if s.format(*words[2 * i : 2 * i + 2]) in story.text]
    assert len(kept) >= 3 and "](" not in story.text
    # the links of the sentences the story kept, in order, and none of a sentence it dropped
    assert links == [target.format(2 * i + n) for i in kept for n in (1, 2)]


def test_the_justext_stoplist_is_hashed_once_and_keeps_its_words() -> None:
    from trafilatura import external

    # a text this short makes trafilatura's full mode run, jusText (with its stoplist of every language) included
    short = extract_story(
        "<html><body><div><p>Council votes on the transit plan today.</p></div></body></html>", URL
    )
    assert short.text == "Council votes on the transit plan today."
    stoplist = external.JT_STOPLIST
    assert isinstance(stoplist, tuple) and len(stoplist) > 10_000
    assert hash(stoplist) == hash(tuple(stoplist)) and stoplist == tuple(stoplist)
    assert set(stoplist) == set(external.jt_stoplist_init())
    external.JT_STOPLIST = stoplist  # jt_stoplist_init replaced it: restore the hashed-once tuple


LEDE = (
    "SPRINGFIELD (AP) — The city council approved a two-billion-dollar transit plan early Tuesday, adding three "
    "bus lines and a rail link to the airport after a debate that ran past midnight."
)
FOLLOWING = (
    "Supporters said the plan would cut commuting times in half for the eastern suburbs, where buses now run "
    "every forty minutes and the nearest rail station is an hour's walk away.",
    "Opponents questioned the cost, estimated at two billion dollars over ten years, and asked why the plan "
    "left the northern districts without a single new stop.",
    "A final vote on the financing is expected next month after a round of public hearings in each district, "
    "the council's president said after the meeting.",
)


def _opens_with_the_lede(text: str) -> bool:
    """The lede is a line of the text, once, right before the first following paragraph."""
    lines = text.split("\n")
    return lines.count(LEDE) == 1 and lines.index(LEDE) + 1 == lines.index(FOLLOWING[0])


def test_an_opening_paragraph_the_parser_left_loose_in_the_article_is_kept() -> None:
    # "<p><div>…</div>LEDE</p>": the parser closes the <p> at the <div>, so the lede is text written straight
    # into the article's container, after a related-stories box that trafilatura deletes with it.
    box = (
        '<div class="related-content"><h3>Related Content</h3><ul>'
        '<li><a href="/a">Earlier: council delays vote on the transit plan</a><p><em>AP - 53 mins ago</em></p></li>'
        '<li><a href="/b">Bus riders weigh in on the transit proposal</a><p><em>AP - 55 mins ago</em></p></li>'
        "</ul></div>"
    )
    paragraphs = "".join(f"<p>{text}</p>" for text in FOLLOWING)
    html = f"<html><body><div class='art-content'><div class='bd'><p>{box}{LEDE}</p>{paragraphs}</div></div></body></html>"
    story = extract_story(html, URL)
    assert _opens_with_the_lede(story.text)
    assert "Bus riders weigh in" not in story.text


def test_a_standfirst_beside_the_article_body_is_kept_before_it() -> None:
    # a lede in an element of its own ("article__summary") between the headline and the body's container
    other_summary = "The stadium deal goes to a vote next week after months of talks with the team's owners, who want the city to pay for roads."
    paragraphs = "".join(f"<p>{text}</p>" for text in FOLLOWING)
    html = (
        "<html><head><title>Council approves transit plan</title></head><body>"
        f'<aside class="sidebar"><div class="summary">{other_summary}</div></aside>'
        '<div class="article"><h1>Council approves transit plan</h1><div class="article__date">1 March 2026</div>'
        f'<div class="article__summary">{LEDE}</div><div class="article__text">{paragraphs}</div></div>'
        "</body></html>"
    )
    story = extract_story(html, URL)
    assert _opens_with_the_lede(story.text)
    assert "stadium" not in story.text  # a summary beside nothing of the article is not its opening


DECK = (
    "Three bus lines and a rail link to the airport, approved after a debate that ran past midnight and a vote of "
    "seven to two"
)


def _article_page(headline: str, heading: str) -> str:
    """A story whose template writes the <h1>, then a heading, then the body's container."""
    paragraphs = "".join(f"<p>{text}</p>" for text in FOLLOWING)
    return (
        "<html><head><title>Council approves transit plan | Springfield News</title>"
        '<meta property="og:title" content="Council approves transit plan"></head><body>'
        f"<div class='article'><h1>{headline}</h1>\n<!--/HEADLINE-->\n<h2>{heading}</h2>"
        "<div class='article__date'>1 March 2026</div>"
        f"<div class='article__text'>{paragraphs}</div></div></body></html>"
    )


def test_a_deck_in_the_heading_after_the_headline_is_kept_before_the_body() -> None:
    # An unmarked deck: the heading right after the headline's <h1> (a comment between), beside the body's
    # container, which trafilatura chooses without it.
    story = extract_story(_article_page("Council approves transit plan", DECK), URL)
    lines = story.text.split("\n")
    assert lines.count(DECK) == 1 and lines.index(DECK) + 1 == lines.index(FOLLOWING[0])
    # the same heading after an <h1> that is not the story's headline (the site's name) is not its deck
    tagline = (
        "Your local paper since 1889: the city, its schools, its teams and its council, every day of the week"
    )
    story = extract_story(_article_page("Springfield News", tagline), URL)
    assert story.title == "Council approves transit plan"
    assert tagline not in story.text and story.text.startswith(FOLLOWING[0])


@pytest.mark.parametrize(
    ("prefix", "lede", "next_paragraph"),
    [
        (
            "goose3/content__test_yahoo",
            "SAN FRANCISCO (AP) — Steve Jobs, the mind behind the iPhone",
            "The move appears",
        ),
        # the deck BusinessWeek writes in an unclassed <h2> after the <h1>, before the photo and the story
        (
            "goose3/content__test_businessWeek1",
            "The Web and cable star has achieved fame by targeting nerdy guys",
            "Six years ago, Olivia Munn arrived in Hollywood",
        ),
        (
            "zyte_aeb/4a44ab3e4c41",
            "Three people have died during protests in Bolivia",
            "In addition to the three",
        ),
    ],
)
def test_real_pages_keep_their_opening_paragraph(prefix: str, lede: str, next_paragraph: str) -> None:
    row, html = _row(prefix)
    lines = extract_story(html, row["url"]).text.split("\n")
    opening = next(i for i, line in enumerate(lines) if line.startswith(lede))
    assert lines[opening + 1].startswith(next_paragraph)


def test_real_page_yonhap_title_date_language() -> None:
    row, html = _row("newspaper4k/yna_co_kr")
    result = extract_story(html, row["url"])
    assert result.title == row["title"]  # without " | Yonhap News Agency"
    assert result.title_method is not None
    assert result.publish_date == datetime(2019, 8, 20, 0, 31, 1, tzinfo=UTC)  # 09:31:01+09:00
    assert result.publish_date.date() == date(2019, 8, 20)
    assert result.date_method is not None and result.date_method.startswith(("meta", "json-ld", "time"))
    assert result.language == "en"


def test_real_page_cnn_decoding_and_title() -> None:
    row, html = _row("newspaper4k/cnn_002")
    result = extract_story(html, row["url"])
    assert result.title == "Takeaways from Donald Trump’s contentious testimony in his civil fraud trial"
    assert result.publish_date is not None and result.publish_date.date().isoformat() == "2023-11-06"


def test_real_page_article_text_matches_the_human_annotation() -> None:
    row, html = _row("zyte_aeb/06e5123e4ef7")
    result = extract_story(html, row["url"])
    assert _f1(result.text, row["text"]) > 0.95


def test_a_windows_1252_page_labelled_utf8_decodes_as_windows_1252() -> None:
    # The commonest mislabel on the web; a charset detector alone picks cp1257 here ("crčme").
    text = "<html><body><p>Le café coûte 2 € à Paris; la crème brûlée est « très » bonne. Déjà vu, naïve.</p></body></html>"
    decoded = decode_html(text.encode("cp1252"), "utf-8")
    assert "crème brûlée" in decoded and "2 €" in decoded and "\ufffd" not in decoded
    # a Cyrillic page mislabelled UTF-8 keeps the detector's answer
    russian = "<html><body><p>Правительство объявило новые меры по сокращению выбросов углерода в стране.</p></body></html>"
    assert "Правительство" in decode_html(russian.encode("cp1251"), "utf-8")


def test_og_title_that_carries_the_site_name_beats_a_wrong_title_tag() -> None:
    head = (
        "<title>TechCrunch – Startup and Technology News</title>"
        '<meta property="og:title" content="Good article title | TechCrunch">'
        '<meta property="og:site_name" content="TechCrunch">'
    )
    result = story(head, url="https://techcrunch.com/2020/01/02/good-article/")
    assert (result.title, result.title_method) == ("Good article title", "og:title, site name removed")


def test_a_title_tag_that_is_only_the_site_name_gives_way() -> None:
    head = '<title>TechCrunch</title><meta property="og:site_name" content="TechCrunch">'
    assert story(head, "<h1>Startup raises a round</h1>").title == "Startup raises a round"
    assert story(head).title == "TechCrunch"  # nothing else: kept


def test_the_headline_the_metadata_agrees_on_beats_the_h1() -> None:
    head = (
        "<title>Markets slide as rates rise | CNN Business</title>"
        '<meta property="og:title" content="Stocks fall for a third day as the Fed signals more hikes">'
        '<script type="application/ld+json">{"@type": "NewsArticle", '
        '"headline": "Stocks fall for a third day as the Fed signals more hikes"}</script>'
    )
    result = story(head, "<h1>Markets slide as rates rise</h1>", url="https://edition.cnn.com/2023/x")
    assert result.title == "Stocks fall for a third day as the Fed signals more hikes"
    assert result.title_method == "og:title = json-ld headline"
    # one metadata title alone does not overrule the <h1> the <title> confirms
    single = head.split("<script")[0]
    assert story(
        single, "<h1>Markets slide as rates rise</h1>", url="https://edition.cnn.com/2023/x"
    ).title == ("Markets slide as rates rise")


def test_clean_title_removes_the_media_name_as_the_extractor_does() -> None:
    assert clean_title("Riverside Gazette: Council debates transit plan", ["Riverside Gazette"]) == (
        "Council debates transit plan"
    )
    assert (
        clean_title("Council debates transit plan | RG", ["Riverside Gazette"])
        == "Council debates transit plan"
    )
    assert clean_title(
        "Council debates transit plan – Riverside Gazette", [], "http://www.riversidegazette.test/x"
    ) == ("Council debates transit plan")
    assert clean_title("Brexit: what happens next", ["Brexit Times"]) == "Brexit: what happens next"
    assert clean_title("  Just a headline ", ["Riverside Gazette"]) == "Just a headline"
    assert clean_title("Riverside Gazette", ["Riverside Gazette"]) == "Riverside Gazette"
    assert clean_title(None, ["x"]) is None and clean_title("  ", []) is None
    once = clean_title("Council debates | Transit | Riverside Gazette", ["Riverside Gazette"])
    assert once == "Council debates | Transit" and clean_title(once, ["Riverside Gazette"]) == once


def test_a_page_title_and_a_drop_title_are_cleaned_alike() -> None:
    for title in (
        "Riverside Gazette: Council debates transit plan",
        "Council debates transit plan - Riverside Gazette",
    ):
        head = f'<title>{title}</title><meta property="og:site_name" content="Riverside Gazette">'
        extracted = story(head, url="http://www.riversidegazette.test/2026/02/01/council")
        assert extracted.title == clean_title(title, ["Riverside Gazette"]) == "Council debates transit plan"


def test_clean_title_takes_the_pages_headline_that_the_title_extends() -> None:
    title = "Council debates transit plan | Environment | Riverside Gazette"
    assert clean_title(title, ["Riverside Gazette"], headlines=["Council debates transit plan"]) == (
        "Council debates transit plan"
    )
    assert clean_title(title, ["Riverside Gazette"], headlines=["Another headline altogether"]) == (
        "Council debates transit plan | Environment"
    )
    page = (
        '<head><meta content="Riverside &amp; Co" property="og:site_name">'
        "<meta property='og:title' content='Council debates transit plan'></head>"
    )
    assert og_values(page) == ("Riverside & Co", "Council debates transit plan")
    assert og_values(page.encode()) == og_values(page) and og_values(None) == (None, None)
