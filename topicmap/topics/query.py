"""Boolean topic queries in the Lucene/Solr syntax Media Cloud users write, matched against story text.

Language
--------
- ``term``: a whole word, case-insensitive (casefolded), with a Unicode word boundary on BOTH sides:
  ``cat`` matches "Cat!" but not "category". A query word that the tokenizer splits
  (``covid-19``, ``d'ivoire``, ``9/11``) is matched as the phrase of its parts.
- ``word*``: trailing wildcard, opens the right boundary only (``cat*`` matches "category").
  A leading (``*foo``) or inner (``fo*o``) wildcard, ``?`` and ``/regex/`` are errors (a ``/`` inside a
  word is punctuation). A bare ``*`` or ``*:*`` matches everything.
- ``"a phrase"``: the words adjacent and in order (punctuation between them is ignored, as Lucene's
  tokenizer does). A trailing ``*`` on a word inside a phrase is a prefix (``{!complexphrase}`` style).
- ``"a b"~N`` (proximity): all words of the phrase occur, in ANY order, with at most N other words
  inside the span that holds them (the span is at most ``k + N`` words for a k-word phrase). For two
  words this is Lucene's slop when they appear in order ("a x x b" needs ~2); unlike Lucene's slop the
  reversed order costs nothing extra. ``~0`` means the words are adjacent in any order.
- ``AND`` ``OR`` ``NOT`` (any case) and ``&&`` ``||`` ``!``; parentheses; AND binds tighter than OR
  (``a OR b AND c`` = ``a OR (b AND c)``, the usual boolean reading; Lucene's classic parser would make
  it ``a +b +c``).
- Juxtaposed clauses are OR-ed (Media Cloud's rule: ``a b`` = ``a OR b``).
- ``+x`` / ``-x`` / ``NOT x`` inside a list of OR-ed clauses follow Lucene: ``-x`` and ``NOT x`` prohibit
  x for the whole list (``a b -c`` = ``(a OR b) AND NOT c``; so a NOT after a clause is an implicit AND),
  and when any clause is ``+required`` the plain (optional) clauses of that list no longer affect matching
  (``a +b`` matches exactly what ``b`` matches; a warning says so).
- A query or group with only prohibited clauses (``NOT foo``, ``-a -b``) means "everything except"
  (plain Lucene matches nothing for a purely negative group, never what a topic author wants).
- ``title:x`` matches only the title, ``text:x`` only the body; ``field:(...)`` applies to a group.
  Other fields (``media_id:``, ``tags_id_media:``, ``language:``, ...) and ranges ``field:[a TO b]`` are
  accepted, dropped from the query (as Media Cloud does) and reported in ``TopicQuery.warnings``.
  ``{!...}`` local params are skipped, ``^boost`` is accepted and ignored, ``term~`` (fuzzy) is matched
  exactly with a warning.
- Scripts written without spaces between words (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
  Myanmar, Yi, ...) have no word boundaries: each such character is its own token, so ``中国`` matches
  inside "中国人" (substring match), as Lucene's CJK unigram analysis would.

Folding: NFKC, casefold (so ß = ss, full-width letters = ASCII), then Turkish İ/ı are folded to i,
because uppercase Turkish text ("KIRMIZI") cannot be told apart from dotted i anyway. Invisible characters
are removed (soft hyphen, zero-width space and joiners, bidi marks, BOM: the extracted text drops them, the
title keeps them). Combining marks are word characters (Devanagari, Arabic vowel signs). Accents are
asymmetric, as people type them: a word written without accents also matches accented text (``cote``
matches "Côte", ``resume`` matches "résumé"), a word written with accents matches only that spelling
(``résumé`` does not match "resume"). Only Latin/Greek/Cyrillic diacritics (U+0300-U+036F) count.

Fields of a story (``TopicQuery.matches_story``): unfielded clauses look in the title, text, URL and
description; each word or phrase is found within one field, and the boolean operators combine across
fields. ``TopicQuery.matches(text)`` is the same with only a text (``title:`` clauses match nothing).

Raw pages (``TopicQuery.may_match``, the spider's test before extraction): a relaxed form of the query that is
true on a page whenever the query can be true on a story extracted from it, evaluated on the page as written,
then on views of it that hold every word of its story (character references decoded, tags that split words
removed, <meta> and JSON-LD strings). NOT clauses, fields and word order are decided on the story only.

Better than Media Cloud: Media Cloud turns the query into one regex; it drops every NOT
(``foo AND NOT bar`` matched texts with bar), builds AND as both-order alternation (exponential in the
number of operands), has no right word boundary (``cat`` matched "category"), ignores the proximity
distance and reads only the first 1 MiB. Here the query is parsed into a tree evaluated against the
casefolded text: every atom is a small regex starting with its literal (so the C scanner finds the
candidates) whose Unicode boundaries are checked in Python, a precomputed set of required literals rejects
most texts with a few substring tests, and proximity counts words only inside candidate windows.

Modules: this one is the public API (``parse``, ``TopicQuery``) and its parse cache; ``query_parser`` reads a
query (bounds, lexer, parser), ``query_tree`` is the tree it builds and evaluates, ``query_text`` folds and
tokenizes text for both, and ``query_prefilter`` relaxes the tree for raw pages.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from topicmap.topics.query_parser import (
    MAX_QUERY_CHARS,
    MAX_QUERY_DEPTH,
    MAX_QUERY_TERMS,
    Lexer,
    Parser,
    QuerySyntaxError,
)
from topicmap.topics.query_prefilter import page_views, relax
from topicmap.topics.query_text import coerce_text, fold
from topicmap.topics.query_tree import (
    FIELDS_OF_A_STORY,
    FieldText,
    Node,
    PrefilterLiteral,
    Story,
    has_match_all,
    selectivity,
)

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_DEPTH", "MAX_QUERY_TERMS", "QuerySyntaxError", "TopicQuery", "parse"]


def _required_literals(root: Node) -> tuple[tuple[PrefilterLiteral, ...], ...]:
    """The clauses of literals every match of ``root`` contains, most selective first: a text lacking a long
    literal is rejected after one substring test."""
    clauses = {clause for clause in root.required_literals() if clause}
    return tuple(
        tuple(sorted(clause, key=lambda literal: (-len(literal[1]), literal)))
        for clause in sorted(clauses, key=lambda c: (-selectivity(c), sorted(c)))
    )


def _has_required_literals(
    required: Sequence[Sequence[PrefilterLiteral]], fields: Sequence[FieldText]
) -> bool:
    """Cheap necessary condition: each clause has a literal in one of the fields (substring tests)."""
    for clause in required:
        # An unaccented literal found in the folded view is in the plain view too: try the cheap one first.
        if not any(
            literal in text.folded or (plain and literal in text.view(True))
            for text in fields
            for plain, literal in clause
        ):
            return False
    return True


class TopicQuery:
    """A parsed topic query. Immutable; reuse one instance for many stories."""

    __slots__ = ("source", "warnings", "_root", "_required", "_relaxed", "_relaxed_required")

    def __init__(self, source: str, root: Node, warnings: Sequence[str]) -> None:
        self.source = source
        self.warnings: tuple[str, ...] = tuple(warnings)
        self._root = root
        self._required = _required_literals(root)
        # The raw-page prefilter's query (``may_match``), built once.
        self._relaxed = relax(root)
        self._relaxed_required = _required_literals(self._relaxed) if isinstance(self._relaxed, Node) else ()

    def __str__(self) -> str:
        return self._root.render("top")

    def __repr__(self) -> str:
        return f"TopicQuery({self.source!r})"

    def matches(self, text: str) -> bool:
        """Does the whole story text match? ``title:`` clauses match nothing here (there is no title)."""
        value = coerce_text(text)
        if value is None:
            return self._root.evaluate(Story({}))
        return self._matches_text(FieldText(fold(value)))

    def _matches_text(self, text: FieldText) -> bool:
        if not _has_required_literals(self._required, (text,)):
            return False
        return self._root.evaluate(Story({"text": text}))

    def may_match(self, text: str | bytes | None, *, urls: Iterable[str | None] = ()) -> bool:
        """Could a story extracted from this raw page (fetched from ``urls``) match? The spider's cheap test
        before extraction: False only when no story the page can give matches, so no relevant story is lost.

        The test is a relaxed form of the query (built once, see ``topicmap.topics.query_prefilter.relax``): a NOT clause is not decided (a
        word the story lacks may be on its page: "recipe" in a navigation link), ``title:``/``text:`` look
        anywhere, a phrase or proximity clause needs only its words. The page is first taken as written,
        with the URLs (which are part of the story): most relevant pages have the query's words in lower
        case somewhere, and are accepted without a copy of the page. Only then is the page read as the
        extractor reads it (``query_prefilter.page_views``: character references decoded, tags that split words taken
        out, the JSON-LD strings), fully folded as ``matches`` folds a story: a rejection there is sound.
        """
        value = coerce_text(text) or ""
        relaxed = self._relaxed
        if isinstance(relaxed, bool):
            return relaxed
        url_fields = [FieldText(fold(url)) for url in dict.fromkeys(urls) if url]
        if self._relaxed_matches([FieldText(value, plain=value), *url_fields]):
            return True
        views = [FieldText(fold(view)) for view in page_views(value) if view]
        return self._relaxed_matches([*views, *url_fields])

    def _relaxed_matches(self, fields: Sequence[FieldText]) -> bool:
        assert isinstance(self._relaxed, Node)
        if not _has_required_literals(self._relaxed_required, fields):
            return False
        return self._relaxed.evaluate(Story({str(index): text for index, text in enumerate(fields)}))

    def matches_story(
        self,
        title: str | None,
        text: str | None,
        url: str | None = None,
        description: str | None = None,
    ) -> bool:
        """Unfielded clauses match in any given field, ``title:`` only the title, ``text:`` only the text.

        Each word or phrase is looked up field by field (a phrase never spans two fields), while the boolean
        operators combine across fields: ``obama AND kenya`` matches a title with one and a body with the
        other (Media Cloud tried its whole regex on each field separately, which missed such stories).
        """
        values = {"title": title, "text": text, "url": url, "description": description}
        by_name = {}
        for name in FIELDS_OF_A_STORY:
            value = coerce_text(values[name])
            if value is not None:
                by_name[name] = FieldText(fold(value))
        if not _has_required_literals(self._required, tuple(by_name.values())):
            return False
        return self._root.evaluate(Story(by_name))

    def matches_any(self, texts: Iterable[str]) -> bool:
        """True when the query matches one of the texts on its own (Media Cloud's per-field test)."""
        return any(self.matches(text) for text in texts)


#: parsed queries (and refused ones) are kept by their text, the least recently used dropped first, up to this
#: many characters of queries together: a parsed query takes about 120 bytes a character (8 MB for 10,000
#: words), so the cache stays near 120 MB whatever it is given. A topics file whose queries fit in it
#: (``topicmap.topics.declarations.MAX_FILE_QUERY_CHARS``) is read on every tick without parsing one twice.
PARSE_CACHE_CHARS = 1_000_000


def parse(q: str) -> TopicQuery:
    """Parse a query; raises QuerySyntaxError (with ``position``) when it is malformed, over a size bound
    (``MAX_QUERY_CHARS``, ``MAX_QUERY_TERMS``, ``MAX_QUERY_DEPTH``) or only excludes (``NOT foo``, ``-foo``: it
    would match every story without foo, so a topic would name nothing).

    The outcome is kept by the query's text, a refusal too: a query seen before costs a dictionary lookup.
    """
    if not isinstance(q, str):
        raise TypeError(f"query must be a str, not {type(q).__name__}")
    outcome = _parsed.get(q)
    if outcome is None:
        try:
            outcome = _parse(q)
        except QuerySyntaxError as exc:
            outcome = exc.with_traceback(None)  # kept without the parser's frames (tokens, a half-built tree)
        _parsed.put(q, outcome)
    if isinstance(outcome, QuerySyntaxError):
        # a new instance each time: raising the kept one would chain every caller's traceback onto it
        raise QuerySyntaxError(outcome.message, outcome.query, outcome.position)
    return outcome


class _ParseCache:
    """Outcomes of ``parse`` by query text, least recently used dropped first beyond ``limit`` characters of
    queries. Sensors and runs may parse from several threads: two may parse one text at once, harmlessly."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._outcomes: OrderedDict[str, TopicQuery | QuerySyntaxError] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, q: str) -> TopicQuery | QuerySyntaxError | None:
        with self._lock:
            outcome = self._outcomes.get(q)
            if outcome is not None:
                self._outcomes.move_to_end(q)
            return outcome

    def put(self, q: str, outcome: TopicQuery | QuerySyntaxError) -> None:
        if len(q) > MAX_QUERY_CHARS:
            return  # refused at once: not worth keeping its text
        with self._lock:
            if q not in self._outcomes:
                self._outcomes[q] = outcome
                self._chars += len(q)
            while self._chars > self.limit:
                dropped, _ = self._outcomes.popitem(last=False)
                self._chars -= len(dropped)


_parsed = _ParseCache(PARSE_CACHE_CHARS)


def _excerpt(text: str, limit: int = 80) -> str:
    """A query as messages quote it: whole when short, its start otherwise (a message is not a copy of it)."""
    return repr(text) if len(text) <= limit else f"{text[: limit - 3]!r}..."


def _parse(q: str) -> TopicQuery:
    if len(q) > MAX_QUERY_CHARS:
        raise QuerySyntaxError(
            f"the query is {len(q):,} characters long, more than {MAX_QUERY_CHARS:,}", q, MAX_QUERY_CHARS
        )
    warnings: list[str] = []
    tokens = Lexer(q, warnings).run()
    root = Parser(q, tokens, warnings).parse()
    if root.evaluate(Story({})) and not has_match_all(root):
        # Solr would quietly turn "NOT foo" into "*:* NOT foo" (every story without foo): a topic spidered
        # with it follows every link. A query that matches a story with no words names nothing; "*:*"
        # written out is the explicit way to ask for everything.
        position = tokens[0].position
        raise QuerySyntaxError(
            f"query {_excerpt(q)} only excludes (it matches a story with no words at all, e.g. 'NOT foo' or "
            "'-foo'): a topic must name what it is about; add the words it is about, e.g. 'climate AND NOT foo'",
            q,
            position,
        )
    return TopicQuery(q, root, warnings)
