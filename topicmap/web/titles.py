"""Story titles: the headline a page gives, without the site name, by one rule for every path.

``choose_title`` picks a page's headline among its titles (``<h1>``, og:title, twitter:title, JSON-LD headline,
``<title>``); ``clean_title`` removes the site name from a title that comes alone (an archive drop's row, a
story-indexer record) with the same test of what names a site (``site_names``, ``is_site_name``). The spider,
the Common Crawl loader and the archive drops all go through one of the two (docs/extraction.md, "Title").
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterable
from typing import Any

from lxml.html import HtmlElement

from topicmap.web.page import collapse, json_ld_field
from topicmap.web.urls import distinctive_domain

MAX_TITLE_LENGTH = 1024

# Separators sites put between the headline and the site name or section ("X | CNN", "X - BBC News").
_TITLE_SPLIT_RE = re.compile(r"\s+(?:[|\-–—»«·•~/:]{1,2}|::)\s+|\s*[|｜]\s*|\u3000+")
# What may follow a clean title inside a longer one. Not ':' — "Brexit: what happens next" is one headline.
_PREFIX_REMAINDER_RE = re.compile(r"^\s*(?:[|\-–—»«·•~/｜]|\u3000)")
# What may precede a clean title inside a longer one ("Site - Headline"); here ':' too ("Site: Headline").
_SUFFIX_REMAINDER_RE = re.compile(r"\S\s*(?:[|\-–—»«·•~/｜:]|\u3000)\s*$")
# "Site name: Headline", the colon written without a space before it: only cut when the part before the
# colon is exactly a site name ("Brexit: what happens next" is one headline).
_SITE_COLON_RE = re.compile(r"^([^:|]{2,80}?)\s*:\s+(\S.*)$", re.S)
_EDGE_SEPARATORS = " |-–—»«·•~/｜"
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})


def title_key(text: str) -> str:
    """Comparison key for titles: quotes unified, casefolded, whitespace collapsed, edge punctuation off."""
    return collapse(text.translate(_QUOTES)).casefold().strip(" .!?\"'")


def _name_key(name: str) -> str:
    return re.sub(r"\W+", "", name.casefold())


def site_names(names: Iterable[str | None], url: str | None = None) -> set[str]:
    """The comparison keys of a site's names: each name given (og:site_name, a drop's medium, ...), the
    initials of a name of several words ("Riverside Gazette" → "rg"), and the first label of the URL's
    domain ("nytimes" of www.nytimes.com)."""
    keys = set()
    for name in names:
        if not isinstance(name, str) or not name.strip():
            continue
        keys.add(_name_key(name))
        words = [word for word in re.split(r"\W+", name.casefold()) if word]
        if words and words[0] == "the" and len(words) > 2:
            words = words[1:]
        if len(words) >= 2:
            keys.add("".join(word[0] for word in words))
        if "." in name and " " not in name.strip():  # a host as a name: also its first label
            keys.add(_name_key(name.strip().removeprefix("www.").split(".")[0]))
    domain = distinctive_domain(url) if url else None
    if domain:
        keys.add(_name_key(domain.split(".")[0]))
    return {key for key in keys if len(key) >= 2}


def page_site_names(meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str | None) -> set[str]:
    """``site_names`` of a page: og:site_name, application-name, twitter:site, the JSON-LD publisher's name,
    the URL's domain (none without ``url``)."""
    names = [meta.get("og:site_name"), meta.get("application-name"), meta.get("twitter:site")]
    publisher = json_ld_field(ld_objects, "publisher")
    if isinstance(publisher, dict) and isinstance(publisher.get("name"), str):
        names.append(publisher["name"])
    return site_names(names, url)


def is_site_name(part: str, names: set[str]) -> bool:
    """Does a title part name the site (one of ``site_names``' keys)? "CNN Politics" does for "cnn"."""
    key = _name_key(part)
    if not key:
        return True  # a bare separator or punctuation
    for name in names:
        if key == name or (len(key) >= 3 and key in name):  # "Guardian" in "theguardian"
            return True
        # A short name must start or end the part ("CNN Politics"): "ft" is in "Soft border" too; initials
        # ("rg") only as the whole part.
        if name in key and (len(name) >= 4 or key.startswith(name) or key.endswith(name)):
            return True
    return False


def strip_site_name(title: str, names: set[str], colon_names: set[str] | None = None) -> str:
    """Drop leading/trailing title parts that name the site ("X | CNN Politics" → "X"); and "Site: X" → "X"
    when "Site" is exactly one of ``colon_names`` (names the page or the medium gives, not a domain's label:
    the blog lostinjit.blogspot.fr titles a post "Lost in JIT: PyPy and …")."""
    parts = [part for part in _TITLE_SPLIT_RE.split(title) if part and part.strip()]
    kept = list(parts)
    while len(kept) > 1 and is_site_name(kept[-1], names):
        kept.pop()
    while len(kept) > 1 and is_site_name(kept[0], names):
        kept.pop(0)
    if len(kept) < len(parts):
        # Cut the original string, so separators inside the kept headline (e.g. "A - B") stay as written.
        start = title.find(kept[0])
        end = title.rfind(kept[-1]) + len(kept[-1])
        if 0 <= start < end:
            title = title[start:end].strip()
    colon = _SITE_COLON_RE.match(title)
    if colon and _name_key(colon.group(1)) in (colon_names or set()) and len(colon.group(2).strip()) >= 3:
        title = colon.group(2).strip()
    return title


def clean_title(
    title: str | None,
    names: Iterable[str | None] = (),
    url: str | None = None,
    headlines: Iterable[str | None] = (),
) -> str | None:
    """A title that comes without its page (an archive row's), site name removed as the extractor removes
    it from a page's ``<title>``: leading or trailing parts naming the medium (``names``: the medium's name,
    the page's og:site_name; the initials of either; the URL's domain). A clean headline the page gives
    (``headlines``: its og:title) that the title extends with a separator and more ("H | Section | Site")
    is taken, as the extractor takes it. Whitespace collapsed; None for no title. Applying it twice changes
    nothing more."""
    if not isinstance(title, str):
        return None
    title = collapse(title)
    if not title:
        return None
    folded = title.translate(_QUOTES).casefold()
    for headline in headlines:
        headline = collapse(headline) if isinstance(headline, str) else ""
        if len(headline) < 10 or len(headline) >= len(title):
            continue
        key = headline.translate(_QUOTES).casefold()
        if (folded.startswith(key) and _PREFIX_REMAINDER_RE.match(title[len(headline) :])) or (
            folded.endswith(key) and _SUFFIX_REMAINDER_RE.search(title[: -len(headline)])
        ):
            return title[: len(headline)] if folded.startswith(key) else title[-len(headline) :]
    names = list(names)
    stripped = strip_site_name(title, site_names(names, url), site_names(names)).strip(_EDGE_SEPARATORS)
    return (stripped or title)[:MAX_TITLE_LENGTH]


_META_RE = re.compile(r"<meta\b[^>]{0,1000}>", re.I)
_SITE_NAME_ATTR_RE = re.compile(r"""(?:property|name)\s*=\s*["']?og:site_name\b""", re.I)
_OG_TITLE_ATTR_RE = re.compile(r"""(?:property|name)\s*=\s*["']?og:title\b""", re.I)
_CONTENT_RE = re.compile(r"""\bcontent\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
#: how much of a page ``og_site_name`` reads: the <head>, where the tag is
MAX_SITE_NAME_SCAN = 200_000


def og_values(html: str | bytes | None) -> tuple[str | None, str | None]:
    """(og:site_name, og:title) a page declares (entities decoded, whitespace collapsed), read from its
    first 200 KB without parsing it, for titles that come with the page but not through the extractor (an
    archive row's); None for what it does not declare."""
    return _og_value(html, _SITE_NAME_ATTR_RE), _og_value(html, _OG_TITLE_ATTR_RE)


def og_site_name(html: str | bytes | None) -> str | None:
    """The og:site_name of ``og_values``."""
    return _og_value(html, _SITE_NAME_ATTR_RE)


def _og_value(html: str | bytes | None, attribute: re.Pattern[str]) -> str | None:
    if not html:
        return None
    text = html[:MAX_SITE_NAME_SCAN]
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    for tag in _META_RE.finditer(text):
        if attribute.search(tag.group(0)):
            content = _CONTENT_RE.search(tag.group(0))
            if content:
                name = collapse(html_lib.unescape(next(g for g in content.groups() if g is not None)))
                return name[:256] or None
    return None


def _agreed_metadata_title(
    named: dict[str, str], names: set[str], colon_names: set[str]
) -> tuple[str, str] | None:
    """The headline two of the page's metadata titles (og:title, twitter:title, JSON-LD headline) give,
    site names removed, with the sources named ("og:title = json-ld headline"), or None."""
    cleaned: dict[str, list[tuple[str, str]]] = {}
    for source in ("og:title", "json-ld headline", "twitter:title"):
        title = named.get(source)
        if title:
            stripped = strip_site_name(title, names, colon_names).strip(_EDGE_SEPARATORS) or title
            cleaned.setdefault(title_key(stripped), []).append((source, stripped))
    for found in cleaned.values():
        if len(found) >= 2:
            return found[0][1], " = ".join(source for source, _ in found)
    return None


def choose_title(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str
) -> tuple[str | None, str | None]:
    """The story's headline, without the site name the <title> usually carries, and how it was found.

    Order of evidence: an <h1> that agrees with a metadata title (og/twitter/JSON-LD/<title>) wins as
    written on the page; else a clean title that another extends with a separator and a site or section
    name; where the page's metadata titles agree with each other on a headline that the <h1> or <title>
    chosen so far is not, that headline; else og:title when it carries the page's site name, then
    <title> (or og:title, JSON-LD headline…), site-name parts removed; else the first <h1>.
    """
    title_element = tree.find(".//head/title")
    if title_element is None:
        title_element = tree.find(".//title")
    tag_title = collapse(title_element.text_content()) if title_element is not None else ""
    headline = json_ld_field(ld_objects, "headline")
    ld_title = collapse(headline) if isinstance(headline, str) else ""
    og_title = collapse(meta.get("og:title"))
    twitter_title = collapse(meta.get("twitter:title"))
    h1s = [text for text in (collapse(h1.text_content()) for h1 in tree.iter("h1")) if 0 < len(text) <= 400][
        :5
    ]
    named = {
        "og:title": og_title,
        "twitter:title": twitter_title,
        "json-ld headline": ld_title,
        "<title>": tag_title,
    }
    names = page_site_names(meta, ld_objects, url)
    declared = page_site_names(meta, ld_objects, None)
    agreed = _agreed_metadata_title(named, names, declared)
    agreed_key = title_key(agreed[0]) if agreed else None

    def unless_metadata_disagrees(title: str, method: str) -> tuple[str, str]:
        # the visible headline or <title> against a headline the metadata gives twice
        if agreed and title_key(title) != agreed_key and not _names_metadata(method):
            return agreed[0][:MAX_TITLE_LENGTH], agreed[1]
        return title[:MAX_TITLE_LENGTH], method

    # 1. the visible headline confirmed by the metadata
    metadata_titles = {title: name for name, title in reversed(named.items()) if title}
    metadata_keys = {title_key(title): name for title, name in metadata_titles.items()}
    for h1 in h1s:
        if title_key(h1) in metadata_keys:
            return unless_metadata_disagrees(h1, f"<h1> = {metadata_keys[title_key(h1)]}")

    # 2. a clean title that another title extends with a separator + site/section name (a blog whose
    # <h1> is its own name, "Lost in JIT" in "Lost in JIT: PyPy and …", is not a headline)
    sources = {
        title: name for name, title in reversed([*named.items(), *(("<h1>", h1) for h1 in h1s)]) if title
    }
    candidates = sorted({*h1s, og_title, twitter_title, ld_title} - {""}, key=len, reverse=True)
    candidates = [candidate for candidate in candidates if not is_site_name(candidate, names)]
    for longer_name, longer in (
        ("<title>", tag_title),
        ("og:title", og_title),
        ("twitter:title", twitter_title),
        ("json-ld headline", ld_title),
    ):
        if not longer:
            continue
        longer_key = longer.translate(_QUOTES).casefold()
        for candidate in candidates:
            if len(candidate) >= len(longer) or len(candidate) < 10:
                continue
            candidate_key = candidate.translate(_QUOTES).casefold()
            if longer_key.startswith(candidate_key) and _PREFIX_REMAINDER_RE.match(longer[len(candidate) :]):
                return unless_metadata_disagrees(candidate, f"{sources[candidate]}, prefix of {longer_name}")
            # "Site name - Headline": the clean title ends the longer one after a separator
            if longer_key.endswith(candidate_key) and _SUFFIX_REMAINDER_RE.search(longer[: -len(candidate)]):
                return unless_metadata_disagrees(candidate, f"{sources[candidate]}, suffix of {longer_name}")

    # 3. the headline the metadata agrees on
    if agreed:
        return agreed[0][:MAX_TITLE_LENGTH], agreed[1]

    # 4. the page's own title, site name removed: og:title first when it carries the site's name
    # ("Headline | TechCrunch" with og:site_name TechCrunch), then <title>
    order = [("<title>", tag_title), ("og:title", og_title), ("json-ld headline", ld_title)]
    order.append(("twitter:title", twitter_title))
    if og_title:
        stripped = strip_site_name(og_title, names, declared).strip(_EDGE_SEPARATORS)
        if stripped and stripped != og_title:
            order.insert(0, ("og:title", og_title))
    present = [(name, title) for name, title in order if title]
    # a title that is only the site's name ("TechCrunch") is the last resort
    for name, title in [*(p for p in present if _name_key(p[1]) not in names), *present[:1]]:
        stripped = strip_site_name(title, names, declared).strip(_EDGE_SEPARATORS)
        if stripped and stripped != title:
            return stripped[:MAX_TITLE_LENGTH], f"{name}, site name removed"
        if h1s and _name_key(title) in names:
            break
        return title[:MAX_TITLE_LENGTH], name
    return (h1s[0][:MAX_TITLE_LENGTH], "<h1>") if h1s else (None, None)


def _names_metadata(method: str) -> bool:
    """Does a title method already rest on og:title, twitter:title or the JSON-LD headline?"""
    return any(source in method for source in ("og:title", "twitter:title", "json-ld headline"))


__all__ = [
    "MAX_TITLE_LENGTH",
    "choose_title",
    "clean_title",
    "is_site_name",
    "og_site_name",
    "og_values",
    "page_site_names",
    "site_names",
    "strip_site_name",
    "title_key",
]
