"""Reading an HTML page before anything is extracted from it: decoding (declared, sniffed and detected charsets),
binary sniffing, parsing into an lxml tree, and the page's metadata (<meta> values, JSON-LD objects).

The layer that extraction (``topicmap.web.extract``), dates (``topicmap.web.dates``) and links share. Everything here
is total: whatever the input, the functions return a value and never raise.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from charset_normalizer import from_bytes
from lxml import etree
from lxml.html import (
    HtmlComment,
    HtmlElement,
    HtmlEntity,
    HTMLParser,
    HtmlProcessingInstruction,
    document_fromstring,
)

log = logging.getLogger(__name__)

# Pages larger than this are cut before decoding/parsing: real articles are far smaller (the largest page of
# the evaluation set is ~1.3 MB), and the cut keeps time and memory bounded on pathological input.
MAX_HTML_BYTES = 4 * 1024 * 1024
MAX_HTML_CHARS = MAX_HTML_BYTES
# Media Cloud rejects publication dates before 2008 (and in the future) as misparsed (its Bit.ly schedule
# falls back to the collect date for them).
MIN_PUBLISH_DATE = datetime(2008, 1, 1, tzinfo=UTC)
# Bytes sampled for charset detection / binary sniffing (whole-file detection is slow on big pages).
CHARSET_SAMPLE_BYTES = 64 * 1024
BINARY_SAMPLE_BYTES = 4096
MAX_JSON_LD_CHARS = 500_000


# --------------------------------------------------------------------------------------------------
# decoding

# Signatures of formats that are never HTML; a fetched PDF or image must not be parsed as a page.
_BINARY_MAGIC = (
    b"%PDF",
    b"\x89PNG",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",
    b"PK\x03\x04",
    b"\x1f\x8b",
    b"BZh",
    b"\xfd7zXZ",
    b"7z\xbc\xaf",
    b"Rar!",
    b"ID3",
    b"OggS",
    b"RIFF",
    b"\x00\x00\x00\x18ftyp",
    b"\x00\x00\x00\x20ftyp",
    b"\x7fELF",
    b"MZ",
    b"\xd0\xcf\x11\xe0",  # old MS Office
    b"wOFF",
    b"wOF2",
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET_RE = re.compile(rb"""<meta[^>]{0,500}?charset\s*=\s*["']?\s*([a-zA-Z0-9_\-:.]{1,40})""", re.I)
# Byte-oriented single-byte Western charsets that servers and templates often declare by default while
# actually sending UTF-8 (the classic "Ã©" mojibake).
_SINGLE_BYTE_WESTERN = {"cp1252", "latin_1", "iso8859_15", "ascii"}
# Characters lxml refuses in a document (XML 1.0 invalid) plus lone surrogates.
XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _codec_name(label: str | bytes | None) -> str | None:
    """Python codec name for a charset label, following the WHATWG aliases that matter in practice."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    label = label.strip().strip("\"'").lower()
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):
        return None
    # WHATWG: latin-1 and ascii labels mean windows-1252; a UTF-16/32 label on an ASCII-compatible
    # document (which it must be, since we read the label as ASCII) means UTF-8.
    if name in ("latin-1", "iso8859-1", "ascii"):
        return "cp1252"
    if name.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return name.replace("-", "_") if name.startswith("iso8859") else name


def _decode_utf8(content: bytes) -> str | None:
    """``content`` as UTF-8, or None when it is not; a multibyte character cut at the end (a truncated page)
    is tolerated and becomes U+FFFD. One decoding pass for valid pages, not a check and then a decode."""
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason != "unexpected end of data" or error.start < len(content) - 3:
            return None
        return content.decode("utf-8", "replace")


def _is_utf8_with_non_ascii(content: bytes) -> bool:
    return not content.isascii() and _decode_utf8(content) is not None


#: Latin-script single-byte code pages that charset detection confuses with windows-1252
_LATIN_SINGLE_BYTE = frozenset(
    {"cp1250", "cp1252", "cp1254", "cp1257", "latin-1", "iso8859-1", "iso8859-2", "iso8859-4", "iso8859-9",
     "iso8859-13", "iso8859-15", "mac-roman", "cp850", "cp437"}
)  # fmt: skip


def decode_html(content: bytes, declared_charset: str | None = None) -> str:
    """Decode a fetched page: BOM, then the declared (HTTP) charset, then the <meta> charset, then UTF-8,
    then charset-normalizer's guess. Never raises; undecodable bytes become U+FFFD."""
    try:
        if isinstance(content, str):
            return content
        content = bytes(content[:MAX_HTML_BYTES])
        if not content:
            return ""
        for bom, encoding in _BOMS:
            if content.startswith(bom):
                return content[len(bom) :].decode(encoding, "replace")
        meta_match = _META_CHARSET_RE.search(content[:4096])
        labels = [declared_charset, meta_match.group(1) if meta_match else None]
        mislabelled_utf8 = False
        for encoding in dict.fromkeys(filter(None, map(_codec_name, labels))):
            if encoding == "utf-8":
                decoded = _decode_utf8(content)
                if decoded is not None:
                    return decoded
                mislabelled_utf8 = True
                continue  # declared UTF-8 but is not: look further
            if encoding in _SINGLE_BYTE_WESTERN and _is_utf8_with_non_ascii(content):
                # Valid multi-byte UTF-8 is vanishingly unlikely in real cp1252 text: the label is wrong.
                return content.decode("utf-8", "replace")
            return content.decode(encoding, "replace")
        decoded = _decode_utf8(content)
        if decoded is not None:
            return decoded
        best = from_bytes(content[:CHARSET_SAMPLE_BYTES]).best()
        if best is not None and best.encoding:
            guess = _codec_name(best.encoding) or best.encoding
            if mislabelled_utf8 and guess in _LATIN_SINGLE_BYTE:
                # A page labelled UTF-8 that is not is almost always windows-1252 (what WHATWG decoders assume
                # for Latin-1 labels); the detector's pick among Latin code pages (cp1257 for "crème") is a
                # coin toss on short French or English text.
                return content.decode("cp1252", "replace")
            return content.decode(best.encoding, "replace")
        return content.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - total function by contract
        log.debug("decode_html failed", exc_info=True)
        return (
            bytes(content or b"").decode("utf-8", "replace") if isinstance(content, bytes | bytearray) else ""
        )


_CONTROL_BYTES = bytes(byte for byte in range(32) if byte not in (9, 10, 12, 13))
_CONTROL_CHARS_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f]")


def looks_binary(content: bytes | str) -> bool:
    """Images, PDFs, archives and other non-text payloads, judged on the first few KB."""
    if isinstance(content, str):
        sample = content[:BINARY_SAMPLE_BYTES]
        return bool(sample) and len(_CONTROL_CHARS_RE.findall(sample)) > len(sample) * 0.05
    stripped = content[:BINARY_SAMPLE_BYTES].lstrip()
    if stripped.startswith(_BINARY_MAGIC):
        return True
    if content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False  # UTF-16 text is full of NULs by design
    sample = bytes(content[:BINARY_SAMPLE_BYTES])
    if not sample:
        return False
    text_bytes = sample.translate(None, _CONTROL_BYTES)
    return len(sample) - len(text_bytes) > len(sample) * 0.05


# --------------------------------------------------------------------------------------------------
# parsing

_PARSER = HTMLParser(
    encoding="utf-8", remove_comments=True, remove_pis=True, collect_ids=False, default_doctype=False
)
# Every element is a plain HtmlElement. lxml.html's default lookup is a Python method run each time an
# element is touched from Python (trafilatura's XPath prunes touch hundreds of thousands per page; ~5% of
# the extraction time in paired runs), only to hand out form/input/label subclasses that no code here uses. Same output on
# every page of the evaluation set.
_PARSER.set_element_class_lookup(
    etree.ElementDefaultClassLookup(
        element=HtmlElement, comment=HtmlComment, pi=HtmlProcessingInstruction, entity=HtmlEntity
    )
)
# The bytes of XML_INVALID_RE's control characters: in UTF-8 they only ever stand for themselves.
_XML_INVALID_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])


def _xml_compatible_utf8(text: str) -> bytes:
    """``text`` as UTF-8 without the characters lxml refuses (what ``XML_INVALID_RE.sub("", text)`` removes),
    at a third of the regex's cost on a 100 KB page."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "ignore")  # lone surrogates are the only characters UTF-8 cannot encode
    data = data.translate(None, _XML_INVALID_BYTES)
    if "\ufffe" in text or "\uffff" in text:  # instant on pages without characters beyond Latin-1
        data = data.replace("\ufffe".encode(), b"").replace("\uffff".encode(), b"")
    return data


def parse_text(text: str) -> HtmlElement | None:
    """Parse decoded HTML into an lxml tree, or None when there is no document."""
    text = text[:MAX_HTML_CHARS]
    if not text.strip():
        return None
    try:
        # Bytes + an explicit parser encoding: a leftover <?xml encoding=…?> or <meta charset> cannot
        # make lxml re-decode text that is already decoded.
        tree = document_fromstring(_xml_compatible_utf8(text), parser=_PARSER)
    except (etree.ParserError, ValueError, etree.LxmlError):
        return None
    return tree if isinstance(tree, HtmlElement) else None


def parse_html(html: str | bytes | None) -> HtmlElement | None:
    """Decode (bytes) and parse a page into an lxml tree; None for empty, binary or unparsable input."""
    try:
        if not html or not isinstance(html, str | bytes | bytearray) or looks_binary(html):
            return None
        return parse_text(decode_html(html) if isinstance(html, bytes | bytearray) else html)
    except Exception:  # noqa: BLE001 - total function by contract
        log.debug("parse_html failed", exc_info=True)
        return None


def collapse(text: str | None) -> str:
    return " ".join(text.split()) if text else ""


def meta_values(tree: HtmlElement) -> dict[str, str]:
    """<meta> key → value, first occurrence wins; the key is the property/name/itemprop/http-equiv."""
    values: dict[str, str] = {}
    for element in tree.iter("meta"):
        value = element.get("content") or element.get("value")
        if not value or not value.strip():
            continue
        for attribute in ("property", "name", "itemprop", "http-equiv"):
            key = element.get(attribute)
            if key:
                values.setdefault(key.strip().lower(), value.strip())
    return values


_ARTICLE_TYPES = {
    "article",
    "newsarticle",
    "reportagenewsarticle",
    "analysisnewsarticle",
    "opinionnewsarticle",
    "backgroundnewsarticle",
    "reviewnewsarticle",
    "blogposting",
    "liveblogposting",
    "scholarlyarticle",
    "socialmediaposting",
    "techarticle",
    "report",
    "webpage",
    "videoobject",
}


def json_ld_objects(tree: HtmlElement) -> list[dict[str, Any]]:
    """Every JSON-LD object on the page (flattening @graph and lists), article types first."""
    found: list[dict[str, Any]] = []

    def walk(node: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
        if depth > 6:
            return
        if isinstance(node, list):
            for item in node[:50]:
                yield from walk(item, depth + 1)
        elif isinstance(node, dict):
            yield node
            graph = node.get("@graph")
            if graph is not None:
                yield from walk(graph, depth + 1)

    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json":
            continue
        raw = (script.text or "").strip()
        if not raw or len(raw) > MAX_JSON_LD_CHARS:
            continue
        try:
            data = json.loads(raw, strict=False)
        except (ValueError, RecursionError):
            continue
        found.extend(walk(data))

    def is_article(obj: dict[str, Any]) -> bool:
        kinds = obj.get("@type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        return any(isinstance(kind, str) and kind.lower() in _ARTICLE_TYPES for kind in kinds)

    return sorted(found, key=lambda obj: not is_article(obj))


def json_ld_field(objects: list[dict[str, Any]], *keys: str) -> Any:
    for obj in objects:
        for key in keys:
            value = obj.get(key)
            if value not in (None, "", [], {}):
                return value
    return None


# --------------------------------------------------------------------------------------------------
# the text of elements, as it is compared with an article's text (its links, its opening paragraph)

# Elements a text extractor writes on lines of their own: a link's paragraph is its nearest such ancestor.
BLOCK_TAGS = frozenset(
    {"address", "article", "blockquote", "body", "caption", "center", "dd", "details", "div", "dl", "dt",
     "figcaption", "figure", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "html", "li", "main", "ol",
     "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)  # fmt: skip


def compact(text: str) -> str:
    """Text without whitespace: how a paragraph and the article text are compared (an extractor moves
    spaces and line breaks, not words)."""
    return "".join(text.split())


def text_of(element: HtmlElement) -> str:
    """The element's text as written, its tail excluded."""
    return etree.tostring(element, method="text", encoding=str, with_tail=False)


def compact_text_of(element: HtmlElement) -> str:
    """The element's text (its tail excluded), compacted; a comment's is none."""
    if not isinstance(element.tag, str):
        return ""
    if len(element) == 0:  # most links: no serialisation needed
        return compact(element.text or "")
    return compact(text_of(element))
