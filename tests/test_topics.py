"""Topic declarations: valid topics load, each broken topic is rejected with topic, field and position."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.test_spider import DictSource, page
from topicmap.spider.iteration import Spider
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import SeedUrlList, TopicConfigError, load_topics, plan_topic_sync
from topicmap.topics.seeding import SeedingRequest, select_seeds

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
            "from 1 to 1,000",
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
            "from 0 to 3600",
        ),
        (
            "{name: bad-span, query: x, start_date: 2026-01-01, end_date: 2026-02-01, timespans: [{name: s, start_date: 2025-12-01, end_date: 2026-01-05}]}",
            "timespans[0]",
            "outside",
        ),
        (
            "{name: bad-seed-flag, query: x, start_date: 2026-01-01, end_date: 2026-02-01, seed_urls: [{path: a.csv, assume_match: 'yes'}]}",
            "seed_urls[0].assume_match",
            "true or false",
        ),
        (
            "{name: bad-seed-key, query: x, start_date: 2026-01-01, end_date: 2026-02-01, seed_urls: [a.csv, {path: b.csv, assume: true}]}",
            "seed_urls[1].assume",
            "unknown setting",
        ),
        (
            "{name: no-seed-path, query: x, start_date: 2026-01-01, end_date: 2026-02-01, seed_urls: [{assume_match: true}]}",
            "seed_urls[0].path",
            "CSV file path",
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


# ---- seed URL lists: taken as relevant, or judged by the query ---------------------------------------------

SEEDED = """
topics:
  - name: seeded
    query: climate
    start_date: 2026-01-01
    end_date: 2026-03-31
    max_iterations: 1
    seed_urls:
      - listed.csv
      - {path: candidates.csv, assume_match: false}
      - {path: also-listed.csv, assume_match: true}
"""
LISTED = "https://listed.test/2026/02/01/football-final"
CANDIDATE = "https://candidates.test/2026/02/01/cooking-tips"
IN_BOTH = "https://both.test/2026/02/01/weather"
FOUND_BY_LINK = "https://linked.test/2026/02/02/climate-plan"


def test_seed_lists_say_whether_their_stories_are_taken_as_relevant(tmp_path: Path) -> None:
    topic = load_topics(write(tmp_path, SEEDED)).topics[0]
    assert topic.seed_urls == (
        SeedUrlList(tmp_path / "listed.csv", assume_match=True),  # the default
        SeedUrlList(tmp_path / "candidates.csv", assume_match=False),
        SeedUrlList(tmp_path / "also-listed.csv", assume_match=True),
    )
    # the flag is part of the declaration: flipping it re-seeds the topic
    flipped = load_topics(
        write(tmp_path, SEEDED.replace("assume_match: false", "assume_match: true"))
    ).topics[0]
    assert flipped.config_hash != topic.config_hash


def test_a_listed_page_that_does_not_match_joins_the_topic_only_when_its_list_assumes_it(
    store: TopicStore, tmp_path: Path
) -> None:
    # None of the three seed pages mentions climate. The first list is taken as relevant (the default), the
    # second is judged by the query, and a URL in both the second and the third is taken as relevant.
    (tmp_path / "listed.csv").write_text(f"url\n{LISTED}\n", encoding="utf-8")
    (tmp_path / "candidates.csv").write_text(f"url\n{CANDIDATE}\n{IN_BOTH}\n", encoding="utf-8")
    (tmp_path / "also-listed.csv").write_text(f"url\n{IN_BOTH}\n", encoding="utf-8")
    topic = load_topics(write(tmp_path, SEEDED)).topics[0]
    topics_id = store.upsert_topic(topic)
    selection = select_seeds(store, SeedingRequest(topic))
    assert {row["url"]: row["assume_match"] for row in selection.rows} == {
        LISTED: True,
        CANDIDATE: False,
        IN_BOTH: True,
    }
    assert store.add_seed_urls(topics_id, selection.rows) == 3
    assert {row["url"]: row["assume_match"] for row in store.seed_rows(topics_id)} == {
        LISTED: True,
        CANDIDATE: False,
        IN_BOTH: True,
    }
    web = {
        LISTED: page("Football final", "The match ended two to one.", [FOUND_BY_LINK]),
        CANDIDATE: page("Cooking tips", "Stir the sauce for ten minutes."),
        IN_BOTH: page("Weather", "Rain is expected on Sunday."),
        FOUND_BY_LINK: page("Climate plan", "The climate plan was announced."),
    }
    spider = Spider(store, topic, DictSource(web), log=lambda _: None)
    spider.run_iteration()  # iteration 0: the seed URLs
    spider.run_iteration()  # iteration 1: the links of the stories that joined
    ts, st, f = s.topic_stories, s.stories, s.topic_fetch_urls
    with store.engine.connect() as conn:
        in_topic = set(
            conn.execute(
                select(st.c.url)
                .join(ts, ts.c.stories_id == st.c.stories_id)
                .where(ts.c.topics_id == topics_id)
            ).scalars()
        )
        state = dict(conn.execute(select(f.c.url, f.c.state).where(f.c.topics_id == topics_id)).all())
    assert in_topic == {LISTED, IN_BOTH, FOUND_BY_LINK}  # the assumed story's links are followed
    assert state[CANDIDATE] == "content match failed"


def test_a_seed_lists_changed_flag_changes_its_stored_seeds(store: TopicStore, tmp_path: Path) -> None:
    (tmp_path / "listed.csv").write_text(f"url\n{LISTED}\n", encoding="utf-8")
    (tmp_path / "candidates.csv").write_text(f"url\n{CANDIDATE}\n{IN_BOTH}\n", encoding="utf-8")
    (tmp_path / "also-listed.csv").write_text(f"url\n{IN_BOTH}\n", encoding="utf-8")
    topic = load_topics(write(tmp_path, SEEDED)).topics[0]
    topics_id = store.upsert_topic(topic)
    assert store.add_seed_urls(topics_id, select_seeds(store, SeedingRequest(topic)).rows) == 3
    # the list of candidates becomes a list taken as relevant, then a list of candidates again
    for flag, candidate_assumed in (("true", True), ("false", False)):
        changed = load_topics(
            write(tmp_path, SEEDED.replace("assume_match: false", f"assume_match: {flag}"))
        ).topics[0]
        for _ in range(2):  # re-seeding with the same file changes nothing more
            assert store.add_seed_urls(topics_id, select_seeds(store, SeedingRequest(changed)).rows) == 0
            stored = {row["url"]: row["assume_match"] for row in store.seed_rows(topics_id)}
            # IN_BOTH stays assumed: another list says so
            assert stored == {LISTED: True, CANDIDATE: candidate_assumed, IN_BOTH: True}
