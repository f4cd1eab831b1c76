"""An article's opening paragraph, when the text extractor dropped it: found beside the headline or by its
class, and put back before the text."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lxml import etree
from lxml.html import (
    HtmlElement,
)

from topicmap.web.page import BLOCK_TAGS, collapse, compact, compact_text_of, text_of

log = logging.getLogger(__name__)

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
            yield compact(node.tail or "")
        following = node.getnext()
        while following is not None:
            yield compact_text_of(following)
            yield compact(following.tail or "")
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
        yield compact(previous.tail or ""), False
        yield compact_text_of(previous), previous.tag in _HEADINGS
        previous = previous.getprevious()
    parent = node.getparent()
    if parent is not None:
        yield compact(parent.text or ""), False


def _loose_run(text_node: Any) -> tuple[str, float, Iterator[str], Iterator[tuple[str, bool]]]:
    """A text written straight into a container (``text_node``, lxml's "smart" string) with the inline
    elements after it up to a <br> or a block: its text, the share of it in links, and the pieces of text
    after and before it (``_pieces_after``, ``_pieces_before``)."""
    owner = text_node.getparent()  # the element whose tail the text is, or the container whose text it is
    pieces = [str(text_node)]
    linked = 0
    last = owner if text_node.is_tail else None  # the run's last node: its next sibling ends the run
    following = owner.getnext() if text_node.is_tail else (owner[0] if len(owner) else None)
    while following is not None and following.tag not in BLOCK_TAGS and following.tag != "br":
        words = text_of(following) if isinstance(following.tag, str) else ""
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
            [compact_text_of(following), compact(following.tail or "")], _pieces_after(following, False)
        )
    else:
        after = _pieces_after(owner)
    before: Iterator[tuple[str, bool]] = iter(())
    if text_node.is_tail:
        before = itertools.chain([(compact_text_of(owner), owner.tag in _HEADINGS)], _pieces_before(owner))
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
    key = compact(text)
    if key[:LEDE_PROBE_CHARS] in article or key == title_key:
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
        and compact_text_of(previous) == title_key
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


def dropped_ledes(tree: HtmlElement, article_text: str, title: str | None) -> list[_Lede]:
    """The opening paragraphs the page marks as the article's that its text lacks, in document order."""
    article = compact(article_text)
    title_key = compact(title or "")
    ledes = []
    for element in _marked_ledes(tree, title_key):
        if element.tag == "h1" or _NOT_LEDE_RE.search(f"{element.get('class', '')} {element.get('id', '')}"):
            continue
        if element.find(".//li") is not None or len(element.findall(".//p")) > 1:
            continue  # a list of points or several paragraphs is a box, not the opening paragraph
        text = collapse(text_of(element))
        linked = sum(len(collapse(text_of(anchor))) for anchor in element.iter("a"))
        if linked > MAX_LEDE_LINK_SHARE * max(1, len(text)):
            continue
        lede = _opening_lede(text, _pieces_after(element), _pieces_before(element), article, title_key)
        if lede is not None:
            ledes.append(lede)
            article += compact(lede.text)  # a paragraph marked twice (a box and its heading) goes in once
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
                article += compact(lede.text)
    return ledes


def with_ledes(article_text: str, ledes: list[_Lede]) -> str:
    """The article text with each dropped opening paragraph as a line before the line it precedes."""
    lines = article_text.split("\n")
    starts = [compact(line) for line in lines]
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
