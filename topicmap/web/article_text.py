"""An article's text: trafilatura, in the mode and with the settings that scored best on the real-page set
(``benchmarks/eval_extraction.py``, docs/extraction.md), run once on the page tree ``topicmap.web.extract``
parsed, and tidied."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trafilatura
import trafilatura.core
from lxml import etree
from lxml.html import (
    HtmlElement,
)
from trafilatura.settings import Extractor
from trafilatura.xml import xmltotxt

log = logging.getLogger(__name__)

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
    article's links are read beside the text instead (``topicmap.web.article_links.article_link_targets``). No URL: trafilatura uses it
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


def strip_page_chrome(tree: HtmlElement) -> None:
    """Delete what is never article text (``_NEVER_ARTICLE_TEXT``), tails kept, in place."""
    etree.strip_elements(tree, *_NEVER_ARTICLE_TEXT, with_tail=False)


def article_document(tree: HtmlElement) -> tuple[_Article | None, str]:
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
