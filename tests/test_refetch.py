"""When a publication day's click stage is due, and which runs a refetch sensor tick requests (topicmap.social.refetch)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from topicmap.social.refetch import (
    DayCandidate,
    busy_days,
    day_due_at,
    latest_due_day,
    parse_cursor,
    plan_refetch,
    stage_day_range,
    stage_for_story,
)

D = date(2024, 1, 10)


def _at(day: date, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=UTC)


def test_a_day_is_due_once_its_last_story_is() -> None:
    # the last story of Jan 10 was published just before midnight: 3 days later is Jan 14 00:00
    assert day_due_at(D, "3d") == _at(date(2024, 1, 14))
    assert day_due_at(D, "30d") == _at(date(2024, 2, 10))
    assert latest_due_day("3d", _at(date(2024, 1, 14))) == D
    assert latest_due_day("3d", _at(date(2024, 1, 13), 23, 59, 59)) == D - timedelta(days=1)
    with pytest.raises(ValueError, match="unknown click stage '7d'"):
        day_due_at(D, "7d")


def test_the_3_day_stage_covers_only_days_whose_30_day_stage_is_not_yet_due() -> None:
    now = _at(date(2024, 1, 14), 1)
    first, last = stage_day_range("3d", now)
    assert last == D and first == latest_due_day("30d", now) + timedelta(days=1)
    assert stage_day_range("30d", now, earliest_day=date(2023, 12, 1)) == (
        date(2023, 12, 1),
        latest_due_day("30d", now),
    )
    assert stage_day_range("3d", _at(date(2008, 1, 3))) is None


def test_plan_requests_one_regular_run_per_day_oldest_first_and_moves_the_cursor() -> None:
    now = _at(date(2024, 3, 1))
    days = [DayCandidate(date(2024, 1, d), 3, 100 + d) for d in (20, 5, 12)]
    plan = plan_refetch("30d", days, None, now)
    assert [r.run_key for r in plan.requests] == [
        "clicks:2024-01-05:30d",
        "clicks:2024-01-12:30d",
        "clicks:2024-01-20:30d",
    ]
    assert plan.cursor == "2024-01-20" and not any(r.late for r in plan.requests)
    # replaying the same tick gives the same keys (Dagster drops the duplicates) and cursor
    assert plan_refetch("30d", days, None, now) == plan


def test_plan_catches_up_in_bounded_ticks_without_repeating_a_day() -> None:
    now = _at(date(2024, 6, 1))
    days = [DayCandidate(date(2024, 1, 1) + timedelta(days=i), 1, i + 1) for i in range(7)]
    first = plan_refetch("30d", days, None, now, max_days=3)
    assert [r.day.day for r in first.requests] == [1, 2, 3] and first.deferred == 4
    # until they run, the requested days are still lacking: they are busy (queued), not requested again
    second = plan_refetch(
        "30d", days, first.cursor, now, busy={date(2024, 1, d) for d in (1, 2, 3)}, max_days=3
    )
    assert [r.day.day for r in second.requests] == [4, 5, 6] and second.busy == [
        date(2024, 1, d) for d in (1, 2, 3)
    ]
    assert not any(r.late for r in second.requests) and second.cursor == "2024-01-06"


def test_late_stories_on_a_requested_day_get_one_stable_late_key() -> None:
    now = _at(date(2024, 6, 1))
    plan = plan_refetch("30d", [DayCandidate(date(2024, 1, 5), 2, 917)], "2024-01-31", now)
    assert [r.run_key for r in plan.requests] == ["clicks:2024-01-05:30d:late-917"]
    assert plan.requests[0].late and plan.cursor == "2024-01-31"  # the cursor never moves back
    # another late story arrives: a new key, so exactly one more run
    again = plan_refetch("30d", [DayCandidate(date(2024, 1, 5), 3, 955)], "2024-01-31", now)
    assert again.requests[0].run_key == "clicks:2024-01-05:30d:late-955"


def test_days_outside_the_stage_range_and_empty_days_are_ignored() -> None:
    now = _at(date(2024, 3, 1))
    candidates = [
        DayCandidate(date(2024, 1, 1), 4, 1),  # 30-day stage due: the 30-day sensor's
        DayCandidate(date(2024, 2, 26), 4, 2),  # 3-day stage due
        DayCandidate(date(2024, 2, 27), 4, 3),  # not due until Mar 1 + ... (Feb 28 00:00 + 3 days = Mar 2)
        DayCandidate(date(2024, 2, 20), 0, 4),
    ]
    plan = plan_refetch("3d", candidates, None, now)
    assert [r.day for r in plan.requests] == [date(2024, 2, 26)]
    assert "requesting 1 day(s)" in plan.describe("3d")
    assert "no publication day" in plan_refetch("3d", [], None, now).describe("3d")


def test_busy_days_come_from_single_and_range_runs_of_this_stage_or_auto() -> None:
    runs = [
        {"dagster/partition": "2024-01-02", "topicmap/clicks_stage": "3d"},
        {"dagster/partition": "2024-01-03", "topicmap/clicks_stage": "30d"},
        {
            "dagster/asset_partition_range_start": "2024-01-10",
            "dagster/asset_partition_range_end": "2024-01-12",
        },
        {"dagster/partition": "climate"},  # a topic partition: not a click run
    ]
    assert busy_days(runs, "3d") == {
        date(2024, 1, 2),
        date(2024, 1, 10),
        date(2024, 1, 11),
        date(2024, 1, 12),
    }
    assert date(2024, 1, 3) in busy_days(runs, "30d") and date(2024, 1, 2) not in busy_days(runs, "30d")


def test_a_bad_cursor_is_reported_clearly() -> None:
    assert parse_cursor("") is None and parse_cursor("2024-02-29") == date(2024, 2, 29)
    with pytest.raises(ValueError, match="reset the sensor cursor"):
        parse_cursor('["2024-01-01"]')


def test_stage_for_story_fetches_only_what_is_due() -> None:
    published = _at(D, 15)
    assert stage_for_story("auto", published, published + timedelta(days=2)) is None
    assert stage_for_story("auto", published, published + timedelta(days=3)) == "3d"
    assert stage_for_story("auto", published, published + timedelta(days=30)) == "30d"
    assert stage_for_story("30d", published, published + timedelta(days=29)) is None
    assert stage_for_story("3d", published, published + timedelta(days=40)) == "3d"
