"""Hostile topics files: whatever a topic holds (deep or huge queries, extreme dates and numbers, duplicate keys,
YAML aliases, tags and nesting), it is rejected alone, naming the topic and the field, and the registry carries on
with the other topics."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from uuid import uuid4

import dagster as dg
import pytest
import yaml

from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.topics import topic_registry
from topicmap.archive.drop_rows import EARLIEST_DATE
from topicmap.topics import query as query_module
from topicmap.topics import query_parser
from topicmap.topics.declarations import (
    EARLIEST_TOPIC_DATE,
    MAX_FILE_QUERY_CHARS,
    TopicConfigError,
    load_topics,
)
from topicmap.topics.query import MAX_QUERY_DEPTH, QuerySyntaxError, parse
from topicmap.topics.topics_yaml import MAX_TOPICS_FILE_VALUES, compose
from topicmap.web.dates import MIN_PUBLISH_DATE

GOOD = """topics:
  - {name: good, query: climate, start_date: 2026-01-01, end_date: 2026-03-31}
"""
DATES = "start_date: 2026-01-01, end_date: 2026-03-31"
# "billion laughs": each anchor repeats the one before ten times, 10^9 values once expanded
LAUGHS = (
    "laughs: [&l0 lol, "
    + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10))
    + "]\n"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topics.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def deep_query(levels: int) -> str:
    return "(" * levels + "climate" + ")" * levels


@pytest.mark.parametrize(
    ("entry", "topic", "field", "fragment"),
    [
        # nested 300 deep: raised RecursionError out of load_topics, every topic lost
        (f"{{name: deep, query: '{deep_query(300)}', {DATES}}}", "deep", "query", "more than 32 deep"),
        (f"{{name: nots, query: '{'NOT ' * 3000}a', {DATES}}}", "nots", "query", "more than 32 deep"),
        # 150,000 words, 1.3 MB: took 48 s, on every tick
        (
            f"{{name: huge, query: '{' OR '.join(f'w{i}' for i in range(150_000))}', {DATES}}}",
            "huge",
            "query",
            "characters long, more than 100,000",
        ),
        (
            f"{{name: wordy, query: '{' '.join(f'w{i}' for i in range(10_001))}', {DATES}}}",
            "wordy",
            "query",
            "more than 10,000 words",
        ),
        # accepted, then seeding raised OverflowError
        (
            "{name: dates, query: a, start_date: 0001-01-01, end_date: 9999-12-31}",
            "dates",
            "start_date",
            "outside 2008-01-01..",
        ),
        (
            "{name: far, query: a, start_date: 2026-01-01, end_date: 9999-12-31}",
            "far",
            "end_date",
            "is outside",
        ),
        # accepted, then PostgreSQL said "integer out of range"
        (
            f"{{name: iters, query: a, {DATES}, max_iterations: 2147483648}}",
            "iters",
            "max_iterations",
            "1,000",
        ),
        (
            f"{{name: stories, query: a, {DATES}, max_stories: 2147483648}}",
            "stories",
            "max_stories",
            "10,000,000",
        ),
        (
            f"{{name: fetches, query: a, {DATES}, fetch: {{max_fetches_per_iteration: {2**63}}}}}",
            "fetches",
            "fetch.max_fetches_per_iteration",
            "10,000,000",
        ),
        (
            f"{{name: digits, query: a, {DATES}, max_stories: {'9' * 5000}}}",
            "digits",
            "max_stories",
            "cannot be read",
        ),
        (
            f"{{name: stall, query: a, {DATES}, fetch: {{default_interval: .inf}}}}",
            "stall",
            "fetch.default_interval",
            "3600",
        ),
        (
            f"{{name: nan, query: a, {DATES}, fetch: {{domain_intervals: {{a.com: .nan}}}}}}",
            "nan",
            "fetch.domain_intervals.a.com",
            "3600",
        ),
        # a duplicate key kept the last value silently
        (
            "name: dup\n    query: climate\n    query: sports\n    start_date: 2026-01-01\n    end_date: 2026-03-31",
            "dup",
            "query",
            "given twice (on lines 5 and 6)",
        ),
        (
            f"{{name: dup-inner, query: a, {DATES}, fetch: {{obey_robots: true, obey_robots: false}}}}",
            "dup-inner",
            "fetch.obey_robots",
            "given twice",
        ),
        # the expanded value would have been written out by the error message (repr of 10^9 strings)
        (f"{{name: lol, query: a, {DATES}, max_iterations: *l9}}", "lol", "max_iterations", "100,000 values"),
        (f"&me {{name: me, query: a, {DATES}, timespans: [*me]}}", "me", "timespans[0]", "contains itself"),
        (
            f"{{name: nested, query: a, {DATES}, timespans: {'[' * 500}{']' * 500}}}",
            "nested",
            "timespans",
            "more than 16 levels",
        ),
        (
            f"{{name: tagged, query: !!python/object/apply:os.system [echo], {DATES}}}",
            "tagged",
            "query",
            "YAML tag",
        ),
        (
            f"{{name: list-key, query: a, {DATES}, fetch: {{domain_intervals: {{[a.com]: 1}}}}}}",
            "list-key",
            "fetch.domain_intervals",
            "not a plain value",
        ),
        # two names for one snapshot timespan: accepted, then every snapshot of the topic failed
        (
            f"{{name: twice, query: a, {DATES}, timespans: [{{name: Summit, start_date: 2026-02-01, "
            "end_date: 2026-02-14}, {name: summit, start_date: 2026-03-01, end_date: 2026-03-07}]}",
            "twice",
            "timespans[1].name",
            "names the same timespan as 'Summit'",
        ),
        # 1,000 custom timespans took minutes a snapshot
        (
            f"{{name: many, query: a, {DATES}, timespans: ["
            + ", ".join(f"{{name: t{i}, start_date: 2026-01-01, end_date: 2026-01-02}}" for i in range(101))
            + "]}",
            "many",
            "timespans",
            "more than 100",
        ),
    ],
)
def test_a_hostile_topic_is_rejected_by_name_and_field_and_the_good_one_still_loads(
    tmp_path: Path, entry: str, topic: str, field: str, fragment: str
) -> None:
    loaded = load_topics(write(tmp_path, LAUGHS + GOOD + f"  - {entry}\n"))
    assert [t.name for t in loaded.topics] == ["good"]
    assert [(error.topic, error.field) for error in loaded.errors] == [(topic, field)]
    assert fragment in str(loaded.errors[0])


def test_topic_dates_lie_in_the_archives_range(tmp_path: Path) -> None:
    # the same earliest date as the archive's and the extractor's: a topic can start on any day they keep
    assert EARLIEST_TOPIC_DATE == EARLIEST_DATE.date() == MIN_PUBLISH_DATE.date()
    text = (
        "topics:\n"
        "  - {name: first-day, query: a, start_date: 2008-01-01, end_date: 2031-12-31}\n"
        "  - {name: too-early, query: a, start_date: 2007-12-31, end_date: 2026-01-31}\n"
        "  - {name: too-late, query: a, start_date: 2026-01-01, end_date: 2032-01-01}\n"
    )
    loaded = load_topics(write(tmp_path, text), today=date(2026, 5, 1))
    assert [t.name for t in loaded.topics] == ["first-day"]
    assert [(e.topic, e.field) for e in loaded.errors] == [
        ("too-early", "start_date"),
        ("too-late", "end_date"),
    ]


def test_a_file_that_cannot_be_read_whole_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "topics.yaml"
    path.write_bytes(GOOD.encode() + b"  - {name: caf\xe9, query: a}\n")
    with pytest.raises(TopicConfigError, match="not UTF-8"):
        load_topics(path)
    # values are counted as the file is read, before any is built (16 MB of "1," would take gigabytes)
    with pytest.raises(TopicConfigError, match=f"more than {MAX_TOPICS_FILE_VALUES:,} YAML values"):
        load_topics(write(tmp_path, "topics: [" + "1," * MAX_TOPICS_FILE_VALUES + "1]\n"))
    with pytest.raises(TopicConfigError, match="nesting depth"):
        load_topics(write(tmp_path, "topics: " + "[" * 5000 + "]" * 5000 + "\n"))


def test_the_files_values_are_what_yaml_reads(tmp_path: Path) -> None:
    """The nodes are built here from the parser's events (without recursion, counted): the values are those
    PyYAML's own composer gives, anchors, aliases and merge keys included, with libyaml's parser and without."""
    text = (
        "defaults: &defaults {max_iterations: 3, fetch: {domain_intervals: {a.com: 1.5}}}\n"
        "topics:\n"
        "  - <<: *defaults\n"
        "    name: merged\n"
        "    query: 'climate AND \"carbon tax\"'\n"
        "    start_date: 2026-01-01\n"
        "    end_date: 2026-03-31\n"
        "    seed_urls: [a.csv, {path: b.csv, assume_match: false}]\n"
        "  - &second {name: second, query: x, start_date: '2026-02-01', end_date: 2026-02-28, max_stories: 7}\n"
        "  - [*second, ~, true, 0x10, 1.5e3, !!str 12, ? complex]\n"
    )
    for loader_class in {yaml.SafeLoader, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader}:
        loader = loader_class(text)
        composed = loader.construct_document(compose(loader, tmp_path / "topics.yaml"))
        assert composed == yaml.load(text, Loader=loader_class)  # noqa: S506 - a safe loader
    loaded = load_topics(write(tmp_path, text))
    merged, second = loaded.topics
    assert (merged.max_iterations, merged.fetch.domain_intervals) == (3, {"a.com": 1.5})
    assert second.max_stories == 7
    assert [(e.topic, e.field) for e in loaded.errors] == [("#3", "<topic>")]  # a list, not a topic


@pytest.fixture
def lexed() -> Iterator[list[str]]:
    """The queries the parser reads (lexes) while the test runs."""
    seen: list[str] = []
    run = query_parser.Lexer.run

    def counting_run(lexer: query_parser.Lexer) -> list:
        seen.append(lexer.query)
        return run(lexer)

    query_parser.Lexer.run = counting_run  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        query_parser.Lexer.run = run  # type: ignore[method-assign]


def test_a_query_is_parsed_once_however_often_the_file_is_read(tmp_path: Path, lexed: list[str]) -> None:
    unique = uuid4().hex[:6]  # a text no other test has parsed in this process
    words = " ".join(f"w{unique}{i}" for i in range(6_000))  # 70,000 characters
    refused = f"{words} (unclosed"
    text = (
        "topics:\n"
        f"  - {{name: big, query: '{words}', {DATES}}}\n"
        f"  - {{name: refused, query: '{refused}', {DATES}}}\n"
    )
    path = write(tmp_path, text)
    for _ in range(3):  # three ticks of the registry
        loaded = load_topics(path)
        assert [t.name for t in loaded.topics] == ["big"]
        assert [(e.topic, e.field) for e in loaded.errors] == [("refused", "query")]
        assert "unbalanced '('" in str(loaded.errors[0])
        assert loaded.topics[0].parsed_query.matches(f"w{unique}5999")
    # each text was parsed on the first read only, the refused one too
    assert sorted(lexed) == sorted([words, refused])


def test_the_queries_of_a_file_are_bounded_together(tmp_path: Path) -> None:
    """Each of these long queries is allowed, but kept parsed they would outgrow the parse cache: past
    MAX_FILE_QUERY_CHARS together, the later ones are refused unparsed (every tick would parse them again)."""
    count = MAX_FILE_QUERY_CHARS // 90_000 + 1
    unique = uuid4().hex
    entries = "".join(
        f"  - {{name: long-{i}, query: w{unique}{i}{'x' * 90_000}, {DATES}}}\n" for i in range(count)
    )
    loaded = load_topics(write(tmp_path, GOOD + entries))
    assert [t.name for t in loaded.topics] == ["good"] + [f"long-{i}" for i in range(count - 1)]
    assert [(e.topic, e.field) for e in loaded.errors] == [(f"long-{count - 1}", "query")]
    assert f"more than {MAX_FILE_QUERY_CHARS:,} characters" in str(loaded.errors[0])


def test_focus_queries_count_in_the_files_query_budget(tmp_path: Path) -> None:
    """Query foci are parsed like topics' queries: they share the file's budget, and the focus past it is named."""
    count = MAX_FILE_QUERY_CHARS // 90_000 + 1
    unique = uuid4().hex
    foci = ", ".join(f"{{name: f{i}, query: w{unique}{i}{'x' * 90_000}}}" for i in range(count))
    entry = f"  - {{name: foci, query: a, {DATES}, focal_sets: [{{name: Many, foci: [{foci}]}}]}}\n"
    loaded = load_topics(write(tmp_path, GOOD + entry))
    assert [t.name for t in loaded.topics] == ["good"]
    assert [(e.topic, e.field) for e in loaded.errors] == [("foci", f"focal_sets[0].foci[{count - 1}].query")]
    assert f"more than {MAX_FILE_QUERY_CHARS:,} characters" in str(loaded.errors[0])


def test_the_parse_cache_keeps_the_recently_used_queries_within_its_size() -> None:
    cache = query_module._ParseCache(limit=100)
    first, second, third = (parse(f"w{uuid4().hex}{'x' * 8}") for _ in range(3))  # 41 characters each
    cache.put(first.source, first)
    cache.put(second.source, second)
    assert cache.get(first.source) is first  # now the most recently used
    cache.put(third.source, third)  # 123 characters: the least recently used goes
    assert cache.get(second.source) is None
    assert cache.get(first.source) is first and cache.get(third.source) is third


def test_a_query_nested_to_the_limit_is_handled_with_little_stack(lexed: list[str]) -> None:
    unique = uuid4().hex
    # every level an AND, a NOT and an OR: the deepest tree the nesting allows
    levels = MAX_QUERY_DEPTH // 2
    query = "".join(f"(a{unique} OR b{i} AND NOT " for i in range(levels)) + "z" + ")" * levels
    with pytest.raises(QuerySyntaxError, match="32 deep"):
        parse(f"({query})")
    stack_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 250)  # a quarter of Python's default, for everything below
    try:
        parsed = parse(query)
        assert str(parsed).startswith(f"a{unique} OR (b0 AND NOT (a{unique} OR (b1 AND NOT")
        assert parsed.matches_story("b0", "z", "https://example.com/", "")
        assert not parsed.matches_story("b0", "b1 z", "https://example.com/", "")
        assert parsed.may_match(f"<p>a{unique}</p>", urls=["https://example.com/"])
    finally:
        sys.setrecursionlimit(stack_limit)
    assert query in lexed


def test_the_registry_keeps_working_with_hostile_topics_in_the_file(tmp_path: Path) -> None:
    text = (
        LAUGHS
        + GOOD
        + f"  - {{name: deep, query: '{deep_query(300)}', {DATES}}}\n"
        + "  - {name: dates, query: a, start_date: 0001-01-01, end_date: 9999-12-31}\n"
        + f"  - {{name: lol, query: a, {DATES}, max_stories: *l9}}\n"
        + "  - name: dup\n    query: a\n    query: b\n    start_date: 2026-01-01\n    end_date: 2026-03-31\n"
    )
    resources = {
        "topics_file": TopicsFileResource(path=str(write(tmp_path, text))),
        "store": TopicStoreResource(database_url=f"sqlite:///{tmp_path / 'store.sqlite3'}"),
    }
    instance = dg.DagsterInstance.ephemeral()
    result = topic_registry(dg.build_sensor_context(instance=instance, resources=resources))
    assert [r.partition_keys for r in result.dynamic_partitions_requests] == [["good"]]
    assert [r.partition_key for r in result.run_requests] == ["good"]
    reported = json.loads(result.cursor)["errors"]
    assert len(reported) == 4
    for name in ("deep", "dates", "lol", "dup"):
        assert any(error.startswith(f"topic '{name}': field ") for error in reported)
