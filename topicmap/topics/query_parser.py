"""Reading a query: its size bounds, the lexer (Lucene/Solr tokens) and the recursive-descent parser into a tree."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

from topicmap.topics.query_text import fold, strip_accents, tokenize_word
from topicmap.topics.query_tree import (
    KEYWORDS,
    MATCHED_FIELDS,
    Atom,
    MatchAll,
    Node,
    Unit,
    make_and,
    make_not,
    make_or,
)

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


class Lexer:
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
        if not escaped_any and not wildcard and word.casefold() in KEYWORDS:
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


class Parser:
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

    def parse(self) -> Node:
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

    def or_list(self) -> tuple[Node | None, int]:
        """Returns the combined node (None when every clause was dropped) and the number of clauses."""
        items: list[tuple[Node | None, _Occur, _Token]] = []
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

    def combine(self, items: list[tuple[Node | None, _Occur, _Token]]) -> Node | None:
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
        parts: list[Node] = []
        if musts:
            parts.append(make_and(musts))
        elif shoulds:
            parts.append(make_or([node for node, _ in shoulds]))
        parts.extend(make_not(node) for node in prohibited)  # alone: "everything except"
        return make_and(parts) if parts else None

    def and_expr(self) -> tuple[Node | None, _Occur, _Token]:
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
            make_not(node) if occur is _Occur.MUST_NOT else node
            for node, occur in operands
            if node is not None
        ]
        return (make_and(nodes) if nodes else None), _Occur.SHOULD, first_token

    def unary(self) -> tuple[Node | None, _Occur]:
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

    def primary(self) -> Node | None:
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
            return None if self.field_context == _IGNORED else MatchAll(self.field_context)
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

    def fielded(self, token: _Token) -> Node | None:
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
        elif name in MATCHED_FIELDS:
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

    def atom(self, token: _Token, words: list[tuple[str, bool]], slop: int | None) -> Node | None:
        if self.field_context == _IGNORED:
            return None
        units: list[Unit] = []
        plain = True
        for word, prefix in words:
            folded = fold(word)
            plain = plain and strip_accents(folded) == folded
            pieces = tokenize_word(folded)
            units.extend(Unit(piece, False) for piece in pieces[:-1])
            if pieces:
                units.append(Unit(pieces[-1], prefix))
        if not units:
            if token.kind is _Kind.PHRASE:
                raise self.error(f"phrase at position {token.position} has no words", token.position)
            self.warnings.append(
                f"term '{token.text}' at position {token.position} has no letters or digits; ignored"
            )
            return None
        if slop is not None and len(units) == 1:
            slop = None  # a one-word proximity is just the word
        return Atom(self.field_context, tuple(units), slop, plain)
