"""The click rules production uses (topicmap.social.clicks): the story timestamp, the click window, the day counts."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from topicmap.social.clicks import (
    canonical_bitlink,
    click_window,
    clicks_until,
    merge_day_counts,
    parse_click_entries,
    story_timestamp,
    sum_day_maps,
)

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _epoch(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def _answer(*pairs: tuple[date, int]) -> dict:
    return {
        "status_code": 200,
        "data": {"link_clicks": [{"clicks": clicks, "dt": _epoch(day)} for day, clicks in pairs]},
    }


# -- story_timestamp -----------------------------------------------------------------------------------------------
def test_the_publish_date_is_the_story_timestamp() -> None:
    published = datetime(2024, 2, 20, 8, 30, tzinfo=UTC)
    assert story_timestamp(published, published + timedelta(hours=2), NOW) == published


def test_missing_publish_date_uses_collect_date() -> None:
    collected = datetime(2024, 2, 25, tzinfo=UTC)
    assert story_timestamp(None, collected, NOW) == collected


def test_publish_date_before_2008_uses_collect_date() -> None:
    collected = datetime(2024, 2, 25, tzinfo=UTC)
    assert story_timestamp(datetime(2007, 12, 31, 23, 59, tzinfo=UTC), collected, NOW) == collected
    # 2008-01-01 itself is a valid date
    assert story_timestamp(datetime(2008, 1, 1, tzinfo=UTC), collected, NOW) == datetime(
        2008, 1, 1, tzinfo=UTC
    )


def test_future_publish_date_uses_collect_date() -> None:
    collected = datetime(2024, 2, 28, tzinfo=UTC)
    assert story_timestamp(NOW + timedelta(days=1), collected, NOW) == collected
    assert story_timestamp(NOW, collected, NOW) == NOW  # exactly now is not the future


def test_naive_datetimes_are_taken_as_utc_and_others_converted() -> None:
    naive = story_timestamp(datetime(2024, 2, 20, 8, 30), datetime(2024, 2, 20, 9), datetime(2024, 3, 1))
    assert naive == datetime(2024, 2, 20, 8, 30, tzinfo=UTC)
    paris = timezone(timedelta(hours=1))
    converted = story_timestamp(datetime(2024, 2, 20, 9, 30, tzinfo=paris), datetime(2024, 2, 21), NOW)
    assert converted == datetime(2024, 2, 20, 8, 30, tzinfo=UTC) and converted.tzinfo == UTC


def test_story_timestamp_rejects_non_datetimes() -> None:
    with pytest.raises(TypeError, match="collect_date"):
        story_timestamp(None, "2024-01-01", NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="publish_date"):
        story_timestamp(date(2024, 1, 1), NOW, NOW)  # type: ignore[arg-type]


# -- click_window --------------------------------------------------------------------------------------------------
def test_the_click_window_is_two_days_before_to_the_stage_cutoff_clipped_to_now() -> None:
    story = datetime(2024, 1, 10, 6, tzinfo=UTC)
    late = datetime(2024, 6, 1, tzinfo=UTC)
    assert click_window("30d", story, late) == (story - timedelta(days=2), story + timedelta(days=30))
    # exactly 3 and 30 days, not Media Cloud's 295200 s / 2952000 s (3.4 / 34.2 days)
    assert click_window("3d", story, late)[1] - story == timedelta(seconds=259200)
    early_now = story + timedelta(days=3)
    assert click_window("30d", story, early_now) == (story - timedelta(days=2), early_now)
    start, end = click_window("30d", story, story - timedelta(days=5))
    assert start == end == story - timedelta(days=2)
    with pytest.raises(ValueError, match="unknown click stage"):
        click_window("7d", story, late)


# -- day counts ----------------------------------------------------------------------------------------------------
def test_parse_accepts_v3_and_v4_shapes() -> None:
    day = date(2024, 1, 2)
    assert parse_click_entries(_answer((day, 5))) == [(day, 5)]
    v4 = {"link_clicks": [{"clicks": 7, "date": "2024-01-02T00:00:00+0000"}]}
    assert parse_click_entries(v4) == [(day, 7)]
    with pytest.raises(ValueError, match="link_clicks"):
        parse_click_entries({"data": {}})
    with pytest.raises(ValueError, match="non-negative"):
        parse_click_entries({"data": {"link_clicks": [{"clicks": -1, "dt": 0}]}})


def test_repeated_date_counted_once_keeping_the_largest_whatever_the_order() -> None:
    d1, d2 = date(2024, 1, 1), date(2024, 1, 2)
    early = parse_click_entries(_answer((d1, 10), (d2, 3)))  # fetched while day 2 was still going
    late = parse_click_entries(_answer((d2, 8), (d2, 8)))  # a later answer, repeating day 2
    forward = merge_day_counts(merge_day_counts({}, early), late)
    backward = merge_day_counts(merge_day_counts({}, late), early)
    assert forward == backward == {d1: 10, d2: 8}


def test_clicks_are_summed_across_bitlinks_by_day() -> None:
    d1, d2 = date(2024, 1, 1), date(2024, 1, 2)
    assert sum_day_maps([{d2: 4, d1: 10}, {d2: 1}]) == {d1: 10, d2: 5}
    assert list(sum_day_maps([{d2: 1}, {d1: 1}])) == [d1, d2]  # sorted by day
    assert sum_day_maps([]) == {}


def test_canonical_bitlink_forms() -> None:
    # one link whatever its spelling: a lookup may answer with either, and its clicks count once
    assert canonical_bitlink("https://Bit.ly/AbC") == canonical_bitlink("bit.ly/AbC") == "http://bit.ly/AbC"
    assert canonical_bitlink("AbC") == "http://bit.ly/AbC"
    with pytest.raises(ValueError):
        canonical_bitlink("  ")


def test_clicks_until_counts_days_begun_before_the_cutoff() -> None:
    days = {date(2024, 1, 1): 1, date(2024, 1, 2): 10, date(2024, 1, 3): 100}
    assert clicks_until(days, datetime(2024, 1, 2, 12, tzinfo=UTC)) == 11
    assert clicks_until(days, datetime(2024, 1, 3, 0, 0, tzinfo=UTC)) == 11  # day 3 begins at the cutoff
    assert clicks_until(days, datetime(2024, 1, 3, 0, 1)) == 111  # naive = UTC
    # published 2023-12-30 18:00 → 3-day cutoff 2024-01-02 18:00: days 1 and 2 count, day 3 does not
    assert clicks_until(days, datetime(2023, 12, 30, 18, tzinfo=UTC) + timedelta(days=3)) == 11
