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
"""

from __future__ import annotations

import functools
import html
import json
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_DEPTH", "MAX_QUERY_TERMS", "QuerySyntaxError", "TopicQuery", "parse"]

# Bounds on what a query may be, so that any text given to ``parse`` costs a bounded time and memory and never
# exhausts the stack (the parser, and the tree's evaluation, rendering and relaxation, are recursive). Each is
# far above what a topic needs: a list of a few thousand names fits.
#: characters in a query
MAX_QUERY_CHARS = 100_000
#: words in a query, each word of a phrase counted (every word becomes a compiled pattern: ~0.1 ms each)
MAX_QUERY_TERMS = 10_000
#: parentheses and prefix operators (NOT, !, -, +) nested inside one another; the tree is then at most about
#: three nodes deep per level (AND, OR, NOT), a few hundred Python frames where the limit is a thousand
MAX_QUERY_DEPTH = 32


class QuerySyntaxError(ValueError):
    """A query that cannot be parsed; ``position`` is a 0-based character offset into ``query``."""

    def __init__(self, message: str, query: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.query = query
        self.position = position

    def __reduce__(self):  # keep it picklable across process boundaries (multiprocess executors)
        return (QuerySyntaxError, (self.message, self.query, self.position))


# --------------------------------------------------------------------------------------------------
# Character classes and folding
# --------------------------------------------------------------------------------------------------

# Scripts written without spaces between words: every character is a token of its own and terms in them
# are matched without word boundaries. Hangul is spaced, but particles attach to nouns (서울에서), so a
# substring match is what a Korean reader expects.
_LOGOGRAM_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3038, 0x303C),
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x3190, 0x31FF),  # Kanbun, Bopomofo ext., CJK strokes, Katakana ext.
    (0x3400, 0x4DBF),  # CJK ext. A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA000, 0xA4CF),  # Yi
    (0xA960, 0xA97F),  # Hangul Jamo ext. A
    (0xA9E0, 0xA9FF),  # Myanmar ext. B
    (0xAA60, 0xAA7F),  # Myanmar ext. A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo ext. B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana (NFKC maps them anyway)
    (0x16FE0, 0x16FFF),  # ideographic symbols
    (0x17000, 0x18D8F),  # Tangut, Khitan
    (0x1B000, 0x1B2FF),  # Kana supplement/extensions, Nushu
    (0x20000, 0x323AF),  # CJK ext. B-H, compatibility supplement
)

# Kinds of characters in folded text. Tokens are runs of WORD characters, or single LOGOGRAM characters.
_SEPARATOR, _WORD, _LOGOGRAM = 0, 1, 2


@functools.lru_cache(maxsize=8192)
def _char_kind(char: str) -> int:
    """Word = Python's \\w or a combining mark (Devanagari vowel signs are marks), minus logograms.

    Checked in Python rather than in the regexes: python's ``re`` has no \\p{M} or script classes, and a
    character class listing them costs ~10 ms of ``re.compile`` per clause (big queries have hundreds).
    """
    code = ord(char)
    if any(low <= code <= high for low, high in _LOGOGRAM_RANGES):
        return _LOGOGRAM
    if char.isalnum() or char == "_" or unicodedata.category(char)[0] == "M":
        return _WORD
    return _SEPARATOR


def _is_word(char: str) -> bool:
    if char < "\x80":
        return char.isalnum() or char == "_"
    return _char_kind(char) == _WORD


def _is_logogram(char: str) -> bool:
    return char >= "\x80" and _char_kind(char) == _LOGOGRAM


_ASCII_TOKEN = re.compile(r"[a-z0-9_]+")  # tokens of folded ASCII text


def _count_tokens(view: str, start: int, end: int, limit: int) -> int:
    """Number of tokens in view[start:end], counting no further than limit + 1."""
    count = 0
    if view.isascii():
        for _ in _ASCII_TOKEN.finditer(view, start, end):
            count += 1
            if count > limit:
                break
        return count
    in_word = False
    for char in view[start:end]:
        kind = _WORD if _is_word(char) else _LOGOGRAM if _is_logogram(char) else _SEPARATOR
        if kind == _LOGOGRAM or (kind == _WORD and not in_word):
            count += 1
            if count > limit:
                break
        in_word = kind == _WORD
    return count


# Invisible characters removed by folding: the format characters of the Basic Multilingual Plane (soft hyphen,
# zero-width space/non-joiner/joiner, bidi marks and isolates, word joiner, BOM, Arabic number signs...) and
# the C1 controls. The story text never has them (trafilatura drops every non-printable character, so
# "تامین&zwnj;مالی" on the page is "تامینمالی" in the text) while the title and description keep them: removed
# here, a query word matches either spelling. Left out, as no news text has them inside a word: C0 controls
# (invalid in HTML; looking for them would double the cost of folding ASCII) and the astral format
# characters (emoji tag sequences, Egyptian hieroglyph and musical notation controls), whose ranges would
# make this scan four times slower. tests/test_query.py checks the class against the Unicode database.
_INVISIBLE = re.compile(
    "[\x80-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _fold(text: str) -> str:
    """Casefold for matching; the same function is applied to query words and to story text."""
    if text.isascii():
        return text.lower()  # casefold == lower on ASCII, NFKC is the identity there and nothing is invisible
    # NFKC returns at once when its quick check passes, and is slow (~25 ns/char) when it does not. The no-break
    # space and the ellipsis are what most often fail it on news pages: replacing them first with what NFKC
    # maps them to (they never compose with a neighbour) lets the quick check pass on most pages.
    if "\xa0" in text:
        text = text.replace("\xa0", " ")
    if "\u2026" in text:
        text = text.replace("\u2026", "...")
    folded = unicodedata.normalize("NFKC", text).casefold()
    if "\u0307" in folded:  # 'İ'.casefold() == 'i' + combining dot above
        folded = folded.replace("i\u0307", "i")
    if "ı" in folded:
        folded = folded.replace("ı", "i")
    if _INVISIBLE.search(folded) is not None:
        folded = _INVISIBLE.sub("", folded)
    return folded


_ACCENTED_UP_TO = 0x2000  # Latin, Greek, Cyrillic and their extended blocks all lie below U+2000
#: the table value of a combining accent: dropped (numpy loads with the first accented text, not on import)
_DROP = 0xFFFFFFFF
#: the only code points the accent table changes (most pages in English have none: skip the table)
_MAY_BE_ACCENTED = re.compile(f"[\\u00c0-\\u{_ACCENTED_UP_TO - 1:04x}]")


@functools.cache
def _accent_table() -> np.ndarray:
    """BMP code point -> code point without Latin/Greek/Cyrillic diacritics; combining accents -> _DROP."""
    import numpy as np

    table = np.arange(0x10000, dtype=np.uint32)
    for code in range(0xC0, _ACCENTED_UP_TO):
        decomposed = unicodedata.normalize("NFD", chr(code))
        if len(decomposed) > 1 and all(0x300 <= ord(mark) <= 0x36F for mark in decomposed[1:]):
            table[code] = ord(decomposed[0])
    table[0x300:0x370] = _DROP
    return table


def _strip_accents(folded: str) -> str:
    """Drop Latin/Greek/Cyrillic diacritics (côte -> cote); other scripts' marks are letters, kept.

    A vectorised table lookup over the code points: NFD + regex removal + NFC is ~5x slower on a story.
    """
    if folded.isascii() or not _MAY_BE_ACCENTED.search(folded):
        return folded
    import numpy as np

    codes = np.frombuffer(folded.encode("utf-32-le"), dtype=np.uint32)
    table = _accent_table()
    if codes.max() < len(table):
        mapped = table.take(codes)
    else:  # astral characters (CJK ext. B, emoji) have no accents: keep them as they are
        bmp = codes < len(table)
        mapped = np.where(bmp, table.take(np.where(bmp, codes, 0)), codes)
    if (mapped == _DROP).any():
        mapped = mapped[mapped != _DROP]
    return mapped.tobytes().decode("utf-32-le")


def _tokenize_word(word: str) -> list[str]:
    """Split a folded query word into tokens exactly as story text is split (runs, or single logograms)."""
    tokens: list[str] = []
    run: list[str] = []
    for char in word:
        if _is_word(char):
            run.append(char)
            continue
        if run:
            tokens.append("".join(run))
            run = []
        if _is_logogram(char):
            tokens.append(char)
    if run:
        tokens.append("".join(run))
    return tokens


def _coerce_text(value: str | bytes | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    raise TypeError(f"story text must be str, bytes or None, not {type(value).__name__}")


# --------------------------------------------------------------------------------------------------
# Evaluation context
# --------------------------------------------------------------------------------------------------

_FIELDS_OF_A_STORY = ("title", "text", "url", "description")
_MATCHED_FIELDS = frozenset({"title", "text"})


class _FieldText:
    """One folded field of a story, in two views: as folded, and without accents ("plain", for query words
    typed without accents). The plain view is computed only when a clause asks for it."""

    __slots__ = ("folded", "_plain")

    def __init__(self, folded: str, plain: str | None = None) -> None:
        self.folded = folded
        self._plain = plain

    def view(self, plain: bool) -> str:
        if not plain:
            return self.folded
        if self._plain is None:
            self._plain = _strip_accents(self.folded)
        return self._plain


class _Story:
    __slots__ = ("by_name", "all_fields")

    def __init__(self, by_name: dict[str, _FieldText]) -> None:
        self.by_name = by_name
        self.all_fields = tuple(by_name.values())

    def select(self, field_name: str | None) -> Sequence[_FieldText]:
        if field_name is None:
            return self.all_fields
        found = self.by_name.get(field_name)
        return (found,) if found is not None else ()


# --------------------------------------------------------------------------------------------------
# Query tree
# --------------------------------------------------------------------------------------------------

_KEYWORDS = frozenset({"and", "or", "not"})


# A literal the prefilter looks for: (in the plain view?, folded substring).
_Literal = tuple[bool, str]


class _Node:
    def evaluate(self, story: _Story) -> bool:
        raise NotImplementedError

    def render(self, context: str) -> str:
        """Readable, re-parseable text; context is 'top', 'and', 'or' or 'not' (the parent)."""
        raise NotImplementedError

    def required_literals(self) -> list[frozenset[_Literal]]:
        """Clauses of a necessary condition: each set needs at least one member in the text."""
        return []


@dataclass(frozen=True)
class _Unit:
    token: str
    prefix: bool  # trailing wildcard on this token

    @property
    def is_logogram(self) -> bool:
        return _is_logogram(self.token[0])


class _TokenPattern:
    """Finds a sequence of tokens in folded text, with Unicode word boundaries at both ends.

    The regex starts with the first token's literal, so ``re``'s fast literal scan finds candidates; it uses
    only \\w/\\W, which equal the token rules on ASCII text. Where they differ (combining marks are \\W but
    belong to words; logograms are \\w but are tokens of their own) each candidate is checked in Python.
    """

    __slots__ = ("units", "_ascii_regex", "_unicode_regex", "_groups", "_left_boundary", "_right_boundary")

    def __init__(self, units: Sequence[_Unit]) -> None:
        self.units = tuple(units)
        ascii_parts: list[str] = []
        unicode_parts: list[str] = []
        # Per capture group: ("sep", both sides are words, previous unit is a prefix) or ("rest", ...).
        groups: list[tuple[str, bool, bool]] = []
        previous: _Unit | None = None
        for index, unit in enumerate(self.units):
            if previous is not None:
                both_words = not previous.is_logogram and not unit.is_logogram
                # Two word tokens need a separator between them, or they would be one token.
                separator = r"(\W+)" if both_words else r"(\W*)"
                ascii_parts.append(separator)
                unicode_parts.append(separator)
                groups.append(("sep", both_words, previous.prefix and not previous.is_logogram))
            literal = re.escape(unit.token)
            ascii_parts.append(literal)
            unicode_parts.append(literal)
            if unit.prefix and not unit.is_logogram and index < len(self.units) - 1:
                # The rest of a prefixed word inside a phrase. On ASCII text that is \\w*; elsewhere words
                # hold marks (\\W) and logograms (\\w) end them, so take the shortest run that lets the
                # phrase go on and check it is all word characters.
                ascii_parts.append(r"(\w*)")
                unicode_parts.append(r"(\S*?)")
                groups.append(("rest", False, False))
            previous = unit
        self._ascii_regex = re.compile("".join(ascii_parts))
        self._unicode_regex = re.compile("".join(unicode_parts))
        self._groups = tuple(groups)
        first, last = self.units[0], self.units[-1]
        self._left_boundary = not first.is_logogram
        # The right boundary Media Cloud lacks ("cat" must not match "category"); a wildcard opens it.
        self._right_boundary = not last.is_logogram and not last.prefix

    def _is_token_match(self, view: str, match: re.Match[str]) -> bool:
        start, end = match.span()
        if self._left_boundary and start and _is_word(view[start - 1]):
            return False
        if self._right_boundary and end < len(view) and _is_word(view[end]):
            return False
        if view.isascii():
            return True  # \\w is exactly a word character here: the regex said everything
        for number, (kind, both_words, after_prefix) in enumerate(self._groups, start=1):
            text = match.group(number)
            if kind == "rest":
                if not all(_is_word(char) for char in text):
                    return False
                continue
            if after_prefix:  # marks right after a prefix's rest still belong to that word
                skip = 0
                while skip < len(text) and _is_word(text[skip]):
                    skip += 1
                text = text[skip:]
            if any(_is_word(char) for char in text) or (both_words and not text):
                return False
        return True

    def _matches(self, view: str) -> Iterator[int]:
        """Start offsets of every valid match (not finditer: a valid match may start inside a rejected one)."""
        regex = self._ascii_regex if view.isascii() else self._unicode_regex
        position = 0
        while (match := regex.search(view, position)) is not None:
            if self._is_token_match(view, match):
                yield match.start()
            position = match.start() + 1

    def search(self, view: str) -> bool:
        return next(self._matches(view), None) is not None

    def starts(self, view: str) -> list[int]:
        return list(self._matches(view))


@dataclass(eq=False)
class _Atom(_Node):
    """A term, wildcard, phrase or proximity phrase: a sequence of tokens, optionally restricted to a field."""

    field: str | None
    units: tuple[_Unit, ...]
    slop: int | None  # None: adjacent in order; an int: proximity window (see module docstring)
    plain: bool  # typed without accents: matched against the accent-free view (cote matches Côte)
    _phrase: _TokenPattern | None = dataclass_field(default=None, init=False, repr=False)
    # Proximity: one pattern per distinct unit, with how many distinct occurrences the phrase needs.
    _unit_patterns: tuple[tuple[_TokenPattern, int], ...] = dataclass_field(
        default=(), init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.slop is None:
            self._phrase = _TokenPattern(self.units)
            return
        wanted: dict[_Unit, int] = {}
        for unit in self.units:
            wanted[unit] = wanted.get(unit, 0) + 1
        self._unit_patterns = tuple((_TokenPattern((unit,)), count) for unit, count in wanted.items())

    def evaluate(self, story: _Story) -> bool:
        fields = story.select(self.field)
        if self._phrase is not None:
            search = self._phrase.search
            return any(search(text.view(self.plain)) for text in fields)
        return any(self._within_window(text.view(self.plain)) for text in fields)

    def _within_window(self, view: str) -> bool:
        """Is there a span of at most k + slop tokens holding every unit (repeats at distinct places)?

        Works on character offsets of unit occurrences and counts tokens only inside candidate windows,
        so a story is never tokenized as a whole.
        """
        assert self.slop is not None
        events: list[tuple[int, int]] = []
        needed: list[int] = []
        for unit_index, (pattern, count) in enumerate(self._unit_patterns):
            starts = pattern.starts(view)
            if len(starts) < count:
                return False
            events.extend((start, unit_index) for start in starts)
            needed.append(count)
        events.sort()
        max_span = len(self.units) + self.slop
        counts = [0] * len(needed)
        missing = len(needed)
        left = 0
        for start, unit_index in events:
            counts[unit_index] += 1
            if counts[unit_index] == needed[unit_index]:
                missing -= 1
            while missing == 0:
                left_start, left_unit = events[left]
                if _count_tokens(view, left_start, start, max_span) + 1 <= max_span:
                    return True
                counts[left_unit] -= 1
                if counts[left_unit] < needed[left_unit]:
                    missing += 1
                left += 1
        return False

    def required_literals(self) -> list[frozenset[_Literal]]:
        unique = {unit.token for unit in self.units}
        # A one-letter token of a spaced script is in nearly every text: useless as a filter.
        useful = [token for token in unique if len(token) > 1 or _is_logogram(token)]
        return [frozenset({(self.plain, token)}) for token in sorted(useful, key=len, reverse=True)]

    def render(self, context: str) -> str:
        prefix = f"{self.field}:" if self.field else ""
        if len(self.units) == 1 and self.slop is None:
            unit = self.units[0]
            if unit.token not in _KEYWORDS:
                return f"{prefix}{unit.token}{'*' if unit.prefix else ''}"
        words: list[str] = []
        previous: _Unit | None = None
        for unit in self.units:
            if previous is not None and not (previous.is_logogram and unit.is_logogram):
                words.append(" ")
            words.append(unit.token + ("*" if unit.prefix and not unit.is_logogram else ""))
            previous = unit
        slop = f"~{self.slop}" if self.slop is not None else ""
        return f'{prefix}"{"".join(words)}"{slop}'


@dataclass(eq=False)
class _MatchAll(_Node):
    field: str | None

    def evaluate(self, story: _Story) -> bool:
        if self.field is None:
            return True
        return any(text.folded.strip() for text in story.select(self.field))

    def render(self, context: str) -> str:
        return f"{self.field}:*" if self.field else "*:*"


@dataclass(eq=False)
class _Not(_Node):
    child: _Node

    def evaluate(self, story: _Story) -> bool:
        return not self.child.evaluate(story)

    def render(self, context: str) -> str:
        text = f"NOT {self.child.render('not')}"
        # Inside an OR list "a OR NOT b" would re-parse as a prohibition (Lucene); a group keeps the meaning.
        return f"({text})" if context == "or" else text


@dataclass(eq=False)
class _And(_Node):
    children: tuple[_Node, ...]

    def evaluate(self, story: _Story) -> bool:
        return all(child.evaluate(story) for child in self.children)

    def required_literals(self) -> list[frozenset[_Literal]]:
        return [clause for child in self.children for clause in child.required_literals()]

    def render(self, context: str) -> str:
        text = " AND ".join(child.render("and") for child in self.children)
        return f"({text})" if context in ("or", "not") else text


@dataclass(eq=False)
class _Or(_Node):
    children: tuple[_Node, ...]

    def evaluate(self, story: _Story) -> bool:
        return any(child.evaluate(story) for child in self.children)

    def required_literals(self) -> list[frozenset[_Literal]]:
        union: set[_Literal] = set()
        for child in self.children:
            clauses = child.required_literals()
            if not clauses:
                return []  # one unconstrained alternative makes the whole OR unconstrained
            union |= max(clauses, key=_selectivity)
        return [frozenset(union)]

    def render(self, context: str) -> str:
        text = " OR ".join(child.render("or") for child in self.children)
        return f"({text})" if context in ("and", "not") else text


def _selectivity(clause: frozenset[_Literal]) -> int:
    """Longer literals are rarer: a clause is as selective as its shortest literal."""
    return min(len(literal) for _, literal in clause)


def _has_match_all(node: _Node) -> bool:
    """An explicit, unnegated ``*:*`` somewhere in the query."""
    if isinstance(node, _MatchAll):
        return node.field is None
    return any(_has_match_all(child) for child in getattr(node, "children", ()))


def _make_not(child: _Node) -> _Node:
    return child.child if isinstance(child, _Not) else _Not(child)


def _make_and(children: Sequence[_Node]) -> _Node:
    flat: list[_Node] = []
    for child in children:
        flat.extend(child.children if isinstance(child, _And) else (child,))
    return flat[0] if len(flat) == 1 else _And(tuple(flat))


def _make_or(children: Sequence[_Node]) -> _Node:
    flat: list[_Node] = []
    for child in children:
        flat.extend(child.children if isinstance(child, _Or) else (child,))
    return flat[0] if len(flat) == 1 else _Or(tuple(flat))


# --------------------------------------------------------------------------------------------------
# Raw-page prefilter: a relaxed query, and the views of a page that hold every word of its story
# --------------------------------------------------------------------------------------------------

#: A relaxed query: a node, or True (may hold on any page) or False (holds on no story at all).
_Relaxed = _Node | bool


def _relax(node: _Node, negated: bool = False) -> _Relaxed:
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
    if isinstance(node, _Not):
        return _relax(node.child, not negated)
    if isinstance(node, _And | _Or):
        parts = [_relax(child, negated) for child in node.children]
        # NOT (a AND b) = NOT a OR NOT b, NOT (a OR b) = NOT a AND NOT b
        return _relaxed_and(parts) if isinstance(node, _And) != negated else _relaxed_or(parts)
    if isinstance(node, _MatchAll):
        # *:* holds on every story, NOT *:* on none; title:* and text:* depend on what the story keeps
        return not negated or node.field is not None
    assert isinstance(node, _Atom)
    if negated:
        return True
    if node.field is None and len(node.units) == 1 and node.slop is None:
        return node  # a word already is its own relaxation: no second pattern
    words = dict.fromkeys(node.units)  # "a a b"~2 needs a twice in the story; once is the bound
    return _relaxed_and([_Atom(None, (unit,), None, node.plain) for unit in words])


def _relaxed_and(parts: Sequence[_Relaxed]) -> _Relaxed:
    if any(part is False for part in parts):
        return False
    nodes = [part for part in parts if part is not True]
    return _make_and(nodes) if nodes else True


def _relaxed_or(parts: Sequence[_Relaxed]) -> _Relaxed:
    if any(part is True for part in parts):
        return True
    nodes = [part for part in parts if part is not False]
    return _make_or(nodes) if nodes else False


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


def _page_views(page: str) -> list[str]:
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


# --------------------------------------------------------------------------------------------------
# Lexer
# --------------------------------------------------------------------------------------------------


class _Kind(Enum):
    LPAREN = "("
    RPAREN = ")"
    AND = "AND"
    OR = "OR"
    NOT = "NOT"
    PLUS = "+"
    MINUS = "-"
    TERM = "term"
    PHRASE = "phrase"
    FIELD = "field"
    RANGE = "range"
    MATCH_ALL = "*"


@dataclass(frozen=True)
class _Token:
    kind: _Kind
    text: str  # as written in the query (for messages)
    position: int
    word: str = ""  # TERM: the word without escapes or trailing '*'; PHRASE: the content; FIELD: name
    wildcard: bool = False  # TERM ends with '*'
    slop: int | None = None  # PHRASE followed by ~N


# A bare word ends at whitespace or at one of these (Lucene's syntax characters, plus typographic quotes).
_WORD_END = frozenset('()"[]{}:^~“”')
# Phrase quotes: typographic ones too, as queries get pasted from word processors (“climate change”).
_OPENING_QUOTES = {'"': '"', "“": '”"', "”": '”"'}
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_INTEGER = re.compile(r"\d+")


class _Lexer:
    def __init__(self, query: str, warnings: list[str]) -> None:
        self.query = query
        self.warnings = warnings
        self.tokens: list[_Token] = []
        self.terms = 0  # words so far, each word of a phrase counted

    def error(self, message: str, position: int) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.query, position)

    def _count_terms(self, words: int, position: int) -> None:
        self.terms += words
        if self.terms > MAX_QUERY_TERMS:
            raise self.error(
                f"more than {MAX_QUERY_TERMS:,} words (phrase words included), at position {position}",
                position,
            )

    def run(self) -> list[_Token]:
        query, i, n = self.query, 0, len(self.query)
        while i < n:
            char = query[i]
            if char.isspace():
                i += 1
            elif query.startswith("{!", i):
                end = query.find("}", i)
                if end < 0:
                    raise self.error(f"unterminated local parameters '{{!' at position {i}", i)
                i = end + 1  # Solr local params ({!complexphrase ...}) change nothing for matching
            elif char == "(":
                self.tokens.append(_Token(_Kind.LPAREN, char, i))
                i += 1
            elif char == ")":
                self.tokens.append(_Token(_Kind.RPAREN, char, i))
                i = self._boost(i + 1)
            elif query.startswith("&&", i):
                self.tokens.append(_Token(_Kind.AND, "&&", i))
                i += 2
            elif query.startswith("||", i):
                self.tokens.append(_Token(_Kind.OR, "||", i))
                i += 2
            elif char == "!":
                self.tokens.append(_Token(_Kind.NOT, char, i))
                i += 1
            elif char == "+":
                self.tokens.append(_Token(_Kind.PLUS, char, i))
                i += 1
            elif char == "-":
                self.tokens.append(_Token(_Kind.MINUS, char, i))
                i += 1
            elif char in _OPENING_QUOTES:
                i = self._phrase(i)
            elif char in "[{":
                i = self._range(i)
            elif char == "/":
                raise self.error(f"regular expression queries ('/') are not supported, at position {i}", i)
            elif char == "*":
                i = self._star(i)
            elif char == "?":
                raise self.error(f"the '?' wildcard is not supported, at position {i}", i)
            elif char in "]}~^:":
                raise self.error(f"unexpected '{char}' at position {i}", i)
            else:
                i = self._word(i)
        return self.tokens

    def _boost(self, i: int) -> int:
        """Skip '^number' (Lucene boost: changes ranking, never matching)."""
        if i < len(self.query) and self.query[i] == "^":
            number = _NUMBER.match(self.query, i + 1)
            if number is None:
                raise self.error(f"expected a number after '^' at position {i}", i)
            return number.end()
        return i

    def _phrase(self, start: int) -> int:
        query, i = self.query, start + 1
        closing = _OPENING_QUOTES[query[start]]
        content: list[str] = []
        while i < len(query) and query[i] not in closing:
            if query[i] == "\\" and i + 1 < len(query):
                i += 1
            content.append(query[i])
            i += 1
        if i >= len(query):
            raise self.error(f"unterminated quote starting at position {start}", start)
        i += 1
        slop = None
        if i < len(query) and query[i] == "~":
            number = _INTEGER.match(query, i + 1)
            if number is None or (number.end() < len(query) and query[number.end()] == "."):
                raise self.error(f"expected a whole number of words after '~' at position {i}", i)
            slop = int(number.group())
            i = number.end()
        phrase = "".join(content)
        self._count_terms(max(1, len(phrase.split())), start)
        self.tokens.append(_Token(_Kind.PHRASE, query[start:i], start, word=phrase, slop=slop))
        return self._boost(i)

    def _range(self, start: int) -> int:
        closing = min(
            (p for p in (self.query.find("]", start), self.query.find("}", start)) if p >= 0), default=-1
        )
        if closing < 0:
            raise self.error(f"unterminated range '{self.query[start]}' at position {start}", start)
        self.tokens.append(_Token(_Kind.RANGE, self.query[start : closing + 1], start))
        return self._boost(closing + 1)

    def _star(self, start: int) -> int:
        query = self.query
        if query.startswith("*:*", start):
            self.tokens.append(_Token(_Kind.MATCH_ALL, "*:*", start))
            return self._boost(start + 3)
        after = start + 1
        if after < len(query) and not query[after].isspace() and query[after] not in "()":
            raise self.error(f"leading wildcard '*' at position {start} is not supported", start)
        self.tokens.append(_Token(_Kind.MATCH_ALL, "*", start))
        return self._boost(after)

    def _word(self, start: int) -> int:
        query, i, n = self.query, start, len(self.query)
        chars: list[str] = []
        escaped_any = False
        wildcard = False
        while i < n:
            char = query[i]
            if char.isspace():
                break
            if char == "\\":
                if i + 1 >= n:
                    raise self.error(f"dangling escape '\\' at position {i}", i)
                chars.append(query[i + 1])
                escaped_any = True
                i += 2
                continue
            if char == ":":
                name = "".join(chars)
                if not escaped_any and _FIELD_NAME.match(name):
                    self.tokens.append(_Token(_Kind.FIELD, query[start : i + 1], start, word=name.casefold()))
                    return i + 1
                chars.append(char)  # '10:30' is a word, not a field
                i += 1
                continue
            if char in _WORD_END:
                break
            if char == "*":
                end = i + 1
                if end < n and not query[end].isspace() and query[end] not in _WORD_END:
                    raise self.error(
                        f"wildcard '*' at position {i} is only supported at the end of a word", i
                    )
                wildcard = True
                i = end
                break
            if char == "?":
                raise self.error(f"the '?' wildcard is not supported, at position {i}", i)
            chars.append(char)
            i += 1
        word = "".join(chars)
        text = query[start:i]
        if not escaped_any and not wildcard and word.casefold() in _KEYWORDS:
            kind = {"and": _Kind.AND, "or": _Kind.OR, "not": _Kind.NOT}[word.casefold()]
            self.tokens.append(_Token(kind, text, start))
            return i
        if i < n and query[i] == "~":
            fuzzy = _NUMBER.match(query, i + 1)
            i = fuzzy.end() if fuzzy else i + 1
            self.warnings.append(
                f"fuzzy search '{query[start:i]}' at position {start} is not supported; matched exactly"
            )
        self._count_terms(1, start)
        self.tokens.append(_Token(_Kind.TERM, text, start, word=word, wildcard=wildcard))
        return self._boost(i)


# --------------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------------


class _Occur(Enum):
    SHOULD = "should"
    MUST = "must"
    MUST_NOT = "must_not"


_IGNORED = "<ignored>"  # field context of clauses that will be dropped


class _Parser:
    """Recursive descent: or_list := and_expr ((OR | juxtaposition) and_expr)*;
    and_expr := unary (AND unary)*; unary := (NOT | ! | - | +) unary | primary."""

    def __init__(self, query: str, tokens: list[_Token], warnings: list[str]) -> None:
        self.query = query
        self.tokens = tokens
        self.index = 0
        self.warnings = warnings
        self.field_context: str | None = None
        self.depth = 0  # parentheses and prefix operators open around the clause being parsed

    def error(self, message: str, position: int) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.query, position)

    @contextmanager
    def _nested(self, token: _Token) -> Iterator[None]:
        """One more level of nesting (a parenthesis or a prefix operator), refused beyond MAX_QUERY_DEPTH
        before the parser recurses into it."""
        if self.depth >= MAX_QUERY_DEPTH:
            raise self.error(
                f"'{token.text}' at position {token.position} nests parentheses and operators more than "
                f"{MAX_QUERY_DEPTH} deep",
                token.position,
            )
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def parse(self) -> _Node:
        if not self.tokens:
            raise self.error("empty query at position 0", 0)
        node, count = self.or_list()
        leftover = self.peek()
        if leftover is not None:  # only a ')' stops or_list at the top level
            raise self.error(f"unbalanced ')' at position {leftover.position}", leftover.position)
        if node is None:
            position = self.tokens[0].position
            raise self.error(
                f"nothing left to match at position {position}: every clause is on an ignored field or a range",
                position,
            )
        return node

    def _no_operand_follows(self) -> bool:
        following = self.peek()
        return following is None or following.kind in (_Kind.RPAREN, _Kind.AND, _Kind.OR)

    def or_list(self) -> tuple[_Node | None, int]:
        """Returns the combined node (None when every clause was dropped) and the number of clauses."""
        items: list[tuple[_Node | None, _Occur, _Token]] = []
        while (token := self.peek()) is not None and token.kind is not _Kind.RPAREN:
            if token.kind in (_Kind.OR, _Kind.AND):
                # and_expr consumes every AND, so an AND here (or an OR) opens the list: no left operand.
                if not items:
                    raise self.error(
                        f"'{token.text}' at position {token.position} has no left-hand operand",
                        token.position,
                    )
                self.take()
                if self._no_operand_follows():
                    raise self.error(
                        f"'{token.text}' at position {token.position} has no right-hand operand",
                        token.position,
                    )
                continue
            items.append(self.and_expr())
        return self.combine(items), len(items)

    def combine(self, items: list[tuple[_Node | None, _Occur, _Token]]) -> _Node | None:
        """Lucene's clause semantics for one list of OR-ed (juxtaposed) clauses."""
        kept = [(node, occur, token) for node, occur, token in items if node is not None]
        musts = [node for node, occur, _ in kept if occur is _Occur.MUST]
        shoulds = [(node, token) for node, occur, token in kept if occur is _Occur.SHOULD]
        prohibited = [node for node, occur, _ in kept if occur is _Occur.MUST_NOT]
        if musts and shoulds:
            written = ", ".join(f"'{token.text}' at position {token.position}" for _, token in shoulds)
            self.warnings.append(
                f"optional clauses next to required (+) clauses do not affect matching: {written}"
            )
        parts: list[_Node] = []
        if musts:
            parts.append(_make_and(musts))
        elif shoulds:
            parts.append(_make_or([node for node, _ in shoulds]))
        parts.extend(_make_not(node) for node in prohibited)  # alone: "everything except"
        return _make_and(parts) if parts else None

    def and_expr(self) -> tuple[_Node | None, _Occur, _Token]:
        first_token = self.peek()
        assert first_token is not None
        operands = [self.unary()]
        while (token := self.peek()) is not None and token.kind is _Kind.AND:
            self.take()
            if self._no_operand_follows():
                raise self.error(
                    f"'{token.text}' at position {token.position} has no right-hand operand", token.position
                )
            operands.append(self.unary())
        if len(operands) == 1:
            node, occur = operands[0]
            return node, occur, first_token
        nodes = [
            _make_not(node) if occur is _Occur.MUST_NOT else node
            for node, occur in operands
            if node is not None
        ]
        return (_make_and(nodes) if nodes else None), _Occur.SHOULD, first_token

    def unary(self) -> tuple[_Node | None, _Occur]:
        token = self.peek()
        assert token is not None
        if token.kind in (_Kind.NOT, _Kind.MINUS, _Kind.PLUS):
            self.take()
            if self._no_operand_follows():
                raise self.error(f"dangling '{token.text}' at position {token.position}", token.position)
            with self._nested(token):
                node, occur = self.unary()
            if token.kind is _Kind.PLUS:
                return node, (_Occur.MUST_NOT if occur is _Occur.MUST_NOT else _Occur.MUST)
            return node, (_Occur.SHOULD if occur is _Occur.MUST_NOT else _Occur.MUST_NOT)
        return self.primary(), _Occur.SHOULD

    def primary(self) -> _Node | None:
        token = self.take()
        kind = token.kind
        if kind is _Kind.LPAREN:
            with self._nested(token):
                node, count = self.or_list()
            closing = self.peek()
            if closing is None:
                raise self.error(f"unbalanced '(' at position {token.position}: missing ')'", token.position)
            self.take()
            if count == 0:
                raise self.error(f"empty parentheses at position {token.position}", token.position)
            return node
        if kind is _Kind.TERM:
            return self.atom(token, [(token.word, token.wildcard)], None)
        if kind is _Kind.PHRASE:
            words = token.word.split()
            if not words:
                raise self.error(f"empty phrase at position {token.position}", token.position)
            # Inside a phrase a trailing '*' is a prefix (complexphrase style); other '*' are punctuation.
            parsed = [(word[:-1], True) if word.endswith("*") else (word, False) for word in words]
            return self.atom(token, parsed, token.slop)
        if kind is _Kind.MATCH_ALL:
            return None if self.field_context == _IGNORED else _MatchAll(self.field_context)
        if kind is _Kind.RANGE:
            if self.field_context != _IGNORED:
                self.warnings.append(f"range clause '{token.text}' at position {token.position} ignored")
            return None
        if kind is _Kind.FIELD:
            return self.fielded(token)
        if kind is _Kind.RPAREN:
            raise self.error(f"unbalanced ')' at position {token.position}", token.position)
        raise self.error(
            f"'{token.text}' at position {token.position} has no left-hand operand", token.position
        )

    def fielded(self, token: _Token) -> _Node | None:
        operand = self.peek()
        if operand is None or operand.kind not in (
            _Kind.LPAREN,
            _Kind.TERM,
            _Kind.PHRASE,
            _Kind.RANGE,
            _Kind.MATCH_ALL,
        ):
            raise self.error(
                f"field '{token.text}' at position {token.position} has no value", token.position
            )
        outer = self.field_context
        name = token.word
        if outer == _IGNORED:
            self.field_context = _IGNORED
        elif name in _MATCHED_FIELDS:
            self.field_context = name
        else:
            self.field_context = _IGNORED
            end = operand.position + len(operand.text)
            self.warnings.append(
                f"field '{name}:' at position {token.position} is not used for matching; "
                f"clause '{self.query[token.position : end]}' ignored"
            )
        try:
            return self.primary()
        finally:
            self.field_context = outer

    def atom(self, token: _Token, words: list[tuple[str, bool]], slop: int | None) -> _Node | None:
        if self.field_context == _IGNORED:
            return None
        units: list[_Unit] = []
        plain = True
        for word, prefix in words:
            folded = _fold(word)
            plain = plain and _strip_accents(folded) == folded
            pieces = _tokenize_word(folded)
            units.extend(_Unit(piece, False) for piece in pieces[:-1])
            if pieces:
                units.append(_Unit(pieces[-1], prefix))
        if not units:
            if token.kind is _Kind.PHRASE:
                raise self.error(f"phrase at position {token.position} has no words", token.position)
            self.warnings.append(
                f"term '{token.text}' at position {token.position} has no letters or digits; ignored"
            )
            return None
        if slop is not None and len(units) == 1:
            slop = None  # a one-word proximity is just the word
        return _Atom(self.field_context, tuple(units), slop, plain)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _required_literals(root: _Node) -> tuple[tuple[_Literal, ...], ...]:
    """The clauses of literals every match of ``root`` contains, most selective first: a text lacking a long
    literal is rejected after one substring test."""
    clauses = {clause for clause in root.required_literals() if clause}
    return tuple(
        tuple(sorted(clause, key=lambda literal: (-len(literal[1]), literal)))
        for clause in sorted(clauses, key=lambda c: (-_selectivity(c), sorted(c)))
    )


def _has_required_literals(required: Sequence[Sequence[_Literal]], fields: Sequence[_FieldText]) -> bool:
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

    def __init__(self, source: str, root: _Node, warnings: Sequence[str]) -> None:
        self.source = source
        self.warnings: tuple[str, ...] = tuple(warnings)
        self._root = root
        self._required = _required_literals(root)
        # The raw-page prefilter's query (``may_match``), built once.
        self._relaxed = _relax(root)
        self._relaxed_required = _required_literals(self._relaxed) if isinstance(self._relaxed, _Node) else ()

    def __str__(self) -> str:
        return self._root.render("top")

    def __repr__(self) -> str:
        return f"TopicQuery({self.source!r})"

    def matches(self, text: str) -> bool:
        """Does the whole story text match? ``title:`` clauses match nothing here (there is no title)."""
        value = _coerce_text(text)
        if value is None:
            return self._root.evaluate(_Story({}))
        return self._matches_text(_FieldText(_fold(value)))

    def _matches_text(self, text: _FieldText) -> bool:
        if not _has_required_literals(self._required, (text,)):
            return False
        return self._root.evaluate(_Story({"text": text}))

    def may_match(self, text: str | bytes | None, *, urls: Iterable[str | None] = ()) -> bool:
        """Could a story extracted from this raw page (fetched from ``urls``) match? The spider's cheap test
        before extraction: False only when no story the page can give matches, so no relevant story is lost.

        The test is a relaxed form of the query (built once, see ``_relax``): a NOT clause is not decided (a
        word the story lacks may be on its page: "recipe" in a navigation link), ``title:``/``text:`` look
        anywhere, a phrase or proximity clause needs only its words. The page is first taken as written,
        with the URLs (which are part of the story): most relevant pages have the query's words in lower
        case somewhere, and are accepted without a copy of the page. Only then is the page read as the
        extractor reads it (``_page_views``: character references decoded, tags that split words taken
        out, the JSON-LD strings), fully folded as ``matches`` folds a story: a rejection there is sound.
        """
        value = _coerce_text(text) or ""
        relaxed = self._relaxed
        if isinstance(relaxed, bool):
            return relaxed
        url_fields = [_FieldText(_fold(url)) for url in dict.fromkeys(urls) if url]
        if self._relaxed_matches([_FieldText(value, plain=value), *url_fields]):
            return True
        views = [_FieldText(_fold(view)) for view in _page_views(value) if view]
        return self._relaxed_matches([*views, *url_fields])

    def _relaxed_matches(self, fields: Sequence[_FieldText]) -> bool:
        assert isinstance(self._relaxed, _Node)
        if not _has_required_literals(self._relaxed_required, fields):
            return False
        return self._relaxed.evaluate(_Story({str(index): text for index, text in enumerate(fields)}))

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
        for name in _FIELDS_OF_A_STORY:
            value = _coerce_text(values[name])
            if value is not None:
                by_name[name] = _FieldText(_fold(value))
        if not _has_required_literals(self._required, tuple(by_name.values())):
            return False
        return self._root.evaluate(_Story(by_name))

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
    tokens = _Lexer(q, warnings).run()
    root = _Parser(q, tokens, warnings).parse()
    if root.evaluate(_Story({})) and not _has_match_all(root):
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
