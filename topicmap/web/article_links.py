"""The links of an article's text: of a page's links, those whose words and surroundings are in the text
``topicmap.web.article_text`` extracted, so a crawler follows the article's links and not the page's menus."""

from __future__ import annotations

import logging

from lxml.html import (
    HtmlElement,
)

from topicmap.web.page import BLOCK_TAGS, compact, compact_text_of

log = logging.getLogger(__name__)

# A link is the article's when its words and LINK_CONTEXT_CHARS characters (not counting whitespace) on
# each side, as its paragraph writes them, are in the article text. A paragraph shorter than
# SHORT_PARAGRAPH_CHARS ("Home", "Sports") must be a whole line of it: such words occur in any article.
LINK_CONTEXT_CHARS = 20
SHORT_PARAGRAPH_CHARS = 24


def _article_lines(article_text: str) -> set[str]:
    """The article's lines, list items (without their marker) and table cells, compacted."""
    lines: set[str] = set()
    for line in article_text.split("\n"):
        lines.add(compact(line))
        if line.startswith("- "):
            lines.add(compact(line[2:]))
        elif line.startswith("|"):
            lines.update(compact(cell) for cell in line.split("|"))
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
            found = [compact(node.text or "")]
        else:
            node = previous
            found = [compact(previous.tail or ""), compact_text_of(previous)]
        for piece in found:
            pieces.append(piece)
            size += len(piece)
    text = "".join(reversed(pieces))
    return text[-LINK_CONTEXT_CHARS:], node is paragraph and size <= LINK_CONTEXT_CHARS


def _text_after(anchor: HtmlElement, paragraph: HtmlElement) -> tuple[str, bool]:
    """Up to LINK_CONTEXT_CHARS characters (compacted) after the anchor in its paragraph, and whether that
    is all of them."""
    pieces = [compact(anchor.tail or "")]
    size = len(pieces[0])
    node = anchor
    while size < LINK_CONTEXT_CHARS:
        following = node.getnext()
        if following is None:
            node = node.getparent()
            if node is paragraph:
                return "".join(pieces), True
            found = [compact(node.tail or "")]
        else:
            node = following
            found = [compact_text_of(following), compact(following.tail or "")]
        for piece in found:
            pieces.append(piece)
            size += len(piece)
    return "".join(pieces)[:LINK_CONTEXT_CHARS], False


def page_anchors(tree: HtmlElement) -> list[HtmlElement]:
    """The page's <a href> elements, in document order: taken after the page chrome is deleted, before
    trafilatura runs (read after it: ``article_link_targets``)."""
    return [anchor for anchor in tree.iter("a") if anchor.get("href")]


def article_link_targets(anchors: list[HtmlElement], article_text: str) -> list[str]:
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
    article = compact(article_text)
    lines: set[str] | None = None  # built for the first short paragraph
    words_found: dict[str, bool] = {}  # a page repeats its link texts ("Share", a section's name)
    targets = []
    for anchor in anchors:
        words = compact_text_of(anchor)
        if not words:
            continue
        found = words_found.get(words)
        if found is None:
            found = words_found[words] = words in article
        if not found:
            continue
        paragraph = anchor.getparent()
        while paragraph is not None and paragraph.tag not in BLOCK_TAGS:
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
