"""Topic declarations: valid topics load, each broken topic is rejected with topic, field and position."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from topicmap.topics.declarations import TopicConfigError, load_topics, plan_topic_sync

GOOD = """
topics:
  - name: climate
    query: '(climate OR "carbon tax" OR emission*) AND NOT sports'
    start_date: 2026-01-01
    end_date: 2026-04-30
    max_stories: 5000
    fetch:
      domain_intervals: {example.com: 2}
    timespans:
      - {name: summit, start_date: 2026-02-01, end_date: 2026-02-14}
  - name: elections
    query: election* OR ballot
    start_date: 2026-02-01
    end_date: 2026-03-31
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topics.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_topics_load_with_defaults(tmp_path: Path) -> None:
    loaded = load_topics(write(tmp_path, GOOD))
    assert loaded.errors == []
    climate, elections = loaded.topics
    assert climate.name == "climate" and climate.max_iterations == 15 and climate.max_stories == 5000
    assert climate.fetch.domain_intervals == {"example.com": 2.0}
    assert climate.timespans[0].start_date == date(2026, 2, 1)
    assert elections.max_iterations == 15
    assert climate.parsed_query.matches("Emissions rose again.")
    assert not climate.parsed_query.matches("Emissions of the sports stadium.")


@pytest.mark.parametrize(
    ("entry", "field", "fragment"),
    [
        (
            "{name: bad-query, query: 'climate AND (carbon', start_date: 2026-01-01, end_date: 2026-02-01}",
            "query",
            "position",
        ),
        (
            "{name: bad-date, query: climate, start_date: 2026-13-01, end_date: 2026-02-01}",
            "start_date",
            "2026-13-01",
        ),
        (
            "{name: reversed, query: climate, start_date: 2026-03-01, end_date: 2026-02-01}",
            "end_date",
            "before",
        ),
        (
            "{name: zero-iter, query: climate, start_date: 2026-01-01, end_date: 2026-02-01, max_iterations: 0}",
            "max_iterations",
            "≥ 1",
        ),
        (
            "{name: typo, query: climate, start_date: 2026-01-01, end_date: 2026-02-01, max_storys: 5}",
            "max_storys",
            "unknown field",
        ),
        (
            "{name: Bad Name, query: climate, start_date: 2026-01-01, end_date: 2026-02-01}",
            "name",
            "lowercase",
        ),
        ("{name: no-query, start_date: 2026-01-01, end_date: 2026-02-01}", "query", "required"),
        (
            "{name: bad-fetch, query: x, start_date: 2026-01-01, end_date: 2026-02-01, fetch: {domain_intervals: {a.com: -1}}}",
            "fetch.domain_intervals.a.com",
            "≥ 0",
        ),
        (
            "{name: bad-span, query: x, start_date: 2026-01-01, end_date: 2026-02-01, timespans: [{name: s, start_date: 2025-12-01, end_date: 2026-01-05}]}",
            "timespans[0]",
            "outside",
        ),
    ],
)
def test_a_bad_topic_is_rejected_by_name_and_field_and_the_others_still_load(
    tmp_path: Path, entry: str, field: str, fragment: str
) -> None:
    text = GOOD + f"  - {entry}\n"
    loaded = load_topics(write(tmp_path, text))
    assert [t.name for t in loaded.topics] == ["climate", "elections"]
    assert len(loaded.errors) == 1
    error = loaded.errors[0]
    assert error.field == field
    assert fragment in str(error)


def test_query_error_names_the_character_position(tmp_path: Path) -> None:
    text = (
        "topics:\n  - {name: q, query: 'climate AND (carbon', start_date: 2026-01-01, end_date: 2026-02-01}\n"
    )
    error = load_topics(write(tmp_path, text)).errors[0]
    assert error.topic == "q" and error.field == "query"
    assert "position 12" in str(error)  # the unclosed '(' stands at offset 12


def test_duplicate_topic_names_keep_the_first(tmp_path: Path) -> None:
    text = GOOD + "  - {name: climate, query: other, start_date: 2026-01-01, end_date: 2026-02-01}\n"
    loaded = load_topics(write(tmp_path, text))
    assert loaded.by_name()["climate"].query.startswith("(climate")
    assert "declared twice" in str(loaded.errors[0])


def test_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TopicConfigError, match="not valid YAML"):
        load_topics(write(tmp_path, "topics: [\n  - {name: x"))
    with pytest.raises(TopicConfigError, match="file not found"):
        load_topics(tmp_path / "missing.yaml")
    with pytest.raises(TopicConfigError, match="expected a list"):
        load_topics(write(tmp_path, "topics: 3\n"))


def test_config_hash_changes_with_the_declaration(tmp_path: Path) -> None:
    first = load_topics(write(tmp_path, GOOD)).topics[0]
    second = load_topics(write(tmp_path, GOOD.replace("max_stories: 5000", "max_stories: 6000"))).topics[0]
    assert first.config_hash != second.config_hash
    assert first.config_hash == load_topics(write(tmp_path, GOOD)).topics[0].config_hash


def test_sync_plan_adds_new_reports_removed_and_reseeds_changed() -> None:
    plan = plan_topic_sync(
        declared={"a": "h1", "b": "h2-new", "c": "h3"},
        partitions={"a", "b", "gone"},
        last_state={"a": "h1", "b": "h2-old", "gone": "h9"},
    )
    assert plan.add == ("c",)
    assert plan.removed == ("gone",)
    assert plan.changed == ("b",)
    assert plan.to_seed == ("c", "b")
