"""The outlets of the demo news web (see topicmap.demo.web): each one's host, size, house style (titles, URLs,
dates, page layout, charset) and the duplicate media it brings (mirrors, bare hosts, renames).

Like ``vocab``, data kept apart from the generator; every name is encodable in windows-1252.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OutletSpec:
    """A news outlet and its house style. Dup-related hosts are described here, media are derived."""

    name: str
    host: str
    abbr: str
    size: float  # relative number of stories
    focus: str | None = None  # a subject it specialises in (None: general news)
    title_style: int = 0  # index into TITLE_STYLES
    url_style: str = "dated_slug"
    date_forms: tuple[str, ...] = ("og",)  # house date forms, first is the usual one
    layout: int = 0  # index of page layout
    relative_chrome: bool = False  # navigation links relative (/news/) rather than absolute
    charset: str = "utf-8"
    charset_in_header: bool = True
    tz_hours: int = 0  # UTC offset of the dates it prints
    mobile_host: str | None = None  # an m. host serving the same stories (archived as its own medium)
    bare_dup: bool = False  # the bare host is archived as its own medium (it redirects to www.)
    renamed_from: tuple[str, str, str] | None = None  # (old name, old host, old abbr) before the rename
    rename_at: float = 0.5  # fraction of the date range at which the rename happened


TITLE_STYLES = (
    "{h} - {name}",
    "{name}: {h}",
    "{h} | {abbr}",
    "{h} \u2013 {name}",
    "{h} | {section} | {name}",
    "{h}",
    "{name} | {h}",
)

URL_STYLES = {
    # style: (has a date in the path, has a slug)
    "dated_slug": (True, True),  # /2026/02/14/slug
    "section_dated": (True, True),  # /environment/2026/02/14/slug.html
    "compact_date": (True, True),  # /news/20260214-slug
    "section_id": (False, True),  # /environment/slug-482113
    "article_id": (False, True),  # /article/482113/slug
    "query_id": (False, False),  # /story.php?id=482113
}

# Ordered so that a smaller n_media still keeps every kind of duplicate medium first.
# fmt: off
OUTLETS: tuple[OutletSpec, ...] = (
    OutletSpec("Daily Herald", "dailyherald.test", "DH", 1.6, title_style=0, date_forms=("og", "jsonld")),
    OutletSpec(
        "Metro Ledger", "www.metroledger.test", "ML", 1.4, title_style=2, url_style="section_dated",
        date_forms=("itemprop", "time"), layout=1, tz_hours=-5, mobile_host="m.metroledger.test",
    ),
    OutletSpec(
        "Riverside Gazette", "www.riversidegazette.test", "RG", 1.0, title_style=1, url_style="section_id",
        date_forms=("jsonld", "dateline"), layout=2, relative_chrome=True, bare_dup=True,
    ),
    OutletSpec(
        "Valley News Now", "valleynewsnow.test", "VNN", 0.9, title_style=3, url_style="article_id",
        date_forms=("time", "og"), tz_hours=-6, renamed_from=("Valley Courier", "valleycourier.test", "VC"),
        rename_at=0.45,
    ),
    OutletSpec(
        "Atlas Wire Service", "atlaswire.test", "Atlas", 1.0, title_style=5, url_style="compact_date",
        date_forms=("dateline", "url"), layout=1,
    ),
    OutletSpec(
        "Carrow County Times", "carrowtimes.test", "CCT", 0.6, title_style=0, url_style="query_id",
        date_forms=("dateline", "itemprop"), layout=2, relative_chrome=True,
        renamed_from=("Carrow Weekly", "carrowweekly.test", "CW"), rename_at=0.6,
    ),
    OutletSpec(
        "Meridian Post", "www.meridianpost.test", "MP", 0.9, title_style=4, url_style="dated_slug",
        date_forms=("url", "og"), tz_hours=1, mobile_host="m.meridianpost.test",
    ),
    OutletSpec(
        "The Open Record", "openrecord.test", "Open Record", 0.6, title_style=6, url_style="section_id",
        date_forms=("og", "time"), layout=1, renamed_from=("The Record Online", "recordonline.test", "TRO"),
        rename_at=0.3,
    ),
    OutletSpec(
        "Twin Rivers Enterprise", "twinrivers.test", "TRE", 0.6, title_style=3, url_style="section_dated",
        date_forms=("jsonld", "url"), layout=2, tz_hours=-5, mobile_host="m.twinrivers.test",
    ),
    OutletSpec(
        "Silver Lake Sun", "silverlakesun.test", "Sun", 0.6, title_style=0, url_style="article_id",
        date_forms=("og", "dateline"), charset="windows-1252",
    ),
    OutletSpec(
        "Old Town Crier", "oldtowncrier.test", "OTC", 0.5, title_style=2, url_style="dated_slug",
        date_forms=("url", "time"), layout=1, relative_chrome=True, charset="windows-1252",
        charset_in_header=False,
    ),
    OutletSpec(
        "Greenline Report", "greenlinereport.test", "Greenline", 0.8, focus="climate", title_style=3,
        url_style="dated_slug", date_forms=("jsonld", "og"),
    ),
    OutletSpec(
        "Pulse Health News", "pulsehealth.test", "Pulse", 0.6, focus="health", title_style=0,
        url_style="section_id", date_forms=("itemprop",), layout=1,
    ),
    OutletSpec(
        "Circuit Weekly", "circuitweekly.test", "Circuit", 0.6, focus="tech", title_style=2,
        url_style="article_id", date_forms=("og", "jsonld"), layout=2,
    ),
    OutletSpec(
        "Matchday Live", "matchdaylive.test", "Matchday", 0.7, focus="sports", title_style=1,
        url_style="compact_date", date_forms=("time", "url"), relative_chrome=True,
    ),
    OutletSpec(
        "Statehouse Watch", "statehousewatch.test", "SW", 0.5, focus="elections", title_style=6,
        url_style="section_dated", date_forms=("dateline", "og"), layout=1, tz_hours=-5,
    ),
    OutletSpec(
        "Stage & Gallery", "stageandgallery.test", "S&G", 0.5, focus="culture", title_style=3,
        url_style="section_id", date_forms=("og",), layout=2,
    ),
    OutletSpec(
        "The Coastal Tribune", "coastaltribune.test", "Tribune", 1.2, title_style=0, url_style="section_dated",
        date_forms=("og", "itemprop"), tz_hours=-5,
    ),
    OutletSpec(
        "Northern Star Courier", "northernstar.test", "NSC", 0.9, title_style=2, url_style="article_id",
        date_forms=("jsonld", "time"), layout=1,
    ),
    OutletSpec(
        "The Evening Dispatch", "eveningdispatch.test", "Dispatch", 1.0, title_style=1,
        url_style="dated_slug", date_forms=("time", "jsonld"), layout=2, relative_chrome=True,
    ),
    OutletSpec(
        "Capital Observer", "www.capitalobserver.test", "CO", 1.1, title_style=4, url_style="section_dated",
        date_forms=("itemprop", "og"), tz_hours=-5,
    ),
    OutletSpec(
        "Harbor Times", "harbortimes.test", "HT", 0.8, title_style=0, url_style="query_id",
        date_forms=("dateline", "og"), layout=1, tz_hours=-6,
    ),
    OutletSpec(
        "Prairie Post", "www.prairiepost.test", "PP", 0.7, title_style=3, url_style="dated_slug",
        date_forms=("og", "url"), layout=2, tz_hours=-6,
    ),
    OutletSpec(
        "The Lakeside Chronicle", "lakesidechronicle.test", "Chronicle", 0.8, title_style=2,
        url_style="section_id", date_forms=("jsonld", "itemprop"), relative_chrome=True,
    ),
    OutletSpec(
        "Summit Daily Record", "summitrecord.test", "SDR", 0.7, title_style=6, url_style="compact_date",
        date_forms=("time", "og"), layout=1,
    ),
    OutletSpec(
        "Granite Sentinel", "granitesentinel.test", "Sentinel", 0.7, title_style=0, url_style="article_id",
        date_forms=("og", "dateline"), layout=2, tz_hours=1,
    ),
    OutletSpec(
        "The Morning Bulletin", "morningbulletin.test", "Bulletin", 0.9, title_style=1,
        url_style="section_dated", date_forms=("jsonld", "og"),
    ),
    OutletSpec(
        "Eastbrook Examiner", "www.eastbrookexaminer.test", "EE", 0.6, title_style=2, url_style="dated_slug",
        date_forms=("itemprop", "url"), layout=1, relative_chrome=True,
    ),
    OutletSpec(
        "The Civic Wire", "civicwire.test", "Civic Wire", 0.6, focus="elections", title_style=3,
        url_style="section_id", date_forms=("og", "jsonld"), layout=2,
    ),
    OutletSpec(
        "Port Alder Press", "portalderpress.test", "PAP", 0.6, title_style=0, url_style="article_id",
        date_forms=("time",), tz_hours=1,
    ),
    OutletSpec(
        "The Frontier Voice", "frontiervoice.test", "Voice", 0.5, title_style=5, url_style="query_id",
        date_forms=("jsonld", "dateline"), layout=1,
    ),
    OutletSpec(
        "Bayview Beacon", "bayviewbeacon.test", "Beacon", 0.6, title_style=4, url_style="dated_slug",
        date_forms=("og", "time"), layout=2, tz_hours=-5,
    ),
    OutletSpec(
        "Highland Mercury", "www.highlandmercury.test", "HM", 0.6, title_style=6, url_style="section_dated",
        date_forms=("dateline", "jsonld"), relative_chrome=True,
    ),
    OutletSpec(
        "Westfield Journal", "westfieldjournal.test", "WJ", 0.6, title_style=1, url_style="compact_date",
        date_forms=("itemprop", "og"), layout=1,
    ),
)
# fmt: on

# Names for outlets beyond the hand-written table (n_media > its size): town + masthead word.
EXTRA_MASTHEADS = ("Gazette", "Times", "Post", "Herald", "Observer", "Record", "Courier", "Journal")
