"""Topic declarations: read ``topics.yaml``, validate each topic on its own, report what is wrong precisely.

A topic with an invalid field or query is rejected with a message naming the topic, the field and, for a
query, the character position; the other topics still load. That way one typo in a shared file never stops
every topic of a deployment.

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
        end_date: 2026-04-30
        max_iterations: 15        # default 15
        max_stories: 5000
        seed_urls:                # optional CSV files with a `url` column
          - seeds/climate.csv     # its stories are taken as relevant (assume_match: true, the default)
          - {path: seeds/maybe.csv, assume_match: false}   # its pages are judged by the query
        fetch:                    # optional per-topic fetch settings
          domain_intervals: {example.com: 2.0}
        timespans:                # optional custom timespans
          - {name: cop31, start_date: 2026-02-01, end_date: 2026-02-15}
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from topicmap.topics.query import QuerySyntaxError, TopicQuery, parse

DEFAULT_MAX_ITERATIONS = 15
#: a seed URL list's stories are taken as relevant unless the list says ``assume_match: false``
DEFAULT_SEED_ASSUME_MATCH = True
SEED_LIST_FIELDS = {"path", "assume_match"}
DEFAULT_MAX_STORIES = 100_000
TOPIC_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,62}$")
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
}
SNAPSHOT_PERIODS = ("overall", "monthly", "weekly", "custom")
FETCH_FIELDS = {"domain_intervals", "default_interval", "obey_robots", "max_fetches_per_iteration"}


class _StringDatesLoader(yaml.SafeLoader):
    """YAML without implicit timestamps: an impossible date such as 2026-13-01 must become a per-topic
    error naming the field, not a failure of the whole file inside the YAML parser."""


_StringDatesLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class TopicConfigError(ValueError):
    """One topic (or the file itself) is invalid; the message names the topic and the field."""

    def __init__(self, topic: str, field_name: str, problem: str) -> None:
        self.topic = topic
        self.field = field_name
        self.problem = problem
        super().__init__(f"topic {topic!r}: field {field_name!r}: {problem}")


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
class SeedUrlList:
    """A CSV file of seed URLs (a ``url`` column), and whether the stories of its URLs are taken as relevant
    (``assume_match``) or judged by the topic's query like any page the spider finds."""

    path: Path
    assume_match: bool = DEFAULT_SEED_ASSUME_MATCH


@dataclass(frozen=True)
class TopicConfig:
    name: str
    query: str
    start_date: date
    end_date: date
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_stories: int = DEFAULT_MAX_STORIES
    seed_urls: tuple[SeedUrlList, ...] = ()
    fetch: FetchSettings = field(default_factory=FetchSettings)
    timespans: tuple[CustomTimespan, ...] = ()
    snapshot_periods: tuple[str, ...] = SNAPSHOT_PERIODS

    @property
    def parsed_query(self) -> TopicQuery:
        return parse(self.query)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): what the store keeps and what a snapshot's provenance hashes."""

        def default(value: Any) -> Any:
            if isinstance(value, date | datetime):
                return value.isoformat()
            if isinstance(value, Path):
                return str(value)
            raise TypeError(f"not serializable: {value!r}")

        return json.dumps(asdict(self), sort_keys=True, default=default)

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
    raise TopicConfigError(topic, field_name, f"expected a date like 2026-01-31, got {value!r}")


def _as_positive_int(topic: str, field_name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TopicConfigError(topic, field_name, f"expected a whole number ≥ 1, got {value!r}")
    return value


def _parse_fetch(topic: str, raw: Any) -> FetchSettings:
    if raw is None:
        return FetchSettings()
    if not isinstance(raw, dict):
        raise TopicConfigError(topic, "fetch", f"expected a mapping, got {type(raw).__name__}")
    unknown = set(raw) - FETCH_FIELDS
    if unknown:
        raise TopicConfigError(
            topic, f"fetch.{sorted(unknown)[0]}", f"unknown setting (known: {sorted(FETCH_FIELDS)})"
        )
    intervals = raw.get("domain_intervals") or {}
    if not isinstance(intervals, dict):
        raise TopicConfigError(topic, "fetch.domain_intervals", "expected a mapping of domain to seconds")
    clean: dict[str, float] = {}
    for domain, seconds in intervals.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise TopicConfigError(
                topic, f"fetch.domain_intervals.{domain}", f"expected seconds ≥ 0, got {seconds!r}"
            )
        clean[str(domain).lower()] = float(seconds)
    default_interval = raw.get("default_interval")
    if default_interval is not None and (
        isinstance(default_interval, bool)
        or not isinstance(default_interval, int | float)
        or default_interval < 0
    ):
        raise TopicConfigError(
            topic, "fetch.default_interval", f"expected seconds ≥ 0, got {default_interval!r}"
        )
    obey_robots = raw.get("obey_robots")
    if obey_robots is not None and not isinstance(obey_robots, bool):
        raise TopicConfigError(topic, "fetch.obey_robots", f"expected true or false, got {obey_robots!r}")
    max_fetches = raw.get("max_fetches_per_iteration")
    if max_fetches is not None:
        max_fetches = _as_positive_int(topic, "fetch.max_fetches_per_iteration", max_fetches)
    return FetchSettings(
        domain_intervals=clean,
        default_interval=None if default_interval is None else float(default_interval),
        obey_robots=obey_robots,
        max_fetches_per_iteration=max_fetches,
    )


def _parse_timespans(topic: str, raw: Any, start: date, end: date) -> tuple[CustomTimespan, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TopicConfigError(topic, "timespans", "expected a list of {name, start_date, end_date}")
    spans = []
    for i, item in enumerate(raw):
        where = f"timespans[{i}]"
        if not isinstance(item, dict) or not {"name", "start_date", "end_date"} <= set(item):
            raise TopicConfigError(topic, where, "expected name, start_date and end_date")
        span_start = _as_date(topic, f"{where}.start_date", item["start_date"])
        span_end = _as_date(topic, f"{where}.end_date", item["end_date"])
        if span_end < span_start:
            raise TopicConfigError(topic, f"{where}.end_date", "ends before it starts")
        if span_start < start or span_end > end:
            raise TopicConfigError(topic, where, f"lies outside the topic's dates {start}..{end}")
        spans.append(CustomTimespan(str(item["name"]), span_start, span_end))
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
            unknown = set(entry) - SEED_LIST_FIELDS
            if unknown:
                raise TopicConfigError(
                    topic,
                    f"{where}.{sorted(unknown)[0]}",
                    f"unknown setting (known: {sorted(SEED_LIST_FIELDS)})",
                )
            assume_match = entry.get("assume_match", DEFAULT_SEED_ASSUME_MATCH)
            if not isinstance(assume_match, bool):
                raise TopicConfigError(
                    topic, f"{where}.assume_match", f"expected true or false, got {assume_match!r}"
                )
            entry = entry.get("path")
            where = f"{where}.path"
        if not isinstance(entry, str) or not entry.strip():
            raise TopicConfigError(
                topic,
                where,
                f"expected a CSV file path or {{path: ..., assume_match: true|false}}, got {entry!r}",
            )
        path = Path(entry.strip())
        lists.append(SeedUrlList(path if path.is_absolute() else base_dir / path, assume_match))
    return tuple(lists)


def parse_topic(raw: Any, base_dir: Path, index: int = 0) -> TopicConfig:
    """Validate one topic mapping; raises TopicConfigError naming the topic and the field."""
    if not isinstance(raw, dict):
        raise TopicConfigError(f"#{index + 1}", "<topic>", f"expected a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    label = str(name) if name else f"#{index + 1}"
    if not isinstance(name, str) or not TOPIC_NAME_PATTERN.match(name):
        raise TopicConfigError(
            label,
            "name",
            "expected a lowercase name of letters, digits, '-' or '_' (it is a Dagster partition key)",
        )
    unknown = set(raw) - KNOWN_FIELDS
    if unknown:
        raise TopicConfigError(name, sorted(unknown)[0], f"unknown field (known: {sorted(KNOWN_FIELDS)})")
    for required in ("query", "start_date", "end_date"):
        if raw.get(required) in (None, ""):
            raise TopicConfigError(name, required, "is required")
    query = raw["query"]
    if not isinstance(query, str):
        raise TopicConfigError(name, "query", f"expected a string, got {type(query).__name__}")
    try:
        parse(query)
    except QuerySyntaxError as exc:
        raise TopicConfigError(name, "query", f"at position {exc.position}: {exc}") from exc
    start = _as_date(name, "start_date", raw["start_date"])
    end = _as_date(name, "end_date", raw["end_date"])
    if end < start:
        raise TopicConfigError(name, "end_date", f"{end} is before start_date {start}")
    max_iterations = _as_positive_int(
        name, "max_iterations", raw.get("max_iterations", DEFAULT_MAX_ITERATIONS)
    )
    max_stories = _as_positive_int(name, "max_stories", raw.get("max_stories", DEFAULT_MAX_STORIES))
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
    )


def load_topics(path: str | Path) -> TopicsFile:
    """Read a topics file. A broken file raises TopicConfigError; a broken topic is listed in ``errors``."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_StringDatesLoader)  # noqa: S506 - a SafeLoader
    except FileNotFoundError as exc:
        raise TopicConfigError("<file>", str(path), "file not found") from exc
    except yaml.YAMLError as exc:
        raise TopicConfigError("<file>", str(path), f"not valid YAML: {exc}") from exc
    if raw is None:
        return TopicsFile([], [])
    items = raw.get("topics") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise TopicConfigError("<file>", str(path), "expected a list under 'topics:'")
    topics: list[TopicConfig] = []
    errors: list[TopicConfigError] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        try:
            topic = parse_topic(item, path.parent, i)
        except TopicConfigError as exc:
            errors.append(exc)
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

    @property
    def to_seed(self) -> tuple[str, ...]:
        """New and changed topics get their seeds (re)computed."""
        return self.add + self.changed


def plan_topic_sync(
    declared: dict[str, str], partitions: set[str], last_state: dict[str, str]
) -> TopicSyncPlan:
    """Compare the declared topics (name → config hash) with the partitions and the last seen state.

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
    return TopicSyncPlan(add=add, removed=removed, changed=changed, state=dict(sorted(declared.items())))
