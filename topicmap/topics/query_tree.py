"""The parsed query: a tree of boolean nodes over token patterns, evaluated against the folded fields of a story."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from topicmap.topics.query_text import count_tokens, is_logogram, is_word, strip_accents

# --------------------------------------------------------------------------------------------------
# Evaluation context
# --------------------------------------------------------------------------------------------------

FIELDS_OF_A_STORY = ("title", "text", "url", "description")
MATCHED_FIELDS = frozenset({"title", "text"})


class FieldText:
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
            self._plain = strip_accents(self.folded)
        return self._plain


class Story:
    __slots__ = ("by_name", "all_fields")

    def __init__(self, by_name: dict[str, FieldText]) -> None:
        self.by_name = by_name
        self.all_fields = tuple(by_name.values())

    def select(self, field_name: str | None) -> Sequence[FieldText]:
        if field_name is None:
            return self.all_fields
        found = self.by_name.get(field_name)
        return (found,) if found is not None else ()


# --------------------------------------------------------------------------------------------------
# Query tree
# --------------------------------------------------------------------------------------------------

KEYWORDS = frozenset({"and", "or", "not"})


# A literal the prefilter looks for: (in the plain view?, folded substring).
PrefilterLiteral = tuple[bool, str]


class Node:
    def evaluate(self, story: Story) -> bool:
        raise NotImplementedError

    def render(self, context: str) -> str:
        """Readable, re-parseable text; context is 'top', 'and', 'or' or 'not' (the parent)."""
        raise NotImplementedError

    def required_literals(self) -> list[frozenset[PrefilterLiteral]]:
        """Clauses of a necessary condition: each set needs at least one member in the text."""
        return []


@dataclass(frozen=True)
class Unit:
    token: str
    prefix: bool  # trailing wildcard on this token

    @property
    def is_logogram(self) -> bool:
        return is_logogram(self.token[0])


class _TokenPattern:
    """Finds a sequence of tokens in folded text, with Unicode word boundaries at both ends.

    The regex starts with the first token's literal, so ``re``'s fast literal scan finds candidates; it uses
    only \\w/\\W, which equal the token rules on ASCII text. Where they differ (combining marks are \\W but
    belong to words; logograms are \\w but are tokens of their own) each candidate is checked in Python.
    """

    __slots__ = ("units", "_ascii_regex", "_unicode_regex", "_groups", "_left_boundary", "_right_boundary")

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = tuple(units)
        ascii_parts: list[str] = []
        unicode_parts: list[str] = []
        # Per capture group: ("sep", both sides are words, previous unit is a prefix) or ("rest", ...).
        groups: list[tuple[str, bool, bool]] = []
        previous: Unit | None = None
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
        if self._left_boundary and start and is_word(view[start - 1]):
            return False
        if self._right_boundary and end < len(view) and is_word(view[end]):
            return False
        if view.isascii():
            return True  # \\w is exactly a word character here: the regex said everything
        for number, (kind, both_words, after_prefix) in enumerate(self._groups, start=1):
            text = match.group(number)
            if kind == "rest":
                if not all(is_word(char) for char in text):
                    return False
                continue
            if after_prefix:  # marks right after a prefix's rest still belong to that word
                skip = 0
                while skip < len(text) and is_word(text[skip]):
                    skip += 1
                text = text[skip:]
            if any(is_word(char) for char in text) or (both_words and not text):
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
class Atom(Node):
    """A term, wildcard, phrase or proximity phrase: a sequence of tokens, optionally restricted to a field."""

    field: str | None
    units: tuple[Unit, ...]
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
        wanted: dict[Unit, int] = {}
        for unit in self.units:
            wanted[unit] = wanted.get(unit, 0) + 1
        self._unit_patterns = tuple((_TokenPattern((unit,)), count) for unit, count in wanted.items())

    def evaluate(self, story: Story) -> bool:
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
                if count_tokens(view, left_start, start, max_span) + 1 <= max_span:
                    return True
                counts[left_unit] -= 1
                if counts[left_unit] < needed[left_unit]:
                    missing += 1
                left += 1
        return False

    def required_literals(self) -> list[frozenset[PrefilterLiteral]]:
        unique = {unit.token for unit in self.units}
        # A one-letter token of a spaced script is in nearly every text: useless as a filter.
        useful = [token for token in unique if len(token) > 1 or is_logogram(token)]
        return [frozenset({(self.plain, token)}) for token in sorted(useful, key=len, reverse=True)]

    def render(self, context: str) -> str:
        prefix = f"{self.field}:" if self.field else ""
        if len(self.units) == 1 and self.slop is None:
            unit = self.units[0]
            if unit.token not in KEYWORDS:
                return f"{prefix}{unit.token}{'*' if unit.prefix else ''}"
        words: list[str] = []
        previous: Unit | None = None
        for unit in self.units:
            if previous is not None and not (previous.is_logogram and unit.is_logogram):
                words.append(" ")
            words.append(unit.token + ("*" if unit.prefix and not unit.is_logogram else ""))
            previous = unit
        slop = f"~{self.slop}" if self.slop is not None else ""
        return f'{prefix}"{"".join(words)}"{slop}'


@dataclass(eq=False)
class MatchAll(Node):
    field: str | None

    def evaluate(self, story: Story) -> bool:
        if self.field is None:
            return True
        return any(text.folded.strip() for text in story.select(self.field))

    def render(self, context: str) -> str:
        return f"{self.field}:*" if self.field else "*:*"


@dataclass(eq=False)
class Not(Node):
    child: Node

    def evaluate(self, story: Story) -> bool:
        return not self.child.evaluate(story)

    def render(self, context: str) -> str:
        text = f"NOT {self.child.render('not')}"
        # Inside an OR list "a OR NOT b" would re-parse as a prohibition (Lucene); a group keeps the meaning.
        return f"({text})" if context == "or" else text


@dataclass(eq=False)
class And(Node):
    children: tuple[Node, ...]

    def evaluate(self, story: Story) -> bool:
        return all(child.evaluate(story) for child in self.children)

    def required_literals(self) -> list[frozenset[PrefilterLiteral]]:
        return [clause for child in self.children for clause in child.required_literals()]

    def render(self, context: str) -> str:
        text = " AND ".join(child.render("and") for child in self.children)
        return f"({text})" if context in ("or", "not") else text


@dataclass(eq=False)
class Or(Node):
    children: tuple[Node, ...]

    def evaluate(self, story: Story) -> bool:
        return any(child.evaluate(story) for child in self.children)

    def required_literals(self) -> list[frozenset[PrefilterLiteral]]:
        union: set[PrefilterLiteral] = set()
        for child in self.children:
            clauses = child.required_literals()
            if not clauses:
                return []  # one unconstrained alternative makes the whole OR unconstrained
            union |= max(clauses, key=selectivity)
        return [frozenset(union)]

    def render(self, context: str) -> str:
        text = " OR ".join(child.render("or") for child in self.children)
        return f"({text})" if context in ("and", "not") else text


def selectivity(clause: frozenset[PrefilterLiteral]) -> int:
    """Longer literals are rarer: a clause is as selective as its shortest literal."""
    return min(len(literal) for _, literal in clause)


def has_match_all(node: Node) -> bool:
    """An explicit, unnegated ``*:*`` somewhere in the query."""
    if isinstance(node, MatchAll):
        return node.field is None
    return any(has_match_all(child) for child in getattr(node, "children", ()))


def make_not(child: Node) -> Node:
    return child.child if isinstance(child, Not) else Not(child)


def make_and(children: Sequence[Node]) -> Node:
    flat: list[Node] = []
    for child in children:
        flat.extend(child.children if isinstance(child, And) else (child,))
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def make_or(children: Sequence[Node]) -> Node:
    flat: list[Node] = []
    for child in children:
        flat.extend(child.children if isinstance(child, Or) else (child,))
    return flat[0] if len(flat) == 1 else Or(tuple(flat))
