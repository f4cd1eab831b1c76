"""Topic declarations: read ``topics.yaml``, validate each topic on its own, report what is wrong precisely.

A topic with an invalid field or query is rejected with a message naming the topic, the field and, for a
query, the character position; the other topics still load. That way one typo in a shared file never stops
every topic of a deployment. The same holds for hostile input: every value is bounded (dates within the
archive's range, whole numbers, query size and nesting: the constants below; YAML values, nesting and
aliases: ``topicmap.topics.topics_yaml``), a duplicate key is an error rather than a silent choice, and
reading a file again costs no query parse (``parse`` keeps each query by its text). Only a file that cannot
be read as a whole (missing, not UTF-8, not YAML, over MAX_TOPICS_FILE_BYTES or MAX_TOPICS_FILE_VALUES) is an
error of the file.

Seeds: the archive stories the query matches, plus the URLs of the ``seed_urls`` CSV files. A seed list is a
researcher's own selection, so its stories are taken as relevant (``assume_match: true``, the default, as
Media Cloud's ``topic_seed_urls.assume_match``): they join the topic whatever their text says, and the spider
follows their links. With ``assume_match: false`` each listed page is judged by the query like any page the
spider finds (a list of candidates). A URL in several lists is taken as relevant if one of them says so.

Example file::

    topics:
      - name: climate-demo
        query: '(climate OR "carbon tax" OR emission*) AND NOT sports'
        start_date: 2026-01-01
        end_date: 2026-04-30      # or a day in the future, or `open` (or left out): it keeps running
        max_iterations: 15        # default 15
        max_stories: 5000
        seed_urls:                # optional CSV files with a `url` column
          - seeds/climate.csv     # its stories are taken as relevant (assume_match: true, the default)
          - {path: seeds/maybe.csv, assume_match: false}   # its pages are judged by the query
        fetch:                    # optional per-topic fetch settings
          domain_intervals: {example.com: 2.0}
        timespans:                # optional custom timespans
          - {name: cop31, start_date: 2026-02-01, end_date: 2026-02-15}
        posts:                    # optional post dumps whose URLs are seeds (topicmap.topics.post_sources)
          - {platform: reddit, path: dumps/reddit.jsonl}

Topics that keep running: a topic whose ``end_date`` is ``open`` (or left out) is open-ended, its dates run up to
the current day (``TopicConfig.last_day``); one whose end date is in the future runs up to that day. Either way,
when the archive gains stories in its dates, the ``archive_growth`` sensor re-seeds it for the new stories and
the spider goes on from there (see ``topicmap.topics.seeding``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from topicmap.topics.focus_kinds import FOCUS_KINDS, FocusDeclarationError, FocusSelection
from topicmap.topics.post_sources import PostSource, parse_post_sources
from topicmap.topics.query import MAX_QUERY_CHARS, PARSE_CACHE_CHARS, QuerySyntaxError, TopicQuery, parse
from topicmap.topics.topic_errors import TopicConfigError, checked_flag, reject_unknown
from topicmap.topics.topic_errors import shown as _shown  # the name every field check quotes values with
from topicmap.topics.topics_yaml import Shape, node_name, read_yaml, topic_nodes, topic_value

DEFAULT_MAX_ITERATIONS = 15
#: a seed URL list's stories are taken as relevant unless the list says ``assume_match: false``
DEFAULT_SEED_ASSUME_MATCH = True
SEED_LIST_FIELDS = {"path", "assume_match"}
DEFAULT_MAX_STORIES = 100_000
TOPIC_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_\-]{0,62}")

# Bounds: whatever the file says, a topic that passes them can be seeded, stored and spidered. Each is far
# from what a topic needs; the query's own bounds are in ``topicmap.topics.query`` (MAX_QUERY_*).
#: a topic's dates start no earlier: the archive refuses stories published before it as misdated (Media
#: Cloud's rule; ``topicmap.archive.drop_rows.EARLIEST_DATE``, ``topicmap.web.dates.MIN_PUBLISH_DATE``)
EARLIEST_TOPIC_DATE = date(2008, 1, 1)
#: a topic may end in the future (it is still being collected), up to the end of the year this many years ahead
TOPIC_YEARS_AHEAD = 5
#: inclusive bounds of the whole-number settings (the store keeps them as 32-bit integers)
MAX_ITERATIONS_RANGE = (1, 1000)
MAX_STORIES_RANGE = (1, 10_000_000)
MAX_FETCHES_PER_ITERATION_RANGE = (1, 10_000_000)
#: seconds between two requests to one site, at most (a larger one would stall the topic's spider)
MAX_FETCH_INTERVAL_SECONDS = 3600.0
#: the queries of one file together, in characters: half the parse cache, so that the queries of a file read
#: on every tick, and those of the edit before it, stay parsed (and the cache's memory bounded)
MAX_FILE_QUERY_CHARS = PARSE_CACHE_CHARS // 2
KNOWN_FIELDS = {
    "name",
    "query",
    "start_date",
    "end_date",
    "max_iterations",
    "max_stories",
    "seed_urls",
    "fetch",
    "timespans",
    "snapshot_periods",
    "focal_sets",
    "posts",
    "respider",
}
RESPIDER_FIELDS = {"start_date", "end_date"}
#: ``respider: all``: every story of the topic has its links mined again
RESPIDER_ALL = "all"
SNAPSHOT_PERIODS = ("overall", "monthly", "weekly", "custom")
#: ``end_date: open`` (or no end_date): the topic keeps running, its dates reach the current day
OPEN_END = "open"
FETCH_FIELDS = {"domain_intervals", "default_interval", "obey_robots", "max_fetches_per_iteration"}


@dataclass(frozen=True)
class CustomTimespan:
    name: str
    start_date: date
    end_date: date


@dataclass(frozen=True)
class FetchSettings:
    """Per-topic overrides of the fetcher's politeness settings."""

    domain_intervals: dict[str, float] = field(default_factory=dict)
    default_interval: float | None = None
    obey_robots: bool | None = None
    max_fetches_per_iteration: int | None = None


@dataclass(frozen=True)
class Respider:
    """Media Cloud's respider request (``respider_stories``, ``respider_start_date``, ``respider_end_date``): the
    topic stories published in these days (both None: every story; stories without a date always) have their
    links mined again, once per declaration."""

    start_date: date | None = None
    end_date: date | None = None

    @property
    def key(self) -> str:
        """What the store records as done: the same declaration is not applied twice."""
        if self.start_date is None and self.end_date is None:
            return RESPIDER_ALL
        return f"{self.start_date or ''}..{self.end_date or ''}"


@dataclass(frozen=True)
class SeedUrlList:
    """A CSV file of seed URLs (a ``url`` column), and whether the stories of its URLs are taken as relevant
    (``assume_match``) or judged by the topic's query like any page the spider finds."""

    path: Path
    assume_match: bool = DEFAULT_SEED_ASSUME_MATCH


#: subtopics of one topic, at most: every focus repeats every timespan of the topic's snapshots
MAX_FOCI = 50
#: custom timespans of one topic, at most: each is computed for the topic and again for each focus
MAX_CUSTOM_TIMESPANS = 100
FOCAL_SET_FIELDS = {"name", "description", "foci"}
MAX_FOCUS_NAME_CHARS = 100
MAX_FOCUS_DESCRIPTION_CHARS = 2000


@dataclass(frozen=True)
class FocusDefinition:
    """A subtopic (Media Cloud's focus definition): its name and what it selects, as its kind's class
    (``topicmap.topics.focus_kinds``: a query, media tags, ...)."""

    name: str
    selection: FocusSelection
    description: str = ""

    def declaration(self) -> dict[str, Any]:
        """The focus as the topic's config JSON records it (part of every snapshot key): its name, its
        description and the declared value under its kind's field. The fields of the first kinds, ``query`` and
        ``media_tags``, are written for every focus (null unless of that kind), as they were before kinds were
        classes, so the keys of existing snapshots stay the same; another kind's field only in its own foci."""
        fields: dict[str, Any] = dict.fromkeys(KEYED_FOCUS_KINDS)
        fields[self.selection.kind] = self.selection.declaration()
        return {"name": self.name, **fields, "description": self.description}


#: the kinds whose field every focus of the config JSON carries (FocusDefinition.declaration)
KEYED_FOCUS_KINDS = ("query", "media_tags")


@dataclass(frozen=True)
class FocalSetDefinition:
    """Foci that split a topic one way (Media Cloud's focal set definition): "partisanship", "subtopics"."""

    name: str
    foci: tuple[FocusDefinition, ...]
    description: str = ""


def current_day() -> date:
    """Today in UTC: the last day of an open-ended topic (the archive's days are UTC days)."""
    return datetime.now(UTC).date()


@dataclass(frozen=True)
class TopicConfig:
    name: str
    query: str
    start_date: date
    #: the last day, inclusive; None: open-ended (``end_date: open``), the topic's dates reach the current day
    end_date: date | None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_stories: int = DEFAULT_MAX_STORIES
    seed_urls: tuple[SeedUrlList, ...] = ()
    fetch: FetchSettings = field(default_factory=FetchSettings)
    timespans: tuple[CustomTimespan, ...] = ()
    snapshot_periods: tuple[str, ...] = SNAPSHOT_PERIODS
    focal_sets: tuple[FocalSetDefinition, ...] = ()
    #: post dumps whose shared URLs are seeds (``topicmap.topics.post_sources``)
    posts: tuple[PostSource, ...] = ()
    #: links of these stories to be mined again (``topicmap.spider.respider``)
    respider: Respider | None = None

    @property
    def parsed_query(self) -> TopicQuery:
        return parse(self.query)

    @property
    def open_ended(self) -> bool:
        return self.end_date is None

    def last_day(self, today: date | None = None) -> date:
        """The last day of the topic's dates as of ``today`` (default: the current UTC day): its end date, or
        ``today`` for an open-ended topic (never before its start)."""
        if self.end_date is not None:
            return self.end_date
        return max(today or current_day(), self.start_date)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): what the store keeps and what a snapshot's provenance hashes."""

        def default(value: Any) -> Any:
            if isinstance(value, date | datetime):
                return value.isoformat()
            if isinstance(value, Path):
                return str(value)
            raise TypeError(f"not serializable: {value!r}")

        declaration = asdict(self)
        if not self.posts:  # a topic without posts keeps the JSON (and the config hash) it had before posts
            del declaration["posts"]
        if self.respider is None:  # likewise without a respider request
            del declaration["respider"]
        if (
            not self.focal_sets
        ):  # a topic without foci keeps the JSON (and the config hash) it had before foci
            del declaration["focal_sets"]
        else:  # each focus as its kind declares it (asdict would spell out the kind's class)
            for declared, focal_set in zip(declaration["focal_sets"], self.focal_sets, strict=True):
                declared["foci"] = [focus.declaration() for focus in focal_set.foci]
        return json.dumps(declaration, sort_keys=True, default=default)

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()


@dataclass
class TopicsFile:
    """The result of reading a topics file: the valid topics and one error per rejected topic."""

    topics: list[TopicConfig]
    errors: list[TopicConfigError]

    def by_name(self) -> dict[str, TopicConfig]:
        return {topic.name: topic for topic in self.topics}


def latest_topic_date(today: date | None = None) -> date:
    """The last day a topic may end on: the end of the year ``TOPIC_YEARS_AHEAD`` years from ``today``."""
    return date((today or date.today()).year + TOPIC_YEARS_AHEAD, 12, 31)


def _as_date(topic: str, field_name: str, value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise TopicConfigError(topic, field_name, f"expected a date like 2026-01-31, got {_shown.repr(value)}")


def _as_topic_date(topic: str, field_name: str, value: Any, today: date | None) -> date:
    """A topic's start or end: a date in the archive's range (any date in it can be seeded month by month)."""
    day = _as_date(topic, field_name, value)
    latest = latest_topic_date(today)
    if not EARLIEST_TOPIC_DATE <= day <= latest:
        raise TopicConfigError(
            topic,
            field_name,
            f"{day} is outside {EARLIEST_TOPIC_DATE}..{latest}: the archive holds no story published before "
            f"{EARLIEST_TOPIC_DATE}, and a topic ends at most {TOPIC_YEARS_AHEAD} years ahead",
        )
    return day


def _as_end_date(topic: str, value: Any, today: date | None) -> date | None:
    """A topic's end: a day (past or future, within the bounds), or None for ``open``, null or no end_date."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", OPEN_END)):
        return None
    if not isinstance(value, date):
        try:
            date.fromisoformat(str(value).strip())
        except ValueError:
            raise TopicConfigError(
                topic,
                "end_date",
                f"expected a date like 2026-01-31, or {OPEN_END!r} for a topic that keeps running, got "
                f"{_shown.repr(value)}",
            ) from None
    return _as_topic_date(topic, "end_date", value, today)


def _as_int_in(topic: str, field_name: str, value: Any, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TopicConfigError(
            topic, field_name, f"expected a whole number from {low:,} to {high:,}, got {_shown.repr(value)}"
        )
    return value


def _as_interval(topic: str, field_name: str, value: Any) -> float:
    """Seconds between two requests to one site: a number from 0 to MAX_FETCH_INTERVAL_SECONDS (not .nan or
    .inf, which YAML reads as floats)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_FETCH_INTERVAL_SECONDS
    ):
        raise TopicConfigError(
            topic,
            field_name,
            f"expected seconds from 0 to {MAX_FETCH_INTERVAL_SECONDS:g}, got {_shown.repr(value)}",
        )
    return float(value)


def _parse_fetch(topic: str, raw: Any) -> FetchSettings:
    if raw is None:
        return FetchSettings()
    if not isinstance(raw, dict):
        raise TopicConfigError(topic, "fetch", f"expected a mapping, got {type(raw).__name__}")
    reject_unknown(topic, "fetch", raw, FETCH_FIELDS)
    intervals = raw.get("domain_intervals") or {}
    if not isinstance(intervals, dict):
        raise TopicConfigError(topic, "fetch.domain_intervals", "expected a mapping of domain to seconds")
    clean = {
        str(domain).lower(): _as_interval(topic, f"fetch.domain_intervals.{domain}", seconds)
        for domain, seconds in intervals.items()
    }
    default_interval = raw.get("default_interval")
    if default_interval is not None:
        default_interval = _as_interval(topic, "fetch.default_interval", default_interval)
    obey_robots = raw.get("obey_robots")
    if obey_robots is not None and not isinstance(obey_robots, bool):
        raise TopicConfigError(
            topic, "fetch.obey_robots", f"expected true or false, got {_shown.repr(obey_robots)}"
        )
    max_fetches = raw.get("max_fetches_per_iteration")
    if max_fetches is not None:
        max_fetches = _as_int_in(
            topic, "fetch.max_fetches_per_iteration", max_fetches, MAX_FETCHES_PER_ITERATION_RANGE
        )
    return FetchSettings(
        domain_intervals=clean,
        default_interval=default_interval,
        obey_robots=obey_robots,
        max_fetches_per_iteration=max_fetches,
    )


def _parse_timespans(topic: str, raw: Any, start: date, end: date | None) -> tuple[CustomTimespan, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TopicConfigError(topic, "timespans", "expected a list of {name, start_date, end_date}")
    if len(raw) > MAX_CUSTOM_TIMESPANS:
        raise TopicConfigError(
            topic,
            "timespans",
            f"{len(raw)} custom timespans, more than {MAX_CUSTOM_TIMESPANS} (each is computed for the topic and "
            "every focus of every snapshot)",
        )
    spans = []
    names: dict[str, str] = {}  # snapshot key -> the name that took it
    for i, item in enumerate(raw):
        where = f"timespans[{i}]"
        if not isinstance(item, dict) or not {"name", "start_date", "end_date"} <= set(item):
            raise TopicConfigError(topic, where, "expected name, start_date and end_date")
        span_start = _as_date(topic, f"{where}.start_date", item["start_date"])
        span_end = _as_date(topic, f"{where}.end_date", item["end_date"])
        if span_end < span_start:
            raise TopicConfigError(topic, f"{where}.end_date", "ends before it starts")
        if span_start < start or (end is not None and span_end > end):
            raise TopicConfigError(topic, where, f"lies outside the topic's dates {start}..{end or 'open'}")
        name = str(item["name"])
        # a snapshot names a custom timespan by its name's slug (by its dates when the name has no letter or digit)
        key = _folder_name(name) or f"{span_start.isoformat()}_{span_end.isoformat()}"
        if key in names:
            raise TopicConfigError(
                topic,
                f"{where}.name",
                f"{name!r} names the same timespan as {names[key]!r} in a snapshot ('custom_{key}'): "
                "give each timespan a name of its own",
            )
        names[key] = name
        spans.append(CustomTimespan(name, span_start, span_end))
    return tuple(spans)


def _parse_seed_urls(topic: str, raw: Any, base_dir: Path) -> tuple[SeedUrlList, ...]:
    """``seed_urls``: one entry or a list; an entry is a CSV path (relative to the topics file) or a mapping
    ``{path: ..., assume_match: true|false}``."""
    if raw is None:
        return ()
    entries = raw if isinstance(raw, list) else [raw]
    lists = []
    for i, entry in enumerate(entries):
        where = f"seed_urls[{i}]"
        assume_match = DEFAULT_SEED_ASSUME_MATCH
        if isinstance(entry, dict):
            reject_unknown(topic, where, entry, SEED_LIST_FIELDS)
            assume_match = checked_flag(
                topic, f"{where}.assume_match", entry.get("assume_match", DEFAULT_SEED_ASSUME_MATCH)
            )
            entry = entry.get("path")
            where = f"{where}.path"
        if not isinstance(entry, str) or not entry.strip():
            raise TopicConfigError(
                topic,
                where,
                f"expected a CSV file path or {{path: ..., assume_match: true|false}}, got {_shown.repr(entry)}",
            )
        path = Path(entry.strip())
        lists.append(SeedUrlList(path if path.is_absolute() else base_dir / path, assume_match))
    return tuple(lists)


def _parse_respider(topic: str, raw: Any) -> Respider | None:
    """``respider: all``, or ``respider: {start_date, end_date}`` (either may be left out: no bound)."""
    if raw is None:
        return None
    if isinstance(raw, str) and raw.strip().lower() == RESPIDER_ALL:
        return Respider()
    if not isinstance(raw, dict) or not raw:
        raise TopicConfigError(
            topic,
            "respider",
            f"expected {RESPIDER_ALL!r} or {{start_date, end_date}}, got {_shown.repr(raw)}",
        )
    reject_unknown(topic, "respider", raw, RESPIDER_FIELDS)
    start, end = (
        None if raw.get(key) is None else _as_date(topic, f"respider.{key}", raw[key])
        for key in ("start_date", "end_date")
    )
    if start is None and end is None:
        raise TopicConfigError(topic, "respider", f"give start_date, end_date or both (or {RESPIDER_ALL!r})")
    if start is not None and end is not None and end < start:
        raise TopicConfigError(topic, "respider.end_date", f"{end} is before respider.start_date {start}")
    return Respider(start, end)


def _folder_name(name: str) -> str:
    """The name a snapshot gives a focal set's or a focus's folder (topicmap.snapshots: the same rule)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _focus_text(topic: str, where: str, value: Any, limit: int, required: bool) -> str:
    """A focal set's or focus's name or description: text of at most ``limit`` characters."""
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise TopicConfigError(
            topic, where, f"expected {'a non-empty' if required else 'a'} string, got {_shown.repr(value)}"
        )
    if len(value) > limit:
        raise TopicConfigError(topic, where, f"is {len(value):,} characters long, more than {limit:,}")
    return value.strip()


def _named_mapping(topic: str, where: str, raw: Any, known: set[str], what: str) -> tuple[dict, str]:
    """A focal set or focus mapping and its name, which must name a folder no sibling names."""
    if not isinstance(raw, dict):
        raise TopicConfigError(
            topic, where, f"expected a mapping with a name ({what}), got {type(raw).__name__}"
        )
    reject_unknown(topic, where, raw, known, "field")
    name = _focus_text(topic, f"{where}.name", raw.get("name"), MAX_FOCUS_NAME_CHARS, required=True)
    if not _folder_name(name):
        raise TopicConfigError(
            topic, f"{where}.name", f"{name!r} needs a letter a-z or a digit: it names the snapshot's folder"
        )
    return raw, name


def _parse_focus(topic: str, where: str, raw: Any, set_name: str) -> FocusDefinition:
    # the fields of a focus: read from the registry at each parse, so a kind registered later is known
    focus_fields = {"name", "description", *FOCUS_KINDS}
    raw, name = _named_mapping(topic, where, raw, focus_fields, f"and a {' or '.join(FOCUS_KINDS)}")
    label = f"focus {name!r} of focal set {set_name!r}"
    description = _focus_text(
        topic, f"{where}.description", raw.get("description"), MAX_FOCUS_DESCRIPTION_CHARS, required=False
    )
    kinds = [kind for kind in FOCUS_KINDS if raw.get(kind) is not None]
    if len(kinds) != 1:
        raise TopicConfigError(
            topic, where, f"{label}: expected a {' or '.join(FOCUS_KINDS)}{'' if not kinds else ', not both'}"
        )
    kind = kinds[0]
    try:
        selection = FOCUS_KINDS[kind].declared(raw[kind])
    except FocusDeclarationError as exc:
        raise TopicConfigError(topic, f"{where}.{kind}{exc.where}", f"{label}: {exc}") from exc
    return FocusDefinition(name=name, selection=selection, description=description)


def _parse_focal_sets(topic: str, raw: Any) -> tuple[FocalSetDefinition, ...]:
    """``focal_sets``: a list of ``{name, description?, foci: [{name, description?, query | media_tags}]}``.

    A mistake names the topic, the place (``focal_sets[1].foci[0].query``), the focus and, in a query, the
    character position; the topic is then refused and the other topics load. Names are free text of at most
    MAX_FOCUS_NAME_CHARS characters; two focal sets of a topic (or two foci of a focal set) may not share a folder
    name (the name lower-cased, runs of other characters than a-z 0-9 made one '-')."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TopicConfigError(topic, "focal_sets", "expected a list of {name, foci: [...]}")
    focal_sets: list[FocalSetDefinition] = []
    set_folders: dict[str, str] = {}
    total = 0
    for i, item in enumerate(raw):
        where = f"focal_sets[{i}]"
        item, set_name = _named_mapping(topic, where, item, FOCAL_SET_FIELDS, "and its foci")
        folder = _folder_name(set_name)
        if folder in set_folders:
            raise TopicConfigError(
                topic,
                f"{where}.name",
                f"focal set {set_name!r} has the folder name of {set_folders[folder]!r}",
            )
        set_folders[folder] = set_name
        description = _focus_text(
            topic,
            f"{where}.description",
            item.get("description"),
            MAX_FOCUS_DESCRIPTION_CHARS,
            required=False,
        )
        foci_raw = item.get("foci")
        if not isinstance(foci_raw, list) or not foci_raw:
            raise TopicConfigError(
                topic, f"{where}.foci", f"focal set {set_name!r}: expected a non-empty list of foci"
            )
        total += len(foci_raw)
        if total > MAX_FOCI:
            raise TopicConfigError(
                topic, "focal_sets", f"more than {MAX_FOCI} foci (each repeats every timespan of a snapshot)"
            )
        foci: list[FocusDefinition] = []
        focus_folders: dict[str, str] = {}
        for j, focus_raw in enumerate(foci_raw):
            focus = _parse_focus(topic, f"{where}.foci[{j}]", focus_raw, set_name)
            folder = _folder_name(focus.name)
            if folder in focus_folders:
                raise TopicConfigError(
                    topic,
                    f"{where}.foci[{j}].name",
                    f"focus {focus.name!r} of focal set {set_name!r} has the folder name of {focus_folders[folder]!r}",
                )
            focus_folders[folder] = focus.name
            foci.append(focus)
        focal_sets.append(FocalSetDefinition(name=set_name, foci=tuple(foci), description=description))
    return tuple(focal_sets)


def _topic_label(name: Any, index: int) -> str:
    """How messages name a topic: its name when it has a short one, else its place in the file."""
    if isinstance(name, str | int) and not isinstance(name, bool) and 0 < len(str(name)) <= 100:
        return str(name)
    return f"#{index + 1}"


def parse_topic(raw: Any, base_dir: Path, index: int = 0, today: date | None = None) -> TopicConfig:
    """Validate one topic mapping; raises TopicConfigError naming the topic and the field. ``today`` (default:
    the current date) bounds how far ahead the topic may end."""
    if not isinstance(raw, dict):
        raise TopicConfigError(f"#{index + 1}", "<topic>", f"expected a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    label = _topic_label(name, index)
    if not isinstance(name, str) or not TOPIC_NAME_PATTERN.fullmatch(name):
        raise TopicConfigError(
            label,
            "name",
            "expected a lowercase name of letters, digits, '-' or '_' (it is a Dagster partition key)",
        )
    reject_unknown(name, "", raw, KNOWN_FIELDS, "field")
    for required in ("query", "start_date"):
        if raw.get(required) in (None, ""):
            raise TopicConfigError(name, required, "is required")
    query = raw["query"]
    if not isinstance(query, str):
        raise TopicConfigError(name, "query", f"expected a string, got {type(query).__name__}")
    try:
        parse(query)
    except QuerySyntaxError as exc:
        raise TopicConfigError(name, "query", f"at position {exc.position}: {exc}") from exc
    start = _as_topic_date(name, "start_date", raw["start_date"], today)
    end = _as_end_date(name, raw.get("end_date"), today)
    if end is not None and end < start:
        raise TopicConfigError(name, "end_date", f"{end} is before start_date {start}")
    max_iterations = _as_int_in(
        name, "max_iterations", raw.get("max_iterations", DEFAULT_MAX_ITERATIONS), MAX_ITERATIONS_RANGE
    )
    max_stories = _as_int_in(
        name, "max_stories", raw.get("max_stories", DEFAULT_MAX_STORIES), MAX_STORIES_RANGE
    )
    seed_lists = _parse_seed_urls(name, raw.get("seed_urls"), base_dir)
    periods = raw.get("snapshot_periods", list(SNAPSHOT_PERIODS))
    if isinstance(periods, str):
        periods = periods.split()
    if not isinstance(periods, list) or not periods or any(p not in SNAPSHOT_PERIODS for p in periods):
        raise TopicConfigError(
            name, "snapshot_periods", f"expected a list drawn from {list(SNAPSHOT_PERIODS)}"
        )
    return TopicConfig(
        name=name,
        query=query,
        start_date=start,
        end_date=end,
        max_iterations=max_iterations,
        max_stories=max_stories,
        seed_urls=seed_lists,
        fetch=_parse_fetch(name, raw.get("fetch")),
        timespans=_parse_timespans(name, raw.get("timespans"), start, end),
        snapshot_periods=tuple(periods),
        focal_sets=_parse_focal_sets(name, raw.get("focal_sets")),
        posts=parse_post_sources(name, raw.get("posts"), base_dir),
        respider=_parse_respider(name, raw.get("respider")),
    )


def _declared_queries(raw: Any) -> Iterator[tuple[str, str]]:
    """(place, query) of every query a topic's raw declaration holds: its own and its query foci's. A query longer
    than MAX_QUERY_CHARS is refused unread, so it counts for nothing here."""
    if not isinstance(raw, dict):
        return
    candidates = [("query", raw.get("query"))]
    focal_sets = raw.get("focal_sets")
    for i, focal_set in enumerate(focal_sets if isinstance(focal_sets, list) else []):
        foci = focal_set.get("foci") if isinstance(focal_set, dict) else None
        for j, focus in enumerate(foci if isinstance(foci, list) else []):
            if isinstance(focus, dict):
                candidates.append((f"focal_sets[{i}].foci[{j}].query", focus.get("query")))
    for where, query in candidates:
        if isinstance(query, str) and len(query) <= MAX_QUERY_CHARS:
            yield where, query


def load_topics(path: str | Path, today: date | None = None) -> TopicsFile:
    """Read a topics file. A file that cannot be read as a whole (missing, not UTF-8, not YAML, over
    MAX_TOPICS_FILE_BYTES or MAX_TOPICS_FILE_VALUES) raises TopicConfigError; any problem inside one topic,
    whatever its input, is listed in ``errors`` and the other topics load.

    Each topic's YAML is checked before it is turned into values (``structure_problem``): no duplicate key,
    no tag the safe loader does not read, no alias expanding past MAX_TOPIC_VALUES values, no nesting past
    MAX_TOPIC_DEPTH. Its query is parsed once per process and text (``parse`` keeps it), so reading the file
    again on each tick of the registry costs the YAML and the checks only.
    """
    path = Path(path)
    root = read_yaml(path)
    topics: list[TopicConfig] = []
    errors: list[TopicConfigError] = []
    seen: set[str] = set()
    shapes: dict[int, Shape] = {}  # of the file's nodes: a node shared by aliases is measured once
    query_chars = 0  # of the queries parsed so far
    for i, node in enumerate(topic_nodes(root, path)):
        label = _topic_label(node_name(node), i)
        try:
            raw = topic_value(node, label, shapes)
            for where, query in _declared_queries(raw):
                query_chars += len(query)
                if query_chars > MAX_FILE_QUERY_CHARS:
                    raise TopicConfigError(
                        label,
                        where,
                        f"not parsed: the file's queries (topics' and foci's) hold more than "
                        f"{MAX_FILE_QUERY_CHARS:,} characters together up to this one",
                    )
            topic = parse_topic(raw, path.parent, i, today)
        except TopicConfigError as exc:
            errors.append(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - one topic must never cost the others (the registry reads them all)
            errors.append(
                TopicConfigError(label, "<topic>", f"could not be read: {type(exc).__name__}: {exc}")
            )
            continue
        if topic.name in seen:
            errors.append(
                TopicConfigError(topic.name, "name", "is declared twice; the first declaration is used")
            )
            continue
        seen.add(topic.name)
        topics.append(topic)
    return TopicsFile(topics, errors)


@dataclass(frozen=True)
class TopicSyncPlan:
    """What the topic registry must do to bring the partitions in step with the topics file."""

    add: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    state: dict[str, str]
    #: declared topics whose partition was added by hand (the launch dialog), never seen by the registry nor seeded
    unseeded: tuple[str, ...] = ()

    @property
    def to_seed(self) -> tuple[str, ...]:
        """New, changed and never seeded topics get their seeds (re)computed."""
        return self.add + self.changed + self.unseeded


def plan_topic_sync(
    declared: dict[str, str],
    partitions: set[str],
    last_state: dict[str, str],
    seeded: set[str] | None = None,
) -> TopicSyncPlan:
    """Compare the declared topics (name → config hash) with the partitions, the last seen state and, when
    given, the partitions whose seeds were ever materialized (``seeded``).

    A removed topic is only reported: its partition and data stay, so nothing is lost by a bad edit.
    """
    add = tuple(sorted(set(declared) - partitions))
    removed = tuple(sorted(name for name in partitions if name not in declared))
    changed = tuple(
        sorted(
            name
            for name, digest in declared.items()
            if name in partitions and last_state.get(name) not in (None, digest)
        )
    )
    # a partition the registry did not add itself (so never seeded by it): once, the state then holds the topic
    unseeded = tuple(
        sorted(
            name
            for name in declared
            if seeded is not None and name in partitions and name not in seeded and name not in last_state
        )
    )
    return TopicSyncPlan(
        add=add, removed=removed, changed=changed, state=dict(sorted(declared.items())), unseeded=unseeded
    )
