"""How query words and story text are read alike: Unicode folding, accents, and the tokens between word boundaries.

The same functions fold a query's words (``topicmap.topics.query_parser``) and the stories they are matched
against (``topicmap.topics.query_tree``), so a word is found exactly where the tokenizer would put it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

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


def is_word(char: str) -> bool:
    if char < "\x80":
        return char.isalnum() or char == "_"
    return _char_kind(char) == _WORD


def is_logogram(char: str) -> bool:
    return char >= "\x80" and _char_kind(char) == _LOGOGRAM


_ASCII_TOKEN = re.compile(r"[a-z0-9_]+")  # tokens of folded ASCII text


def count_tokens(view: str, start: int, end: int, limit: int) -> int:
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
        kind = _WORD if is_word(char) else _LOGOGRAM if is_logogram(char) else _SEPARATOR
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


def fold(text: str) -> str:
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


def strip_accents(folded: str) -> str:
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


def tokenize_word(word: str) -> list[str]:
    """Split a folded query word into tokens exactly as story text is split (runs, or single logograms)."""
    tokens: list[str] = []
    run: list[str] = []
    for char in word:
        if is_word(char):
            run.append(char)
            continue
        if run:
            tokens.append("".join(run))
            run = []
        if is_logogram(char):
            tokens.append(char)
    if run:
        tokens.append("".join(run))
    return tokens


def coerce_text(value: str | bytes | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    raise TypeError(f"story text must be str, bytes or None, not {type(value).__name__}")
