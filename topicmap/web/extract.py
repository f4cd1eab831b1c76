"""Story extraction: title, article text, publication date, language, description and canonical URL.

The article text comes from trafilatura, in the mode that scored best on our real-page set (precision,
see docs/extraction.md); the title, the date and the small metadata are chosen here from the page's own
markup (Open Graph, JSON-LD, <title>, <h1>) because trafilatura's choices keep site-name suffixes
("… | CNN Politics") and drop dates on pages whose body text is too short. htmldate is the fallback for
dates that no explicit publication field states.

The article text is ``topicmap.web.article_text``'s, with the opening paragraph it may drop put back
(``topicmap.web.article_ledes``); the article's links are read by ``topicmap.web.article_links``.

Everything here is total: whatever the input (binary, truncated, gigantic, malformed), the functions
return a value and never raise; work is bounded by truncating the input before parsing.
"""

from __future__ import annotations

import html as html_lib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

from lxml.html import (
    HtmlElement,
)

from topicmap.web.article_ledes import dropped_ledes, with_ledes
from topicmap.web.article_links import article_link_targets, page_anchors
from topicmap.web.article_text import article_document, strip_page_chrome, tidy_text
from topicmap.web.dates import date_from_tree
from topicmap.web.page import (
    MAX_HTML_BYTES,
    MAX_HTML_CHARS,
    MIN_PUBLISH_DATE,
    XML_INVALID_RE,
    collapse,
    decode_html,
    json_ld_field,
    json_ld_objects,
    looks_binary,
    meta_values,
    parse_html,
    parse_text,
)
from topicmap.web.titles import MAX_TITLE_LENGTH, choose_title
from topicmap.web.urls import is_http_url

log = logging.getLogger(__name__)

# Media Cloud treats content without a '<' in its first 1000 chars as plain text (its link extraction's rule).
PLAIN_TEXT_PROBE_CHARS = 1000
MAX_PLAIN_TEXT_CHARS = 1_000_000


@dataclass(frozen=True)
class ExtractedStory:
    """What a story page says about itself."""

    title: str | None
    text: str
    # timezone-aware, in the page's own UTC offset: .date() is the publisher's calendar day
    publish_date: datetime | None
    language: str | None  # ISO 639 primary subtag, lowercase ("en", "pt")
    description: str | None
    canonical_url: str | None
    # how the title and the date were found ("og:title", "meta article:published_time", "url", ...)
    title_method: str | None = None
    date_method: str | None = None
    language_method: str | None = None
    # did the page give a time of day / a zone with its date (``DateGuess.time_known`` / ``zone_known``)
    date_time_known: bool | None = None
    date_zone_known: bool | None = None
    # the name the page gives its site (og:site_name, else the JSON-LD publisher's name), or None
    site_name: str | None = None


EMPTY_STORY = ExtractedStory(None, "", None, None, None, None)


def _site_name(meta: dict[str, str], ld_objects: list[dict[str, Any]]) -> str | None:
    """The name the page gives its site: og:site_name, else the JSON-LD publisher's name (≤ 256 chars)."""
    publisher = json_ld_field(ld_objects, "publisher")
    name = meta.get("og:site_name") or (publisher.get("name") if isinstance(publisher, dict) else None)
    return collapse(name)[:256] or None if isinstance(name, str) else None


_TITLE_OPEN_RE = re.compile(r"<title\b[^>]{0,1000}>", re.I)
_TITLE_CLOSE_RE = re.compile(r"</title\s*>", re.I)
# Where to look for </title>: one lazy regex over the page would rescan to the end from every "<title"
# of a hostile page without a closing tag (quadratic).
MAX_TITLE_SCAN_CHARS = 20_000


def page_title(html: str | bytes | None) -> str | None:
    """The plain <title> text (entities decoded, whitespace collapsed, ≤ 1024 chars), or None."""
    try:
        if not html:
            return None
        text = decode_html(html) if isinstance(html, bytes | bytearray) else str(html)
        opening = _TITLE_OPEN_RE.search(text, 0, MAX_HTML_CHARS)
        if not opening:
            return None
        closing = _TITLE_CLOSE_RE.search(text, opening.end(), opening.end() + MAX_TITLE_SCAN_CHARS)
        if not closing:
            return None
        raw = text[opening.end() : closing.start()]
        title = collapse(html_lib.unescape(re.sub(r"<[^>]*>", " ", raw)))
        title = XML_INVALID_RE.sub("", title)
        return title[:MAX_TITLE_LENGTH] or None
    except Exception:  # noqa: BLE001 - total function by contract
        log.debug("page_title failed", exc_info=True)
        return None


# --------------------------------------------------------------------------------------------------
# language, description, canonical URL

_LANGUAGE_RE = re.compile(r"^\s*([a-zA-Z]{2,3})(?:[-_]|\s*$)")
_NOT_A_LANGUAGE = {"und", "mul", "zxx", "mis"}


def _language_code(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    match = _LANGUAGE_RE.match(value)
    code = match.group(1).lower() if match else None
    return code if code and code not in _NOT_A_LANGUAGE else None


def _declared_language(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]]
) -> str | None:
    declared = [
        tree.get("lang"),
        tree.get("{http://www.w3.org/XML/1998/namespace}lang"),
        tree.get("xml:lang"),
        meta.get("content-language"),
        meta.get("language"),
        meta.get("og:locale"),
        meta.get("dc.language"),
        json_ld_field(ld_objects, "inLanguage"),
    ]
    for value in declared:
        code = _language_code(value)
        if code:
            return code
    return None


# The language is read from the text by py3langid (langid.py's maintained fork, the detector trafilatura
# itself uses for its language filter; its model ships in the package). Page declarations are often wrong
# (templates declare "en" on Thai, Romanian and German pages): one only breaks a tie, when the detector's
# own ranking puts the declared language within LANGUAGE_TIE_RATIO of its first choice, or when there is
# too little text to judge.
# A paragraph decides. The cost grows with the sample (py3langid walks its byte automaton in Python, ~0.5 µs
# a byte): 600 characters instead of 1200 halve it, and on the 170 evaluation pages samples down to 400
# characters give the same language, by the same method, on every page.
LANGUAGE_SAMPLE_CHARS = 600
MIN_LANGUAGE_TEXT_CHARS = 60
LANGUAGE_TIE_RATIO = 0.5
# py3langid's model labels some languages with ISO 639-3 codes: dialects go to their ISO 639-1 language
# (as sites label them); others (no ISO 639-1 code, or "zxx", no linguistic content) are not reported.
_LANGID_CODES = {"nn": "no", "ary": "ar", "arz": "ar", "yue": "zh", "wuu": "zh", "uzs": "uz", "gug": "gn"}
_identifier: Any = None
_NOT_LETTERS_RE = re.compile(r"[\W\d_]+")


def _language_identifier() -> Any:
    global _identifier
    if _identifier is None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier  # local: loading the model takes a moment

        _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return _identifier


def _language_ranking(text: str | None) -> list[tuple[str, float]]:
    """(language, probability) best first, from the text's letters; [] when there are too few."""
    if not text:
        return []
    sample = text[:LANGUAGE_SAMPLE_CHARS]
    if len(sample) < 400 and len(_NOT_LETTERS_RE.sub("", sample)) < MIN_LANGUAGE_TEXT_CHARS:
        return []
    try:
        ranking = _language_identifier().rank(sample)
    except Exception:  # noqa: BLE001 - third-party model on hostile input
        log.debug("language detection failed", exc_info=True)
        return []
    merged: dict[str, float] = {}
    for code, probability in ranking[:8]:
        code = _LANGID_CODES.get(code, code)
        if len(code) == 2:
            merged[code] = merged.get(code, 0.0) + float(probability)
    return sorted(merged.items(), key=lambda item: item[1], reverse=True)


def guess_language(text: str | None) -> str | None:
    """ISO 639-1 code of the language a text is written in, or None when it is too short to tell."""
    ranking = _language_ranking(text)
    return ranking[0][0] if ranking else None


def _language(text: str, declared: str | None) -> tuple[str | None, str | None]:
    """The story's language and how it was found: "text", "text = declared", "declared (tie)",
    "text (page declares xx)", "declared (text too short)"."""
    ranking = _language_ranking(text)
    if not ranking:
        return (declared, "declared (text too short)") if declared else (None, None)
    detected, best = ranking[0]
    if declared is None:
        return detected, "text"
    if detected == declared:
        return detected, "text = declared"
    declared_probability = next((p for code, p in ranking if code == declared), 0.0)
    if declared_probability >= best * LANGUAGE_TIE_RATIO:
        return declared, "declared (tie)"
    return detected, f"text (page declares {declared})"


def _description(meta: dict[str, str], ld_objects: list[dict[str, Any]]) -> str | None:
    for value in (
        meta.get("og:description"),
        meta.get("description"),
        meta.get("twitter:description"),
        json_ld_field(ld_objects, "description"),
    ):
        if isinstance(value, str) and value.strip():
            return collapse(html_lib.unescape(value))[:10_000]
    return None


def _canonical_url(tree: HtmlElement, meta: dict[str, str], url: str) -> str | None:
    hrefs = [
        link.get("href")
        for link in tree.iterfind(".//link[@rel]")
        if link.get("rel", "").lower() == "canonical"
    ]
    hrefs.append(meta.get("og:url"))
    for href in hrefs:
        if not href or not href.strip():
            continue
        try:
            absolute = urljoin(url, href.strip()) if url else href.strip()
        except ValueError:
            continue
        if is_http_url(absolute):
            return absolute
    return None


# --------------------------------------------------------------------------------------------------
# public entry point


def extract_story(html: str | bytes, url: str) -> ExtractedStory:
    """Title, text, publication date, language, description and canonical URL of one story page.

    Never raises: binary or empty input gives an empty story; oversized input is truncated first.
    """
    return extract_story_document(html, url).story


@dataclass(frozen=True)
class StoryDocument:
    """One parse of a page: the story (the same whether or not links were asked for); when they were, the
    targets (as written, in document order) of the links in the article text; and whatever
    ``before_pruning`` read from the full page tree (for link mining: <base>, embedded videos)."""

    story: ExtractedStory
    link_targets: list[str] = field(default_factory=list)
    before_pruning: Any = None


def extract_story_document(
    html: str | bytes,
    url: str,
    include_links: bool = False,
    before_pruning: Callable[[HtmlElement], Any] | None = None,
) -> StoryDocument:
    """``extract_story`` that can also read the article's links, so a crawler parses each page once. The
    story is ``extract_story``'s: the text comes from the same passes, and the links are those whose words
    and surroundings are in that text (``_article_link_targets``)."""
    try:
        return _extract_story(html, url if isinstance(url, str) else "", include_links, before_pruning)
    except Exception:  # noqa: BLE001 - total function by contract
        log.warning("story extraction failed for %s", url, exc_info=True)
        return StoryDocument(EMPTY_STORY)


def _extract_story(
    html: str | bytes, url: str, include_links: bool, before_pruning: Callable[[HtmlElement], Any] | None
) -> StoryDocument:
    if not html or not isinstance(html, str | bytes | bytearray):
        return StoryDocument(EMPTY_STORY)
    if looks_binary(html):
        return StoryDocument(EMPTY_STORY)
    text = decode_html(html) if isinstance(html, bytes | bytearray) else html[:MAX_HTML_CHARS]
    if "<" not in text[:PLAIN_TEXT_PROBE_CHARS]:
        plain = XML_INVALID_RE.sub("", text[:MAX_PLAIN_TEXT_CHARS]).strip()
        return StoryDocument(ExtractedStory(None, plain, None, None, None, None))
    tree = parse_text(text)
    if tree is None:
        return StoryDocument(EMPTY_STORY)
    meta = meta_values(tree)
    ld_objects = json_ld_objects(tree)
    title, title_method = choose_title(tree, meta, ld_objects, url)
    dated = date_from_tree(tree, meta, ld_objects, url)
    declared_language = _declared_language(tree, meta, ld_objects)
    description = _description(meta, ld_objects)
    canonical_url = _canonical_url(tree, meta, url)
    seen_before_pruning = before_pruning(tree) if before_pruning is not None else None
    # Last, because it prunes the tree the metadata was read from.
    strip_page_chrome(tree)
    anchors = page_anchors(tree) if include_links else []
    document, _text_method = article_document(tree)
    text = tidy_text(document.text) if document is not None else ""
    if text:
        text = with_ledes(text, dropped_ledes(tree, text, title))
    language, language_method = _language(text, declared_language)
    story = ExtractedStory(
        title,
        text,
        dated.date,
        language,
        description,
        canonical_url,
        title_method,
        dated.method,
        language_method,
        dated.time_known,
        dated.zone_known,
        _site_name(meta, ld_objects),
    )
    return StoryDocument(story, article_link_targets(anchors, text), seen_before_pruning)


__all__ = [
    "EMPTY_STORY",
    "ExtractedStory",
    "decode_html",
    "extract_story",
    "extract_story_document",
    "StoryDocument",
    "guess_language",
    "page_title",
    "parse_html",
    "MIN_PUBLISH_DATE",
    "MAX_HTML_BYTES",
]
