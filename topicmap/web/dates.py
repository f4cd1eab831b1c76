"""When a story was published: ``guess_date(html, url=None)``, after Media Cloud's date_guesser (fact sheet §7).

Order of evidence, each step named in the result's ``method`` so a researcher can see how a date was found:

1. An undateable URL (no host, Wikipedia, a tweet-less twitter.com page, a front page, a /search or /tag
   page) gives no date: a guess there would be the date of whatever the page lists, not of a story.
2. The publication date the page states in its markup (JSON-LD ``datePublished``, ``<meta
   property="article:published_time">`` and the other explicit fields, ``<time itemprop="datePublished">``).
3. The day written in the URL path (``/2020/04/13/``): minted when the story was published, so when the
   markup disagrees with it by a day (a local time labelled UTC, a time stamped in the server's zone) or by
   more than date_guesser's two days (a modification or template date), the URL's day wins.
4. htmldate's search of the page (visible bylines, ``<time>`` elements, other metadata, the URL).

The returned datetime keeps the page's own UTC offset: "2020-04-13T23:30:00+09:00" is 13 April for the
publisher and its readers (and for Media Cloud, which stored the local time), though it is 12 April in UTC.
A date known only to the day is midnight UTC of that day. Dates before 2008 or in the future are refused
(Media Cloud: misparsed). ``None`` rather than a guess when nothing dates the page.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlsplit

import htmldate
from dateutil import parser as dateutil_parser
from lxml.html import HtmlElement

from topicmap.web import page as _page

log = logging.getLogger(__name__)

MIN_PUBLISH_DATE = _page.MIN_PUBLISH_DATE  # 2008-01-01: Media Cloud refuses earlier dates as misparsed
# date_guesser's tolerance for a later guess that disagrees with the URL's day.
URL_AGREEMENT_DAYS = 2

# How a date was found (the stored ``date_guess_method``; ≤ 64 chars).
METHOD_URL = "url"
METHOD_URL_OVER_MARKUP = "url (markup disagrees)"
METHOD_HTMLDATE = "htmldate search"
UNDATEABLE_PREFIX = "undateable"


@dataclass(frozen=True)
class DateGuess:
    """A publication date (timezone-aware, in the page's own offset) and how it was found, or why not."""

    date: datetime | None
    method: str | None

    @property
    def found(self) -> bool:
        return self.date is not None

    @property
    def day(self) -> date | None:
        """The publisher's calendar day (the date as written on the page, not converted to UTC)."""
        return self.date.date() if self.date is not None else None


NOT_FOUND = DateGuess(None, None)

# Explicit "this is when it was published" fields, most specific first. A page that states one is
# trusted over any heuristic search of its text.
META_DATE_KEYS = (
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


def _with_zone(moment: datetime) -> datetime:
    """A naive time is taken as UTC (nothing better is known); an aware one keeps its offset."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _in_window(moment: datetime | None, now: datetime) -> datetime | None:
    if moment is None:
        return None
    moment = _with_zone(moment)
    return moment if MIN_PUBLISH_DATE <= moment <= now else None


_COMPACT_DATE_RE = re.compile(r"^(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])$")
# dateutil fills fields a string lacks from this default: year 1 makes a year-less date invalid.
_NO_DEFAULT_DATE = datetime(1, 1, 1)


def parse_date_value(value: Any) -> datetime | None:
    """A date from an ISO string, a free-form date string or a Unix timestamp (s or ms); offsets kept."""
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


def _declared(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], now: datetime
) -> DateGuess:
    """The publication date the page states in its metadata, as written (its own offset kept)."""
    candidates: list[tuple[str, Any]] = []
    for obj in ld_objects:
        for key in ("datePublished", "dateCreated"):
            if obj.get(key) not in (None, "", [], {}):
                candidates.append((f"json-ld {key}", obj[key]))
                break
        else:
            continue
        break
    candidates += [(f"meta {key}", meta[key]) for key in META_DATE_KEYS if key in meta]
    for element in tree.iterfind(".//time[@itemprop='datePublished']"):
        candidates.append(("time itemprop=datePublished", element.get("datetime") or element.get("content")))
    for method, value in candidates:
        if value is None:
            continue
        moment = _in_window(parse_date_value(value), now)
        if moment is not None:
            return DateGuess(moment, method)
    return NOT_FOUND


# A full date in the URL path (/2020/04/13/, /2020-04-13-, /20200413/), minted when the story was published.
_URL_DATE_RE = re.compile(
    r"(?<![0-9])(20[0-9]{2})([/_.-]?)(0[1-9]|1[0-2])\2(0[1-9]|[12][0-9]|3[01])(?![0-9])"
)


def url_day(url: str | None) -> date | None:
    """The publication day written in a URL's path, or None."""
    if not url:
        return None
    path = url.split("://", 1)[-1].partition("/")[2]
    match = _URL_DATE_RE.search(path)
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(3)), int(match.group(4)))
    except ValueError:
        return None


def undateable_reason(url: str | None) -> str | None:
    """date_guesser's ``filter_url_for_undateable``: why no page at this URL has one publication date."""
    if not url:
        return None  # no URL given: judge the page alone
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "no hostname"
    host = (parts.hostname or "").lower()
    if not host:
        return "no hostname"
    if host == "wikipedia.org" or host.endswith(".wikipedia.org"):
        return "wikipedia"
    if (host == "twitter.com" or host.endswith(".twitter.com")) and "status" not in parts.path:
        return "twitter page that is not a tweet"
    if parts.path.strip("/") == "":
        return "front page"
    segments = {segment.lower() for segment in parts.path.split("/")}
    if segments & {"search", "tag"}:
        return "search or tag page"
    return None


# htmldate's "extensive search" (free-text date patterns, dateparser) finds more dates on pages that state
# none in their markup, but on the evaluation set the extra ones were wrong (three 1 January dates made
# from a bare year, a 2011 date on a story whose URL says 2010/08/13), and its first calls load
# dateparser's locale tables (~2 s each): off. See docs/extraction.md.
EXTENSIVE_DATE_SEARCH = False


def _searched(tree: HtmlElement, url: str | None, now: datetime) -> DateGuess:
    """htmldate's search (URL, markup, visible bylines), restricted to the valid window."""
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
        return NOT_FOUND
    if not found:
        return NOT_FOUND
    try:
        day = date.fromisoformat(found)
    except ValueError:
        return NOT_FOUND
    moment = _in_window(datetime(day.year, day.month, day.day, tzinfo=UTC), now)
    return DateGuess(moment, METHOD_HTMLDATE) if moment is not None else NOT_FOUND


def date_from_tree(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str | None
) -> DateGuess:
    """``guess_date`` on an already parsed page (``extract_story`` reads the tree once for everything)."""
    reason = undateable_reason(url)
    if reason is not None:
        return DateGuess(None, f"{UNDATEABLE_PREFIX}: {reason}")
    now = datetime.now(UTC)
    declared = _declared(tree, meta, ld_objects, now)
    day_in_url = url_day(url)
    url_guess = None
    if day_in_url is not None:
        url_guess = _in_window(datetime(day_in_url.year, day_in_url.month, day_in_url.day, tzinfo=UTC), now)
    if declared.date is None:
        if url_guess is not None:
            return DateGuess(url_guess, METHOD_URL)
        return _searched(tree, url, now)
    if url_guess is not None and declared.date.date() != day_in_url:
        # The markup's day (in its own offset) is not the URL's: within a day it is a time stamped in
        # another zone or local time mislabelled UTC ("…T00:38:07Z" for 16:38 the day before); beyond
        # date_guesser's two days it is some other date (modification, template). The URL's day stands.
        return DateGuess(url_guess, METHOD_URL_OVER_MARKUP)
    return declared


def guess_date(html: str | bytes | None, url: str | None = None) -> DateGuess:
    """The publication date of a story page and how it was found (``.date`` is None when not found).

    Never raises: binary, empty or unparsable input gives a result with no date."""
    try:
        if url is not None and not isinstance(url, str):
            url = None
        if undateable_reason(url) is not None:
            return DateGuess(None, f"{UNDATEABLE_PREFIX}: {undateable_reason(url)}")
        tree = _page.parse_html(html) if html else None
        if tree is None:
            day = url_day(url)
            moment = (
                _in_window(datetime(day.year, day.month, day.day, tzinfo=UTC), datetime.now(UTC))
                if day
                else None
            )
            return DateGuess(moment, METHOD_URL) if moment is not None else NOT_FOUND
        return date_from_tree(tree, _page.meta_values(tree), _page.json_ld_objects(tree), url)
    except Exception:  # noqa: BLE001 - total function by contract
        log.warning("date guessing failed for %s", url, exc_info=True)
        return NOT_FOUND


__all__ = ["DateGuess", "MIN_PUBLISH_DATE", "date_from_tree", "guess_date", "undateable_reason", "url_day"]
