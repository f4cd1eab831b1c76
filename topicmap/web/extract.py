"""Story extraction: title, article text, publication date, language, description and canonical URL.

The article text comes from trafilatura, in the mode that scored best on our real-page set (precision,
see docs/extraction.md); the title, the date and the small metadata are chosen here from the page's own
markup (Open Graph, JSON-LD, <title>, <h1>) because trafilatura's choices keep site-name suffixes
("… | CNN Politics") and drop dates on pages whose body text is too short. htmldate is the fallback for
dates that no explicit publication field states.

Everything here is total: whatever the input (binary, truncated, gigantic, malformed), the functions
return a value and never raise; work is bounded by truncating the input before parsing.
"""

from __future__ import annotations

import codecs
import html as html_lib
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urljoin

import htmldate
import trafilatura
from charset_normalizer import from_bytes
from dateutil import parser as dateutil_parser
from lxml import etree
from lxml.html import HtmlElement, HTMLParser, document_fromstring
from trafilatura.xml import xmltotxt

from topicmap.web.urls import distinctive_domain, is_http_url

log = logging.getLogger(__name__)

# Pages larger than this are cut before decoding/parsing: real articles are far smaller (the largest page of
# the evaluation set is ~1.3 MB), and the cut keeps time and memory bounded on pathological input.
MAX_HTML_BYTES = 4 * 1024 * 1024
MAX_HTML_CHARS = MAX_HTML_BYTES
# Media Cloud rejects publication dates before 2008 (and in the future) as misparsed (fact sheet §12).
MIN_PUBLISH_DATE = datetime(2008, 1, 1, tzinfo=UTC)
MAX_TITLE_LENGTH = 1024
# Media Cloud treats content without a '<' in its first 1000 chars as plain text (fact sheet §3).
PLAIN_TEXT_PROBE_CHARS = 1000
MAX_PLAIN_TEXT_CHARS = 1_000_000
# Bytes sampled for charset detection / binary sniffing (whole-file detection is slow on big pages).
CHARSET_SAMPLE_BYTES = 64 * 1024
BINARY_SAMPLE_BYTES = 4096
MAX_JSON_LD_CHARS = 500_000


@dataclass(frozen=True)
class ExtractedStory:
    """What a story page says about itself."""

    title: str | None
    text: str
    publish_date: datetime | None  # timezone-aware, UTC
    language: str | None  # ISO 639 primary subtag, lowercase ("en", "pt")
    description: str | None
    canonical_url: str | None


EMPTY_STORY = ExtractedStory(None, "", None, None, None, None)

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
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


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


def _looks_binary(content: bytes | str) -> bool:
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


def _parse(text: str) -> HtmlElement | None:
    """Parse decoded HTML into an lxml tree, or None when there is no document."""
    text = _XML_INVALID_RE.sub("", text[:MAX_HTML_CHARS])
    if not text.strip():
        return None
    try:
        # Bytes + an explicit parser encoding: a leftover <?xml encoding=…?> or <meta charset> cannot
        # make lxml re-decode text that is already decoded.
        tree = document_fromstring(text.encode("utf-8", "replace"), parser=_PARSER)
    except (etree.ParserError, ValueError, etree.LxmlError):
        return None
    return tree if isinstance(tree, HtmlElement) else None


def parse_html(html: str | bytes | None) -> HtmlElement | None:
    """Decode (bytes) and parse a page into an lxml tree; None for empty, binary or unparsable input."""
    try:
        if not html or not isinstance(html, str | bytes | bytearray) or _looks_binary(html):
            return None
        return _parse(decode_html(html) if isinstance(html, bytes | bytearray) else html)
    except Exception:  # noqa: BLE001 - total function by contract
        log.debug("parse_html failed", exc_info=True)
        return None


def _collapse(text: str | None) -> str:
    return " ".join(text.split()) if text else ""


def _meta_values(tree: HtmlElement) -> dict[str, str]:
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


def _json_ld_objects(tree: HtmlElement) -> list[dict[str, Any]]:
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


def _json_ld_field(objects: list[dict[str, Any]], *keys: str) -> Any:
    for obj in objects:
        for key in keys:
            value = obj.get(key)
            if value not in (None, "", [], {}):
                return value
    return None


# --------------------------------------------------------------------------------------------------
# title

# Separators sites put between the headline and the site name or section ("X | CNN", "X - BBC News").
_TITLE_SPLIT_RE = re.compile(r"\s+(?:[|\-–—»«·•~/:]{1,2}|::)\s+|\s*[|｜]\s*|\u3000+")
# What may follow a clean title inside a longer one. Not ':' — "Brexit: what happens next" is one headline.
_PREFIX_REMAINDER_RE = re.compile(r"^\s*(?:[|\-–—»«·•~/｜]|\u3000)")
_EDGE_SEPARATORS = " |-–—»«·•~/｜"
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})


def _title_key(text: str) -> str:
    """Comparison key for titles: quotes unified, casefolded, whitespace collapsed, edge punctuation off."""
    return _collapse(text.translate(_QUOTES)).casefold().strip(" .!?\"'")


def _site_names(meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str) -> set[str]:
    names = {meta.get("og:site_name", ""), meta.get("application-name", ""), meta.get("twitter:site", "")}
    publisher = _json_ld_field(ld_objects, "publisher")
    if isinstance(publisher, dict) and isinstance(publisher.get("name"), str):
        names.add(publisher["name"])
    domain = distinctive_domain(url) if url else None
    if domain:
        names.add(domain.split(".")[0])
    return {key for key in (re.sub(r"\W+", "", name.casefold()) for name in names) if len(key) >= 2}


def _is_site_name(part: str, site_names: set[str]) -> bool:
    key = re.sub(r"\W+", "", part.casefold())
    if not key:
        return True  # a bare separator or punctuation
    for name in site_names:
        if key == name or (len(key) >= 3 and key in name):  # "Guardian" in "theguardian"
            return True
        # A short name must start or end the part ("CNN Politics"): "ft" is in "Soft border" too.
        if name in key and (len(name) >= 4 or key.startswith(name) or key.endswith(name)):
            return True
    return False


def _strip_site_name(title: str, site_names: set[str]) -> str:
    """Drop leading/trailing title parts that name the site ("X | CNN Politics" → "X")."""
    parts = [part for part in _TITLE_SPLIT_RE.split(title) if part and part.strip()]
    if len(parts) < 2:
        return title
    kept = list(parts)
    while len(kept) > 1 and _is_site_name(kept[-1], site_names):
        kept.pop()
    while len(kept) > 1 and _is_site_name(kept[0], site_names):
        kept.pop(0)
    if len(kept) == len(parts):
        return title
    # Cut the original string, so separators inside the kept headline (e.g. "A - B") stay as written.
    start = title.find(kept[0])
    end = title.rfind(kept[-1]) + len(kept[-1])
    return title[start:end].strip() if 0 <= start < end else title


def _choose_title(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str
) -> str | None:
    """The story's headline, without the site name the <title> usually carries.

    Order of evidence: an <h1> that agrees with a metadata title (og/twitter/JSON-LD/<title>) wins as
    written on the page; else a metadata title that is a prefix of <title> followed by a separator;
    else <title> (or og:title, JSON-LD headline…) with site-name parts removed; else the first <h1>.
    """
    title_element = tree.find(".//head/title")
    if title_element is None:
        title_element = tree.find(".//title")
    tag_title = _collapse(title_element.text_content()) if title_element is not None else ""
    headline = _json_ld_field(ld_objects, "headline")
    ld_title = _collapse(headline) if isinstance(headline, str) else ""
    og_title = _collapse(meta.get("og:title"))
    twitter_title = _collapse(meta.get("twitter:title"))
    h1s = [text for text in (_collapse(h1.text_content()) for h1 in tree.iter("h1")) if 0 < len(text) <= 400][
        :5
    ]
    metadata_titles = [title for title in (og_title, twitter_title, ld_title, tag_title) if title]

    # 1. the visible headline confirmed by the metadata
    metadata_keys = {_title_key(title) for title in metadata_titles}
    for h1 in h1s:
        if _title_key(h1) in metadata_keys:
            return h1[:MAX_TITLE_LENGTH]

    # 2. a clean title that another title extends with a separator + site/section name (a blog whose
    # <h1> is its own name, "Lost in JIT" in "Lost in JIT: PyPy and …", is not a headline)
    site_names = _site_names(meta, ld_objects, url)
    candidates = sorted({*h1s, og_title, twitter_title, ld_title} - {""}, key=len, reverse=True)
    candidates = [candidate for candidate in candidates if not _is_site_name(candidate, site_names)]
    for longer in (tag_title, og_title, twitter_title, ld_title):
        if not longer:
            continue
        longer_key = longer.translate(_QUOTES).casefold()
        for candidate in candidates:
            if len(candidate) >= len(longer) or len(candidate) < 10:
                continue
            if longer_key.startswith(candidate.translate(_QUOTES).casefold()) and _PREFIX_REMAINDER_RE.match(
                longer[len(candidate) :]
            ):
                return candidate[:MAX_TITLE_LENGTH]

    # 3. the page's own title, site name removed
    for title in (tag_title, og_title, ld_title, twitter_title):
        if title:
            stripped = _strip_site_name(title, site_names).strip(_EDGE_SEPARATORS)
            return (stripped or title)[:MAX_TITLE_LENGTH]
    return h1s[0][:MAX_TITLE_LENGTH] if h1s else None


_TITLE_OPEN_RE = re.compile(r"<title\b[^>]{0,1000}>", re.I)
_TITLE_CLOSE_RE = re.compile(r"</title\s*>", re.I)
# Where to look for </title>: one lazy regex over the page would rescan to the end from every "<title"
# of a hostile page without a closing tag (quadratic).
MAX_TITLE_SCAN_CHARS = 20_000


def page_title(html: str | bytes | None) -> str | None:
    """The plain <title> text (entities decoded, whitespace collapsed, ≤ 1024 chars), or None."""
    try:
        if not html:
            return None
        text = decode_html(html) if isinstance(html, bytes | bytearray) else str(html)
        opening = _TITLE_OPEN_RE.search(text, 0, MAX_HTML_CHARS)
        if not opening:
            return None
        closing = _TITLE_CLOSE_RE.search(text, opening.end(), opening.end() + MAX_TITLE_SCAN_CHARS)
        if not closing:
            return None
        raw = text[opening.end() : closing.start()]
        title = _collapse(html_lib.unescape(re.sub(r"<[^>]*>", " ", raw)))
        title = _XML_INVALID_RE.sub("", title)
        return title[:MAX_TITLE_LENGTH] or None
    except Exception:  # noqa: BLE001 - total function by contract
        log.debug("page_title failed", exc_info=True)
        return None


# --------------------------------------------------------------------------------------------------
# publication date

# Explicit "this is when it was published" fields, most specific first. A page that states one is
# trusted over any heuristic search of its text.
_META_DATE_KEYS = (
    "article:published_time",
    "og:published_time",
    "og:article:published_time",
    "article:published",
    "datepublished",
    "rnews:datepublished",
    "originalpublicationdate",
    "article_date_original",
    "dc.date.issued",
    "dcterms.issued",
    "dc.date.published",
    "dcterms.created",
    "dc.date.created",
    "citation_publication_date",
    "citation_date",
    "parsely-pub-date",
    "sailthru.date",
    "publication_date",
    "publish-date",
    "publishdate",
    "pubdate",
    "date",
    "dc.date",
)
_TZINFOS = {
    "UTC": 0,
    "GMT": 0,
    "Z": 0,
    "EST": -5 * 3600,
    "EDT": -4 * 3600,
    "CST": -6 * 3600,
    "CDT": -5 * 3600,
    "MST": -7 * 3600,
    "MDT": -6 * 3600,
    "PST": -8 * 3600,
    "PDT": -7 * 3600,
    "BST": 3600,
    "CET": 3600,
    "CEST": 2 * 3600,
    "IST": 19800,
    "JST": 9 * 3600,
    "KST": 9 * 3600,
}


def _valid_publish_date(moment: datetime | None, now: datetime) -> datetime | None:
    if moment is None:
        return None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment if MIN_PUBLISH_DATE <= moment <= now else None


_COMPACT_DATE_RE = re.compile(r"^(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])$")
# dateutil fills fields a string lacks from this default: year 1 makes a year-less date invalid.
_NO_DEFAULT_DATE = datetime(1, 1, 1)


def _parse_date_value(value: Any) -> datetime | None:
    """A date from an ISO string, a free-form date string or a Unix timestamp (s or ms)."""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _COMPACT_DATE_RE.match(value.strip()):
        return datetime.strptime(value.strip(), "%Y%m%d")
    if isinstance(value, int | float) or (isinstance(value, str) and value.strip().isdigit()):
        number = float(value)
        if number > 1e11:  # milliseconds
            number /= 1000
        try:
            return datetime.fromtimestamp(number, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    value = value.strip()[:100]
    if len(value) < 6:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        pass
    try:
        return dateutil_parser.parse(value, default=_NO_DEFAULT_DATE, tzinfos=_TZINFOS, fuzzy=False)
    except (ValueError, OverflowError, TypeError, LookupError):
        return None


def _declared_publish_date(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], now: datetime
) -> datetime | None:
    """The publication date the page states in its metadata (JSON-LD, <meta>, <time itemprop>), as
    written (its own offset kept, so the publisher's calendar day can still be read from it)."""
    candidates: list[Any] = [_json_ld_field(ld_objects, "datePublished", "dateCreated")]
    candidates += [meta.get(key) for key in _META_DATE_KEYS]
    for element in tree.iterfind(".//time[@itemprop='datePublished']"):
        candidates.append(element.get("datetime") or element.get("content"))
    for value in candidates:
        if value is None:
            continue
        moment = _parse_date_value(value)
        if _valid_publish_date(moment, now) is not None:
            return moment
    return None


# A full date in the URL path (/2020/04/13/, /2020-04-13-, /20200413/), minted when the story was published.
_URL_DATE_RE = re.compile(
    r"(?<![0-9])(20[0-9]{2})([/_.-]?)(0[1-9]|1[0-2])\2(0[1-9]|[12][0-9]|3[01])(?![0-9])"
)


def _url_day(url: str) -> date | None:
    path = url.split("://", 1)[-1].partition("/")[2]
    match = _URL_DATE_RE.search(path)
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(3)), int(match.group(4)))
    except ValueError:
        return None


# htmldate's "extensive search" (free-text date patterns, dateparser) finds more dates on pages that state
# none in their markup, but on the evaluation set the extra ones were wrong (three 1 January dates made
# from a bare year, a 2011 date on a story whose URL says 2010/08/13), and its first calls load
# dateparser's locale tables (~2 s each): off. See docs/extraction.md.
EXTENSIVE_DATE_SEARCH = False


def _searched_publish_date(tree: HtmlElement, url: str, now: datetime) -> datetime | None:
    """htmldate's search (URL, markup, then text patterns), restricted to the valid window."""
    try:
        found = htmldate.find_date(
            tree,
            url=url or None,
            original_date=True,  # publication, not last modification
            extensive_search=EXTENSIVE_DATE_SEARCH,
            min_date=MIN_PUBLISH_DATE.strftime("%Y-%m-%d"),
            max_date=now.strftime("%Y-%m-%d"),
        )
    except Exception:  # noqa: BLE001 - third-party parser on hostile input
        log.debug("htmldate failed", exc_info=True)
        return None
    if not found:
        return None
    try:
        day = date.fromisoformat(found)
    except ValueError:
        return None
    return _valid_publish_date(datetime(day.year, day.month, day.day, tzinfo=UTC), now)


def _publish_date(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str
) -> datetime | None:
    """Declared publication date, else htmldate's search; UTC, within [2008-01-01, now]."""
    now = datetime.now(UTC)
    declared = _declared_publish_date(tree, meta, ld_objects, now)
    if declared is None:
        return _searched_publish_date(tree, url, now)
    url_day = _url_day(url) if url else None
    if url_day is not None and abs((declared.date() - url_day).days) == 1:
        # The URL's day is the publisher's own; metadata one day off is a time stamped in another zone
        # or a local time mislabelled as UTC ("…T00:38:07Z" for 16:38 the day before).
        return _valid_publish_date(datetime(url_day.year, url_day.month, url_day.day, tzinfo=UTC), now)
    return _valid_publish_date(declared, now)


# --------------------------------------------------------------------------------------------------
# language, description, canonical URL

_LANGUAGE_RE = re.compile(r"^\s*([a-zA-Z]{2,3})(?:[-_]|\s*$)")
_NOT_A_LANGUAGE = {"und", "mul", "zxx", "mis"}


def _language_code(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    match = _LANGUAGE_RE.match(value)
    code = match.group(1).lower() if match else None
    return code if code and code not in _NOT_A_LANGUAGE else None


def _language(tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]]) -> str | None:
    declared = [
        tree.get("lang"),
        tree.get("{http://www.w3.org/XML/1998/namespace}lang"),
        tree.get("xml:lang"),
        meta.get("content-language"),
        meta.get("language"),
        meta.get("og:locale"),
        meta.get("dc.language"),
        _json_ld_field(ld_objects, "inLanguage"),
    ]
    for value in declared:
        code = _language_code(value)
        if code:
            return code
    return None


# Fallback when a page declares no language: stop-word counts over the article text, using the stop-word
# lists jusText ships (a trafilatura dependency), plus Unicode scripts that identify a language alone.
_STOPLIST_LANGUAGES = {
    "Afrikaans": "af", "Albanian": "sq", "Arabic": "ar", "Armenian": "hy", "Azerbaijani": "az",
    "Basque": "eu", "Belarusian": "be", "Bengali": "bn", "Bosnian": "bs", "Bulgarian": "bg",
    "Catalan": "ca", "Croatian": "hr", "Czech": "cs", "Danish": "da", "Dutch": "nl", "English": "en",
    "Estonian": "et", "Finnish": "fi", "French": "fr", "Galician": "gl", "German": "de", "Greek": "el",
    "Gujarati": "gu", "Hebrew": "he", "Hindi": "hi", "Hungarian": "hu", "Icelandic": "is",
    "Indonesian": "id", "Irish": "ga", "Italian": "it", "Kannada": "kn", "Kazakh": "kk", "Latvian": "lv",
    "Lithuanian": "lt", "Macedonian": "mk", "Malay": "ms", "Malayalam": "ml", "Marathi": "mr",
    "Nepali": "ne", "Norwegian_Bokmal": "nb", "Persian": "fa", "Polish": "pl", "Portuguese": "pt",
    "Romanian": "ro", "Russian": "ru", "Serbian": "sr", "Slovak": "sk", "Slovenian": "sl",
    "Spanish": "es", "Swahili": "sw", "Swedish": "sv", "Tagalog": "tl", "Tamil": "ta", "Telugu": "te",
    "Turkish": "tr", "Ukrainian": "uk", "Urdu": "ur", "Uzbek": "uz", "Vietnamese": "vi", "Welsh": "cy",
}  # fmt: skip
_SCRIPT_LANGUAGES = (
    (re.compile(r"[\u3040-\u30ff]"), "ja"),  # kana (before Han: Japanese text mixes both)
    (re.compile(r"[\uac00-\ud7af]"), "ko"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh"),
    (re.compile(r"[\u0e00-\u0e7f]"), "th"),
    (re.compile(r"[\u10a0-\u10ff]"), "ka"),
    (re.compile(r"[\u0530-\u058f]"), "hy"),
    (re.compile(r"[\u0590-\u05ff]"), "he"),
    (re.compile(r"[\u0370-\u03ff]"), "el"),
)
_stopword_languages: dict[str, set[str]] | None = None
LANGUAGE_SAMPLE_CHARS = 4000


def _stopwords_by_word() -> dict[str, set[str]]:
    """word → languages whose stop-word list has it (loaded once, ~0.3 s)."""
    global _stopword_languages
    if _stopword_languages is None:
        import justext  # local: only pages without a declared language pay for loading the lists

        table: dict[str, set[str]] = {}
        for name, code in _STOPLIST_LANGUAGES.items():
            try:
                words = justext.get_stoplist(name)
            except (ValueError, OSError):
                continue
            if sum(word.isascii() for word in words) < len(words) / 2:
                # Lists of non-Latin-script languages carry stray Latin words ("the", "and").
                words = {word for word in words if not word.isascii()}
            for word in words:
                table.setdefault(word, set()).add(code)
        _stopword_languages = table
    return _stopword_languages


def guess_language(text: str | None) -> str | None:
    """ISO 639-1 code of the language a text is written in, or None when it is too short to tell."""
    if not text:
        return None
    sample = text[:LANGUAGE_SAMPLE_CHARS]
    for pattern, code in _SCRIPT_LANGUAGES:
        if len(pattern.findall(sample)) >= 20:
            return code
    words = re.findall(r"\w+", sample.lower())
    if len(words) < 20:
        return None
    table = _stopwords_by_word()
    # A word shared by several lists ("a", "de") says less than one only a single language uses.
    scores: dict[str, float] = {}
    for word in words:
        languages = table.get(word, ())
        for code in languages:
            scores[code] = scores.get(code, 0.0) + 1.0 / len(languages)
    if not scores:
        return None
    code, score = max(scores.items(), key=lambda item: item[1])
    return code if score >= max(3.0, len(words) / 20) else None


def _description(meta: dict[str, str], ld_objects: list[dict[str, Any]]) -> str | None:
    for value in (
        meta.get("og:description"),
        meta.get("description"),
        meta.get("twitter:description"),
        _json_ld_field(ld_objects, "description"),
    ):
        if isinstance(value, str) and value.strip():
            return _collapse(html_lib.unescape(value))[:10_000]
    return None


def _canonical_url(tree: HtmlElement, meta: dict[str, str], url: str) -> str | None:
    hrefs = [
        link.get("href")
        for link in tree.iterfind(".//link[@rel]")
        if link.get("rel", "").lower() == "canonical"
    ]
    hrefs.append(meta.get("og:url"))
    for href in hrefs:
        if not href or not href.strip():
            continue
        try:
            absolute = urljoin(url, href.strip()) if url else href.strip()
        except ValueError:
            continue
        if is_http_url(absolute):
            return absolute
    return None


# --------------------------------------------------------------------------------------------------
# article text

# Tuned on the real-page set (benchmarks/eval_extraction.py, docs/extraction.md).
TRAFILATURA_OPTIONS: dict[str, Any] = {"include_comments": False, "favor_precision": True}


# Elements the text extractor deletes anyway. Removing them up front (in place, keeping their tail text)
# saves trafilatura work on script-heavy pages — its pruning passes measure text_content() of the whole
# tree, inline JSON blobs included — 2-5% overall, with identical output on the evaluation set. (Removing
# <form> too is not safe: ASP.NET sites wrap the whole page, article included, in one.)
_NEVER_ARTICLE_TEXT = (
    "head", "script", "style", "noscript", "template", "svg", "canvas", "iframe", "embed", "object",
    "video", "audio", "link", "meta",
)  # fmt: skip


def _article_document(tree: HtmlElement, url: str, include_links: bool = False) -> Any:
    """trafilatura's article document (``.text``, ``.body``), or None. Prunes `tree` in place.

    With ``include_links`` the body keeps the article's links as <ref target=...> elements, and no URL is
    given to trafilatura: it would resolve relative links against the site root instead of the page."""
    etree.strip_elements(tree, *_NEVER_ARTICLE_TEXT, with_tail=False)
    try:
        return trafilatura.bare_extraction(
            tree,
            url=None if include_links else (url or None),
            with_metadata=False,
            include_tables=True,
            include_links=include_links,
            **TRAFILATURA_OPTIONS,
        )
    except Exception:  # noqa: BLE001 - third-party extractor on hostile input
        log.debug("trafilatura failed", exc_info=True)
        return None


# --------------------------------------------------------------------------------------------------
# public entry point


def extract_story(html: str | bytes, url: str) -> ExtractedStory:
    """Title, text, publication date, language, description and canonical URL of one story page.

    Never raises: binary or empty input gives an empty story; oversized input is truncated first.
    """
    return extract_story_document(html, url).story


@dataclass(frozen=True)
class StoryDocument:
    """One parse of a page: the story; when links were asked for, the article's link targets (as written)
    and its text with the links' words; and whatever ``before_pruning`` read from the full page tree (for
    link mining: <base>, embedded videos)."""

    story: ExtractedStory
    link_targets: list[str] = field(default_factory=list)
    linked_text: str = ""
    before_pruning: Any = None


def extract_story_document(
    html: str | bytes,
    url: str,
    include_links: bool = False,
    before_pruning: Callable[[HtmlElement], Any] | None = None,
) -> StoryDocument:
    """``extract_story`` that can also keep the article's links, so a crawler parses each page once."""
    try:
        return _extract_story(html, url if isinstance(url, str) else "", include_links, before_pruning)
    except Exception:  # noqa: BLE001 - total function by contract
        log.warning("story extraction failed for %s", url, exc_info=True)
        return StoryDocument(EMPTY_STORY)


def _extract_story(
    html: str | bytes, url: str, include_links: bool, before_pruning: Callable[[HtmlElement], Any] | None
) -> StoryDocument:
    if not html or not isinstance(html, str | bytes | bytearray):
        return StoryDocument(EMPTY_STORY)
    if _looks_binary(html):
        return StoryDocument(EMPTY_STORY)
    text = decode_html(html) if isinstance(html, bytes | bytearray) else html[:MAX_HTML_CHARS]
    if "<" not in text[:PLAIN_TEXT_PROBE_CHARS]:
        plain = _XML_INVALID_RE.sub("", text[:MAX_PLAIN_TEXT_CHARS]).strip()
        return StoryDocument(ExtractedStory(None, plain, None, None, None, None))
    tree = _parse(text)
    if tree is None:
        return StoryDocument(EMPTY_STORY)
    meta = _meta_values(tree)
    ld_objects = _json_ld_objects(tree)
    title = _choose_title(tree, meta, ld_objects, url)
    publish_date = _publish_date(tree, meta, ld_objects, url)
    language = _language(tree, meta, ld_objects)
    description = _description(meta, ld_objects)
    canonical_url = _canonical_url(tree, meta, url)
    seen_before_pruning = before_pruning(tree) if before_pruning is not None else None
    # Last, because it prunes the tree the metadata was read from.
    document = _article_document(tree, url, include_links)
    body = getattr(document, "body", None) if document is not None else None
    link_targets: list[str] = []
    linked_text = ""
    if include_links and body is not None:
        link_targets = [target for ref in body.iter("ref") if (target := ref.get("target"))]
        linked_text = " ".join(body.itertext())
        # trafilatura writes links into its text output; the text comes from the body without them
        # (F1 0.971 vs 0.970 without links on the evaluation set; 0.928 with trafilatura's linked text).
        etree.strip_tags(body, "ref")
        text = xmltotxt(body, False) or ""
    else:
        text = (getattr(document, "text", None) if document is not None else None) or ""
    language = language or guess_language(text)
    story = ExtractedStory(title, text, publish_date, language, description, canonical_url)
    return StoryDocument(story, link_targets, linked_text, seen_before_pruning)


__all__ = [
    "EMPTY_STORY",
    "ExtractedStory",
    "decode_html",
    "extract_story",
    "extract_story_document",
    "StoryDocument",
    "guess_language",
    "page_title",
    "parse_html",
    "MIN_PUBLISH_DATE",
    "MAX_HTML_BYTES",
]
