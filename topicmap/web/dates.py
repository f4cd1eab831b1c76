"""When a story was published: ``guess_date(html, url=None)``, after Media Cloud's date_guesser.

Order of evidence, each step named in the result's ``method`` so a researcher can see how a date was found:

1. An undateable URL (no host, Wikipedia, a tweet-less twitter.com page, a front page, a /search or /tag
   page) gives no date: a guess there would be the date of whatever the page lists, not of a story.
2. The publication date the page states in its markup (JSON-LD ``datePublished``, ``<meta
   property="article:published_time">`` and the other explicit fields, ``<time itemprop="datePublished">``,
   ``<time pubdate>``; a ``<time>`` whose ``datetime`` is impossible is read from its visible text).
3. The date written in the article's URL path, in the forms date_guesser reads: numeric year/month/day
   (``/2020/04/13/``, ``/2020-04-13-``, ``/20200413/``), month/day/year (``/12/17/2013/``), month names and
   abbreviations (``/2013/jan/05/``, ``/Feb/29/2012/``, ``/sept/2013/``), and year-month only as whole path
   segments (``/2015/10/``, ``/2016-02/``). A URL date is minted when the story was published, so whenever the
   markup's day is not the URL's, the URL's day wins (a day off is a local time labelled UTC or a time stamped
   in the server's zone; further off, a modification or template date); a URL's month likewise overrules a
   markup date in another month.
4. htmldate's search of the page (visible bylines, ``<time>`` elements, other metadata, the ``og:image`` URL).
   On a page whose URL gives only a month, a day found this way is taken when it lies in that month (an
   image URL never overrules the article's: a 2017 photo on a 2018 story stays a 2018 story).

Impossible dates are refused wherever they are read (month 26, 30 February, 29 February 2013), and a URL
whose date is impossible gives no date at all rather than a shorter reading of the same digits.

A date known only to the month ("url (month)" in the method, the only way its precision is recorded) is
stored as the 15th of that month, midnight UTC: date_guesser's choice, at most about half a month from the
true day, and the day Media Cloud stored for such stories; in the current month before the 15th it is today.

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
# How a date was found (the stored ``date_guess_method``; ≤ 64 chars).
METHOD_URL = "url"
METHOD_URL_OVER_MARKUP = "url (markup disagrees)"
# Only the year and month are in the URL: the stored day is MONTH_ONLY_DAY, not a known day.
METHOD_URL_MONTH = "url (month)"
METHOD_URL_MONTH_OVER_MARKUP = "url (month; markup disagrees)"
MONTH_ONLY_DAY = 15
METHOD_HTMLDATE = "htmldate search"
UNDATEABLE_PREFIX = "undateable"


@dataclass(frozen=True)
class DateGuess:
    """A publication date (timezone-aware, in the page's own offset) and how it was found, or why not."""

    date: datetime | None
    method: str | None
    #: did the page give a time of day / a UTC offset with the date? (None: not known; False for a date read
    #: from the URL or found by htmldate, which give a day; a date without a time is midnight UTC of its day)
    time_known: bool | None = None
    zone_known: bool | None = None

    @property
    def found(self) -> bool:
        return self.date is not None

    @property
    def day(self) -> date | None:
        """The publisher's calendar day (the date as written on the page, not converted to UTC); for a date known
        only to the month (method "url (month)…"), that month's MONTH_ONLY_DAY."""
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
    # <time pubdate> is HTML5's (since dropped) mark of the publication date; pages still carry it.
    for path, name in (
        (".//time[@itemprop='datePublished']", "itemprop=datePublished"),
        (".//time[@pubdate]", "pubdate"),
    ):
        for element in tree.iterfind(path):
            stated = element.get("datetime") or element.get("content")
            if stated is not None and parse_date_value(stated) is not None:
                candidates.append((f"time {name}", stated))
            else:
                # An impossible machine-readable value ("2015-26-26T04:03:40Z") is refused; the visible
                # text of the same element ("Thursday, Mar. 26 2015, 12:26 AM EDT") still dates the page.
                candidates.append((f"time {name} text", element.text_content().strip()))
    for method, value in candidates:
        if value is None:
            continue
        parsed = parse_date_value(value)
        moment = _in_window(parsed, now)
        if moment is not None:
            assert parsed is not None
            time_known, zone_known = _stated_parts(value, parsed)
            return DateGuess(moment, method, time_known, zone_known)
    return NOT_FOUND


_TIME_OF_DAY_RE = re.compile(r"\d{1,2}:\d{2}|T\d{2}\d{2}")


def _stated_parts(value: Any, parsed: datetime) -> tuple[bool, bool]:
    """Did the stated value give a time of day, and a zone? A Unix timestamp gives both; a text gives a time
    when it has one ("12:26", "T0426"), a zone when it parsed with an offset."""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, int | float) or (
        isinstance(value, str) and value.strip().isdigit() and len(value.strip()) > 8
    ):
        return True, True
    text = value if isinstance(value, str) else ""
    return bool(_TIME_OF_DAY_RE.search(text)), parsed.tzinfo is not None


_MONTH_NUMBERS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
# Longest first, so "sept" is not read as "sep" followed by a stray "t".
_MONTH_NAME = "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))
_MONTH = rf"[0-9]{{1,2}}|{_MONTH_NAME}"
_YEAR = r"(?:19|20)[0-9]{2}"
_SEP = r"[/._-]"
# Separated forms stand apart from letters and digits; one separator throughout. The month and day are
# matched loosely ([0-9]{1,2}) so that "2013/13/22" is read, and refused, as a date rather than missed.
_FULL_URL_DATE_RES = (
    re.compile(
        rf"(?<![a-z0-9])(?P<year>{_YEAR})(?P<sep>{_SEP})(?P<month>{_MONTH})(?P=sep)(?P<day>[0-9]{{1,2}})(?![a-z0-9])",
        re.IGNORECASE,
    ),
    re.compile(
        rf"(?<![a-z0-9])(?P<month>{_MONTH})(?P<sep>{_SEP})(?P<day>[0-9]{{1,2}})(?P=sep)(?P<year>{_YEAR})(?![a-z0-9])",
        re.IGNORECASE,
    ),
    # /20131216/: exactly eight digits (a ninth makes it an id, "libro-201008012")
    re.compile(rf"(?<![0-9])(?P<year>{_YEAR})(?P<month>[0-9]{{2}})(?P<day>[0-9]{{2}})(?![0-9])"),
)
# Year and month only, as whole path segments (/2015/10/, /2016-02/, /sept/2013/): in a slug ("-may-2020-")
# a month name or number is as likely a word or a count as a date. Month first only by name: "/page/2/2015"
# is a page number and a year, where date_guesser reads February 2015.
_MONTH_URL_DATE_RES = (
    re.compile(rf"(?<=/)(?P<year>{_YEAR})(?P<sep>{_SEP})(?P<month>{_MONTH})(?=/|$)", re.IGNORECASE),
    re.compile(rf"(?<=/)(?P<month>{_MONTH_NAME})(?P<sep>{_SEP})(?P<year>{_YEAR})(?=/|$)", re.IGNORECASE),
)


@dataclass(frozen=True)
class UrlDate:
    """The publication date an article's URL states: a day, or only a year and month (``month_only``, with
    ``day`` the month's MONTH_ONLY_DAY)."""

    day: date
    month_only: bool
    written: str  # as it appears in the URL ("2015/10")

    def agrees(self, day: date) -> bool:
        """Whether ``day`` is the URL's day, or lies in its month when only the month is known."""
        if self.month_only:
            return (day.year, day.month) == (self.day.year, self.day.month)
        return day == self.day


def _month_number(written: str) -> int:
    return int(written) if written.isdigit() else _MONTH_NUMBERS[written.lower()]


def url_date(url: str | None) -> UrlDate | None:
    """The publication date written in a URL's path, or None; impossible dates are refused.

    A full date anywhere in the path (or query) is preferred to a year-month; an impossible full date
    ("2013/02/29") makes its digits unusable, so they are not read again as the year-month "2013/02"."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    refused: list[tuple[int, int]] = []
    full_text = f"{parts.path}?{parts.query}" if parts.query else parts.path
    for match in sorted(
        (match for pattern in _FULL_URL_DATE_RES for match in pattern.finditer(full_text)),
        key=lambda match: match.start(),
    ):
        try:
            day = date(int(match["year"]), _month_number(match["month"]), int(match["day"]))
        except ValueError:
            refused.append(match.span())
            continue
        return UrlDate(day, False, match.group())
    for match in sorted(
        (match for pattern in _MONTH_URL_DATE_RES for match in pattern.finditer(parts.path)),
        key=lambda match: match.start(),
    ):
        start, end = match.span()
        if any(start < refused_end and refused_start < end for refused_start, refused_end in refused):
            continue
        month = _month_number(match["month"])
        if 1 <= month <= 12:
            return UrlDate(date(int(match["year"]), month, MONTH_ONLY_DAY), True, match.group())
    return None


def _url_guess(found: UrlDate | None, now: datetime) -> DateGuess | None:
    """A URL's date as a guess inside the valid window, or None."""
    if found is None:
        return None
    moment = datetime(found.day.year, found.day.month, found.day.day, tzinfo=UTC)
    if found.month_only and moment > now >= moment.replace(day=1):
        # this month, before its 15th: the latest day it can be is today
        moment = datetime(now.year, now.month, now.day, tzinfo=UTC)
    moment = _in_window(moment, now)
    if moment is None:
        return None
    return DateGuess(moment, METHOD_URL_MONTH if found.month_only else METHOD_URL, False, False)


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
    return DateGuess(moment, METHOD_HTMLDATE, False, False) if moment is not None else NOT_FOUND


def date_from_tree(
    tree: HtmlElement, meta: dict[str, str], ld_objects: list[dict[str, Any]], url: str | None
) -> DateGuess:
    """``guess_date`` on an already parsed page (``extract_story`` reads the tree once for everything)."""
    reason = undateable_reason(url)
    if reason is not None:
        return DateGuess(None, f"{UNDATEABLE_PREFIX}: {reason}")
    now = datetime.now(UTC)
    declared = _declared(tree, meta, ld_objects, now)
    in_url = url_date(url)
    url_guess = _url_guess(in_url, now)
    if url_guess is None or in_url is None:
        return declared if declared.found else _searched(tree, url, now)
    if declared.day is not None:
        if in_url.agrees(declared.day):
            return declared
        # The markup's day (in its own offset) is not the URL's: within a day it is a time stamped in
        # another zone or local time mislabelled UTC ("…T00:38:07Z" for 16:38 the day before); further off
        # it is some other date (modification, template). The URL's date stands either way.
        return DateGuess(
            url_guess.date,
            METHOD_URL_MONTH_OVER_MARKUP if in_url.month_only else METHOD_URL_OVER_MARKUP,
            False,
            False,
        )
    if in_url.month_only:
        # The page may know the day the URL lacks (a byline, the og:image URL), but only a day in the URL's
        # month counts: htmldate's search knows nothing of it and would let a 2017 photo's URL date a 2018
        # story (date_guesser allows 45 days around the 15th; a day in the month is what the URL says).
        searched = _searched(tree, url, now)
        if searched.day is not None and in_url.agrees(searched.day):
            return searched
    return url_guess


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
            return _url_guess(url_date(url), datetime.now(UTC)) or NOT_FOUND
        return date_from_tree(tree, _page.meta_values(tree), _page.json_ld_objects(tree), url)
    except Exception:  # noqa: BLE001 - total function by contract
        log.warning("date guessing failed for %s", url, exc_info=True)
        return NOT_FOUND


__all__ = [
    "DateGuess",
    "MIN_PUBLISH_DATE",
    "MONTH_ONLY_DAY",
    "UrlDate",
    "date_from_tree",
    "guess_date",
    "undateable_reason",
    "url_date",
]
