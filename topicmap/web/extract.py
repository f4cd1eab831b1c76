"""Story extraction: title, article text, publication date, language, description and canonical URL.

The article text comes from trafilatura, in the mode that scored best on our real-page set (precision,
see docs/extraction.md); the title, the date and the small metadata are chosen here from the page's own
markup (Open Graph, JSON-LD, <title>, <h1>) because trafilatura's choices keep site-name suffixes
("… | CNN Politics") and drop dates on pages whose body text is too short. htmldate is the fallback for
dates that no explicit publication field states.

Everything here is total: whatever the input (binary, truncated, gigantic, malformed), the functions
return a value and never raise; work is bounded by truncating the input before parsing.
"""

from __future__ import annotations

import html as html_lib
import inspect
import itertools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

import trafilatura
import trafilatura.core
from lxml import etree
from lxml.html import (
    HtmlElement,
)
from trafilatura.settings import Extractor
from trafilatura.xml import xmltotxt

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
from topicmap.web.urls import distinctive_domain, is_http_url

log = logging.getLogger(__name__)

MAX_TITLE_LENGTH = 1024
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


EMPTY_STORY = ExtractedStory(None, "", None, None, None, None)

# --------------------------------------------------------------------------------------------------
# title

# Separators sites put between the headline and the site name or section ("X | CNN", "X - BBC News").
_TITLE_SPLIT_RE = re.compile(r"\s+(?:[|\-–—»«·•~/:]{1,2}|::)\s+|\s*[|｜]\s*|\u3000+")
# What may follow a clean title inside a longer one. Not ':' — "Brexit: what happens next" is one headline.
_PREFIX_REMAINDER_RE = re.compile(r"^\s*(?:[|\-–—»«·•~/｜]|\u3000)")
# What may precede a clean title inside a longer one ("Site - Headline"); here ':' too ("Site: Headline").
_SUFFIX_REMAINDER_RE = re.compile(r"\S\s*(?:[|\-–—»«·•~/｜:]|\u3000)\s*$")
_EDGE_SEPARATORS = " |-–—»«·•~/｜"
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})


def _title_key(text: str) -> str:
    """Comparison key for titles: quotes unified, casefolded, whitespace collapsed, edge punctuation off."""
    return collapse(text.translate(_QUOTES)).casefold().strip(" .!?\"'")


def _site_names(meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str) -> set[str]:
    names = {meta.get("og:site_name", ""), meta.get("application-name", ""), meta.get("twitter:site", "")}
    publisher = json_ld_field(ld_objects, "publisher")
    if isinstance(publisher, dict) and isinstance(publisher.get("name"), str):
        names.add(publisher["name"])
    domain = distinctive_domain(url) if url else None
    if domain:
        names.add(domain.split(".")[0])
    return {key for key in (re.sub(r"\W+", "", name.casefold()) for name in names) if len(key) >= 2}


def _is_site_name(part: str, site_names: set[str]) -> bool:
    key = re.sub(r"\W+", "", part.casefold())
    if not key:
        return True  # a bare separator or punctuation
    for name in site_names:
        if key == name or (len(key) >= 3 and key in name):  # "Guardian" in "theguardian"
            return True
        # A short name must start or end the part ("CNN Politics"): "ft" is in "Soft border" too.
        if name in key and (len(name) >= 4 or key.startswith(name) or key.endswith(name)):
            return True
    return False


def _strip_site_name(title: str, site_names: set[str]) -> str:
    """Drop leading/trailing title parts that name the site ("X | CNN Politics" → "X")."""
    parts = [part for part in _TITLE_SPLIT_RE.split(title) if part and part.strip()]
    if len(parts) < 2:
        return title
    kept = list(parts)
    while len(kept) > 1 and _is_site_name(kept[-1], site_names):
        kept.pop()
    while len(kept) > 1 and _is_site_name(kept[0], site_names):
        kept.pop(0)
    if len(kept) == len(parts):
        return title
    # Cut the original string, so separators inside the kept headline (e.g. "A - B") stay as written.
    start = title.find(kept[0])
    end = title.rfind(kept[-1]) + len(kept[-1])
    return title[start:end].strip() if 0 <= start < end else title


def _choose_title(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str
) -> tuple[str | None, str | None]:
    """The story's headline, without the site name the <title> usually carries, and how it was found.

    Order of evidence: an <h1> that agrees with a metadata title (og/twitter/JSON-LD/<title>) wins as
    written on the page; else a metadata title that is a prefix of <title> followed by a separator;
    else <title> (or og:title, JSON-LD headline…) with site-name parts removed; else the first <h1>.
    """
    title_element = tree.find(".//head/title")
    if title_element is None:
        title_element = tree.find(".//title")
    tag_title = collapse(title_element.text_content()) if title_element is not None else ""
    headline = json_ld_field(ld_objects, "headline")
    ld_title = collapse(headline) if isinstance(headline, str) else ""
    og_title = collapse(meta.get("og:title"))
    twitter_title = collapse(meta.get("twitter:title"))
    h1s = [text for text in (collapse(h1.text_content()) for h1 in tree.iter("h1")) if 0 < len(text) <= 400][
        :5
    ]
    named = {
        "og:title": og_title,
        "twitter:title": twitter_title,
        "json-ld headline": ld_title,
        "<title>": tag_title,
    }
    metadata_titles = {title: name for name, title in reversed(named.items()) if title}

    # 1. the visible headline confirmed by the metadata
    metadata_keys = {_title_key(title): name for title, name in metadata_titles.items()}
    for h1 in h1s:
        if _title_key(h1) in metadata_keys:
            return h1[:MAX_TITLE_LENGTH], f"<h1> = {metadata_keys[_title_key(h1)]}"

    # 2. a clean title that another title extends with a separator + site/section name (a blog whose
    # <h1> is its own name, "Lost in JIT" in "Lost in JIT: PyPy and …", is not a headline)
    site_names = _site_names(meta, ld_objects, url)
    sources = {
        title: name for name, title in reversed([*named.items(), *(("<h1>", h1) for h1 in h1s)]) if title
    }
    candidates = sorted({*h1s, og_title, twitter_title, ld_title} - {""}, key=len, reverse=True)
    candidates = [candidate for candidate in candidates if not _is_site_name(candidate, site_names)]
    for longer_name, longer in (
        ("<title>", tag_title),
        ("og:title", og_title),
        ("twitter:title", twitter_title),
        ("json-ld headline", ld_title),
    ):
        if not longer:
            continue
        longer_key = longer.translate(_QUOTES).casefold()
        for candidate in candidates:
            if len(candidate) >= len(longer) or len(candidate) < 10:
                continue
            candidate_key = candidate.translate(_QUOTES).casefold()
            if longer_key.startswith(candidate_key) and _PREFIX_REMAINDER_RE.match(longer[len(candidate) :]):
                return candidate[:MAX_TITLE_LENGTH], f"{sources[candidate]}, prefix of {longer_name}"
            # "Site name - Headline": the clean title ends the longer one after a separator
            if longer_key.endswith(candidate_key) and _SUFFIX_REMAINDER_RE.search(longer[: -len(candidate)]):
                return candidate[:MAX_TITLE_LENGTH], f"{sources[candidate]}, suffix of {longer_name}"

    # 3. the page's own title, site name removed
    for name, title in (
        ("<title>", tag_title),
        ("og:title", og_title),
        ("json-ld headline", ld_title),
        ("twitter:title", twitter_title),
    ):
        if title:
            stripped = _strip_site_name(title, site_names).strip(_EDGE_SEPARATORS)
            if stripped and stripped != title:
                return stripped[:MAX_TITLE_LENGTH], f"{name}, site name removed"
            return title[:MAX_TITLE_LENGTH], name
    return (h1s[0][:MAX_TITLE_LENGTH], "<h1>") if h1s else (None, None)


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
# article text

# Tuned on the real-page set (benchmarks/eval_extraction.py, docs/extraction.md).
TRAFILATURA_OPTIONS: dict[str, Any] = {"include_comments": False, "favor_precision": True}


# Elements the text extractor deletes anyway. Removing them up front (in place, keeping their tail text)
# saves trafilatura work on script-heavy pages — its pruning passes measure text_content() of the whole
# tree, inline JSON blobs included — 2-5% overall, with identical output on the evaluation set. (Removing
# <form> too is not safe: ASP.NET sites wrap the whole page, article included, in one.)
_NEVER_ARTICLE_TEXT = (
    "head", "script", "style", "noscript", "template", "svg", "canvas", "iframe", "embed", "object",
    "video", "audio", "link", "meta",
    # trafilatura's own MANUALLY_CLEANED list (deleted, tails kept, in every mode) less what it looks at
    # first: <form> (ASP.NET), <figure> (may hold a table), <math> (formulas salvaged). Deleting the page
    # chrome before its XPath prunes run over the raw tree saves them most of their work.
    "aside", "footer", "nav", "menu", "menuitem", "button", "input", "select", "option", "optgroup",
    "textarea", "label", "fieldset", "legend", "datalist", "dialog", "noindex", "map", "area", "applet",
    "frame", "frameset", "fencedframe", "marquee", "blink", "output", "progress", "param", "source",
    "track", "use", "picture",
)  # fmt: skip


# bare_extraction's keyword → its Extractor's (trafilatura.settings.Extractor, the documented ``options=``).
_EXTRACTOR_FIELDS = {
    "fast": "fast",
    "favor_precision": "precision",
    "favor_recall": "recall",
    "include_comments": "comments",
    "include_tables": "tables",
    "include_links": "links",
    "include_images": "images",
    "include_formatting": "formatting",
}
_extractors: dict[tuple[Any, ...], Extractor] = {}


class _HashedOnce(tuple):
    """A tuple whose hash is computed once (a tuple re-hashes every element each time it is hashed)."""

    _hash: int

    def __new__(cls, items: Any) -> _HashedOnce:
        self = super().__new__(cls, items)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash


def _hash_justext_stoplist_once() -> None:
    """trafilatura's full modes run jusText on short texts with a stoplist of every language: a tuple of
    ~150,000 words that jusText's classify_paragraphs looks up in an lru_cache, so each call re-hashed it
    (6-9 ms, more than the whole fast extraction of a small page). Same words, same order, hashed once."""
    try:
        from trafilatura import external
    except ImportError:
        return
    stoplist = getattr(external, "JT_STOPLIST", None)
    if stoplist is None and callable(getattr(external, "jt_stoplist_init", None)):
        stoplist = external.jt_stoplist_init()
    if isinstance(stoplist, tuple) and not isinstance(stoplist, _HashedOnce):
        external.JT_STOPLIST = _HashedOnce(stoplist)


def _extractor(options: dict[str, Any]) -> Extractor:
    """trafilatura's settings for one mode, built once: building them per call (config reads, a time-zone
    lookup for htmldate's date window, unused without metadata) cost 0.2-0.3 ms a pass. Never with links:
    trafilatura splits a paragraph at an inline link it keeps and glues the link's words to the next ones
    ("speechin San Francisco", "heads upthat"), and with links it keeps or drops other paragraphs than without; the
    article's links are read beside the text instead (``_article_link_targets``). No URL: trafilatura uses it
    to resolve links and in log lines. The object is only read during extraction, so threads may share it."""
    key = tuple(sorted(options.items()))
    extractor = _extractors.get(key)
    if extractor is None:
        settings = {"tables": True, "links": False}
        settings.update({_EXTRACTOR_FIELDS[name]: value for name, value in options.items()})
        extractor = _extractors[key] = Extractor(output_format="python", with_metadata=False, **settings)
        if not extractor.fast:
            _hash_justext_stoplist_once()
    return extractor


@dataclass(frozen=True)
class _Article:
    """What we use of trafilatura's Document: the article body (its XML) and its text."""

    text: str
    body: Any


def _sequence_function() -> Callable[..., Any] | None:
    """trafilatura's extraction cascade (``trafilatura.core.trafilatura_sequence(tree, options, url)`` →
    body, text, comments body, comments text), or None when this trafilatura does not have it as known."""
    function = getattr(trafilatura.core, "trafilatura_sequence", None)
    try:
        parameters = list(inspect.signature(function).parameters) if callable(function) else []
    except (TypeError, ValueError):
        return None
    return function if parameters[:3] == ["tree", "options", "url"] else None


# bare_extraction deep-copies a tree it is given (so the caller's stays intact): with the settings built once
# per mode, skipping that copy saves ~0.4 ms a page, 2-3% of our time (paired runs). We own the tree and read nothing from it after the
# last pass, so the cascade bare_extraction runs is called on it directly (when this trafilatura has it as
# known; tests/test_extract.py checks that both give the same text). A pass prunes comment sections and
# infinite-scroll containers from the tree in place; the next pass would prune the same ones first.
DIRECT_SEQUENCE = True
_SEQUENCE = _sequence_function()


def _bare_extraction(tree: HtmlElement, options: dict[str, Any]) -> _Article | None:
    """trafilatura's article of `tree` in one mode, or None. Prunes `tree`."""
    extractor = _extractor(options)
    try:
        if not DIRECT_SEQUENCE or _SEQUENCE is None:
            document = trafilatura.bare_extraction(tree, options=extractor)
            body = getattr(document, "body", None) if document is not None else None
            return None if body is None else _Article(xmltotxt(body, extractor.formatting), body)
        body, text, _comments_body, comments = _SEQUENCE(tree, extractor, None)
        # bare_extraction's own check: nothing extracted is no document
        if len(text) < extractor.min_output_size and len(comments) < extractor.min_output_comm_size:
            return None
        return _Article(xmltotxt(body, extractor.formatting), body)
    except Exception:  # noqa: BLE001 - third-party extractor on hostile input
        log.debug("trafilatura failed", exc_info=True)
        return None


# Recall fallback. Precision-first extraction sometimes keeps a fragment of a long article (a reprint
# notice, a caption) or drops the short items of a list page. When its text is shorter than this, the
# page is extracted again favouring recall, and the longer text is taken if it is at least
# RECALL_FALLBACK_GAIN times longer (a real gain, not a few boilerplate lines more). Each pass sees the page
# as the one before left it: less the comment sections and infinite-scroll containers it pruned, which the
# next pass prunes first anyway (see DIRECT_SEQUENCE). The recall pass runs in trafilatura's fast variant:
# its full variant adds a readability/jusText comparison on these short-text pages (a few ms each, a third of
# the pass), and the precision pass before it has just made that comparison. On the develop pages the fast
# recall text is as long as the full one wherever the fallback could be taken; on all 170 pages the stories
# are the same.
RECALL_FALLBACK_BELOW_CHARS = 1000
RECALL_FALLBACK_GAIN = 2.0
RECALL_OPTIONS: dict[str, Any] = {"include_comments": False, "favor_recall": True, "fast": True}


def _body_text_length(document: _Article | None) -> int:
    return len(document.text) if document is not None else 0


# Fast first. trafilatura's full precision mode also runs readability and jusText on copies of the page and
# keeps their text when its own looks deficient; that costs about half of the extraction time and changes
# the text of few pages. So the fast mode runs first and its text is kept unless it looks deficient the way
# the comparison would catch: shorter than FULL_EXTRACTION_BELOW_CHARS, no paragraph text, or more tables
# than paragraphs. Then the full precision mode runs, then the recall fallback below.
FAST_FIRST = True
FULL_EXTRACTION_BELOW_CHARS = 600


def _looks_deficient(document: _Article | None) -> bool:
    if document is None or _body_text_length(document) < FULL_EXTRACTION_BELOW_CHARS:
        return True
    paragraphs = document.body.findall(".//p")
    return not paragraphs or len(document.body.findall(".//table")) > len(paragraphs)


def _strip_page_chrome(tree: HtmlElement) -> None:
    """Delete what is never article text (``_NEVER_ARTICLE_TEXT``), tails kept, in place."""
    etree.strip_elements(tree, *_NEVER_ARTICLE_TEXT, with_tail=False)


def _article_document(tree: HtmlElement) -> tuple[_Article | None, str]:
    """trafilatura's article or None, and how it was found ("precision (fast)", "precision", "recall
    fallback"). Prunes `tree` in place: read it before. Expects ``_strip_page_chrome`` done."""
    if FAST_FIRST:
        document = _bare_extraction(tree, {**TRAFILATURA_OPTIONS, "fast": True})
        if not _looks_deficient(document):
            return document, "precision (fast)"
    document = _bare_extraction(tree, TRAFILATURA_OPTIONS)
    precise_length = _body_text_length(document)
    if precise_length >= RECALL_FALLBACK_BELOW_CHARS or RECALL_FALLBACK_BELOW_CHARS <= 0:
        return document, "precision"
    recalled = _bare_extraction(tree, RECALL_OPTIONS)
    if _body_text_length(recalled) >= max(1, precise_length) * RECALL_FALLBACK_GAIN:
        return recalled, "recall fallback"
    return document, "precision"


# Layout left in extracted text: runs of tabs/spaces (templates indent their markup), and comment or
# CDATA delimiters of inline scripts that leaked into text nodes.
_MARKUP_REMNANT_RE = re.compile(
    r"^(?:<!--|-->|//\s*-->|//\s*<!--|<!\[CDATA\[|\]\]>|//\s*\]\]>)+|(?:<!--|-->|//\s*-->|<!\[CDATA\[|\]\]>)+$"
)


def tidy_text(text: str | None) -> str:
    """Article text without layout: each line's whitespace runs collapsed to one space and its ends
    trimmed, comment/CDATA delimiters at line ends removed, empty lines dropped."""
    if not text:
        return ""
    # Per line, str.split() + join: the same whitespace as a regex's \s (both use str.isspace), at a third of
    # the cost of a substitution; the remnant pattern runs only where one of its delimiters occurs at all.
    lines = [" ".join(line.split()) for line in text.split("\n")]
    if "<!" in text or "-->" in text or "]]>" in text:
        lines = [_MARKUP_REMNANT_RE.sub("", line).strip() for line in lines]
    return "\n".join(filter(None, lines))


# --------------------------------------------------------------------------------------------------
# the article's links

# Elements a text extractor writes on lines of their own: a link's paragraph is its nearest such ancestor.
_BLOCK_TAGS = frozenset(
    {"address", "article", "blockquote", "body", "caption", "center", "dd", "details", "div", "dl", "dt",
     "figcaption", "figure", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "html", "li", "main", "ol",
     "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)  # fmt: skip
# A link is the article's when its words and LINK_CONTEXT_CHARS characters (not counting whitespace) on
# each side, as its paragraph writes them, are in the article text. A paragraph shorter than
# SHORT_PARAGRAPH_CHARS ("Home", "Sports") must be a whole line of it: such words occur in any article.
LINK_CONTEXT_CHARS = 20
SHORT_PARAGRAPH_CHARS = 24


def _compact(text: str) -> str:
    """Text without whitespace: how a paragraph and the article text are compared (an extractor moves
    spaces and line breaks, not words)."""
    return "".join(text.split())


def _text_of(element: HtmlElement) -> str:
    """The element's text as written, its tail excluded."""
    return etree.tostring(element, method="text", encoding=str, with_tail=False)


def _compact_text_of(element: HtmlElement) -> str:
    """The element's text (its tail excluded), compacted; a comment's is none."""
    if not isinstance(element.tag, str):
        return ""
    if len(element) == 0:  # most links: no serialisation needed
        return _compact(element.text or "")
    return _compact(_text_of(element))


def _article_lines(article_text: str) -> set[str]:
    """The article's lines, list items (without their marker) and table cells, compacted."""
    lines: set[str] = set()
    for line in article_text.split("\n"):
        lines.add(_compact(line))
        if line.startswith("- "):
            lines.add(_compact(line[2:]))
        elif line.startswith("|"):
            lines.update(_compact(cell) for cell in line.split("|"))
    return lines


def _text_before(anchor: HtmlElement, paragraph: HtmlElement) -> tuple[str, bool]:
    """Up to LINK_CONTEXT_CHARS characters (compacted) before the anchor in its paragraph, and whether
    that is all of them."""
    pieces: list[str] = []
    size = 0
    node = anchor
    while node is not paragraph and size < LINK_CONTEXT_CHARS:
        previous = node.getprevious()
        if previous is None:
            node = node.getparent()
            found = [_compact(node.text or "")]
        else:
            node = previous
            found = [_compact(previous.tail or ""), _compact_text_of(previous)]
        for piece in found:
            pieces.append(piece)
            size += len(piece)
    text = "".join(reversed(pieces))
    return text[-LINK_CONTEXT_CHARS:], node is paragraph and size <= LINK_CONTEXT_CHARS


def _text_after(anchor: HtmlElement, paragraph: HtmlElement) -> tuple[str, bool]:
    """Up to LINK_CONTEXT_CHARS characters (compacted) after the anchor in its paragraph, and whether that
    is all of them."""
    pieces = [_compact(anchor.tail or "")]
    size = len(pieces[0])
    node = anchor
    while size < LINK_CONTEXT_CHARS:
        following = node.getnext()
        if following is None:
            node = node.getparent()
            if node is paragraph:
                return "".join(pieces), True
            found = [_compact(node.tail or "")]
        else:
            node = following
            found = [_compact_text_of(following), _compact(following.tail or "")]
        for piece in found:
            pieces.append(piece)
            size += len(piece)
    return "".join(pieces)[:LINK_CONTEXT_CHARS], False


def _page_anchors(tree: HtmlElement) -> list[HtmlElement]:
    """The page's <a href> elements, in document order: taken after the page chrome is deleted, before
    trafilatura runs (read after it: ``_article_link_targets``)."""
    return [anchor for anchor in tree.iter("a") if anchor.get("href")]


def _article_link_targets(anchors: list[HtmlElement], article_text: str) -> list[str]:
    """The hrefs (as written, in document order) of the anchors found in the article text, whichever of
    trafilatura's passes chose it: an anchor is found by its words with up to LINK_CONTEXT_CHARS characters
    on each side within its paragraph (its nearest block ancestor), or, when that paragraph is shorter than
    SHORT_PARAGRAPH_CHARS, by the whole paragraph being a line, list item or table cell of the article. A
    link without words (an image, an icon) has nothing to be found by: it is not the article's.

    Read after extraction because most anchors' words are not in the article at all, and only those that are
    need their paragraph: trafilatura cleans a copy of our tree and prunes the tree itself only of comment
    sections and infinite-scroll containers, so the anchors' paragraphs are as the page wrote them (a pruned
    section's anchors keep theirs, detached, and are not article text)."""
    if not anchors or not article_text:
        return []
    article = _compact(article_text)
    lines: set[str] | None = None  # built for the first short paragraph
    words_found: dict[str, bool] = {}  # a page repeats its link texts ("Share", a section's name)
    targets = []
    for anchor in anchors:
        words = _compact_text_of(anchor)
        if not words:
            continue
        found = words_found.get(words)
        if found is None:
            found = words_found[words] = words in article
        if not found:
            continue
        paragraph = anchor.getparent()
        while paragraph is not None and paragraph.tag not in _BLOCK_TAGS:
            paragraph = paragraph.getparent()
        if paragraph is None:
            continue
        before, paragraph_starts = _text_before(anchor, paragraph)
        after, paragraph_ends = _text_after(anchor, paragraph)
        context = before + words + after
        if paragraph_starts and paragraph_ends and len(context) < SHORT_PARAGRAPH_CHARS:
            lines = _article_lines(article_text) if lines is None else lines
            found = context in lines
        else:
            found = context in article
        if found:
            targets.append(anchor.get("href", "").strip())
    return [target for target in targets if target]


# --------------------------------------------------------------------------------------------------
# the opening paragraph

# trafilatura keeps the paragraphs of the container it chooses. An opening paragraph the page writes beside
# them is lost: text written straight into the container (a <p> the parser closed at a nested <div>;
# paragraphs separated by <br> only), or a standfirst in an element of its own next to the body's container
# ("article__summary", "story-lede", "c-standfirst") or in the heading that follows the headline (a deck in
# an unclassed <h2>). Such a paragraph is put back, before the kept text it precedes, when the page marks it
# as the article's opening: it is loose text in a container of paragraphs, an element whose class names it a
# lede/standfirst/summary, or a heading right after the headline's <h1>; the article's kept text follows it
# in its container (only wordless or dropped pieces between: a photo credit, a share bar); and nothing of the
# article but the headline comes before it in its container.

# A class name that makes an element the story's standfirst: one of these words, at the end of the name or
# before "-text"/"-paragraph" ("lead-image" and "summary-box" are not).
_LEDE_CLASS_RE = re.compile(
    r"(?:^|[\s_-])(?:lede|lead|standfirst|summary|dek|deck|intro|subtitle|subhead|subheadline|excerpt|abstract)"
    r"(?:[-_](?:text|paragraph|para|copy))?(?:\s|$)"
)
# Class or id names of what is not the story's own prose, even when it sits in its container.
_NOT_LEDE_RE = re.compile(
    r"caption|credit|byline|author|share|social|related|promo|advert|sponsor|newsletter|subscri|comment|signup"
    r"|popular|trending|teaser|recommend|breadcrumb",
    re.I,
)
# Cheap first test of a class name (the full pattern above is slower on the hundreds of names of a page).
_LEDE_CLASS_WORD_RE = re.compile("lede|lead|standfirst|summary|dek|intro|subtitle|subhead|excerpt|abstract")
# Text written straight into a container that holds paragraphs (<p> or <br>-separated).
_LOOSE_TEXT_XPATH = etree.XPath(
    "(//div|//section|//article|//main|//td|//center)[p or br]/text()[string-length(normalize-space(.)) >= 40]"
)
MIN_LEDE_CHARS = 80  # shorter is a label, a dateline or a headline, not a paragraph
MAX_LEDE_LINK_SHARE = 0.5  # of its characters in links: a list of links, not prose
# A piece of text (an element's or a text run's) shorter than this is not telling: "By X", "Advertisement".
MIN_PIECE_CHARS = 20
# How many pieces around a dropped paragraph are looked at for the article's text.
LEDE_NEIGHBOURS = 8
LEDE_PROBE_CHARS = 30
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_SUBHEADINGS = _HEADINGS - {"h1"}


@dataclass(frozen=True)
class _Lede:
    """A paragraph trafilatura left out, and the piece of the article's text that follows it."""

    text: str
    followed_by: str


def _pieces_after(node: HtmlElement, with_tail: bool = True) -> Iterator[str]:
    """The texts (compacted) that follow ``node``: its tail (``with_tail``), its following siblings' texts
    and tails, then the same after its container and after that one's container."""
    for _level in range(3):
        if with_tail:
            yield _compact(node.tail or "")
        following = node.getnext()
        while following is not None:
            yield _compact_text_of(following)
            yield _compact(following.tail or "")
            following = following.getnext()
        parent = node.getparent()
        if parent is None:
            return
        node, with_tail = parent, True


def _pieces_before(node: HtmlElement) -> Iterator[tuple[str, bool]]:
    """The texts (compacted) before ``node`` in its container, nearest first, each with whether it is a
    heading's."""
    previous = node.getprevious()
    while previous is not None:
        yield _compact(previous.tail or ""), False
        yield _compact_text_of(previous), previous.tag in _HEADINGS
        previous = previous.getprevious()
    parent = node.getparent()
    if parent is not None:
        yield _compact(parent.text or ""), False


def _loose_run(text_node: Any) -> tuple[str, float, Iterator[str], Iterator[tuple[str, bool]]]:
    """A text written straight into a container (``text_node``, lxml's "smart" string) with the inline
    elements after it up to a <br> or a block: its text, the share of it in links, and the pieces of text
    after and before it (``_pieces_after``, ``_pieces_before``)."""
    owner = text_node.getparent()  # the element whose tail the text is, or the container whose text it is
    pieces = [str(text_node)]
    linked = 0
    last = owner if text_node.is_tail else None  # the run's last node: its next sibling ends the run
    following = owner.getnext() if text_node.is_tail else (owner[0] if len(owner) else None)
    while following is not None and following.tag not in _BLOCK_TAGS and following.tag != "br":
        words = _text_of(following) if isinstance(following.tag, str) else ""
        if following.tag == "a" or (words and following.find(".//a") is not None):
            linked += len(collapse(words))
        pieces += [words, following.tail or ""]
        last = following
        following = following.getnext()
    text = collapse(" ".join(pieces))
    if last is not None:
        after = _pieces_after(last, with_tail=False)
    elif following is not None:
        after = itertools.chain(
            [_compact_text_of(following), _compact(following.tail or "")], _pieces_after(following, False)
        )
    else:
        after = _pieces_after(owner)
    before: Iterator[tuple[str, bool]] = iter(())
    if text_node.is_tail:
        before = itertools.chain([(_compact_text_of(owner), owner.tag in _HEADINGS)], _pieces_before(owner))
    return text, linked / max(1, len(text)), after, before


def _is_kept(piece: str, article: str) -> bool:
    return len(piece) >= MIN_PIECE_CHARS and piece[:LEDE_PROBE_CHARS] in article


def _opening_lede(
    text: str,
    pieces_after: Iterator[str],
    pieces_before: Iterator[tuple[str, bool]],
    article: str,
    title_key: str,
) -> _Lede | None:
    """The paragraph ``text`` as the article's dropped opening, or None (see the comment above)."""
    if len(text) < MIN_LEDE_CHARS:
        return None
    compact = _compact(text)
    if compact[:LEDE_PROBE_CHARS] in article or compact == title_key:
        return None
    followed_by = None
    for piece in itertools.islice((piece for piece in pieces_after if piece), LEDE_NEIGHBOURS):
        if _is_kept(piece, article):
            followed_by = piece[:LEDE_PROBE_CHARS]
            break
    if followed_by is None:
        return None
    for piece, is_heading in itertools.islice(((p, h) for p, h in pieces_before if p), LEDE_NEIGHBOURS):
        if not is_heading and piece != title_key and _is_kept(piece, article):
            return None  # the article's text starts before it: not its opening
    return _Lede(text, followed_by)


def _follows_headline(heading: HtmlElement, title_key: str) -> bool:
    """Whether ``heading`` comes right after the headline: an <h1> whose text is the story's title (compacted:
    ``title_key``), with nothing but comments and whitespace between them."""
    previous = heading.getprevious()
    while previous is not None and not isinstance(previous.tag, str):  # a comment ("<!--/HEADLINE-->")
        if (previous.tail or "").strip():
            return False
        previous = previous.getprevious()
    return (
        previous is not None
        and previous.tag == "h1"
        and not (previous.tail or "").strip()
        and bool(title_key)
        and _compact_text_of(previous) == title_key
    )


def _marked_ledes(tree: HtmlElement, title_key: str) -> Iterator[HtmlElement]:
    """The elements whose class names them a lede, standfirst or summary, or whose itemprop (schema.org)
    names them the article's description or abstract, and a heading right after the headline's <h1> (its
    deck: HTML's subheading). (XPath's contains() on each element's class took ten times as long as this
    walk; a case-insensitive pattern, four times.)"""
    for element in tree.iter(etree.Element):
        classes = (element.get("class") or "").lower()
        marked = bool(classes and _LEDE_CLASS_WORD_RE.search(classes) and _LEDE_CLASS_RE.search(classes))
        described = element.get("itemprop") in ("description", "abstract")
        if marked or described or (element.tag in _SUBHEADINGS and _follows_headline(element, title_key)):
            yield element


def _dropped_ledes(tree: HtmlElement, article_text: str, title: str | None) -> list[_Lede]:
    """The opening paragraphs the page marks as the article's that its text lacks, in document order."""
    article = _compact(article_text)
    title_key = _compact(title or "")
    ledes = []
    for element in _marked_ledes(tree, title_key):
        if element.tag == "h1" or _NOT_LEDE_RE.search(f"{element.get('class', '')} {element.get('id', '')}"):
            continue
        if element.find(".//li") is not None or len(element.findall(".//p")) > 1:
            continue  # a list of points or several paragraphs is a box, not the opening paragraph
        text = collapse(_text_of(element))
        linked = sum(len(collapse(_text_of(anchor))) for anchor in element.iter("a"))
        if linked > MAX_LEDE_LINK_SHARE * max(1, len(text)):
            continue
        lede = _opening_lede(text, _pieces_after(element), _pieces_before(element), article, title_key)
        if lede is not None:
            ledes.append(lede)
            article += _compact(lede.text)  # a paragraph marked twice (a box and its heading) goes in once
    for text_node in _LOOSE_TEXT_XPATH(tree):
        owner = text_node.getparent()
        container = owner.getparent() if text_node.is_tail else owner
        if container is None or _NOT_LEDE_RE.search(
            f"{container.get('class', '')} {container.get('id', '')}"
        ):
            continue
        text, link_share, after, before = _loose_run(text_node)
        if link_share <= MAX_LEDE_LINK_SHARE:
            lede = _opening_lede(text, after, before, article, title_key)
            if lede is not None:
                ledes.append(lede)
                article += _compact(lede.text)
    return ledes


def _with_ledes(article_text: str, ledes: list[_Lede]) -> str:
    """The article text with each dropped opening paragraph as a line before the line it precedes."""
    lines = article_text.split("\n")
    starts = [_compact(line) for line in lines]
    inserted: dict[int, list[str]] = {}
    for lede in ledes:
        # the line the following piece is on: where it starts, else the first that has it
        index = next((i for i, line in enumerate(starts) if line.startswith(lede.followed_by)), None)
        if index is None:
            index = next((i for i, line in enumerate(starts) if lede.followed_by in line), None)
        if index is not None:
            inserted.setdefault(index, []).append(lede.text)
    if not inserted:
        return article_text
    return "\n".join(line for i, text in enumerate(lines) for line in (*inserted.get(i, ()), text))


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
    title, title_method = _choose_title(tree, meta, ld_objects, url)
    dated = date_from_tree(tree, meta, ld_objects, url)
    declared_language = _declared_language(tree, meta, ld_objects)
    description = _description(meta, ld_objects)
    canonical_url = _canonical_url(tree, meta, url)
    seen_before_pruning = before_pruning(tree) if before_pruning is not None else None
    # Last, because it prunes the tree the metadata was read from.
    _strip_page_chrome(tree)
    anchors = _page_anchors(tree) if include_links else []
    document, _text_method = _article_document(tree)
    text = tidy_text(document.text) if document is not None else ""
    if text:
        text = _with_ledes(text, _dropped_ledes(tree, text, title))
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
    )
    return StoryDocument(story, _article_link_targets(anchors, text), seen_before_pruning)


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
