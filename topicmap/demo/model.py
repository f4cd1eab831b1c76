"""What the demo web generator works with: the records it hands out (``Page``, ``DemoStory``, ``DemoTruth``), its
internal model of outlets, stories and links, and the small text helpers every step uses."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from topicmap.demo import vocab
from topicmap.demo.outlets import OutletSpec
from topicmap.demo.vocab import SubjectSpec

# ---------------------------------------------------------------------------------------------------------
# Public records
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One static HTTP response of the demo web."""

    status: int
    headers: dict[str, str]
    body: bytes
    content_type: str


@dataclass(frozen=True)
class DemoStory:
    """The truth about one story: where it lives, what it is about and how the spider can reach it."""

    url: str  # the URL serving it with 200 (for a renamed outlet: the new host)
    medium: str  # the outlet's current name
    subject: str
    headline: str
    title: str  # the <title> text of the page at `url`
    publish_date: datetime  # UTC
    date_form: str  # og | itemprop | time | jsonld | dateline | url | none
    kind: str  # original | syndicated_copy | retitled
    archived: bool
    hop_depth: int | None  # links followed from the archive (same subject) to reach it; None: unreachable
    alt_urls: tuple[str, ...]  # other URLs of the same story: old host, m. mirror, bare host, tracking tail
    word_count: int


@dataclass
class DemoTruth:
    """Ground truth planted in the demo web."""

    subject_of: dict[str, str]  # every story URL, alternates included → subject
    publish_dates: dict[str, str]  # canonical story URL → ISO UTC publish date
    date_forms: dict[str, str]  # canonical story URL → how the page shows its date
    hop_depth: dict[str, int | None]  # canonical story URL → hops from the archive within its subject
    syndication_groups: list[dict]  # {"original": url, "medium", "copies": [{url, medium, edits...}]}
    duplicate_media: list[dict]  # {"medium", "host", "dup_of", "kind": mobile|bare_host|renamed, ...}
    duplicate_stories: list[dict]  # {"kind": tracking_url|retitled|mirror, "medium", "urls", ...}
    redirects: dict[str, str]  # URL answering 301 → its Location
    dead_urls: list[str]  # linked URLs that answer 404
    binary_urls: list[str]  # linked PDFs and images
    robots_disallowed: list[str]  # linked URLs under /private/
    flaky_once: list[str]  # story URLs a server started with flaky=True answers 500 to, once


# ---------------------------------------------------------------------------------------------------------
# Internal model
# ---------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Outlet:
    spec: OutletSpec
    index: int
    subject_weights: tuple[float, ...]
    authors: tuple[str, ...]
    rename_date: date | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def host(self) -> str:
        return self.spec.host

    @property
    def bare_host(self) -> str | None:
        return self.spec.host[4:] if self.spec.host.startswith("www.") else None

    @property
    def old_host(self) -> str | None:
        return self.spec.renamed_from[1] if self.spec.renamed_from else None


@dataclass(frozen=True)
class Brand:
    name: str
    abbr: str
    host: str


@dataclass(eq=False)
class Link:
    kind: str  # story | pdf | image | dead | private | credit
    url: str
    template: str
    paragraph: int
    target: Story | None = None
    target_name: str = ""
    cast: dict[str, str] = field(
        default_factory=dict
    )  # the linking story's cast (copies keep the original's)


@dataclass(eq=False)
class Story:
    sid: int
    outlet: Outlet
    subject: SubjectSpec
    published: datetime
    headline: str
    paragraphs: list[list[str]]
    cast: dict[str, str]
    date_form: str
    author: str
    tags: tuple[str, ...]
    kind: str = "original"
    source: Story | None = None
    path: str = ""
    url: str = ""  # serving URL
    origin_url: str = ""  # URL when published (old host for a renamed outlet's earlier stories)
    tracking_url: str | None = None
    archived: bool = False
    depth: int | None = None  # assigned hop depth (0 = archived); None = orphan
    links: list[Link] = field(default_factory=list)
    added_sentence: str | None = None  # syndicated copy: the sentence it adds
    credit: bool = False  # syndicated copy: the added sentence is a credit line linking the original
    substituted_words: int = 0
    headline_change: str | None = None  # retitled: prefix | case | reworded

    @property
    def old_branded(self) -> bool:
        return self.origin_url != self.url


class Slots(dict):
    """Template slots: the story's cast, plus numbers drawn fresh for each sentence when a template asks."""

    def __init__(self, rng: random.Random, cast: dict[str, object]):
        super().__init__(cast)
        self._rng = rng

    def __missing__(self, key: str) -> str:
        rng = self._rng
        if key == "num":
            value = f"{rng.randrange(120, 9800):,}"
        elif key == "num2":
            value = str(rng.randrange(11, 60))
        elif key == "num3":
            value = str(rng.randrange(2, 10))
        elif key in ("pct", "pct2"):
            value = str(rng.randrange(3, 68))
        elif key == "price":
            value = f"${rng.randrange(20, 180)}"
        elif key == "amount":
            value = f"${rng.randrange(12, 9500) / 10:g} million"
        elif key == "year":
            value = str(rng.randrange(2027, 2046))
        elif key == "year2":
            value = str(rng.randrange(2004, 2025))
        elif key == "weekday":
            value = rng.choice(vocab.WEEKDAYS)
        elif key == "month":
            value = rng.choice(vocab.MONTHS)
        elif key == "ordinal":
            value = rng.choice(vocab.ORDINALS)
        elif key == "score":
            value = f"{rng.randrange(1, 5)}-{rng.randrange(0, 3)}"
        elif key == "minute":
            value = str(rng.randrange(12, 89))
        else:
            raise KeyError(key)
        return value


class _Anchor:
    """Formats `{a:anchor text}` in a link template into markers that rendering turns into <a>."""

    def __format__(self, spec: str) -> str:
        return f"\x00{spec}\x01"


ANCHOR = _Anchor()
_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_words: int = 9) -> str:
    ascii_text = text.lower().encode("ascii", "ignore").decode()
    return "-".join([w for w in _SLUG_RE.split(ascii_text) if w][:max_words])


def name_mid_sentence(name: str) -> str:
    """A medium's name as it reads mid-sentence: "the Daily Herald", "The Morning Bulletin"."""
    return name if name.startswith("The ") or "." in name else f"the {name}"


def capitalized(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def add_months(day: date, months: int) -> date:
    """The same day `months` calendar months later (clamped to the month's length)."""
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    next_month = date(year + month // 12, month % 12 + 1, 1)
    return date(year, month, min(day.day, (next_month - timedelta(days=1)).day))


def time_key(story: Story) -> tuple[datetime, int]:
    return (story.published, story.sid)


def strip_markers(text: str) -> str:
    return text.replace("\x00", "").replace("\x01", "")
