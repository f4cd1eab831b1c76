"""Respidering (Media Cloud's respider_stories / respider_start_date / respider_end_date): a topic's stories have
their links mined again once, when the topic declares it or when its dates widen over stories whose links the old
dates left unmined."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.test_spider import DictSource, page, run_to_end, states
from topicmap.spider.iteration import Spider
from topicmap.spider.respider import apply_respider, gained_days
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore
from topicmap.topics.declarations import Respider, TopicConfig, TopicConfigError, parse_topic

SEED = "https://hub.test/2026/01/10/climate-roundup"
LATE = "https://wire.test/2026/03/20/climate-later"  # published after the first dates (and their 7 days)
DEEP = "https://deep.test/2026/03/22/climate-deeper"  # linked only from LATE
WEB = {
    LATE: page("Climate later", "The climate plan was voted.", [DEEP], day="2026-03-20"),
    DEEP: page("Climate deeper", "The climate plan in detail.", day="2026-03-22"),
}


def _topic(store: TopicStore, **changes: object) -> TopicConfig:
    topic = TopicConfig(
        name="respidered",
        query="climate",
        start_date=date(2026, 1, 1),
        end_date=date(2026, 1, 31),
        max_iterations=5,
    )
    topic = dataclasses.replace(topic, **changes)
    store.upsert_topic(topic)
    return topic


def _seeded(store: TopicStore, **changes: object) -> TopicConfig:
    topic = _topic(store, **changes)
    seed = store.add_stories(
        [
            NewStory(
                url=SEED,
                title="Climate roundup",
                text="Links to the climate reporting.",
                publish_date=datetime(2026, 1, 10, tzinfo=UTC),
                html=page("Climate roundup", "Links to the climate reporting.", [LATE], day="2026-01-10"),
            )
        ],
        source="test",
    )
    topics_id = int(store.topic_row(topic.name)["topics_id"])
    store.add_seed_urls(
        topics_id, [{"url": SEED, "source": "archive query", "stories_id": seed.stories_ids[0]}]
    )
    assert apply_respider(store, topic).stories == 0  # the first seeding records the window, resets nothing
    return topic


def _mined(store: TopicStore) -> dict[str, bool]:
    ts, st = s.topic_stories, s.stories
    with store.engine.connect() as conn:
        return dict(
            conn.execute(select(st.c.url, ts.c.link_mined).join(st, st.c.stories_id == ts.c.stories_id)).all()
        )


def test_widening_the_dates_mines_the_stories_the_old_dates_left_unmined(store: TopicStore) -> None:
    topic = _seeded(store)
    source = DictSource(WEB)
    run_to_end(Spider(store, topic, source, log=lambda _: None))
    # LATE matched and joined, but it lies outside 2026-01-01..31 ± 7 days: marked mined, its link never followed
    assert states(store)[LATE] == "story added"
    assert DEEP not in states(store)

    wider = _topic(store, end_date=date(2026, 3, 31))
    report = apply_respider(store, wider)
    assert report.gained == [(date(2026, 2, 8), date(2026, 4, 7))]
    assert report.stories == 1  # LATE; the seed, mined under the old dates, is not mined again
    assert _mined(store) == {SEED: True, LATE: False}
    run_to_end(Spider(store, wider, source, log=lambda _: None))
    assert states(store)[DEEP] == "story added"
    assert source.fetched.count(LATE) == 1  # nothing is fetched twice
    assert all(_mined(store).values())
    # applied once: the same dates again reset nothing
    assert apply_respider(store, wider).stories == 0


def test_a_respider_declaration_mines_the_stories_it_names_once(store: TopicStore) -> None:
    # Raising max_iterations alone queues nothing: the links of the stories of the last iteration were recorded
    # but not followed. A respider of their days mines them again, and then the deeper story is found.
    topic = _seeded(store, end_date=date(2026, 3, 31), max_iterations=1)
    source = DictSource(WEB)
    run_to_end(Spider(store, topic, source, log=lambda _: None))
    assert DEEP not in states(store)

    elsewhere = _topic(
        store, max_iterations=2, end_date=date(2026, 3, 31), respider=Respider(date(2026, 2, 1))
    )
    assert apply_respider(store, elsewhere).stories == 1  # LATE, published after Feb 1
    assert _mined(store) == {SEED: True, LATE: False}
    run_to_end(Spider(store, elsewhere, source, log=lambda _: None))
    assert states(store)[DEEP] == "story added"
    assert apply_respider(store, elsewhere).stories == 0  # once per declaration

    everything = _topic(store, max_iterations=2, end_date=date(2026, 3, 31), respider=Respider())
    report = apply_respider(store, everything)
    assert (report.applied, report.stories) == ("all", 3)
    run_to_end(Spider(store, everything, source, log=lambda _: None))
    assert all(_mined(store).values())
    assert sorted(set(source.fetched)) == sorted([LATE, DEEP])
    assert len(source.fetched) == 2


def test_gained_days_are_the_parts_of_the_new_window_outside_the_old() -> None:
    jan, feb, mar = date(2026, 1, 1), date(2026, 2, 1), date(2026, 3, 1)
    assert gained_days((feb, mar), (jan, mar)) == [(jan, date(2026, 1, 31))]
    assert gained_days((jan, feb), (jan, None)) == [(date(2026, 2, 2), None)]
    assert gained_days((jan, None), (jan, mar)) == []
    assert gained_days((feb, feb), (mar, date(2026, 3, 5))) == [(mar, date(2026, 3, 5))]  # moved, not widened


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("all", Respider()),
        ({"start_date": "2026-02-01"}, Respider(date(2026, 2, 1))),
        (
            {"start_date": "2026-02-01", "end_date": "2026-02-10"},
            Respider(date(2026, 2, 1), date(2026, 2, 10)),
        ),
    ],
)
def test_respider_is_declared_as_all_or_dates(raw: object, expected: Respider) -> None:
    declared = {"name": "t", "query": "climate", "start_date": "2026-01-01", "respider": raw}
    assert parse_topic(declared, Path(".")).respider == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("some", "expected 'all' or {start_date, end_date}"),
        ({"start": "2026-02-01"}, "'respider.start': unknown setting"),
        ({"start_date": "2026-02-10", "end_date": "2026-02-01"}, "before respider.start_date"),
        ({"end_date": "soon"}, "'respider.end_date': expected a date"),
    ],
)
def test_a_bad_respider_is_refused_naming_the_field(raw: object, message: str) -> None:
    declared = {"name": "t", "query": "climate", "start_date": "2026-01-01", "respider": raw}
    with pytest.raises(TopicConfigError, match=re.escape(message)):
        parse_topic(declared, Path("."))
