"""A deterministic demo news web: ~40 outlets under the reserved `.test` TLD, a few thousand stories.

`generate_demo_web(seed)` builds, in memory and byte-identically for a given seed, everything a topic mapper
meets on the real web, with the truth about it recorded so tests and benchmarks can score themselves:

- stories on six subjects (climate, elections, health, sports, tech, culture), each written from its own
  vocabulary so that `web.topic_query_for(subject)` selects exactly that subject's stories;
- realistic pages: `<title>` with the outlet's suffix style, publish dates in several common forms (Open Graph
  meta, itemprop, `<time>`, JSON-LD, a visible dateline, only in the URL, or nowhere), the body inside page
  chrome (navigation, share bar, "most read" sidebar, footer), two outlets in windows-1252;
- in-article links: cross-media and self links, links to tag/category/author pages, to PDFs and images, to
  dead pages (404), to robots-disallowed /private/ pages, to other subjects' stories;
- planted structures: syndicated near-copies (1-3 % of words changed, maybe a sentence added), duplicate media
  (`m.` mirrors, bare hosts of `www.` outlets, renamed outlets whose old host answers 301), the same story
  twice in one medium (tracking-tail URL, changed headline the same day);
- a split between the archive (`web.archive_stories`) and the stories only reachable by following links
  from archived ones, several hops deep (`web.truth.hop_depth`).

Pages are static (`web.pages`, `web.lookup`); `topicmap.demo.server` serves them over loopback HTTP. All
URLs use http:// because the loopback server speaks plain HTTP.

Determinism: one `random.Random(seed)` drives every choice; nothing iterates a set or uses `hash()`.
"""

from __future__ import annotations

import csv
import hashlib
import html as htmllib
import json
import random
import re
import string
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote, urlsplit

from topicmap.demo import vocab
from topicmap.demo.vocab import SUBJECTS, OutletSpec, SubjectSpec

DEMO_SUBJECT = "climate"
DEAD_HOST = "closedgazette.test"  # a host linked to but not served: its links all end in 404
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"

_SYNDICATED_SHARE = 0.05  # share of stories that are members of a syndication group
_RETITLED_SHARE = 0.01  # share of stories republished in the same medium with a changed headline
_TRACKING_SHARE = 0.02  # share of stories also reachable under a ?utm_... URL
_ARCHIVED_SHARE = 0.55
_ORPHAN_SHARE = 0.03  # unarchived stories nothing links to: the spider cannot find them
_DEPTH_WEIGHTS = (0.34, 0.24, 0.17, 0.12, 0.08, 0.05)  # hops 1..6 for the unarchived stories
_NAV = (
    ("News", "news"),
    ("Politics", "politics"),
    ("Environment", "environment"),
    ("Health", "health"),
    ("Sport", "sport"),
    ("Technology", "technology"),
    ("Culture", "culture"),
    ("Opinion", "opinion"),
)
_TZ_LABELS = {0: "GMT", 1: "CET", -5: "EST", -6: "CST"}
_PDF_BODY = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
_JPEG_BODY = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffdb004300") + bytes(64) + b"\xff\xd9"


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
class _Outlet:
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
class _Brand:
    name: str
    abbr: str
    host: str


@dataclass(eq=False)
class _Link:
    kind: str  # story | pdf | image | dead | private | credit
    url: str
    template: str
    paragraph: int
    target: _Story | None = None
    target_name: str = ""
    cast: dict[str, str] = field(
        default_factory=dict
    )  # the linking story's cast (copies keep the original's)


@dataclass(eq=False)
class _Story:
    sid: int
    outlet: _Outlet
    subject: SubjectSpec
    published: datetime
    headline: str
    paragraphs: list[list[str]]
    cast: dict[str, str]
    date_form: str
    author: str
    tags: tuple[str, ...]
    kind: str = "original"
    source: _Story | None = None
    path: str = ""
    url: str = ""  # serving URL
    origin_url: str = ""  # URL when published (old host for a renamed outlet's earlier stories)
    tracking_url: str | None = None
    archived: bool = False
    depth: int | None = None  # assigned hop depth (0 = archived); None = orphan
    links: list[_Link] = field(default_factory=list)
    added_sentence: str | None = None  # syndicated copy: the sentence it adds
    credit: bool = False  # syndicated copy: the added sentence is a credit line linking the original
    substituted_words: int = 0
    headline_change: str | None = None  # retitled: prefix | case | reworded

    @property
    def old_branded(self) -> bool:
        return self.origin_url != self.url


class _Slots(dict):
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


_ANCHOR = _Anchor()
_WORD_RE = re.compile(r"^([^\w]*)([A-Za-z]+)([^\w]*)$")
_SLUG_RE = re.compile(r"[^a-z0-9]+")
_SPORTS_WORD = re.compile(r"\bsports\b", re.IGNORECASE)


def _query_word_pattern() -> re.Pattern[str]:
    """Matches a lowercase word that is part of some subject's query (a wildcard term matches its stem)."""
    alternatives: list[str] = []
    for spec in SUBJECTS.values():
        for term in spec.terms + spec.exclude:
            for word in term.strip('"').split():
                stem = re.escape(word.rstrip("*").lower())
                alternatives.append(stem + r"\w*" if word.endswith("*") else stem)
    return re.compile("(?:" + "|".join(alternatives) + ")")


_QUERY_WORD = _query_word_pattern()


def _protected_word(word: str) -> bool:
    """A word that is part of some subject's query: never swapped by a syndicating editor."""
    return _QUERY_WORD.fullmatch(word) is not None


def _slugify(text: str, max_words: int = 9) -> str:
    ascii_text = text.lower().encode("ascii", "ignore").decode()
    return "-".join([w for w in _SLUG_RE.split(ascii_text) if w][:max_words])


def _the(name: str) -> str:
    """A medium's name as it reads mid-sentence: "the Daily Herald", "The Morning Bulletin"."""
    return name if name.startswith("The ") or "." in name else f"the {name}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def _add_months(day: date, months: int) -> date:
    """The same day `months` calendar months later (clamped to the month's length)."""
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    next_month = date(year + month // 12, month % 12 + 1, 1)
    return date(year, month, min(day.day, (next_month - timedelta(days=1)).day))


# ---------------------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------------------


class _Builder:
    """Builds a DemoWeb step by step; one instance per generation, one Random for every choice."""

    def __init__(self, seed: int, n_media: int, n_stories: int, start: date, months: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.n_media = n_media
        self.n_stories = n_stories
        self.start = start
        self.months = months
        self.end = _add_months(start, months) - timedelta(days=1)
        self.days = (self.end - start).days + 1
        self.outlets: list[_Outlet] = []
        self.stories: list[_Story] = []
        self.pages: dict[str, Page] = {}
        self.used_paths: set[str] = set()  # membership only, never iterated
        self.truth_dead: list[str] = []
        self.truth_binary: list[str] = []
        self.truth_private: list[str] = []
        self.redirects: dict[str, str] = {}
        self.groups: list[tuple[_Story, list[_Story]]] = []
        self.retitled: list[tuple[_Story, _Story]] = []
        self.parent_links: list[tuple[_Story, _Story]] = []
        self._segments: dict[int, list[list[tuple[str, str | None]]]] = {}
        self._texts: dict[int, str] = {}
        self._body_html: dict[int, str] = {}

    # -- media ------------------------------------------------------------------------------------------

    def build_outlets(self) -> None:
        specs = list(vocab.OUTLETS)
        taken = {spec.host for spec in specs} | {spec.name for spec in specs}
        specs += [
            spec for spec in self._extra_outlet_specs() if spec.host not in taken and spec.name not in taken
        ]
        total = 0
        for spec in specs:
            dups = int(spec.mobile_host is not None) + int(spec.bare_dup) + int(spec.renamed_from is not None)
            if total + 1 + dups > self.n_media:
                if total + 1 > self.n_media:
                    break
                spec = replace(spec, mobile_host=None, bare_dup=False, renamed_from=None)
                dups = 0
            self.outlets.append(self._make_outlet(spec, len(self.outlets)))
            total += 1 + dups
            if total == self.n_media:
                break
        if total < self.n_media:
            raise ValueError(f"n_media={self.n_media} is more than the demo web can name ({total})")

    def _extra_outlet_specs(self) -> Iterator[OutletSpec]:
        styles = tuple(vocab.URL_STYLES)
        forms = ("og", "itemprop", "time", "jsonld", "dateline")
        index = 0
        for masthead in vocab.EXTRA_MASTHEADS:
            for place in vocab.PLACES:
                name = f"{place} {masthead}"
                yield OutletSpec(
                    name=name,
                    host=f"{_slugify(place).replace('-', '')}{masthead.lower()}.test",
                    abbr="".join(w[0] for w in name.split()),
                    size=0.5,
                    title_style=index % len(vocab.TITLE_STYLES),
                    url_style=styles[index % len(styles)],
                    date_forms=(forms[index % len(forms)], forms[(index + 2) % len(forms)]),
                    layout=index % 3,
                    relative_chrome=index % 2 == 0,
                )
                index += 1

    def _make_outlet(self, spec: OutletSpec, index: int) -> _Outlet:
        rng = self.rng
        if spec.focus is None:
            weights = tuple(s.share for s in SUBJECTS.values())
        else:
            rest = sum(s.share for s in SUBJECTS.values() if s.name != spec.focus)
            weights = tuple(
                0.75 if s.name == spec.focus else 0.25 * s.share / rest for s in SUBJECTS.values()
            )
        authors = tuple(
            f"{rng.choice(vocab.FIRST_NAMES)} {rng.choice(vocab.LAST_NAMES)}"
            for _ in range(rng.randrange(4, 8))
        )
        rename_date = None
        if spec.renamed_from is not None:
            rename_date = self.start + timedelta(days=int(self.days * spec.rename_at))
        return _Outlet(spec, index, weights, authors, rename_date)

    # -- stories ----------------------------------------------------------------------------------------

    def build_stories(self) -> None:
        rng = self.rng
        n = self.n_stories
        group_sizes: list[int] = []
        members = max(2, round(n * _SYNDICATED_SHARE)) if len(self.outlets) > 1 else 0
        while sum(group_sizes) < members:
            size = rng.choice((2, 2, 3, 3, 4))
            group_sizes.append(min(size, max(2, members - sum(group_sizes)), len(self.outlets)))
        n_copies = sum(group_sizes) - len(group_sizes)
        n_retitled = max(1, round(n * _RETITLED_SHARE))
        n_base = n - n_copies - n_retitled
        cum_weights = []
        acc = 0.0
        for outlet in self.outlets:
            acc += outlet.spec.size
            cum_weights.append(acc)
        subjects = list(SUBJECTS.values())
        for _ in range(n_base):
            outlet = rng.choices(self.outlets, cum_weights=cum_weights)[0]
            subject = rng.choices(subjects, weights=outlet.subject_weights)[0]
            day = self.start + timedelta(days=rng.randrange(self.days))
            published = datetime(day.year, day.month, day.day, 6, 0, tzinfo=UTC) + timedelta(
                minutes=rng.randrange(15 * 60)
            )
            self.stories.append(self._new_story(outlet, subject, published))
        self._syndicate(group_sizes, cum_weights)
        self._retitle(n_retitled)

    def _new_story(self, outlet: _Outlet, subject: SubjectSpec, published: datetime) -> _Story:
        rng = self.rng
        cast = self._cast(outlet, subject, published)
        headline = self._headline(subject, cast)
        paragraphs = self._compose(subject, cast, outlet)
        return _Story(
            sid=len(self.stories),
            outlet=outlet,
            subject=subject,
            published=published,
            headline=headline,
            paragraphs=paragraphs,
            cast=cast,
            date_form=self._date_form(outlet),
            author=rng.choice(outlet.authors),
            tags=tuple(rng.sample(subject.tags, rng.randrange(1, 4))),
        )

    def _cast(self, outlet: _Outlet, subject: SubjectSpec, published: datetime) -> dict[str, str]:
        rng = self.rng
        first = rng.sample(vocab.FIRST_NAMES, 2)
        last = rng.sample(vocab.LAST_NAMES, 2)
        org, org2 = rng.sample(subject.orgs, 2)
        role = rng.choice(subject.roles)
        return {
            "person": f"{first[0]} {last[0]}",
            "person2": f"{first[1]} {last[1]}",
            "place": rng.choice(vocab.PLACES),
            "org": org,
            "org_cap": _cap(org),
            "org2": org2,
            "team": _cap(org),
            "team2": _cap(org2),
            "role": role,
            "a_role": f"an {role}" if role[0] in "aeiou" else f"a {role}",
            "artist": rng.choice(vocab.ARTISTS),
            "play": rng.choice(vocab.PLAYS),
            "outlet": self._brand(outlet, published).name,
            "the_outlet": _the(self._brand(outlet, published).name),
            "a": _ANCHOR,
        }

    def _brand(self, outlet: _Outlet, when: datetime | date) -> _Brand:
        """The outlet's name and host at a given time (a renamed outlet had its old ones before)."""
        day = when.date() if isinstance(when, datetime) else when
        if outlet.spec.renamed_from is not None and outlet.rename_date and day < outlet.rename_date:
            old_name, old_host, old_abbr = outlet.spec.renamed_from
            return _Brand(old_name, old_abbr, old_host)
        return _Brand(outlet.name, outlet.spec.abbr, outlet.host)

    def _headline(self, subject: SubjectSpec, cast: dict[str, str], avoid: str = "") -> str:
        rng = self.rng
        headline = ""
        for _ in range(20):
            headline = _cap(rng.choice(subject.headlines).format_map(_Slots(rng, cast)))
            if len(headline) >= 32 and headline != avoid:
                break
        return headline

    def _date_form(self, outlet: _Outlet) -> str:
        rng = self.rng
        forms = outlet.spec.date_forms
        has_date_in_url = vocab.URL_STYLES[outlet.spec.url_style][0]
        if not has_date_in_url and rng.random() < 0.12:
            return "none"
        return forms[0] if rng.random() < 0.8 else rng.choice(forms)

    def _compose(self, subject: SubjectSpec, cast: dict[str, str], outlet: _Outlet) -> list[list[str]]:
        """Sentences drawn from the subject's and the shared templates until the target length is reached."""
        rng = self.rng
        slots = _Slots(
            rng, cast
        )  # numbers are drawn afresh at each use, so one mapping serves every sentence
        target = int(rng.triangular(150, 450, 280))
        lead = _cap(rng.choice(subject.leads).format_map(slots))
        if outlet.spec.name == "Atlas Wire Service":
            lead = f"{cast['place'].upper()} (Atlas) \u2014 {lead}"
        elif rng.random() < 0.2:
            lead = f"{cast['place'].upper()} \u2014 {lead}"
        pool = list(subject.sentences + subject.quotes + vocab.GENERIC_SENTENCES)
        sentences: list[str] = []
        words = len(lead.split())
        drawn = 0
        while words < target:
            if drawn < len(pool):  # without replacement, shuffling only as far as needed
                pick = rng.randrange(drawn, len(pool))
                pool[drawn], pool[pick] = pool[pick], pool[drawn]
                template = pool[drawn]
                drawn += 1
            else:
                template = rng.choice(pool)
            sentence = _cap(template.format_map(slots))
            sentences.append(sentence)
            words += len(sentence.split())
        if subject.name == "sports":
            if rng.random() < 0.3:
                bleed = rng.choice(vocab.SPORTS_BLEED).format_map(slots)
                sentences.insert(rng.randrange(len(sentences) + 1), bleed)
            if not any(_SPORTS_WORD.search(s) for s in sentences + [lead]):
                marker = rng.choice(vocab.SPORTS_MARKERS).format_map(slots)
                sentences.insert(rng.randrange(len(sentences) + 1), marker)
        paragraphs = [[lead]]
        while sentences:
            take = rng.choice((1, 2, 2, 3))
            paragraphs.append(sentences[:take])
            sentences = sentences[take:]
        return paragraphs

    def _syndicate(self, group_sizes: list[int], cum_weights: list[float]) -> None:
        """Near-copies of originals in other outlets: a few words changed, maybe a sentence added."""
        rng = self.rng
        wire = [s for s in self.stories if s.outlet.name == "Atlas Wire Service"]
        others = list(self.stories)
        taken: set[int] = set()  # membership only
        for size in group_sizes:
            pool = wire if wire and rng.random() < 0.6 else others
            original = rng.choice(pool)
            for _ in range(50):
                if original.sid not in taken:
                    break
                original = rng.choice(others)
            else:  # a story heads one group at most
                original = next(s for s in others if s.sid not in taken)
            taken.add(original.sid)
            copy_outlets: list[_Outlet] = []
            while len(copy_outlets) < size - 1:
                outlet = rng.choices(self.outlets, cum_weights=cum_weights)[0]
                if outlet is not original.outlet and outlet not in copy_outlets:
                    copy_outlets.append(outlet)
            copies = [self._copy_of(original, outlet) for outlet in copy_outlets]
            self.groups.append((original, copies))

    def _copy_of(self, original: _Story, outlet: _Outlet) -> _Story:
        rng = self.rng
        published = min(
            original.published + timedelta(minutes=rng.randrange(10, 240)),
            original.published.replace(hour=21, minute=59),
        )
        paragraphs, substituted = self._edit_words(original.paragraphs, rng.uniform(0.01, 0.03))
        story = _Story(
            sid=len(self.stories),
            outlet=outlet,
            subject=original.subject,
            published=published,
            headline=original.headline,
            paragraphs=paragraphs,
            cast=dict(
                original.cast,
                outlet=self._brand(outlet, published).name,
                the_outlet=_the(self._brand(outlet, published).name),
            ),
            date_form=self._date_form(outlet),
            author=rng.choice(outlet.authors),
            tags=original.tags,
            kind="syndicated_copy",
            source=original,
            substituted_words=substituted,
        )
        roll = rng.random()
        if roll < 0.25:
            story.credit = True  # the credit line (with its link) is rendered after the links are known
        elif roll < 0.5:
            sentence = _cap(rng.choice(vocab.GENERIC_SENTENCES).format_map(_Slots(rng, story.cast)))
            story.added_sentence = sentence
            target = story.paragraphs[rng.randrange(len(story.paragraphs))]
            target.append(sentence)
        self.stories.append(story)
        return story

    def _edit_words(self, paragraphs: list[list[str]], rate: float) -> tuple[list[list[str]], int]:
        """Swap about `rate` of the words for synonyms (or a filler word): a syndicating editor's touch."""
        rng = self.rng
        edited = [[s.split(" ") for s in paragraph] for paragraph in paragraphs]
        synonym_spots: list[tuple[int, int, int]] = []
        filler_spots: list[tuple[int, int, int]] = []
        total = 0
        for p, paragraph in enumerate(edited):
            for s, words in enumerate(paragraph):
                total += len(words)
                if p == 0 and s == 0:
                    continue  # the lead keeps its query term intact
                for w, token in enumerate(words):
                    match = _WORD_RE.match(token)
                    if not match:
                        continue
                    core = match.group(2).lower()
                    if _protected_word(core):
                        continue
                    if core in vocab.SYNONYMS:
                        synonym_spots.append((p, s, w))
                    elif len(core) >= 5 and match.group(2).islower():
                        filler_spots.append((p, s, w))
        wanted = max(1, round(rate * total))
        rng.shuffle(synonym_spots)
        rng.shuffle(filler_spots)
        spots = (synonym_spots + filler_spots)[:wanted]
        for p, s, w in spots:
            token = edited[p][s][w]
            match = _WORD_RE.match(token)
            assert match is not None
            core = match.group(2)
            replacement = vocab.SYNONYMS.get(core.lower()) or rng.choice(
                [w for w in vocab.FILLER_WORDS if w != core.lower()]  # a swap always changes the word
            )
            if core[0].isupper():
                replacement = _cap(replacement)
            edited[p][s][w] = f"{match.group(1)}{replacement}{match.group(3)}"
        return [[" ".join(words) for words in paragraph] for paragraph in edited], len(spots)

    def _retitle(self, count: int) -> None:
        """The same story published again in the same medium on the same day under a changed headline."""
        rng = self.rng
        originals = [s for s in self.stories if s.kind == "original" and s.date_form != "none"]
        in_groups = {g[0].sid for g in self.groups}
        candidates = [s for s in originals if s.sid not in in_groups]
        for original in rng.sample(candidates, min(count, len(candidates))):
            change = rng.choice(("prefix", "case", "reworded"))
            if change == "prefix":
                headline = rng.choice(("UPDATE: ", "Updated: ", "Breaking: ")) + original.headline
            elif change == "case":
                headline = string.capwords(original.headline.rstrip(".!?"))
                headline = headline + "!" if headline == original.headline else headline
            else:
                headline = self._headline(original.subject, original.cast, avoid=original.headline)
            update = "Update: " + rng.choice(original.subject.leads).format_map(_Slots(rng, original.cast))
            published = min(
                original.published + timedelta(minutes=rng.randrange(30, 180)),
                original.published.replace(hour=21, minute=59),
            )
            story = _Story(
                sid=len(self.stories),
                outlet=original.outlet,
                subject=original.subject,
                published=published,
                headline=headline,
                paragraphs=[[update]] + [list(p) for p in original.paragraphs],
                cast=original.cast,
                date_form=original.date_form,
                author=original.author,
                tags=original.tags,
                kind="retitled",
                source=original,
                headline_change=change,
            )
            self.stories.append(story)
            self.retitled.append((original, story))

    # -- URLs -------------------------------------------------------------------------------------------

    def assign_urls(self) -> None:
        rng = self.rng
        for story in self.stories:
            outlet = story.outlet
            path = self._path(story)
            story.path = path
            story.url = f"http://{outlet.host}{path}"
            brand = self._brand(outlet, story.published)
            story.origin_url = f"http://{brand.host}{path}"
        tracked = rng.sample(self.stories, round(len(self.stories) * _TRACKING_SHARE))
        for story in tracked:
            source = rng.choice(("twitter", "newsletter", "facebook", "rss"))
            tail = f"utm_source={source}&utm_medium=social&utm_campaign={story.sid}"
            story.tracking_url = story.url + ("&" if "?" in story.url else "?") + tail

    def _path(self, story: _Story) -> str:
        outlet = story.outlet
        day = story.published
        slug = _slugify(story.headline)
        article_id = 480_000 + story.sid * 7 + outlet.index % 7
        section = story.subject.section
        style = outlet.spec.url_style
        if style == "dated_slug":
            path = f"/{day:%Y/%m/%d}/{slug}"
        elif style == "section_dated":
            path = f"/{section}/{day:%Y/%m/%d}/{slug}.html"
        elif style == "compact_date":
            path = f"/news/{day:%Y%m%d}-{slug}"
        elif style == "section_id":
            path = f"/{section}/{slug}-{article_id}"
        elif style == "article_id":
            path = f"/article/{article_id}/{slug}"
        else:
            path = f"/story.php?id={article_id}"
        key = outlet.host + path
        suffix = 2
        while key in self.used_paths:
            path = f"{path}-{suffix}" if "?" not in path else f"{path}{suffix}"
            key = outlet.host + path
            suffix += 1
        self.used_paths.add(key)
        return path

    # -- archive split and hop depths -------------------------------------------------------------------

    def split_archive(self) -> None:
        """Archive about half of each subject; give the rest a hop depth and a parent one hop closer."""
        rng = self.rng
        for story in self.stories:
            story.archived = rng.random() < _ARCHIVED_SHARE
            story.depth = 0 if story.archived else None
        for subject in SUBJECTS.values():
            members = [s for s in self.stories if s.subject is subject]
            wanted: dict[int, list[_Story]] = {d: [] for d in range(1, len(_DEPTH_WEIGHTS) + 1)}
            for story in members:
                if story.archived or rng.random() < _ORPHAN_SHARE:
                    continue
                depth = rng.choices(range(1, len(_DEPTH_WEIGHTS) + 1), weights=_DEPTH_WEIGHTS)[0]
                wanted[depth].append(story)
            # Parents are originals only: copies and retitled stories repeat their original's links.
            by_depth: dict[int, list[_Story]] = {
                0: sorted((s for s in members if s.archived and s.kind == "original"), key=_time_key)
            }
            deepest = 0
            for depth in range(1, len(_DEPTH_WEIGHTS) + 1):
                if not wanted[depth]:
                    continue
                parent_depth = min(depth - 1, deepest)
                parents = by_depth.get(parent_depth, [])
                if not parents:
                    continue  # no archived original of this subject at all: these stay unreachable
                parent_times = [_time_key(p) for p in parents]
                reached = []
                for child in wanted[depth]:
                    parent = self._later_parent(parents, parent_times, child)
                    child.depth = parent_depth + 1
                    self.parent_links.append((parent, child))
                    if child.kind == "original":
                        reached.append(child)
                if reached:
                    by_depth[parent_depth + 1] = sorted(reached, key=_time_key)
                    deepest = parent_depth + 1

    def _later_parent(self, parents: list[_Story], times: list[tuple], child: _Story) -> _Story:
        """A parent published after the child, when there is one: stories cite earlier reporting."""
        rng = self.rng
        start = bisect_left(times, _time_key(child))
        if start < len(parents):
            return parents[rng.randrange(start, min(len(parents), start + 60))]
        return parents[rng.randrange(max(0, len(parents) - 60), len(parents))]

    # -- links ------------------------------------------------------------------------------------------

    def build_links(self) -> None:
        rng = self.rng
        by_subject: dict[str, list[_Story]] = {
            name: sorted((s for s in self.stories if s.subject.name == name), key=_time_key)
            for name in SUBJECTS
        }
        subject_times = {name: [_time_key(s) for s in stories] for name, stories in by_subject.items()}
        everything = sorted(self.stories, key=_time_key)
        all_times = [_time_key(s) for s in everything]
        for parent, child in self.parent_links:
            self._add_story_link(parent, child)
        for story in sorted((s for s in self.stories if s.kind == "original"), key=_time_key):
            same = by_subject[story.subject.name]
            position = bisect_left(subject_times[story.subject.name], _time_key(story))
            for _ in range(rng.choice((1, 1, 2, 2, 3))):
                target = self._earlier_target(story, same, position)
                if target is not None:
                    self._add_story_link(story, target)
            if rng.random() < 0.35:
                position_all = bisect_left(all_times, _time_key(story))
                for _ in range(8):
                    if position_all == 0:
                        break
                    other = everything[rng.randrange(max(0, position_all - 300), position_all)]
                    if other.subject is not story.subject:
                        self._add_story_link(story, other, vocab.OTHER_SUBJECT_LINKS)
                        break
            if rng.random() < 0.10:
                self._add_binary_link(story, "pdf")
            if rng.random() < 0.08:
                self._add_binary_link(story, "image")
            if rng.random() < 0.12:
                self._add_dead_link(story)
            if rng.random() < 0.05:
                self._add_private_link(story)
        for original, copies in self.groups:
            for copy in copies:
                copy.links = [replace(link) for link in original.links]
                if copy.credit:
                    brand = self._brand(original.outlet, original.published)
                    credit = _Link(
                        "credit",
                        self._link_url(original, copy),
                        vocab.CREDIT_LINE,
                        len(copy.paragraphs) - 1,
                        original,
                        brand.name,
                        copy.cast,
                    )
                    copy.links.append(credit)
        for original, story in self.retitled:
            story.links = [replace(link, paragraph=link.paragraph + 1) for link in original.links]

    def _earlier_target(self, story: _Story, same: list[_Story], position: int) -> _Story | None:
        """An earlier same-subject story, mostly in another outlet, that keeps the planted hop depths."""
        rng = self.rng
        if position == 0:
            return None
        want_other_outlet = rng.random() < 0.75
        for _ in range(10):
            target = same[rng.randrange(max(0, position - 200), position)]
            if target is story or (want_other_outlet and target.outlet is story.outlet):
                continue
            if story.depth is None:
                return target if target.depth is None or target.archived else None
            if target.archived or (target.depth is not None and target.depth <= story.depth + 1):
                return target
        return None

    def _link_url(self, target: _Story, linker: _Story) -> str:
        """The URL a linking story uses: old host, m. mirror, bare host or tracking tail now and then."""
        rng = self.rng
        outlet = target.outlet
        if target.old_branded:
            if outlet.rename_date and linker.published.date() < outlet.rename_date:
                return target.origin_url
            return target.origin_url if rng.random() < 0.3 else target.url
        roll = rng.random()
        if outlet.spec.mobile_host and roll < 0.2:
            return f"http://{outlet.spec.mobile_host}{target.path}"
        if outlet.bare_host and roll < 0.1:
            return f"http://{outlet.bare_host}{target.path}"
        if target.tracking_url and roll < 0.5:
            return target.tracking_url
        return target.url

    def _add_story_link(
        self, story: _Story, target: _Story, templates: tuple[str, ...] | None = None
    ) -> None:
        rng = self.rng
        url = self._link_url(target, story)
        target_brand = self._brand(target.outlet, story.published)
        if templates is None:
            templates = vocab.SELF_LINKS if target.outlet is story.outlet else vocab.CROSS_MEDIA_LINKS
        story.links.append(
            _Link(
                "story",
                url,
                rng.choice(templates),
                self._link_paragraph(story),
                target,
                target_brand.name,
                story.cast,
            )
        )

    def _link_paragraph(self, story: _Story) -> int:
        count = len(story.paragraphs)
        return self.rng.randrange(1, count) if count > 1 else 0

    def _add_binary_link(self, story: _Story, kind: str) -> None:
        rng = self.rng
        host = self._brand(story.outlet, story.published).host
        day = story.published
        if kind == "pdf":
            url = f"http://{host}/files/{day:%Y/%m}/{_slugify(story.headline, 5)}-{story.sid}.pdf"
            templates = vocab.PDF_LINKS
        else:
            url = f"http://{host}/images/{day:%Y/%m}/photo-{story.sid}-{rng.randrange(1, 30)}.jpg"
            templates = vocab.IMAGE_LINKS
        story.links.append(
            _Link(kind, url, rng.choice(templates), self._link_paragraph(story), cast=story.cast)
        )
        self.truth_binary.append(url)

    def _add_dead_link(self, story: _Story) -> None:
        rng = self.rng
        host = DEAD_HOST if rng.random() < 0.25 else rng.choice(self.outlets).host
        last_year = self.start.year - 1
        slug = _slugify(self._headline(story.subject, story.cast), 6)
        url = f"http://{host}/{last_year}/{rng.randrange(1, 13):02d}/{rng.randrange(1, 29):02d}/{slug}"
        story.links.append(
            _Link("dead", url, rng.choice(vocab.DEAD_LINKS), self._link_paragraph(story), cast=story.cast)
        )
        self.truth_dead.append(url)

    def _add_private_link(self, story: _Story) -> None:
        rng = self.rng
        host = self._brand(story.outlet, story.published).host
        url = f"http://{host}/private/interviews/{story.sid}"
        story.links.append(
            _Link(
                "private", url, rng.choice(vocab.PRIVATE_LINKS), self._link_paragraph(story), cast=story.cast
            )
        )
        self.truth_private.append(url)

    # -- rendering --------------------------------------------------------------------------------------

    def render(self) -> None:
        """Every page: stories, their mirrors and redirects, listings, binaries, robots.txt."""
        self.by_outlet_subject: dict[tuple[int, str], list[_Story]] = {}
        for story in sorted(self.stories, key=_time_key):
            self.by_outlet_subject.setdefault((story.outlet.index, story.subject.name), []).append(story)
        self.position_in_outlet_subject = {
            story.sid: i for stories in self.by_outlet_subject.values() for i, story in enumerate(stories)
        }
        self.rendered: dict[int, str] = {}  # sid → HTML served at story.url, for archived stories
        for story in self.stories:
            outlet = story.outlet
            brand = _Brand(outlet.name, outlet.spec.abbr, outlet.host)
            text = self._render_story(story, brand, mobile=False)
            if story.archived:  # the archive keeps the HTML as text; other pages only as bytes
                self.rendered[story.sid] = text
            page = self._html_page(outlet, text)
            self.pages[story.url] = page
            if story.tracking_url:
                self.pages[story.tracking_url] = page
            if outlet.spec.mobile_host:
                mirror = self._render_story(
                    story, _Brand(outlet.name, outlet.spec.abbr, outlet.spec.mobile_host), mobile=True
                )
                self.pages[f"http://{outlet.spec.mobile_host}{story.path}"] = self._html_page(outlet, mirror)
            if story.old_branded:
                self._redirect(story.origin_url, story.url)
            if outlet.bare_host:
                self._redirect(f"http://{outlet.bare_host}{story.path}", story.url)
        outlet_of_host: dict[str, _Outlet] = {}
        for outlet in self.outlets:
            outlet_of_host[outlet.host] = outlet
            if outlet.old_host:
                outlet_of_host[outlet.old_host] = outlet
        for story in self.stories:
            for link in story.links:
                if link.kind not in ("pdf", "image", "private") or link.url in self.pages:
                    continue
                parts = urlsplit(link.url)
                outlet = outlet_of_host[parts.hostname or ""]
                serving_url = f"http://{outlet.host}{parts.path}"
                if serving_url != link.url:  # linked under a renamed outlet's old host
                    self._redirect(link.url, serving_url)
                if link.kind == "pdf":
                    page = Page(200, {"Content-Type": "application/pdf"}, _PDF_BODY, "application/pdf")
                elif link.kind == "image":
                    page = Page(200, {"Content-Type": "image/jpeg"}, _JPEG_BODY, "image/jpeg")
                else:
                    body = _simple_page(
                        "Subscribers only", "<p>This interview is for subscribers.</p>", outlet.spec.charset
                    )
                    page = self._html_page(outlet, body)
                self.pages[serving_url] = page
        self._render_listings()

    def _redirect(self, source: str, target: str) -> None:
        self.redirects[source] = target
        body = _simple_page(
            "Moved Permanently",
            f'<p>This page has moved to <a href="{_attr(target)}">{htmllib.escape(target)}</a>.</p>',
        ).encode()
        self.pages[source] = Page(
            301, {"Location": target, "Content-Type": "text/html; charset=utf-8"}, body, "text/html"
        )

    def _html_page(self, outlet: _Outlet, text: str) -> Page:
        charset = outlet.spec.charset
        content_type = f"text/html; charset={charset}" if outlet.spec.charset_in_header else "text/html"
        return Page(200, {"Content-Type": content_type}, text.encode(charset), "text/html")

    def title_of(self, story: _Story, brand: _Brand) -> str:
        style = vocab.TITLE_STYLES[story.outlet.spec.title_style]
        return style.format(
            h=story.headline, name=brand.name, abbr=brand.abbr, section=story.subject.section_label
        )

    def body_segments(self, story: _Story) -> list[list[tuple[str, str | None]]]:
        """Paragraphs as (sentence, link URL or None) pairs, links appended where they were placed."""
        paragraphs: list[list[tuple[str, str | None]]] = [[(s, None) for s in p] for p in story.paragraphs]
        for link in story.links:
            slots = _Slots(self.rng, link.cast or story.cast)
            slots["tname"] = link.target_name
            slots["the_tname"] = _the(link.target_name)
            if link.target is not None:
                slots["tweekday"] = vocab.WEEKDAYS[link.target.published.weekday()]
                slots["tmonth"] = vocab.MONTHS[link.target.published.month - 1]
                slots["oname"] = link.target_name
            sentence = _cap(link.template.format_map(slots))
            paragraph = min(link.paragraph, len(paragraphs) - 1)
            if link.kind == "credit":
                paragraphs.append([(sentence, link.url)])
            else:
                paragraphs[paragraph].append((sentence, link.url))
        return paragraphs

    def plain_text(self, story: _Story) -> str:
        """The article text as an extractor would give it: paragraphs separated by blank lines."""
        text = self._texts.get(story.sid)
        if text is None:
            segments = self.body_segments_cached(story)
            text = "\n\n".join(" ".join(_strip_markers(s) for s, _ in p) for p in segments)
            self._texts[story.sid] = text
        return text

    def body_segments_cached(self, story: _Story) -> list[list[tuple[str, str | None]]]:
        cached = self._segments.get(story.sid)
        if cached is None:
            cached = self.body_segments(story)
            self._segments[story.sid] = cached
        return cached

    def _render_story(self, story: _Story, brand: _Brand, mobile: bool) -> str:
        outlet = story.outlet
        spec = outlet.spec
        canonical = story.url if mobile else f"http://{brand.host}{story.path}"
        title = self.title_of(story, brand)
        chrome_base = "" if spec.relative_chrome else f"http://{brand.host}"
        local = story.published.astimezone(timezone(timedelta(hours=spec.tz_hours)))
        segments = self.body_segments_cached(story)
        description = _strip_markers(segments[0][0][0])
        head = [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n',
            _charset_meta(spec.charset),
            f"<title>{htmllib.escape(title, quote=False)}</title>\n",
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f'<link rel="canonical" href="{_attr(canonical)}">\n',
            f'<meta property="og:title" content="{_attr(story.headline)}">\n',
            '<meta property="og:type" content="article">\n',
            f'<meta property="og:url" content="{_attr(canonical)}">\n',
            f'<meta property="og:site_name" content="{_attr(brand.name)}">\n',
            f'<meta name="description" content="{_attr(description)}">\n',
            f'<meta name="keywords" content="{_attr(", ".join(story.tags))}">\n',
        ]
        form = story.date_form
        modified = local + timedelta(hours=3 + story.sid % 40)
        if form == "og":
            head.append(f'<meta property="article:published_time" content="{_iso(local)}">\n')
            if story.sid % 4 == 0:
                head.append(f'<meta property="article:modified_time" content="{_iso(modified)}">\n')
        elif form == "jsonld":
            data = {
                "@context": "https://schema.org",
                "@type": "NewsArticle",
                "headline": story.headline,
                "datePublished": _iso(local),
                "dateModified": _iso(modified if story.sid % 3 == 0 else local),
                "author": {"@type": "Person", "name": story.author},
                "publisher": {"@type": "Organization", "name": brand.name},
                "mainEntityOfPage": canonical,
            }
            head.append(
                '<script type="application/ld+json">'
                + json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
                + "</script>\n"
            )
        head.append(f'<link rel="stylesheet" href="{chrome_base}/static/site.css">\n</head>\n')
        parts = head
        parts.append(f'<body class="article-page layout-{spec.layout}">\n')
        if mobile:
            parts.append(
                f'<header class="m-header"><a class="logo" href="/">{htmllib.escape(brand.abbr)}</a> '
                f'<a class="desktop" href="{_attr(story.url)}">Full site</a></header>\n'
            )
        else:
            parts.append(self._header(brand, chrome_base))
            parts.append(self._share_bar(canonical, story.headline))
        author_url = f"http://{brand.host}/author/{_slugify(story.author)}"
        byline = f'By <a href="{_attr(author_url)}" rel="author">{htmllib.escape(story.author)}</a>'
        if (
            story.kind == "syndicated_copy"
            and story.source is not None
            and story.source.outlet.name == "Atlas Wire Service"
        ):
            byline += ", Atlas Wire Service"
        date_html = ""
        if form == "time":
            date_html = (
                f' <time datetime="{_iso(local)}" class="published">'
                f"{vocab.MONTHS[local.month - 1]} {local.day}, {local.year}</time>"
            )
        elif form == "itemprop":
            date_html = f' <meta itemprop="datePublished" content="{_iso(story.published)}">'
        elif form == "dateline":
            label = _TZ_LABELS.get(spec.tz_hours, f"UTC{spec.tz_hours:+d}")
            if spec.tz_hours < 0:
                hour = local.hour % 12 or 12
                text = (
                    f"{vocab.MONTH_ABBR[local.month - 1]} {local.day}, {local.year} at {hour}:{local:%M} "
                    f"{'a.m.' if local.hour < 12 else 'p.m.'} {label}"
                )
            else:
                text = f"{local.day} {vocab.MONTHS[local.month - 1]} {local.year}, {local:%H:%M} {label}"
            date_html = f'\n<div class="dateline">Published {text}</div>'
        headline_html = htmllib.escape(story.headline, quote=False)
        body_html = self._body_html.get(story.sid)
        if body_html is None:  # the same for every rendering of the story (mirror, old branding)
            body_html = "".join(_paragraph_html(paragraph) for paragraph in segments)
            self._body_html[story.sid] = body_html
        category_url = f"http://{brand.host}/category/{story.subject.section}"
        tag_links = ", ".join(
            f'<a href="http://{brand.host}/tag/{_slugify(tag)}" rel="tag">{htmllib.escape(tag)}</a>'
            for tag in story.tags
        )
        tags_html = (
            f'<p class="filed">Filed under <a href="{_attr(category_url)}">'
            f"{story.subject.section_label}</a> \u00b7 Topics: {tag_links}</p>\n"
        )
        if spec.layout == 0 or mobile:
            parts.append(
                '<main>\n<article class="story" itemscope itemtype="https://schema.org/NewsArticle">\n'
                f'<h1 class="headline" itemprop="headline">{headline_html}</h1>\n'
                f'<div class="byline">{byline}{date_html}</div>\n'
                f'<div class="article-body" itemprop="articleBody">\n{body_html}{tags_html}</div>\n'
                "</article>\n"
            )
        elif spec.layout == 1:
            parts.append(
                '<main id="content">\n<div class="entry">\n<header class="entry-header">'
                f'<h1 class="entry-title">{headline_html}</h1>\n'
                f'<p class="meta">{byline}{date_html}</p></header>\n'
                f'<div class="entry-content">\n{body_html}{tags_html}</div>\n</div>\n'
            )
        else:
            parts.append(
                '<main>\n<div id="story">\n'
                f"<h1>{headline_html}</h1>\n"
                f'<span class="author">{byline}</span>{date_html}\n'
                f'<section id="story-body">\n{body_html}{tags_html}</section>\n</div>\n'
            )
        if not mobile:
            parts.append(self._most_read(story, chrome_base))
        parts.append("</main>\n")
        parts.append(self._footer(brand, chrome_base))
        parts.append("</body>\n</html>\n")
        return "".join(parts)

    def _header(self, brand: _Brand, base: str) -> str:
        nav = "".join(f'<li><a href="{base}/{section}/">{label}</a></li>' for label, section in _NAV)
        return (
            f'<header class="site-header">\n<a class="logo" href="{base}/">{htmllib.escape(brand.name)}</a>\n'
            f'<nav class="main-nav"><ul>{nav}</ul></nav>\n'
            f'<form class="search" action="{base}/search"><input name="q" placeholder="Search"></form>\n'
            "</header>\n"
        )

    def _share_bar(self, url: str, headline: str) -> str:
        quoted = quote(url, safe="")
        quoted_headline = quote(headline, safe="")
        return (
            '<div class="share-bar">'
            f'<a href="https://www.facebook.com/sharer/sharer.php?u={quoted}" class="share-facebook">Share</a> '
            f'<a href="https://twitter.com/intent/tweet?url={quoted}&amp;text={quoted_headline}" '
            'class="share-twitter">Tweet</a> '
            f'<a href="mailto:?subject={quoted_headline}&amp;body={quoted}" class="share-email">Email'
            "</a></div>\n"
        )

    def _most_read(self, story: _Story, base: str) -> str:
        """Up to five earlier stories of the same outlet and subject ("More in this section")."""
        siblings = self.by_outlet_subject[(story.outlet.index, story.subject.name)]
        position = self.position_in_outlet_subject[story.sid]
        picks = siblings[max(0, position - 5) : position] or siblings[position + 1 : position + 4]
        items = "".join(
            f'<li><a href="{base}{s.path}">{htmllib.escape(s.headline, quote=False)}</a></li>'
            for s in reversed(picks)
        )
        return (
            f'<aside class="sidebar most-read"><h2>Most read in {story.subject.section_label}</h2>'
            f"<ol>{items}</ol></aside>\n"
        )

    def _footer(self, brand: _Brand, base: str) -> str:
        year = self.end.year
        return (
            '<footer class="site-footer"><ul>'
            f'<li><a href="{base}/about">About us</a></li><li><a href="{base}/contact">Contact</a></li>'
            f'<li><a href="{base}/privacy">Privacy policy</a></li>'
            f'<li><a href="{base}/newsletter">Newsletter</a></li></ul>'
            f"<p>\u00a9 {year} {htmllib.escape(brand.name)}. All rights reserved.</p></footer>\n"
        )

    def _render_listings(self) -> None:
        """Home, section, category, tag and author pages, about/contact/privacy, and robots.txt."""
        by_outlet: dict[int, list[_Story]] = {}
        for story in sorted(self.stories, key=_time_key, reverse=True):
            by_outlet.setdefault(story.outlet.index, []).append(story)
        for outlet in self.outlets:
            stories = by_outlet.get(outlet.index, [])
            brand = _Brand(outlet.name, outlet.spec.abbr, outlet.host)
            base = f"http://{outlet.host}"
            self._listing(outlet, brand, "/", "Latest news", stories)
            for label, section in _NAV:
                chosen = [s for s in stories if s.subject.section == section] or stories
                self._listing(outlet, brand, f"/{section}/", label, chosen)
                self._listing(outlet, brand, f"/category/{section}", label, chosen)
            tags: dict[str, list[_Story]] = {}
            authors: dict[str, list[_Story]] = {}
            for story in stories:
                for tag in story.tags:
                    tags.setdefault(tag, []).append(story)
                authors.setdefault(story.author, []).append(story)
            for tag, tagged in tags.items():
                self._listing(outlet, brand, f"/tag/{_slugify(tag)}", f"Topic: {tag}", tagged)
            for author, written in authors.items():
                self._listing(outlet, brand, f"/author/{_slugify(author)}", f"Stories by {author}", written)
            for path, heading in (("/about", "About us"), ("/contact", "Contact"), ("/privacy", "Privacy")):
                text = _simple_page(
                    f"{heading} - {brand.name}",
                    f"<p>{htmllib.escape(brand.name)} is an independent news organisation.</p>",
                    outlet.spec.charset,
                )
                self.pages[base + path] = self._html_page(outlet, text)
            self.pages[base + "/robots.txt"] = _robots_page()
            if outlet.spec.mobile_host:
                mobile = _Brand(outlet.name, outlet.spec.abbr, outlet.spec.mobile_host)
                self._listing(outlet, mobile, "/", "Latest news", stories)
                self.pages[f"http://{outlet.spec.mobile_host}/robots.txt"] = _robots_page()

    def _listing(
        self, outlet: _Outlet, brand: _Brand, path: str, heading: str, stories: list[_Story]
    ) -> None:
        base = "" if outlet.spec.relative_chrome else f"http://{brand.host}"
        items = "".join(
            f'<li><a href="{base}{s.path}">{htmllib.escape(s.headline, quote=False)}</a></li>'
            for s in stories[:25]
        )
        content = (
            self._header(brand, base) + f'<main><h1>{htmllib.escape(heading)}</h1><ul class="river">'
            f"{items}</ul></main>\n" + self._footer(brand, base)
        )
        text = _simple_page(f"{heading} - {brand.name}", content, charset=outlet.spec.charset)
        self.pages[f"http://{brand.host}{path}"] = self._html_page(outlet, text)

    # -- assembly ---------------------------------------------------------------------------------------

    def build(self) -> DemoWeb:
        self.build_outlets()
        self.build_stories()
        self.assign_urls()
        self.split_archive()
        self.build_links()
        self.render()
        depths = self._hop_depths()
        media, duplicate_media = self._media()
        archive, archive_dups = self._archive_rows()
        stories = [self._public_story(s, depths[s.sid]) for s in self.stories]
        truth = self._truth(stories, duplicate_media, archive_dups, depths)
        host_redirects = {}
        for outlet in self.outlets:
            if outlet.bare_host:
                host_redirects[outlet.bare_host] = outlet.host
            if outlet.old_host:
                host_redirects[outlet.old_host] = outlet.host
        hosts = sorted({urlsplit(url).hostname or "" for url in self.pages} | set(host_redirects))
        hosts = [h for h in hosts if h and h != DEAD_HOST]
        return DemoWeb(
            seed=self.seed,
            start=self.start,
            end=self.end,
            media=media,
            pages=self.pages,
            archive_stories=archive,
            stories=stories,
            truth=truth,
            hosts=hosts,
            host_redirects=host_redirects,
        )

    def _hop_depths(self) -> dict[int, int | None]:
        """Breadth-first search from the archive over same-subject in-article links: the spider's view."""
        url_to_story: dict[str, _Story] = {}
        for story in self.stories:
            url_to_story[story.url] = story
            url_to_story[story.origin_url] = story
            if story.tracking_url:
                url_to_story[story.tracking_url] = story
            if story.outlet.spec.mobile_host:
                url_to_story[f"http://{story.outlet.spec.mobile_host}{story.path}"] = story
            if story.outlet.bare_host:
                url_to_story[f"http://{story.outlet.bare_host}{story.path}"] = story
        depth: dict[int, int | None] = {s.sid: None for s in self.stories}
        frontier = [s for s in self.stories if s.archived]
        for story in frontier:
            depth[story.sid] = 0
        hops = 0
        while frontier:
            hops += 1
            next_frontier = []
            for story in frontier:
                for link in story.links:
                    target = url_to_story.get(link.url)
                    if target is None or target.subject is not story.subject or depth[target.sid] is not None:
                        continue
                    depth[target.sid] = hops
                    next_frontier.append(target)
            frontier = next_frontier
        return depth

    def _media(self) -> tuple[list[dict], list[dict]]:
        media: list[dict] = []
        duplicates: list[dict] = []
        for outlet in self.outlets:
            spec = outlet.spec
            aliases = [h for h in (outlet.bare_host, spec.mobile_host, outlet.old_host) if h]
            media.append(
                {
                    "name": spec.name,
                    "url": f"http://{spec.host}/",
                    "host": spec.host,
                    "aliases": aliases,
                    "dup_of": None,
                }
            )
            if spec.mobile_host:
                name = f"{spec.name} Mobile"
                media.append(
                    {
                        "name": name,
                        "url": f"http://{spec.mobile_host}/",
                        "host": spec.mobile_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {"medium": name, "host": spec.mobile_host, "dup_of": spec.name, "kind": "mobile"}
                )
            if spec.bare_dup and outlet.bare_host:
                media.append(
                    {
                        "name": outlet.bare_host,
                        "url": f"http://{outlet.bare_host}/",
                        "host": outlet.bare_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {
                        "medium": outlet.bare_host,
                        "host": outlet.bare_host,
                        "dup_of": spec.name,
                        "kind": "bare_host",
                    }
                )
            if spec.renamed_from and outlet.rename_date:
                old_name, old_host, _ = spec.renamed_from
                media.append(
                    {
                        "name": old_name,
                        "url": f"http://{old_host}/",
                        "host": old_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {
                        "medium": old_name,
                        "host": old_host,
                        "dup_of": spec.name,
                        "kind": "renamed",
                        "renamed_on": outlet.rename_date.isoformat(),
                    }
                )
        return media, duplicates

    def _archive_rows(self) -> tuple[list[dict], list[dict]]:
        """Archive rows of archived stories, some under a duplicate medium's URL, some twice."""
        rng = self.rng
        rows: list[dict] = []
        duplicates: list[dict] = []
        for story in self.stories:
            if not story.archived:
                continue
            outlet = story.outlet
            spec = outlet.spec
            current = _Brand(outlet.name, spec.abbr, outlet.host)
            canonical_row = self._row(
                story, story.url, current, current.name, outlet.host, self.rendered[story.sid]
            )
            story_rows = []
            roll = rng.random()
            if story.old_branded:  # archived before the rename: old host, old name, old branding
                old = self._brand(outlet, story.published)
                old_html = self._render_story(story, old, mobile=False)
                story_rows.append(self._row(story, story.origin_url, old, old.name, old.host, old_html))
                if roll < 0.1:
                    story_rows.append(canonical_row)
            elif spec.mobile_host and roll < 0.4:  # archived from the m. host, as its own medium
                mirror_url = f"http://{spec.mobile_host}{story.path}"
                html = self.pages[mirror_url].body.decode(spec.charset)
                mirror = _Brand(outlet.name, spec.abbr, spec.mobile_host)
                story_rows.append(
                    self._row(story, mirror_url, mirror, f"{spec.name} Mobile", spec.mobile_host, html)
                )
                if roll < 0.15:
                    story_rows.append(canonical_row)
            elif spec.bare_dup and outlet.bare_host and roll < 0.4:  # archived from the bare host
                story_rows.append(
                    self._row(
                        story,
                        f"http://{outlet.bare_host}{story.path}",
                        current,
                        outlet.bare_host,
                        outlet.bare_host,
                        self.rendered[story.sid],
                    )
                )
                if roll < 0.1:
                    story_rows.append(canonical_row)
            else:
                story_rows.append(canonical_row)
            if story.tracking_url and rng.random() < 0.4:
                story_rows.append(
                    self._row(
                        story,
                        story.tracking_url,
                        current,
                        current.name,
                        outlet.host,
                        self.rendered[story.sid],
                    )
                )
            if len(story_rows) > 1:
                duplicates.append(
                    {
                        "kind": "archived_twice",
                        "medium": outlet.name,
                        "media": [r["medium"] for r in story_rows],
                        "urls": [r["url"] for r in story_rows],
                    }
                )
            rows.extend(story_rows)
        rows.sort(key=lambda r: (r["publish_date"], r["url"]))
        return rows, duplicates

    def _row(
        self, story: _Story, url: str, page_brand: _Brand, medium: str, medium_host: str, html: str
    ) -> dict:
        return {
            "url": url,
            "title": self.title_of(story, page_brand),
            "text": self.plain_text(story),
            "publish_date": story.published.isoformat(),
            "medium": medium,
            "medium_url": f"http://{medium_host}/",
            "html": html,
        }

    def _public_story(self, story: _Story, depth: int | None) -> DemoStory:
        outlet = story.outlet
        alternates = []
        if story.old_branded:
            alternates.append(story.origin_url)
        if outlet.spec.mobile_host:
            alternates.append(f"http://{outlet.spec.mobile_host}{story.path}")
        if outlet.bare_host:
            alternates.append(f"http://{outlet.bare_host}{story.path}")
        if story.tracking_url:
            alternates.append(story.tracking_url)
        text = self.plain_text(story)
        return DemoStory(
            url=story.url,
            medium=outlet.name,
            subject=story.subject.name,
            headline=story.headline,
            title=self.title_of(story, _Brand(outlet.name, outlet.spec.abbr, outlet.host)),
            publish_date=story.published,
            date_form=story.date_form,
            kind=story.kind,
            archived=story.archived,
            hop_depth=depth,
            alt_urls=tuple(alternates),
            word_count=len(text.split()),
        )

    def _truth(
        self,
        stories: list[DemoStory],
        duplicate_media: list[dict],
        archive_dups: list[dict],
        depths: dict[int, int | None],
    ) -> DemoTruth:
        rng = self.rng
        subject_of: dict[str, str] = {}
        for story in stories:
            subject_of[story.url] = story.subject
            for alt in story.alt_urls:
                subject_of[alt] = story.subject
        groups = []
        for original, copies in self.groups:
            groups.append(
                {
                    "original": original.url,
                    "medium": original.outlet.name,
                    "copies": [
                        {
                            "url": c.url,
                            "medium": c.outlet.name,
                            "substituted_words": c.substituted_words,
                            "word_count": len(self.plain_text(c).split()),
                            "added_sentence": (
                                _strip_markers(self.body_segments_cached(c)[-1][0][0])
                                if c.credit
                                else c.added_sentence
                            ),
                        }
                        for c in copies
                    ],
                }
            )
        duplicate_stories: list[dict] = []
        for story in self.stories:
            if story.tracking_url:
                duplicate_stories.append(
                    {
                        "kind": "tracking_url",
                        "medium": story.outlet.name,
                        "urls": [story.url, story.tracking_url],
                    }
                )
        for original, story in self.retitled:
            duplicate_stories.append(
                {
                    "kind": "retitled",
                    "medium": story.outlet.name,
                    "urls": [original.url, story.url],
                    "headline_change": story.headline_change,
                    "headlines": [original.headline, story.headline],
                }
            )
        duplicate_stories.extend(archive_dups)
        unarchived = sorted(s.url for s in self.stories if not s.archived and s.date_form != "none")
        flaky = rng.sample(unarchived, min(8, len(unarchived)))
        return DemoTruth(
            subject_of=subject_of,
            publish_dates={s.url: s.publish_date.isoformat() for s in stories},
            date_forms={s.url: s.date_form for s in stories},
            hop_depth={s.url: s.hop_depth for s in stories},
            syndication_groups=groups,
            duplicate_media=duplicate_media,
            duplicate_stories=duplicate_stories,
            redirects=dict(self.redirects),
            dead_urls=list(dict.fromkeys(self.truth_dead)),
            binary_urls=list(dict.fromkeys(self.truth_binary)),
            robots_disallowed=list(dict.fromkeys(self.truth_private)),
            flaky_once=flaky,
        )


def _time_key(story: _Story) -> tuple[datetime, int]:
    return (story.published, story.sid)


def _iso(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _attr(value: str) -> str:
    return htmllib.escape(value, quote=True)


def _strip_markers(text: str) -> str:
    return text.replace("\x00", "").replace("\x01", "")


def _paragraph_html(paragraph: list[tuple[str, str | None]]) -> str:
    """One <p>: the sentences escaped at once, then each link's markers turned into its <a> element."""
    escaped = htmllib.escape(" ".join(sentence for sentence, _ in paragraph), quote=False)
    for _, url in paragraph:
        if url is not None:
            escaped = escaped.replace("\x00", f'<a href="{_attr(url)}">', 1).replace("\x01", "</a>", 1)
    return f"<p>{escaped}</p>\n"


def _charset_meta(charset: str) -> str:
    if charset.lower() == "utf-8":
        return '<meta charset="utf-8">\n'
    return f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">\n'


def _simple_page(title: str, content: str, charset: str = "utf-8") -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n{_charset_meta(charset)}'
        f"<title>{htmllib.escape(title, quote=False)}</title>\n</head>\n<body>\n{content}\n</body>\n</html>\n"
    )


def _robots_page() -> Page:
    return Page(200, {"Content-Type": "text/plain; charset=utf-8"}, ROBOTS_TXT.encode(), "text/plain")


# ---------------------------------------------------------------------------------------------------------
# The web
# ---------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class DemoWeb:
    """The generated demo web: media, static pages, the archive part, and the planted truth."""

    seed: int
    start: date
    end: date  # last day with stories (inclusive)
    media: list[dict]  # name, url, host, aliases, dup_of
    pages: dict[str, Page]  # absolute http:// URL → response
    archive_stories: list[dict]  # url, title, text, publish_date (ISO UTC), medium, medium_url, html
    stories: list[DemoStory]
    truth: DemoTruth
    hosts: list[str]  # every hostname the demo server answers for
    host_redirects: dict[str, str]  # host → host it redirects every path to (bare → www., old → renamed)

    @property
    def subjects(self) -> tuple[str, ...]:
        return tuple(SUBJECTS)

    def topic_query_for(self, subject: str = DEMO_SUBJECT) -> str:
        """The boolean query selecting `subject`'s stories, e.g. for the demo topic in topics.yaml."""
        if subject not in SUBJECTS:
            raise ValueError(f"unknown demo subject {subject!r}; expected one of {sorted(SUBJECTS)}")
        return SUBJECTS[subject].query

    def lookup(self, url: str) -> Page | None:
        """The response for a URL (http or https), as the demo server gives it; None means 404."""
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return self.lookup_path(parts.hostname or "", path)

    def lookup_path(self, host: str, path: str) -> Page | None:
        """The response for a Host header and request path: exact page, host-wide 301, or None (404).

        Like real sites, a story page answers under any extra query string (a tracking tail that is not
        recorded still serves the story)."""
        host = host.lower().rstrip(".")
        if not path.startswith("/"):
            path = "/" + path
        page = self.pages.get(f"http://{host}{path}")
        if page is not None:
            return page
        target_host = self.host_redirects.get(host)
        if target_host is not None:
            target = f"http://{target_host}{path}"
            body = _simple_page("Moved Permanently", f'<p>Moved to <a href="{_attr(target)}">here</a>.</p>')
            return Page(
                301,
                {"Location": target, "Content-Type": "text/html; charset=utf-8"},
                body.encode(),
                "text/html",
            )
        if "?" in path:
            page = self.pages.get(f"http://{host}{path.split('?', 1)[0]}")
            if page is not None and page.status == 200 and page.content_type == "text/html":
                return page
        return None

    def story_for_url(self, url: str) -> DemoStory | None:
        """The story a URL (canonical or alternate) shows, if any."""
        index = self.__dict__.get("_story_index")
        if index is None:
            index = {}
            for story in self.stories:
                index[story.url] = story
                for alt in story.alt_urls:
                    index[alt] = story
            self.__dict__["_story_index"] = index
        return index.get(url)

    def archive_rows(self) -> Iterator[dict]:
        """Archive rows with the loader's columns (url, title, text, publish_date, medium)."""
        for row in self.archive_stories:
            yield {k: row[k] for k in ("url", "title", "text", "publish_date", "medium")}

    def write_archive_csv(self, path: str | Path, include_html: bool = False) -> Path:
        """Write the archive as CSV (UTF-8, header line), the format the archive loader reads."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ["url", "title", "text", "publish_date", "medium"] + (["html"] if include_html else [])
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in self.archive_stories:
                writer.writerow(row)
        return path

    def write_archive_parquet(self, path: str | Path, include_html: bool = False) -> Path:
        """Write the archive as Parquet with the same columns as the CSV."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ["url", "title", "text", "publish_date", "medium"] + (["html"] if include_html else [])
        table = pa.table(
            {c: pa.array([row[c] for row in self.archive_stories], type=pa.string()) for c in columns}
        )
        pq.write_table(table, path)
        return path

    def digest(self) -> str:
        """SHA-256 over every page, archive row and truth record: equal digests mean identical webs."""
        h = hashlib.sha256()
        for url in sorted(self.pages):
            page = self.pages[url]
            h.update(url.encode())
            h.update(str(page.status).encode())
            h.update(json.dumps(page.headers, sort_keys=True).encode())
            h.update(hashlib.sha256(page.body).digest())
        h.update(json.dumps(self.archive_stories, sort_keys=True).encode())
        h.update(json.dumps(self.media, sort_keys=True).encode())
        truth = self.truth
        h.update(
            json.dumps(
                [
                    truth.subject_of,
                    truth.publish_dates,
                    truth.date_forms,
                    truth.hop_depth,
                    truth.syndication_groups,
                    truth.duplicate_media,
                    truth.duplicate_stories,
                    truth.redirects,
                    truth.dead_urls,
                    truth.binary_urls,
                    truth.robots_disallowed,
                    truth.flaky_once,
                ],
                sort_keys=True,
            ).encode()
        )
        return h.hexdigest()


def generate_demo_web(
    seed: int = 7,
    n_media: int = 40,
    n_stories: int = 3000,
    start: date = date(2026, 1, 1),
    months: int = 4,
) -> DemoWeb:
    """Generate the demo news web; the same arguments give a byte-identical web in any process."""
    if not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if not 3 <= n_media <= 150:
        raise ValueError(f"n_media must be between 3 and 150, got {n_media}")
    if not 100 <= n_stories <= 200_000:
        raise ValueError(f"n_stories must be between 100 and 200000, got {n_stories}")
    if not 1 <= months <= 36:
        raise ValueError(f"months must be between 1 and 36, got {months}")
    if not isinstance(start, date):
        raise ValueError(f"start must be a date, got {start!r}")
    return _Builder(seed, n_media, n_stories, start, months).build()
