"""The click schedule, stats window and aggregation rules (topicmap.social.clicks)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from topicmap.social.clicks import (
    aggregate_clicks,
    canonical_bitlink,
    clicks_until,
    fetch_schedule,
    parse_click_entries,
    stage_totals,
    stats_window,
    story_timestamp,
)

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _epoch(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def _answer(*pairs: tuple[date, int]) -> dict:
    return {
        "status_code": 200,
        "data": {"link_clicks": [{"clicks": clicks, "dt": _epoch(day)} for day, clicks in pairs]},
    }


# -- fetch_schedule ----------------------------------------------------------------------------------------------
def test_schedule_is_exactly_3_and_30_days_after_publication() -> None:
    published = datetime(2024, 2, 20, 8, 30, tzinfo=UTC)
    schedule = fetch_schedule(published, published + timedelta(hours=2), NOW)
    assert schedule == [("3d", published + timedelta(days=3)), ("30d", published + timedelta(days=30))]
    # not Media Cloud's 295200 s / 2952000 s (3.4 / 34.2 days)
    assert schedule[0][1] - published == timedelta(seconds=259200)
    assert all(due.tzinfo is not None and due.utcoffset() == timedelta(0) for _, due in schedule)


def test_missing_publish_date_uses_collect_date() -> None:
    collected = datetime(2024, 2, 25, tzinfo=UTC)
    assert fetch_schedule(None, collected, NOW) == [
        ("3d", collected + timedelta(days=3)),
        ("30d", collected + timedelta(days=30)),
    ]


def test_publish_date_before_2008_uses_collect_date() -> None:
    collected = datetime(2024, 2, 25, tzinfo=UTC)
    schedule = fetch_schedule(datetime(2007, 12, 31, 23, 59, tzinfo=UTC), collected, NOW)
    assert schedule[0] == ("3d", collected + timedelta(days=3))
    # 2008-01-01 itself is a valid date
    assert story_timestamp(datetime(2008, 1, 1, tzinfo=UTC), collected, NOW) == datetime(
        2008, 1, 1, tzinfo=UTC
    )


def test_future_publish_date_uses_collect_date() -> None:
    collected = datetime(2024, 2, 28, tzinfo=UTC)
    future = NOW + timedelta(days=1)
    assert fetch_schedule(future, collected, NOW)[1] == ("30d", collected + timedelta(days=30))
    assert story_timestamp(NOW, collected, NOW) == NOW  # exactly now is not the future


def test_naive_datetimes_are_taken_as_utc_and_others_converted() -> None:
    naive = fetch_schedule(datetime(2024, 2, 20, 8, 30), datetime(2024, 2, 20, 9), datetime(2024, 3, 1))
    assert naive[0] == ("3d", datetime(2024, 2, 23, 8, 30, tzinfo=UTC))
    paris = timezone(timedelta(hours=1))
    converted = fetch_schedule(datetime(2024, 2, 20, 9, 30, tzinfo=paris), datetime(2024, 2, 21), NOW)
    assert converted[0][1] == datetime(2024, 2, 23, 8, 30, tzinfo=UTC)
    assert converted[0][1].tzinfo == UTC


def test_story_older_than_30_days_on_arrival_is_due_once_at_once_for_30d() -> None:
    published = datetime(2024, 1, 1, tzinfo=UTC)
    collected = datetime(2024, 2, 15, tzinfo=UTC)  # 45 days later
    assert fetch_schedule(published, collected, NOW) == [("30d", NOW)]
    # exactly 30 days old on arrival: the 30-day figure is complete, so also once, at once
    assert fetch_schedule(published, published + timedelta(days=30), NOW) == [("30d", NOW)]
    # a day short of 30: both stages, the 3-day one already overdue (fetched at once by a catching-up sensor)
    younger = fetch_schedule(published, published + timedelta(days=29), NOW)
    assert [stage for stage, _ in younger] == ["3d", "30d"]
    assert younger[1][1] == published + timedelta(days=30)


def test_schedule_after_downtime_keeps_both_overdue_due_times() -> None:
    published = datetime(2024, 1, 1, tzinfo=UTC)
    late_now = datetime(2024, 6, 1, tzinfo=UTC)
    assert fetch_schedule(published, published + timedelta(hours=1), late_now) == [
        ("3d", published + timedelta(days=3)),
        ("30d", published + timedelta(days=30)),
    ]


def test_schedule_rejects_non_datetimes() -> None:
    with pytest.raises(TypeError, match="collect_date"):
        fetch_schedule(None, "2024-01-01", NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="publish_date"):
        fetch_schedule(date(2024, 1, 1), NOW, NOW)  # type: ignore[arg-type]


# -- stats_window ------------------------------------------------------------------------------------------------
def test_stats_window_is_two_days_before_to_thirty_after_clipped_to_now() -> None:
    story = datetime(2024, 1, 10, 6, tzinfo=UTC)
    assert stats_window(story, datetime(2024, 6, 1, tzinfo=UTC)) == (
        story - timedelta(days=2),
        story + timedelta(days=30),
    )
    early_now = story + timedelta(days=3)
    assert stats_window(story, early_now) == (story - timedelta(days=2), early_now)
    start, end = stats_window(story, story - timedelta(days=5))
    assert start == end == story - timedelta(days=2)


# -- aggregation -------------------------------------------------------------------------------------------------
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
    early = _answer((d1, 10), (d2, 3))  # fetched while day 2 was still going
    late = _answer((d2, 8), (d2, 8))  # a later answer, repeating day 2
    forward = aggregate_clicks({"http://bit.ly/a": [early, late]})
    backward = aggregate_clicks({"http://bit.ly/a": [late, early]})
    assert forward == backward
    assert forward["per_bitlink"]["http://bit.ly/a"] == {d1: 10, d2: 8}
    assert forward["total"] == 18


def test_clicks_are_summed_across_bitlinks_and_spellings_count_once() -> None:
    d1, d2 = date(2024, 1, 1), date(2024, 1, 2)
    result = aggregate_clicks(
        {
            "http://bit.ly/a": [_answer((d1, 10), (d2, 4))],
            "bit.ly/a": [_answer((d1, 10))],  # same link, other spelling: not double counted
            "https://bit.ly/b": [_answer((d2, 1))],
        }
    )
    assert result["bitlinks"] == ["http://bit.ly/a", "http://bit.ly/b"]
    assert result["daily"] == {d1: 10, d2: 5}
    assert result["per_bitlink_total"] == {"http://bit.ly/a": 14, "http://bit.ly/b": 1}
    assert result["total"] == 15
    assert aggregate_clicks({})["total"] == 0


def test_canonical_bitlink_forms() -> None:
    assert canonical_bitlink("https://Bit.ly/AbC") == "http://bit.ly/AbC"
    assert canonical_bitlink("AbC") == "http://bit.ly/AbC"
    with pytest.raises(ValueError):
        canonical_bitlink("  ")


def test_clicks_until_counts_days_begun_before_the_cutoff() -> None:
    days = {date(2024, 1, 1): 1, date(2024, 1, 2): 10, date(2024, 1, 3): 100}
    assert clicks_until(days, datetime(2024, 1, 2, 12, tzinfo=UTC)) == 11
    assert clicks_until(days, datetime(2024, 1, 3, 0, 0, tzinfo=UTC)) == 11  # day 3 begins at the cutoff
    assert clicks_until(days, datetime(2024, 1, 3, 0, 1)) == 111  # naive = UTC
    # published 2023-12-30 18:00 → 3-day cutoff 2024-01-02 18:00: days 1 and 2 count, day 3 does not
    assert stage_totals(days, datetime(2023, 12, 30, 18, tzinfo=UTC)) == {"3d": 11, "30d": 111}
    assert stage_totals(days, datetime(2023, 12, 31, 0, 30, tzinfo=UTC)) == {"3d": 111, "30d": 111}
