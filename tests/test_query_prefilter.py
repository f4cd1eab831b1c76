"""The spider's raw-page prefilter (``TopicQuery.may_match``) never rejects a page whose extracted story the
full relevance test keeps: generated queries over the real news pages, and the cases that lost stories."""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass

from tests.shared_data import NEWS_HTML, news_pages, require_shared
from topicmap.topics import query_prefilter
from topicmap.topics.query import QuerySyntaxError, TopicQuery, parse
from topicmap.topics.query_text import fold, tokenize_word
from topicmap.web.extract import PLAIN_TEXT_PROBE_CHARS, extract_story
from topicmap.web.page import decode_html

# ---- the cases the prefilter used to get wrong ----------------------------------------------------------


def test_an_excluded_word_elsewhere_on_the_page_does_not_reject_it() -> None:
    # "recipe" in the navigation: the extracted story has no recipe, and matches
    page = "<nav><a>Recipes</a></nav><p>The president spoke.</p>"
    assert parse("president AND NOT recipe*").may_match(page)
    assert parse("president -recipe*").may_match(page)
    assert parse('(politic* OR president*) AND NOT (recipe* OR "game day")').may_match(page)
    # NOT (a AND NOT b) is NOT a OR b: undecidable on the page either way
    assert parse("spoke AND NOT (president AND NOT recipe)").may_match(page)
    # NOT (NOT a AND NOT b) is a OR b: a page with neither is rejected
    assert not parse("spoke AND NOT (NOT climate AND NOT weather)").may_match(page)
    assert parse("spoke AND NOT (NOT climate AND NOT weather)").may_match(page + "<p>Weather</p>")


def test_a_page_without_the_query_words_is_still_rejected() -> None:
    page = "<nav><a>Recipes</a></nav><p>The president spoke.</p>"
    assert not parse("climate AND NOT recipe*").may_match(page)
    assert not parse('"climate change"').may_match(page)
    assert not parse("title:climate").may_match(page)


def test_fields_phrases_and_proximity_are_decided_on_the_story() -> None:
    page = (
        '<html><head><meta property="og:title" content="Brexit talks resume"></head>'
        "<body><p>The <a href='/eu'>European</a>\n<em>Union</em> said.</p>"
        "<p>Carbon</p><p>tax</p></body></html>"
    )
    assert parse("title:brexit").may_match(page)
    assert parse('text:"european union"').may_match(page)
    assert parse('"carbon tax"').may_match(page)  # two paragraphs on the page, "Carbon\ntax" in the story
    assert parse('"union european"~1').may_match(page)
    assert not parse('"european commission"').may_match(page)


def test_the_page_is_read_as_the_extractor_reads_it() -> None:
    # character references, words split by inline tags or a script, the description's double escaping,
    # JSON-LD strings, zero-width joiners the story's text drops
    assert parse("café").may_match("<p>Le caf&eacute; est ferm&eacute;.</p>")
    assert parse("cafe").may_match("<p>Le CAF&Eacute; est ferm&eacute;.</p>")
    assert parse("president's").may_match("<p>The president&#8217;s speech</p>")
    assert parse("president").may_match("<p>The Pre<b>sident</b> spoke</p>")
    assert parse("president").may_match("<p>The Pre<script>var x = 1;</script>sident spoke</p>")
    assert parse("café").may_match('<meta name="description" content="Un caf&amp;eacute; ferm&amp;eacute;">')
    assert parse("bündchen").may_match(
        '<script type="application/ld+json">{"headline": "Gisele B\\u00fcndchen speaks"}</script>'
    )
    assert parse("تامینمالی").may_match("<p>تامین&zwnj;مالی</p>")
    assert parse("تامین\u200cمالی").matches("تامینمالی")  # the query typed with the joiner
    # what no story holds: a script, the attributes of tags other than <meta> (the page as written is tried
    # first, so the words are in capitals here: only the views can accept them)
    assert not parse("climate").may_match('<script>var CLIMATE = 1;</script><a title="CLIMATE">x</a>')


def test_a_page_the_extractor_reads_as_plain_text_is_read_whole() -> None:
    assert query_prefilter._PLAIN_TEXT_PROBE_CHARS == PLAIN_TEXT_PROBE_CHARS
    page = (
        "WEATHER REPORT " * 100 + "<p>CAF&EACUTE; data-x</p>"
    )  # no '<' early: all of it is the story's text
    assert extract_story(page, "https://example.com/a").text.endswith("CAF&EACUTE; data-x</p>")
    assert parse("eacute AND p").may_match(page)


def test_the_urls_are_part_of_the_story() -> None:
    page = "<p>Nothing about it here.</p>"
    assert not parse("obama").may_match(page)
    assert parse("obama").may_match(page, urls=["https://example.com/2016/obama-visits-kenya"])
    assert parse("obama AND kenya").may_match(
        page, urls=["https://example.com/a", "https://example.com/obama-kenya"]
    )
    assert parse("obama").may_match(page, urls=[None, "https://example.com/Obama"])


def test_queries_that_always_or_never_match_need_no_page() -> None:
    assert parse("*:* AND NOT recipe").may_match("<p>recipe</p>")
    assert not parse("climate AND NOT *:*").may_match("<p>climate</p>")


# ---- the property, over the real pages --------------------------------------------------------------------


@dataclass(frozen=True)
class Story:
    """A real page as the spider reads it, and the story extracted from it."""

    name: str
    page: str
    url: str
    title: str | None
    text: str
    description: str | None
    words: tuple[str, ...]  # the story's tokens, in order (title, description, text)
    title_words: tuple[str, ...]
    text_words: tuple[str, ...]
    page_only_words: tuple[str, ...]  # ASCII words of the raw page that the story lacks (navigation, scripts)


_PAGE_WORD = re.compile(r"[a-z][a-z0-9]{2,15}")
_KEYWORDS = {"and", "or", "not", "to"}


def _tokens(text: str | None) -> tuple[str, ...]:
    return tuple(token for token in tokenize_word(fold(text or "")) if token not in _KEYWORDS)


@functools.cache
def stories() -> tuple[Story, ...]:
    """Every real page extracted once for the whole module (~10 s)."""
    urls = {}
    if NEWS_HTML.is_dir():
        for line in (NEWS_HTML / "expected.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            urls[row["file"]] = row.get("url") or row.get("url_raw_from_fixture") or ""
    found = []
    for name, content in news_pages().items():
        page = decode_html(content)  # the spider extracts, and prefilters, the text the fetcher decoded
        url = urls.get(name, "")
        story = extract_story(page, url)
        words = _tokens(" ".join(part for part in (story.title, story.description, story.text) if part))
        in_story = set(words) | set(_tokens(url))
        page_only = sorted(set(_PAGE_WORD.findall(page.lower())) - in_story - _KEYWORDS)
        found.append(
            Story(
                name,
                page,
                url,
                story.title,
                story.text,
                story.description,
                words,
                _tokens(story.title),
                _tokens(story.text),
                tuple(page_only),
            )
        )
    return tuple(found)


def spider_keeps(query: TopicQuery, story: Story) -> bool:
    """The full relevance test: the query on the title, description and URL, each alone and as the fields of
    one story, and on the text (a superset of the new sentences the spider tries); the story with all four
    fields too, so the prefilter is checked against every way a story can match."""
    fields = (story.title, story.description, story.url)
    return (
        any(value and query.matches(value) for value in fields)
        or query.matches_story(story.title, None, story.url, story.description)
        or query.matches(story.text)
        or query.matches_story(story.title, story.text, story.url, story.description)
    )


class QueryMaker:
    """Random queries over one story's words, biased to match it: words of the story (plain, wildcard,
    phrase, proximity, fielded), words only its page has (what a NOT clause must not be decided on),
    words nowhere, combined with AND, OR, NOT, ``-``/``+`` lists and groups."""

    def __init__(self, rng: random.Random, story: Story) -> None:
        self.rng = rng
        self.story = story

    def word(self, words: tuple[str, ...]) -> str:
        return self.rng.choice(words) if words else "zzqxj"

    def run(self, words: tuple[str, ...], length: int) -> list[str]:
        """Consecutive words of the story (a phrase), or any words when it is too short."""
        if len(words) < length:
            return [self.word(self.story.words) for _ in range(length)]
        start = self.rng.randrange(len(words) - length + 1)
        return list(words[start : start + length])

    def leaf(self) -> str:
        story, rng = self.story, self.rng
        kind = rng.random()
        if kind < 0.25:
            return self.word(story.words)
        if kind < 0.40:
            return self.word(story.page_only_words)
        if kind < 0.45:
            return rng.choice(["zzqxj", "wqvv", "recipe*", "game"])
        if kind < 0.55:
            word = self.word(story.words)
            return word[: max(1, min(len(word) - 1, rng.randint(3, 6)))] + "*"
        if kind < 0.67:
            return '"' + " ".join(self.run(story.text_words, rng.randint(2, 3))) + '"'
        if kind < 0.77:
            words = self.run(story.text_words, rng.randint(3, 5))
            chosen = [words[0], words[-1]]
            rng.shuffle(chosen)
            return f'"{" ".join(chosen)}"~{rng.randint(0, 4)}'
        if kind < 0.84:
            return "title:" + self.word(story.title_words)
        if kind < 0.88:
            return 'title:"' + " ".join(self.run(story.title_words, 2)) + '"'
        if kind < 0.95:
            return "text:" + self.word(story.text_words)
        return "text:(" + self.word(story.text_words) + " OR " + self.word(story.page_only_words) + ")"

    def clause(self, depth: int) -> str:
        if depth >= 3 or self.rng.random() < 0.35:
            return self.leaf()
        left, right = self.clause(depth + 1), self.clause(depth + 1)
        shape = self.rng.random()
        if shape < 0.3:
            return f"({left} AND {right})"
        if shape < 0.5:
            return f"({left} OR {right})"
        if shape < 0.75:
            return f"({left} AND NOT {right})"
        if shape < 0.85:
            return f"NOT ({left} AND NOT {right})"
        if shape < 0.95:
            return f"({left} {right} -{self.leaf()})"
        return f"(+{left} -{right})"

    def query(self) -> str:
        return self.clause(0)


QUERIES_PER_PAGE = 10


def test_may_match_accepts_every_page_whose_story_the_spider_keeps() -> None:
    require_shared(NEWS_HTML / "expected.jsonl")
    corpus = stories()
    kept = 0
    lost: list[tuple[str, str]] = []
    for index, story in enumerate(corpus):
        maker = QueryMaker(random.Random(index), story)
        for _ in range(QUERIES_PER_PAGE):
            text = maker.query()
            try:
                query = parse(text)
            except QuerySyntaxError:
                continue  # a query that only excludes
            if not spider_keeps(query, story):
                continue
            kept += 1
            if not query.may_match(story.page, urls=(story.url,)):
                lost.append((story.name, text))
    # the generator must make matching queries, or the property would hold for nothing
    assert kept >= len(corpus) * QUERIES_PER_PAGE // 4, kept
    assert not lost, f"{len(lost)} of {kept} kept stories rejected by the prefilter, e.g. {lost[:5]}"
