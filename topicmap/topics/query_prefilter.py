"""The raw-page prefilter (``TopicQuery.may_match``): a relaxed query, and the views of a page that hold every word of
its story."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence

from topicmap.topics.query_tree import And, Atom, MatchAll, Node, Not, Or, make_and, make_or

#: A relaxed query: a node, or True (may hold on any page) or False (holds on no story at all).
_Relaxed = Node | bool


def relax(node: Node, negated: bool = False) -> _Relaxed:
    """An upper bound of ``node`` (of ``NOT node`` when ``negated``) that can be decided on a raw page.

    It is true on a page whenever ``node`` could be true on a story extracted from that page: it is
    monotone (true stays true when the page holds more words), so it is decided on a page that holds every
    word of the story and more. Negation is pushed down to the atoms (De Morgan: NOT (a AND NOT b) is
    NOT a OR b, and relaxes to True OR b = True; NOT (NOT a AND NOT b) is a OR b). A negated atom is True: a
    word absent from the story may well be on its page (a navigation link, an image URL template). An atom
    becomes the AND of its words, unfielded: the page does not say which of its parts is the title, and
    tags, attributes and paragraph breaks sit between the words of a phrase on the page and not in the
    story. Wildcards stay (a prefix of a story's word is a prefix of the same word on the page).
    """
    if isinstance(node, Not):
        return relax(node.child, not negated)
    if isinstance(node, And | Or):
        parts = [relax(child, negated) for child in node.children]
        # NOT (a AND b) = NOT a OR NOT b, NOT (a OR b) = NOT a AND NOT b
        return _relaxed_and(parts) if isinstance(node, And) != negated else _relaxed_or(parts)
    if isinstance(node, MatchAll):
        # *:* holds on every story, NOT *:* on none; title:* and text:* depend on what the story keeps
        return not negated or node.field is not None
    assert isinstance(node, Atom)
    if negated:
        return True
    if node.field is None and len(node.units) == 1 and node.slop is None:
        return node  # a word already is its own relaxation: no second pattern
    words = dict.fromkeys(node.units)  # "a a b"~2 needs a twice in the story; once is the bound
    return _relaxed_and([Atom(None, (unit,), None, node.plain) for unit in words])


def _relaxed_and(parts: Sequence[_Relaxed]) -> _Relaxed:
    if any(part is False for part in parts):
        return False
    nodes = [part for part in parts if part is not True]
    return make_and(nodes) if nodes else True


def _relaxed_or(parts: Sequence[_Relaxed]) -> _Relaxed:
    if any(part is True for part in parts):
        return True
    nodes = [part for part in parts if part is not False]
    return make_or(nodes) if nodes else False


# Elements whose content is not markup: a script or style holds no story text (only JSON-LD, read below,
# does); a title's content is text, what looks like a tag in it included. The lookahead keeps custom
# elements such as <style-guide>. Each ends at its closing tag, or at the end of the page, as an HTML parser
# reads it.
_RAW_TEXT_ELEMENT = re.compile(r"<(script|style|title)(?=[\s/>])([^<>]*)>", re.IGNORECASE)
_CLOSING_TAG = {name: re.compile(f"</{name}", re.IGNORECASE) for name in ("script", "style", "title")}
# A start or end tag, comment or declaration; "[^<>]" keeps the scan linear on pages with stray '<'.
_TAG = re.compile(r"<[a-zA-Z/!?][^<>]*>")
_META_TAG = re.compile(r"<meta\b[^<>]*>", re.IGNORECASE)
#: The extractor takes a page with no '<' in its first this many characters for plain text: all of it is the
#: story's text, markup included (Media Cloud's rule; ``topicmap.web.extract.PLAIN_TEXT_PROBE_CHARS``, which
#: this module does not import: it loads trafilatura).
_PLAIN_TEXT_PROBE_CHARS = 1000


def page_views(page: str) -> list[str]:
    """Texts that together hold every word of any story extracted from ``page`` (title, description, text).

    A word of the story is on the page as written unless the page spells it differently; the views undo
    the ways it does, as the extractor reads the page:

    - its text without tags, character references decoded (``caf&eacute;``, ``&#8217;``): once with a space
      for each tag (words in separate elements), once joined (``Pre<b>sident</b>`` is "President");
    - its <title>, its <meta> tags (og:title, description) decoded once and, as the description is, twice
      (``&amp;eacute;`` is an é there), and every string of its JSON-LD (headline, description), as
      written and decoded.

    The invisible characters the extracted text drops (zero-width joiners, soft hyphens) are removed by
    folding. Scripts, styles and the attributes of other tags, most of a news page's characters, are left
    out: the views are a few tenths of the page, and folding them costs less than folding the page. A page
    the extractor reads as plain text is its own view.
    """
    if "<" not in page[:_PLAIN_TEXT_PROBE_CHARS]:
        return [page]
    markup: list[str] = []
    views: list[str] = []
    position = 0
    while (opening := _RAW_TEXT_ELEMENT.search(page, position)) is not None:
        name = opening.group(1).lower()
        closing = _CLOSING_TAG[name].search(page, opening.end())
        end = closing.start() if closing is not None else len(page)
        content = page[opening.end() : end]
        if name == "title":
            views.append(html.unescape(content))
            markup.append(page[position:end])
        else:
            # the content goes, its tags stay: text on both sides of a script is still joined
            markup.append(page[position : opening.end()])
            if "ld+json" in opening.group(2).lower():
                strings = "\n".join(_json_strings(content))
                views.extend((strings, html.unescape(strings)) if "&" in strings else (strings,))
        position = end
    markup.append(page[position:])
    without_scripts = "".join(markup)
    texts = _TAG.split(without_scripts)
    views.extend((html.unescape(" ".join(texts)), html.unescape("".join(texts))))
    meta = html.unescape("\n".join(_META_TAG.findall(without_scripts)))
    views.extend((meta, html.unescape(meta)) if "&" in meta else (meta,))
    return views


def _json_strings(text: str) -> list[str]:
    """Every string value of a JSON document, or nothing if it is not valid JSON (then the extractor reads
    nothing from it either)."""
    try:
        data = json.loads(text.strip(), strict=False)
    except (ValueError, RecursionError):
        return []
    strings: list[str] = []
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return strings
