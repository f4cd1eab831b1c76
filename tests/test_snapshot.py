"""Snapshots against hand-computed answers (topicmap.snapshots.compute).

The main fixture is a small topic, 2026-01-07 (a Wednesday) to 2026-02-10 (a Tuesday), whose every count is
worked out by hand below. Media: A=1, B=2, C=3 (links to itself), D=4, E=5 (no links).

    story  medium  published (UTC)          note
    101    A       2026-01-08 10:00         week of Jan 5
    102    A       2026-01-20 09:00         week of Jan 19
    201    B       2026-01-13 12:00         week of Jan 12 ("Launch week")
    202    B       2026-02-03 08:00         week of Feb 2
    203    B       2026-01-26 00:00:00      exactly Monday midnight: week of Jan 26, not Jan 19
    301    C       2026-01-14
    302    C       2026-01-15
    401    D       2025-12-15               BEFORE the topic
    402    D       undated (NaT)
    403    D       2026-02-10 23:59:59      the topic's last second
    501    E       2026-03-01               AFTER the topic, links out only: never in the snapshot
    502    E       2026-01-09               no links at all

    links (source -> ref)                    fate
    101 -> 201  A->B                         counts (twice in the input: the duplicate is dropped)
    101 -> 102  A->A                         same medium: dropped
    201 -> 101  B->A
    201 -> 401  B->D                         brings 401 (dated outside) into the timespans of Jan 13
    301 -> 302  C->C                         same medium: dropped
    301 -> 201  C->B
    302 -> 201  C->B
    302 -> 999  ref not in the topic         dropped
    402 -> 101  D->A                         undated source: overall only
    202 -> 102  B->A
    401 -> 202  D->B                         source dated outside the topic: never counts
    403 -> 202  D->B
    501 -> 101  E->A                         source dated after the topic: never counts
    102 -> 302  A->C
    203 -> 302  B->C
    888 -> 101  source not in the topic      dropped

Statistics: 101 fb 10 / bitly 5 / 7; 102 fb 3; 201 bitly 1 / 2 (fb unknown); 202 fb 0; 401 fb 100;
999 (not a topic story) fb 50, ignored. Every other value is unknown (null).
"""

from __future__ import annotations

import json
import random
from datetime import date

import numpy as np
import pandas as pd
import pytest

from tests.snapshot_exports import check_snapshot_folder
from topicmap.snapshots.checks import snapshot_problems
from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.files import (
    MEDIA_CSV_COLUMNS,
    STORY_CSV_COLUMNS,
    STORY_DATE_COLUMNS,
    write_snapshot_files,
)
from topicmap.snapshots.foci import Focus
from topicmap.snapshots.summaries import SUMMARY_SCHEMAS
from topicmap.snapshots.timespans import Timespan, build_timespans
from topicmap.topics.focus_kinds import QuerySelection

A, B, C, D, E = 1, 2, 3, 4, 5
NA = None

# ----------------------------------------------------------------------------------------------- fixture


def media_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "media_id": [A, B, C, D, E],
            "name": ["Alpha News", "Beta Daily", "Gamma Blog", "Delta Wire", "Epsilon Post"],
            "url": [f"https://{n}.example/" for n in ("alpha", "beta", "gamma", "delta", "epsilon")],
        }
    )


def stories_frame() -> pd.DataFrame:
    rows = [
        (101, A, "2026-01-08 10:00:00"),
        (102, A, "2026-01-20 09:00:00"),
        (201, B, "2026-01-13 12:00:00"),
        (202, B, "2026-02-03 08:00:00"),
        (203, B, "2026-01-26 00:00:00"),
        (301, C, "2026-01-14 00:00:00"),
        (302, C, "2026-01-15 00:00:00"),
        (401, D, "2025-12-15 00:00:00"),
        (402, D, None),
        (403, D, "2026-02-10 23:59:59"),
        (501, E, "2026-03-01 00:00:00"),
        (502, E, "2026-01-09 00:00:00"),
    ]
    return pd.DataFrame(
        {
            "stories_id": np.array([r[0] for r in rows], dtype=np.int64),
            "media_id": np.array([r[1] for r in rows], dtype=np.int64),
            "publish_date": pd.to_datetime([r[2] for r in rows], utc=True).astype("datetime64[ns, UTC]"),
            "url": [f"https://example.com/story/{r[0]}" for r in rows],
            "title": [f"Story {r[0]}" for r in rows],
        }
    )


def links_frame() -> pd.DataFrame:
    pairs = [
        (101, 201),
        (101, 201),
        (101, 102),
        (201, 101),
        (201, 401),
        (301, 302),
        (301, 201),
        (302, 201),
        (302, 999),
        (402, 101),
        (202, 102),
        (401, 202),
        (403, 202),
        (501, 101),
        (102, 302),
        (203, 302),
        (888, 101),
    ]
    return pd.DataFrame(pairs, columns=["stories_id", "ref_stories_id"], dtype=np.int64)


def stats_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stories_id": [101, 102, 201, 202, 401, 999],
            "facebook_share_count": pd.array([10, 3, None, 0, 100, 50], dtype="Int64"),
            "bitly_clicks_3d": pd.array([5, None, 1, None, None, None], dtype="Int64"),
            "bitly_clicks_30d": pd.array([7, None, 2, None, None, None], dtype="Int64"),
        }
    )


CUSTOM = [("Launch week", "2026-01-12", "2026-01-18"), ("Before the topic", "2025-12-20", "2026-01-09")]


def topic_timespans() -> list[Timespan]:
    return build_timespans("2026-01-07", "2026-02-10", custom=CUSTOM)


@pytest.fixture(scope="module")
def result():
    return compute_snapshot(
        stories_frame(), media_frame(), links_frame(), topic_timespans(), story_stats=stats_frame()
    )


@pytest.fixture(scope="module")
def written(result, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The fixture's files, written once for the tests that only read them: (folder, what was written)."""
    folder = tmp_path_factory.mktemp("written")
    return folder, write_snapshot_files(result, folder)


def rows(frame: pd.DataFrame, columns: list[str] | None = None) -> list[tuple]:
    """Plain tuples, nulls as None, for comparison with the literal expectations."""
    frame = frame[columns] if columns else frame
    return [
        tuple(None if pd.isna(v) else int(v) if isinstance(v, np.integer) else v for v in r)
        for r in frame.itertuples(index=False)
    ]


def counts(snap) -> tuple[int, int, int, int]:
    c = snap.counts
    return (c.story_count, c.story_link_count, c.medium_count, c.medium_link_count)


SLC = ["stories_id", "media_id", "inlink_count", "outlink_count", "media_inlink_count"]
STATS = ["facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d"]
MLC = [
    "media_id",
    "story_count",
    "media_inlink_count",
    "inlink_count",
    "outlink_count",
    "sum_media_inlink_count",
]


# ----------------------------------------------------------------------------------------------- timespans


def test_timespans_of_a_topic_starting_mid_week_are_clipped_to_its_dates():
    spans = topic_timespans()
    got = [(t.period, t.key, t.start_date.isoformat(), t.last_date.isoformat()) for t in spans]
    assert got == [
        ("overall", "overall", "2026-01-07", "2026-02-10"),
        # monthly: from the 1st of the start's month; the first is clipped to the topic's Jan 7 start
        ("monthly", "monthly_2026-01-01", "2026-01-07", "2026-01-31"),
        ("monthly", "monthly_2026-02-01", "2026-02-01", "2026-02-10"),
        # weekly: from Monday Jan 5 (the Monday on or before Wednesday Jan 7), clipped to Jan 7; the
        # last week (Monday Feb 9) is clipped to the topic's last day, Tuesday Feb 10
        ("weekly", "weekly_2026-01-05", "2026-01-07", "2026-01-11"),
        ("weekly", "weekly_2026-01-12", "2026-01-12", "2026-01-18"),
        ("weekly", "weekly_2026-01-19", "2026-01-19", "2026-01-25"),
        ("weekly", "weekly_2026-01-26", "2026-01-26", "2026-02-01"),
        ("weekly", "weekly_2026-02-02", "2026-02-02", "2026-02-08"),
        ("weekly", "weekly_2026-02-09", "2026-02-09", "2026-02-10"),
        # custom ranges by start date; "Before the topic" (Dec 20 - Jan 9) is clipped to Jan 7 - Jan 9
        ("custom", "custom_before-the-topic", "2026-01-07", "2026-01-09"),
        ("custom", "custom_launch-week", "2026-01-12", "2026-01-18"),
    ]
    assert all(t.start_date.weekday() == 0 for t in spans[4:8])  # unclipped weeks start on Monday
    assert spans[0].end_date == date(2026, 2, 11)  # end_date is exclusive
    assert spans[-1].name == "Launch week"


def test_weeks_and_months_cut_by_the_topics_dates_are_partial_in_the_files(tmp_path):
    """The topic runs from Wednesday 7 January to Tuesday 10 February: its first week has 5 days, its last 2,
    January 25 and February 10; the rows of timespans.parquet/.csv say so, whole weeks are not partial."""
    # its own result: writing adds the post columns to the tables the module's `result` compares elsewhere
    own = compute_snapshot(stories_frame(), media_frame(), links_frame(), topic_timespans())
    write_snapshot_files(own, tmp_path)
    expected = {
        "overall": (False, 35),
        "monthly_2026-01-01": (True, 25),
        "monthly_2026-02-01": (True, 10),
        "weekly_2026-01-05": (True, 5),
        "weekly_2026-01-12": (False, 7),
        "weekly_2026-02-02": (False, 7),
        "weekly_2026-02-09": (True, 2),
        "custom_before-the-topic": (False, 3),
    }
    for table in (
        pd.read_parquet(tmp_path / "timespans.parquet"),
        pd.read_csv(tmp_path / "timespans.csv", keep_default_na=False),
    ):
        got = {row.key: (bool(row.partial), int(row.day_count)) for row in table.itertuples()}
        assert {key: got[key] for key in expected} == expected
    schema = json.loads((tmp_path / "schemas" / "timespans.json").read_text(encoding="utf-8"))
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["partial"]["type"] == "boolean" and "cut by the topic" in fields["partial"]["description"]
    assert fields["day_count"]["type"] == "integer"
    assert "timespans.partial" in (tmp_path / "README.md").read_text(encoding="utf-8")


def test_a_whole_month_and_week_are_not_partial():
    spans = {t.key: t for t in build_timespans("2026-02-01", "2026-03-01", periods=("monthly", "weekly"))}
    assert (spans["monthly_2026-02-01"].partial, spans["monthly_2026-02-01"].day_count) == (False, 28)
    assert (spans["monthly_2026-03-01"].partial, spans["monthly_2026-03-01"].day_count) == (True, 1)
    assert (spans["weekly_2026-02-02"].partial, spans["weekly_2026-02-02"].day_count) == (False, 7)
    assert (spans["weekly_2026-01-26"].partial, spans["weekly_2026-01-26"].day_count) == (True, 1)  # a Sunday


def test_timespans_never_leave_the_topic_and_cover_it_without_gaps():
    spans = build_timespans(date(2025, 12, 15), date(2026, 3, 3), periods=("monthly", "weekly"))
    for period in ("monthly", "weekly"):
        chain = [t for t in spans if t.period == period]
        assert chain[0].start_date == date(2025, 12, 15) and chain[-1].last_date == date(2026, 3, 3)
        assert all(a.end_date == b.start_date for a, b in zip(chain, chain[1:], strict=False))
    months = [t.key for t in spans if t.period == "monthly"]
    # Jan 1 + 32 days = Feb 2 -> Feb 1; across the year boundary; a 28-day February
    assert months == ["monthly_2025-12-01", "monthly_2026-01-01", "monthly_2026-02-01", "monthly_2026-03-01"]
    assert len([t for t in spans if t.period == "weekly"]) == 12  # Mondays Dec 15 ... Mar 2


def test_timespan_configuration_errors_are_named():
    with pytest.raises(ValueError, match="before its start_date"):
        build_timespans("2026-02-01", "2026-01-01")
    with pytest.raises(ValueError, match="unknown snapshot period"):
        build_timespans("2026-01-01", "2026-02-01", periods=("overall", "daily"))
    with pytest.raises(ValueError, match="entirely outside"):
        build_timespans("2026-01-01", "2026-02-01", custom=[("Old", "2025-01-01", "2025-02-01")])
    with pytest.raises(ValueError, match="ends .* before it starts"):
        build_timespans("2026-01-01", "2026-02-01", custom=[("Backwards", "2026-01-20", "2026-01-10")])
    with pytest.raises(ValueError, match="same key"):
        build_timespans(
            "2026-01-01",
            "2026-02-01",
            custom=[("Week 1", "2026-01-01", "2026-01-07"), ("week-1", "2026-01-02", "2026-01-08")],
        )
    with pytest.raises(ValueError, match="expected a date"):
        build_timespans("soon", "2026-02-01")
    # Media Cloud's space-separated topics.snapshot_periods and mapping-style custom ranges are accepted
    spans = build_timespans(
        "2026-01-01",
        "2026-01-31",
        periods="overall custom",
        custom=[{"name": "X", "start_date": "2026-01-05", "end_date": "2026-01-06"}],
    )
    assert [t.key for t in spans] == ["overall", "custom_x"]


# ----------------------------------------------------------------------------------------------- overall


def test_dropped_links_are_tallied(result):
    # 888->101 source unknown; 302->999 ref unknown; 101->102 and 301->302 same medium; 101->201 twice
    assert result.dropped_links == {
        "source_not_in_topic": 1,
        "ref_not_in_topic": 1,
        "same_medium": 2,
        "duplicate": 1,
    }


def test_overall_story_links(result):
    # Cross-media links whose source is dated in Jan 7..Feb 10 or undated (402). Not 401->202 (Dec 15) nor
    # 501->101 (Mar 1).
    assert rows(result["overall"].story_links) == [
        (101, 201),
        (102, 302),
        (201, 101),
        (201, 401),
        (202, 102),
        (203, 302),
        (301, 201),
        (302, 201),
        (402, 101),
        (403, 202),
    ]


def test_overall_story_link_counts(result):
    snap = result["overall"]
    # stories: everything dated in the topic or undated (501 is after it), plus 401 (dated before the topic,
    # linked by 201 from another medium)
    assert rows(snap.story_link_counts, SLC + STATS) == [
        # id, medium, inlinks, outlinks, media inlinks, fb, bitly 3d, bitly 30d
        (101, A, 2, 1, 2, 10, 5, 7),  # in: 201 (B), 402 (D); 501's link is from after the topic
        (102, A, 1, 1, 1, 3, NA, NA),  # in: 202 (B); out: 302
        (201, B, 3, 2, 2, NA, 1, 2),  # in: 101 (A), 301 and 302 (both C): 3 stories, 2 media
        (202, B, 1, 1, 1, 0, NA, NA),  # in: 403 only (401 is dated before the topic)
        (203, B, 0, 1, 0, NA, NA, NA),  # out: 302
        (301, C, 0, 1, 0, NA, NA, NA),  # its link to 302 (same medium) does not count
        (302, C, 2, 1, 2, NA, NA, NA),  # in: 102 (A), 203 (B); 301 (C) is the same medium
        (401, D, 1, 0, 1, 100, NA, NA),  # in: 201; its own outlink is dated before the topic
        (402, D, 0, 1, 0, NA, NA, NA),  # undated: in overall, with its link to 101
        (403, D, 0, 1, 0, NA, NA, NA),
        (502, E, 0, 0, 0, NA, NA, NA),  # no links, but published in the topic
    ]


def test_overall_medium_links_and_counts(result):
    snap = result["overall"]
    assert rows(snap.medium_links) == [
        (A, B, 1),  # 101->201
        (A, C, 1),  # 102->302
        (B, A, 2),  # 201->101, 202->102
        (B, C, 1),  # 203->302
        (B, D, 1),  # 201->401
        (C, B, 2),  # 301->201, 302->201
        (D, A, 1),  # 402->101
        (D, B, 1),  # 403->202
    ]
    assert rows(snap.medium_link_counts, MLC + STATS) == [
        # medium, stories, media inlinks, inlinks, outlinks, sum of story media inlinks, fb, bitly 3d, 30d
        (A, 2, 2, 3, 2, 3, 13, 5, 7),  # 101+102; linked from B and D; fb 10+3; bitly only 101's
        (B, 3, 3, 4, 4, 3, 0, 1, 2),  # 201+202+203; from A, C, D; fb: only 202's 0 is known
        (C, 2, 2, 2, 2, 2, NA, NA, NA),  # 301+302; from A and B; no statistics known: null, not 0
        (D, 3, 1, 1, 2, 1, 100, NA, NA),  # 401+402+403; from B
        (E, 1, 0, 0, 0, 0, NA, NA, NA),  # 502
    ]
    assert list(snap.medium_link_counts["name"]) == [
        "Alpha News",
        "Beta Daily",
        "Gamma Blog",
        "Delta Wire",
        "Epsilon Post",
    ]
    assert counts(snap) == (11, 10, 5, 8)
    # the sum of medium link counts is the number of story links, all between different media
    assert snap.medium_links["link_count"].sum() == len(snap.story_links)


# ----------------------------------------------------------------------------------------------- monthly


def test_january(result):
    snap = result["monthly_2026-01-01"]  # Jan 7 .. Jan 31
    assert rows(snap.story_links) == [
        (101, 201),
        (102, 302),
        (201, 101),
        (201, 401),
        (203, 302),
        (301, 201),
        (302, 201),
    ]
    assert rows(snap.story_link_counts, SLC + ["facebook_share_count"]) == [
        (101, A, 1, 1, 1, 10),  # in: 201 (402 is undated: overall only)
        (102, A, 0, 1, 0, 3),  # 202's link to it is in February
        (201, B, 3, 2, 2, NA),
        (203, B, 0, 1, 0, NA),
        (301, C, 0, 1, 0, NA),
        (302, C, 2, 1, 2, NA),
        (401, D, 1, 0, 1, 100),  # dated before the topic, but linked by 201 (B) published in January
        (502, E, 0, 0, 0, NA),
    ]
    assert rows(snap.medium_links) == [(A, B, 1), (A, C, 1), (B, A, 1), (B, C, 1), (B, D, 1), (C, B, 2)]
    assert rows(snap.medium_link_counts, MLC + STATS) == [
        (A, 2, 1, 1, 2, 1, 13, 5, 7),
        (B, 2, 2, 3, 3, 2, NA, 1, 2),  # 201 and 203 have no known fb count: null
        (C, 2, 2, 2, 2, 2, NA, NA, NA),
        (D, 1, 1, 1, 0, 1, 100, NA, NA),
        (E, 1, 0, 0, 0, 0, NA, NA, NA),
    ]
    assert counts(snap) == (8, 7, 5, 6)


def test_february(result):
    snap = result["monthly_2026-02-01"]  # Feb 1 .. Feb 10
    assert rows(snap.story_links) == [(202, 102), (403, 202)]
    assert rows(snap.story_link_counts, SLC) == [
        (102, A, 1, 0, 1),  # published in January, linked by 202 in February; its own link is January's
        (202, B, 1, 1, 1),  # 401's link (dated December) does not count
        (403, D, 0, 1, 0),  # its last-second date is still inside the topic
    ]
    assert rows(snap.medium_link_counts, MLC + ["facebook_share_count"]) == [
        (A, 1, 1, 1, 0, 1, 3),
        (B, 1, 1, 1, 1, 1, 0),
        (D, 1, 0, 0, 1, 0, NA),
    ]
    assert counts(snap) == (3, 2, 3, 2)


# ----------------------------------------------------------------------------------------------- weekly


def test_weeks(result):
    # week key: (story links, stories)
    expected = {
        "weekly_2026-01-05": ([(101, 201)], [101, 201, 502]),  # 201 only as the target of 101's link
        "weekly_2026-01-12": ([(201, 101), (201, 401), (301, 201), (302, 201)], [101, 201, 301, 302, 401]),
        "weekly_2026-01-19": ([(102, 302)], [102, 302]),  # 203 (Monday Jan 26, 00:00) is NOT in this week
        "weekly_2026-01-26": ([(203, 302)], [203, 302]),
        "weekly_2026-02-02": ([(202, 102)], [102, 202]),
        "weekly_2026-02-09": ([(403, 202)], [202, 403]),
    }
    for key, (links, stories) in expected.items():
        snap = result[key]
        assert rows(snap.story_links) == links, key
        assert snap.story_link_counts["stories_id"].tolist() == stories, key


def test_timespans_count_the_publishers_calendar_day():
    """203 is Monday Jan 26, 00:00 UTC; published at 19:00-05:00 it is Sunday Jan 25 where it appeared: its week is
    the one of Jan 19. The exports carry both (test_exports_carry_the_utc_instant_and_the_publishers_day)."""
    stories = stories_frame()
    stories["publish_utc_offset"] = [None] * len(stories)
    stories.loc[stories["stories_id"] == 203, "publish_utc_offset"] = -300
    shifted = compute_snapshot(stories, media_frame(), links_frame(), topic_timespans())
    assert shifted["weekly_2026-01-19"].story_link_counts["stories_id"].tolist() == [102, 203, 302]
    assert rows(shifted["weekly_2026-01-19"].story_links) == [(102, 302), (203, 302)]
    assert rows(shifted["weekly_2026-01-26"].story_links) == []
    overall = shifted["overall"].story_link_counts
    assert list(overall.columns) == list(
        compute_snapshot(stories_frame(), media_frame(), links_frame(), topic_timespans())[
            "overall"
        ].story_link_counts.columns
    )


def test_week_of_jan_12_counts(result):
    snap = result["weekly_2026-01-12"]
    assert rows(snap.story_link_counts, SLC) == [
        (101, A, 1, 0, 1),  # linked by 201 this week; its own link to 201 was the week before
        (201, B, 2, 2, 1),  # in: 301 and 302, both medium C: 2 inlinks, 1 media inlink
        (301, C, 0, 1, 0),
        (302, C, 0, 1, 0),  # 102 links it the week after
        (401, D, 1, 0, 1),
    ]
    assert rows(snap.medium_links) == [(B, A, 1), (B, D, 1), (C, B, 2)]
    assert rows(snap.medium_link_counts, MLC) == [
        (A, 1, 1, 1, 0, 1),
        (B, 1, 1, 2, 2, 1),
        (C, 2, 0, 0, 2, 0),
        (D, 1, 1, 1, 0, 1),
    ]
    assert counts(snap) == (5, 4, 4, 3)


# ----------------------------------------------------------------------------------------------- custom


def test_custom_timespans(result):
    launch, week = result["custom_launch-week"], result["weekly_2026-01-12"]
    # Jan 12..18 is exactly that week
    for table in ("story_links", "story_link_counts", "medium_links", "medium_link_counts"):
        pd.testing.assert_frame_equal(getattr(launch, table), getattr(week, table))
    before = result["custom_before-the-topic"]  # asked for Dec 20..Jan 9, clipped to Jan 7..Jan 9
    # 401 (Dec 15) is outside anyway; 101 (Jan 8) and 502 (Jan 9) are in; 201 as the target of 101
    assert rows(before.story_links) == [(101, 201)]
    assert rows(before.story_link_counts, SLC) == [(101, A, 0, 1, 0), (201, B, 1, 0, 1), (502, E, 0, 0, 0)]
    assert counts(before) == (3, 1, 3, 1)


def test_empty_window_gives_empty_tables_with_columns():
    spans = build_timespans("2026-01-26", "2026-02-01", periods=("weekly",))  # nothing published that week
    res = compute_snapshot(stories_frame().query("stories_id != 203"), media_frame(), links_frame(), spans)
    snap = res["weekly_2026-01-26"]
    assert counts(snap) == (0, 0, 0, 0)
    assert list(snap.story_link_counts.columns) == SLC + STATS
    assert list(snap.medium_link_counts.columns)[:3] == ["media_id", "name", "url"]


def test_a_topic_without_stories_records_its_timespans_but_writes_no_timespan_files(tmp_path):
    empty = compute_snapshot(
        stories_frame().iloc[:0], media_frame().iloc[:0], links_frame().iloc[:0], topic_timespans()
    )
    assert [counts(s) for s in empty.timespans] == [(0, 0, 0, 0)] * len(topic_timespans())
    assert all(s.empty for s in empty.timespans)
    written = write_snapshot_files(empty, tmp_path)
    assert {key for key, paths in written.items() if paths} == {"snapshot"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md",
        "datapackage.json",
        "manifest.json",
        "schemas",
        "timespans.csv",
        "timespans.parquet",
    ]
    assert [p.name for p in (tmp_path / "schemas").iterdir()] == ["timespans.json"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["format"] == "topicmap-snapshot/3"
    assert [(t["key"], t["empty"]) for t in manifest["timespans"]] == [
        (t.key, True) for t in topic_timespans()
    ]
    assert pd.read_parquet(tmp_path / "timespans.parquet")["story_count"].tolist() == [0] * len(
        topic_timespans()
    )


def test_a_sparse_topic_over_decades_writes_files_only_for_timespans_with_stories(result, tmp_path):
    """The fixture's stories in a topic declared over 2000-2026: 1,735 timespans, a handful with stories.

    Every timespan is recorded with its counts; only those with stories get files; and a timespan with stories
    counts exactly what the same calendar week or month counts in the short topic.
    """
    spans = build_timespans("2000-01-01", "2026-12-31")
    assert len(spans) == 1 + 324 + 1410
    decades = compute_snapshot(
        stories_frame(), media_frame(), links_frame(), spans, story_stats=stats_frame()
    )
    assert [s.timespan.key for s in decades.timespans] == [t.key for t in spans]
    busy = [s.timespan.key for s in decades.timespans if not s.empty]
    # stories are published in Dec 2025 (401), Jan/Feb 2026 and on Mar 1 2026 (501); none in between
    assert busy == [
        "overall",
        "monthly_2025-12-01",
        "monthly_2026-01-01",
        "monthly_2026-02-01",
        "monthly_2026-03-01",
        "weekly_2025-12-15",
        "weekly_2026-01-05",
        "weekly_2026-01-12",
        "weekly_2026-01-19",
        "weekly_2026-01-26",
        "weekly_2026-02-02",
        "weekly_2026-02-09",
        "weekly_2026-02-23",
    ]
    for snap in decades.timespans:
        if snap.empty:
            assert counts(snap) == (0, 0, 0, 0) and snap.counts.syndicated_repeat_link_count == 0
    # the same calendar weeks (wholly inside the short topic) and January count the same, table by table
    for key in ("weekly_2026-01-12", "weekly_2026-01-19", "weekly_2026-01-26", "weekly_2026-02-02"):
        for table in ("story_links", "story_link_counts", "medium_links", "medium_link_counts"):
            pd.testing.assert_frame_equal(getattr(decades[key], table), getattr(result[key], table))
    assert counts(decades["monthly_2026-01-01"]) == counts(result["monthly_2026-01-01"])
    # overall now also holds 401 (Dec 15) and its link to 202, and 501 (Mar 1) and its link to 101
    assert counts(decades["overall"]) == (12, 12, 5, 9)

    written = write_snapshot_files(decades, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir() and p.name != "schemas") == sorted(busy)
    assert all(len(written[key]) == 9 for key in busy)  # 5 Parquet + 4 CSV each
    assert sum(len(paths) for key, paths in written.items() if key != "snapshot") == 9 * len(busy)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    # + timespans and the summary tables (top words, days, top media and stories), Parquet and CSV each
    assert len(manifest["timespans"]) == len(spans)
    # README.md, datapackage.json and a Table Schema per table (6 per timespan, timespans, the summaries)
    dictionary = 2 + 6 + 1 + len(SUMMARY_SCHEMAS)
    assert len(manifest["files"]) == 9 * len(busy) + 2 + 2 * len(SUMMARY_SCHEMAS) + dictionary
    assert [t["key"] for t in manifest["timespans"] if not t["empty"]] == busy
    table = pd.read_parquet(tmp_path / "timespans.parquet")
    assert len(table) == len(spans) and int((table["story_count"] > 0).sum()) == len(busy)
    assert snapshot_problems(decades, "2000-01-01", "2026-12-31") == []


# ----------------------------------------------------------------------------------------------- syndication


def syndication_topic():
    """Copies 10 (X, Mar 3), 11 (Y, Mar 4), 12 (Z, Mar 10) of one wire story all link 20 (Source)."""
    media = pd.DataFrame(
        {"media_id": [1, 2, 3, 4, 5], "name": ["Wire", "X", "Y", "Z", "Source"], "url": list("wxyzs")}
    )
    stories = pd.DataFrame(
        {
            "stories_id": [10, 11, 12, 20, 21, 30],
            "media_id": [2, 3, 4, 5, 2, 1],
            "publish_date": pd.to_datetime(
                ["2026-03-03", "2026-03-04", "2026-03-10", "2026-03-02", "2026-03-02", "2026-03-05"], utc=True
            ),
            "url": [f"u{i}" for i in range(6)],
            "title": [f"t{i}" for i in range(6)],
        }
    )
    links = pd.DataFrame(
        {"stories_id": [10, 11, 12, 11, 10, 30], "ref_stories_id": [20, 20, 20, 21, 21, 20]}
    )  # 10->21 is X->X: same medium
    groups = pd.DataFrame({"stories_id": [10, 11, 12], "group_id": ["wire-1"] * 3})
    spans = build_timespans("2026-03-02", "2026-03-15", periods=("overall", "weekly"))
    return stories, media, links, groups, spans


def test_syndicated_copies_count_once_when_asked():
    stories, media, links, groups, spans = syndication_topic()
    plain = compute_snapshot(stories, media, links, spans, near_dup_groups=groups)
    once = compute_snapshot(stories, media, links, spans, near_dup_groups=groups, count_syndicated_once=True)

    # Without the option every copy counts; the repeats are only reported (11->20 and 12->20).
    assert rows(plain["overall"].story_links) == [(10, 20), (11, 20), (11, 21), (12, 20), (30, 20)]
    assert plain["overall"].counts.syndicated_repeat_link_count == 2
    assert rows(plain["overall"].story_link_counts.query("stories_id == 20"), SLC) == [(20, 5, 4, 0, 4)]

    # With it, the earliest copy (10, Mar 3) stands for the group; 11->21 is the only copy linking 21.
    assert rows(once["overall"].story_links) == [(10, 20), (11, 21), (30, 20)]
    assert rows(once["overall"].story_link_counts, SLC) == [
        (10, 2, 0, 1, 0),
        (11, 3, 0, 1, 0),  # still counts its link to 21
        (12, 4, 0, 0, 0),  # still a story of the timespan (its own date), but its link is a repeat
        (20, 5, 2, 0, 2),  # 10 (X) and 30 (Wire)
        (21, 2, 1, 0, 1),
        (30, 1, 0, 1, 0),
    ]
    assert rows(once["overall"].medium_links) == [(1, 5, 1), (2, 5, 1), (3, 2, 1)]

    # Per timespan: in the week of Mar 9 the copy 12 is the only one published, so its link counts there.
    assert rows(once["weekly_2026-03-02"].story_links) == [(10, 20), (11, 21), (30, 20)]
    assert once["weekly_2026-03-02"].counts.syndicated_repeat_link_count == 1
    assert rows(once["weekly_2026-03-09"].story_links) == [(12, 20)]
    assert once["weekly_2026-03-09"].counts.syndicated_repeat_link_count == 0


def test_syndication_ties_keep_the_lowest_story_id():
    stories, media, links, groups, spans = syndication_topic()
    stories.loc[stories["stories_id"] == 11, "publish_date"] = pd.Timestamp("2026-03-03", tz="UTC")
    once = compute_snapshot(stories, media, links, spans, near_dup_groups=groups, count_syndicated_once=True)
    assert (10, 20) in rows(once["overall"].story_links) and (11, 20) not in rows(once["overall"].story_links)


def test_count_syndicated_once_needs_groups():
    stories, media, links, _, spans = syndication_topic()
    with pytest.raises(ValueError, match="near_dup_groups"):
        compute_snapshot(stories, media, links, spans, count_syndicated_once=True)


# ----------------------------------------------------------------------------------------------- inputs


def test_bad_inputs_raise_clear_errors():
    spans = topic_timespans()
    stories, media, links = stories_frame(), media_frame(), links_frame()
    with pytest.raises(ValueError, match="stories_id repeats"):
        compute_snapshot(pd.concat([stories, stories.head(1)]), media, links, spans)
    with pytest.raises(ValueError, match=r"media_id\(s\) not in media"):
        compute_snapshot(stories, media[media["media_id"] != E], links, spans)
    with pytest.raises(ValueError, match="media.media_id repeats"):
        compute_snapshot(stories, pd.concat([media, media.tail(1)]), links, spans)
    with pytest.raises(ValueError, match=r"links: missing column\(s\) \['ref_stories_id'\]"):
        compute_snapshot(stories, media, links.rename(columns={"ref_stories_id": "ref"}), spans)
    with pytest.raises(ValueError, match="missing value"):
        compute_snapshot(
            stories,
            media,
            pd.concat([links, pd.DataFrame({"stories_id": [101], "ref_stories_id": [None]})]),
            spans,
        )
    with pytest.raises(ValueError, match="story_stats.stories_id repeats"):
        compute_snapshot(stories, media, links, spans, story_stats=pd.concat([stats_frame(), stats_frame()]))
    with pytest.raises(ValueError, match="publish_date is not a date/time column"):
        compute_snapshot(stories.assign(publish_date="sometime last week"), media, links, spans)
    with pytest.raises(ValueError, match="timespan keys repeat"):
        compute_snapshot(stories, media, links, spans + spans[:1])


def test_input_order_and_naive_datetimes_do_not_change_the_result(result):
    stories = stories_frame().sample(frac=1.0, random_state=3)
    stories["publish_date"] = stories["publish_date"].dt.tz_localize(None)  # naive: taken as UTC
    shuffled = compute_snapshot(
        stories,
        media_frame().iloc[::-1],
        links_frame().sample(frac=1.0, random_state=4),
        topic_timespans(),
        story_stats=stats_frame().iloc[::-1],
    )
    for mine, theirs in zip(result.timespans, shuffled.timespans, strict=True):
        for table in ("story_links", "story_link_counts", "medium_links", "medium_link_counts"):
            pd.testing.assert_frame_equal(getattr(mine, table), getattr(theirs, table))


# ----------------------------------------------------------------------------------------------- checks


def test_snapshot_problems_finds_inconsistencies(result):
    assert snapshot_problems(result, "2026-01-07", "2026-02-10") == []
    # a narrower topic than the snapshot was built for: timespans now lie outside it
    problems = snapshot_problems(result, "2026-01-10", "2026-02-10")
    assert any("overall" in p and "outside the topic" in p for p in problems)
    # a tampered medium link count no longer adds up to the story links
    res = compute_snapshot(stories_frame(), media_frame(), links_frame(), topic_timespans()[:1])
    res["overall"].medium_links.loc[0, "link_count"] += 1
    assert snapshot_problems(res, "2026-01-07", "2026-02-10") == [
        "overall: medium link counts sum to 11, but there are 10 story links"
    ]


# ----------------------------------------------------------------------------------------------- files


def test_files_are_byte_identical_on_rewrite_and_read_back(result, written, tmp_path):
    one, first = written
    again = compute_snapshot(  # recomputed from reordered inputs, written elsewhere
        stories_frame().iloc[::-1],
        media_frame(),
        links_frame().iloc[::-1],
        topic_timespans(),
        story_stats=stats_frame(),
    )
    second = write_snapshot_files(again, tmp_path / "two")
    assert first.keys() == second.keys()
    assert len(first) == len(result.timespans) + 1  # every timespan plus "snapshot"
    for key in first:
        assert [p.name for p in first[key]] == [p.name for p in second[key]]
        for a, b in zip(first[key], second[key], strict=True):
            assert a.read_bytes() == b.read_bytes(), f"{key}/{a.name} differs"
    assert not [*tmp_path.rglob(".*tmp*"), *one.rglob(".*tmp*")]  # no temporary files left behind

    slc = pd.read_parquet(one / "overall" / "story_link_counts.parquet", dtype_backend="numpy_nullable")
    counts = result["overall"].story_link_counts
    assert rows(slc, list(counts.columns)) == rows(counts)
    assert list(slc.columns) == [*counts.columns, *STORY_DATE_COLUMNS]
    spans = pd.read_parquet(one / "timespans.parquet")
    assert spans["key"].tolist() == [t.key for t in topic_timespans()]
    assert spans.loc[spans["key"] == "overall", "story_count"].item() == 11


def test_csv_lists_use_media_cloud_column_names(written):
    top, files = written
    folder = top / "overall"
    stories = pd.read_csv(folder / "stories.csv", keep_default_na=False, na_values=[""])
    media = pd.read_csv(folder / "media.csv")
    assert list(stories.columns) == list(STORY_CSV_COLUMNS)
    assert list(media.columns) == list(MEDIA_CSV_COLUMNS)
    # listed by media inlinks, then inlinks, most first (ties by id), as Media Cloud's web tools do
    # 201: 2 media inlinks, 3 inlinks; 101 and 302: 2 and 2; 102: 1 and 1
    assert stories["stories_id"].tolist()[:4] == [201, 101, 302, 102]
    first = stories.iloc[0]
    assert tuple(first[["publish_date_utc", "publish_day_local", "title", "media_name"]]) == (
        "2026-01-13T12:00:00Z",
        "2026-01-13",
        "Story 201",
        "Beta Daily",
    )
    undated = stories.loc[stories["stories_id"] == 402, list(STORY_DATE_COLUMNS)]
    assert undated.isna().all(axis=None)  # empty fields
    assert media["media_id"].tolist() == [B, A, C, D, E]  # 3, 2, 2 (inlinks 3 > 2), 1, 0 media inlinks
    assert pd.isna(media.loc[media["media_id"] == C, "facebook_share_count"].item())
    assert (folder / "story_links.csv").read_text().splitlines()[:2] == [
        "source_stories_id,ref_stories_id",
        "101,201",
    ]
    assert {p.name for p in files["snapshot"] if p.parent.name != "schemas"} == {
        "manifest.json",
        "datapackage.json",
        "README.md",
        *(f"{name}.{kind}" for name in ("timespans", *SUMMARY_SCHEMAS) for kind in ("parquet", "csv")),
    }


def test_exports_carry_the_utc_instant_and_the_publishers_day(tmp_path):
    """203 was published on Sunday Jan 25 at 19:00-05:00, which is Monday Jan 26 00:00 UTC: the exports say
    both, each named for what it is, in the CSV and in the Parquet."""
    stories = stories_frame()
    stories["publish_utc_offset"] = [None] * len(stories)
    stories.loc[stories["stories_id"] == 203, "publish_utc_offset"] = -300
    shifted = compute_snapshot(stories, media_frame(), links_frame(), topic_timespans())
    write_snapshot_files(shifted, tmp_path)
    folder = tmp_path / "weekly_2026-01-19"  # the timespan of the publisher's day
    listed = pd.read_csv(folder / "stories.csv", dtype=str).set_index("stories_id")
    assert tuple(listed.loc["203", list(STORY_DATE_COLUMNS)]) == ("2026-01-26T00:00:00Z", "2026-01-25")
    # no offset known: the UTC day, as the timespans count it
    assert tuple(listed.loc["102", list(STORY_DATE_COLUMNS)]) == ("2026-01-20T09:00:00Z", "2026-01-20")
    table = pd.read_parquet(folder / "story_link_counts.parquet").set_index("stories_id")
    assert table.loc[203, "publish_date_utc"] == pd.Timestamp("2026-01-26 00:00", tz="UTC")
    assert table.loc[203, "publish_day_local"] == date(2026, 1, 25)


def test_counts_reconcile_and_the_data_package_validates(written):
    """Every timespan's story_count is its published, linked and undated stories; stories_per_day sums to the
    published ones; each stories table says which story is which; datapackage.json validates."""
    folder, _ = written
    spans = check_snapshot_folder(folder)
    overall = spans.set_index("key").loc["overall"]
    # 402 is undated, 401 (Dec 15) is in through a link
    assert (
        overall["published_story_count"],
        overall["linked_story_count"],
        overall["undated_story_count"],
    ) == (
        9,
        1,
        1,
    )
    stories = pd.read_parquet(folder / "overall" / "stories.parquet").set_index("stories_id")
    assert stories.loc[[401, 402, 201], "in_timespan"].tolist() == ["linked", "undated", "published"]
    assert stories.loc[201, ["title", "url", "media_name"]].tolist()[0] == "Story 201"


@pytest.mark.parametrize("seed", [3, 11])
def test_counts_reconcile_on_generated_topics(seed, tmp_path):
    """A random topic with undated stories, stories dated outside it and a query focus: every timespan of the
    topic and of the focus reconciles (check_snapshot_folder)."""
    rng = random.Random(seed)
    n = 300
    ids = rng.sample(range(1, 5000), n)
    days = [None, "2025-12-20 10:00:00", "2026-03-03 10:00:00"] + [
        f"2026-{m:02d}-{d:02d} {h:02d}:30:00" for m in (1, 2) for d in range(1, 29) for h in (1, 12, 23)
    ]
    stories = pd.DataFrame(
        {
            "stories_id": ids,
            "media_id": [rng.randint(1, 9) for _ in ids],
            "publish_date": pd.to_datetime([rng.choice(days) for _ in ids], utc=True),
            "publish_utc_offset": [rng.choice([None, 0, -300, 540]) for _ in ids],
            "url": [f"https://example.org/{i}" for i in ids],
            "title": [rng.choice(["Solar farm", "Wind power", "Flood"]) + f" {i}" for i in ids],
            "text": ["story text"] * n,
            "language": [rng.choice(["en", "fr", None]) for _ in ids],
            "date_method": [rng.choice(["url", "json-ld datePublished", None]) for _ in ids],
        }
    )
    # as extraction records them: a day only has no zone; stories stored before it was recorded know neither
    stories["time_known"] = [rng.choice([True, False, None]) for _ in ids]
    stories["zone_known"] = [
        rng.choice([True, False]) if t else (None if t is None else False) for t in stories["time_known"]
    ]
    stories.loc[:9, "publish_date"] = pd.NaT  # undated, and dated outside the topic
    stories.loc[10:14, "publish_date"] = pd.Timestamp("2026-03-05 12:00", tz="UTC")
    media = pd.DataFrame(
        {"media_id": range(1, 10), "name": [f"m{i}" for i in range(1, 10)], "url": ["u"] * 9}
    )
    links = pd.DataFrame(
        {
            "stories_id": [rng.choice(ids) for _ in range(4 * n)],
            "ref_stories_id": [rng.choice(ids) for _ in range(4 * n)],
        }
    )
    spans = build_timespans("2026-01-01", "2026-02-28", custom=[("mid", "2026-01-10", "2026-02-20")])
    focus = Focus("Subtopics", "Solar", QuerySelection("solar"))
    result = compute_snapshot(stories, media, links, spans, foci=[focus], word_sample=0)
    write_snapshot_files(result, tmp_path)
    table = check_snapshot_folder(tmp_path)
    assert set(table["focus"].dropna()) == {"subtopics/solar"}
    for part in ("published_story_count", "linked_story_count", "undated_story_count"):
        assert table[part].sum() > 0, part
    listed = pd.read_parquet(tmp_path / "overall" / "stories.parquet").set_index("stories_id")
    given = stories.set_index("stories_id")
    assert listed["language"].equals(given.loc[listed.index, "language"])
    assert listed["date_method"].equals(given.loc[listed.index, "date_method"])
    # a page that gave a day only has no instant, only its day; every dated story says which day it is
    dated = listed[listed["publish_day_local"].notna()]
    day_only = dated[dated["time_known"].eq(False)]
    assert len(day_only) and day_only["publish_date_utc"].isna().all()
    assert (day_only["day_basis"] == "page day").all()
    assert dated.loc[dated["time_known"].eq(True), "publish_date_utc"].notna().all()
    offsets = given.loc[dated.index, "publish_utc_offset"].fillna(0)
    stated = dated["time_known"].eq(True) & dated["zone_known"].eq(True)
    assert set(dated.loc[stated & (offsets != 0), "day_basis"]) == {"page offset"}
    assert set(dated.loc[stated & (offsets == 0), "day_basis"]) == {"utc stated"}
    assert set(dated.loc[dated["time_known"].isna(), "day_basis"]) == {"unknown"}
    assert listed.loc[listed["publish_day_local"].isna(), "day_basis"].isna().all()


def test_parquet_only_when_csv_is_off(result, tmp_path):
    written = write_snapshot_files(result, tmp_path, csv=False)
    assert {p.suffix for p in written["overall"]} == {".parquet"}


# ----------------------------------------------------------------------------------------------- reference


def reference_snapshot(stories, media, links, span: Timespan, groups=None, once=False):
    """Straightforward per-story Python (sets and dicts) of the same rules, to cross-check the vectorized code."""
    lo, hi = pd.Timestamp(span.start_date, tz="UTC"), pd.Timestamp(span.end_date, tz="UTC")
    medium = dict(zip(stories["stories_id"], stories["media_id"], strict=True))
    when = dict(zip(stories["stories_id"], stories["publish_date"], strict=True))

    def in_window(sid):
        d = when[sid]
        if pd.isna(d):
            return span.period == "overall"
        return lo <= d < hi

    pairs = sorted(
        {
            (s, r)
            for s, r in zip(links["stories_id"], links["ref_stories_id"], strict=True)
            if s in medium and r in medium and medium[s] != medium[r]
        }
    )
    chosen = [(s, r) for s, r in pairs if in_window(s)]
    if once:
        group = dict(zip(groups["stories_id"], groups["group_id"], strict=True))
        best = {}
        for s, r in chosen:
            key = (group.get(s, ("solo", s)), r)
            rank = (pd.isna(when[s]), when[s] if not pd.isna(when[s]) else None, s)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, (s, r))
        chosen = sorted(v[1] for v in best.values())
    period = sorted({s for s in medium if in_window(s)} | {r for _, r in chosen})
    out = {}
    for sid in period:
        sources = {s for s, r in chosen if r == sid}
        out[sid] = (
            sid,
            medium[sid],
            len(sources),
            len({r for s, r in chosen if s == sid}),
            len({medium[s] for s in sources}),
        )
    mlinks = {}
    for s, r in chosen:
        mlinks[(medium[s], medium[r])] = mlinks.get((medium[s], medium[r]), 0) + 1
    return chosen, [out[s] for s in period], sorted((a, b, n) for (a, b), n in mlinks.items())


@pytest.mark.parametrize("seed", range(8))
def test_random_topics_match_the_reference(seed):
    rng = random.Random(seed)
    n_media, n_stories = rng.randint(2, 6), rng.randint(5, 40)
    media = pd.DataFrame(
        {"media_id": range(1, n_media + 1), "name": [f"m{i}" for i in range(n_media)], "url": ["u"] * n_media}
    )
    days = (
        [None]
        + [f"2026-01-{d:02d} {h:02d}:00:00" for d in range(1, 32) for h in (0, 13)]
        + ["2025-12-30 00:00:00", "2026-02-02 00:00:00"]
    )
    ids = rng.sample(range(1, 500), n_stories)
    stories = pd.DataFrame(
        {
            "stories_id": ids,
            "media_id": [rng.randint(1, n_media) for _ in ids],
            "publish_date": pd.to_datetime([rng.choice(days) for _ in ids], utc=True),
            "url": ["u"] * n_stories,
            "title": ["t"] * n_stories,
        }
    )
    pool = ids + [999_999]
    links = pd.DataFrame(
        {
            "stories_id": [rng.choice(pool) for _ in range(3 * n_stories)],
            "ref_stories_id": [rng.choice(pool) for _ in range(3 * n_stories)],
        }
    )
    groups = pd.DataFrame(
        {"stories_id": ids[: n_stories // 2], "group_id": [rng.randint(0, 3) for _ in ids[: n_stories // 2]]}
    )
    spans = build_timespans("2026-01-03", "2026-01-28", custom=[("mid", "2026-01-10", "2026-01-20")])
    for once in (False, True):
        res = compute_snapshot(
            stories, media, links, spans, near_dup_groups=groups, count_syndicated_once=once
        )
        for snap in res.timespans:
            chosen, slc, mlinks = reference_snapshot(stories, media, links, snap.timespan, groups, once)
            assert rows(snap.story_links) == chosen, snap.timespan.key
            assert rows(snap.story_link_counts, SLC) == slc, snap.timespan.key
            assert rows(snap.medium_links) == mlinks, snap.timespan.key
        assert snapshot_problems(res, "2026-01-03", "2026-01-28") == []
