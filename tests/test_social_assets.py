"""Social metrics: the store reads/writes (SQLite and PostgreSQL), and the click_totals / story_statistics assets
driving the Bit.ly and Facebook clients over real HTTP against the loopback stand-in."""

from __future__ import annotations

import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select, update

from assets.social import click_totals, clicks_30d_not_below_3d, publication_days, story_statistics
from tests.social_fixtures import (
    TOPIC,
    add_plain_story,
    add_topic_stories,
    at,
    click_instance,
    click_table,
    dataset_for,
    social_resources,
    story_url,
    week_of_stories,
)
from topicmap.demo.standins import StandinDataset, StandinFaults, StandinServer, run_standin_server
from topicmap.social import refetch
from topicmap.social.bitly import recompute_from_raw
from topicmap.social.clicks import click_window, clicks_until
from topicmap.social.facebook import EngagementResult
from topicmap.social.rawstore import RawResponseStore
from topicmap.social.store import (
    ClickStory,
    canonical_link,
    click_rows,
    click_stories,
    clicks_30d_below_3d,
    days_lacking_stage,
    statistics_summary,
    stories_needing_statistics,
    topic_story_days,
    topic_story_timestamps,
    upsert_click_totals,
    upsert_story_statistics,
    write_click_parquet,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, utc

NOW = at(date(2024, 3, 1), 12)
JAN10 = date(2024, 1, 10)


# ---------------------------------------------------------------------------------------------- store (both DBs)
def test_stories_are_placed_on_their_publication_day_with_the_collect_date_fallback(
    store: TopicStore,
) -> None:
    collected = at(date(2024, 1, 12), 8)
    page = b'<html><head><link rel="canonical" href="/canonical/late-night"></head><body>x</body></html>'
    stories = [
        NewStory(story_url(JAN10, 0), "late night", "x", at(JAN10, 23, 30), html=page),
        NewStory(story_url(JAN10, 1), "no date", "x", None, collect_date=at(date(2024, 1, 11), 2)),
        NewStory(
            story_url(JAN10, 2), "too old", "x", datetime(2007, 5, 1, tzinfo=UTC), collect_date=collected
        ),
        NewStory(
            story_url(JAN10, 3), "future", "x", datetime(2030, 1, 1, tzinfo=UTC), collect_date=collected
        ),
    ]
    ids = add_topic_stories(
        store,
        stories,
        redirects={stories[0].url: "https://mirror.example.org/2024/01/10/late-night"},
        extra_urls={stories[0].url: "http://news.example.com/2024/01/10/climate-story-0"},
    )
    add_plain_story(store, "https://elsewhere.example.net/2024/01/10/not-in-a-topic", at(JAN10, 9))

    found = {story.stories_id: story for story in click_stories(store, JAN10, date(2024, 1, 12), NOW)}
    assert {sid: found[sid].day for sid in found} == {
        ids[stories[0].url]: JAN10,
        ids[stories[1].url]: date(2024, 1, 11),
        ids[stories[2].url]: date(2024, 1, 12),
        ids[stories[3].url]: date(2024, 1, 12),
    }
    variants = found[ids[stories[0].url]].url_variants
    assert variants[0] == stories[0].url
    assert "https://mirror.example.org/2024/01/10/late-night" in variants  # redirect target
    assert "https://news.example.com/canonical/late-night" in variants  # <link rel=canonical>, made absolute
    assert "http://news.example.com/2024/01/10/climate-story-0" in variants  # a story_urls row
    assert [s.day for s in click_stories(store, JAN10, JAN10, NOW)] == [JAN10]

    assert topic_story_days(store, NOW) == [JAN10, date(2024, 1, 11), date(2024, 1, 12)]
    lacking = days_lacking_stage(store, "3d", JAN10, date(2024, 1, 31), NOW, limit=10)
    assert [(c.day, c.stories) for c in lacking] == [
        (JAN10, 1),
        (date(2024, 1, 11), 1),
        (date(2024, 1, 12), 2),
    ]
    assert lacking[-1].max_stories_id == max(ids[stories[2].url], ids[stories[3].url])
    with pytest.raises(ValueError, match="day range is empty"):
        click_stories(store, JAN10, JAN10 - timedelta(days=1), NOW)


def test_each_window_keeps_the_largest_figure_with_the_time_it_was_fetched(store: TopicStore) -> None:
    stories = week_of_stories(JAN10, 1, 3)
    ids = list(add_topic_stories(store, stories).values())
    fetched_3d, fetched_30d = at(date(2024, 1, 14), 1), at(date(2024, 2, 10), 1)

    def row(sid: int, clicks_3d: int, clicks_30d: int | None, fetched: datetime, bitlinks: int = 1) -> dict:
        return {
            "stories_id": sid,
            "publish_day": JAN10,
            "bitlinks_found": bitlinks,
            "clicks_3d": clicks_3d,
            "fetched_3d_at": fetched,
            "clicks_30d": clicks_30d,
            "fetched_30d_at": fetched if clicks_30d is not None else None,
        }

    assert (
        upsert_click_totals(
            store, "3d", [row(ids[0], 40, None, fetched_3d), row(ids[1], 900, None, fetched_3d)]
        )
        == []
    )
    assert [c.stories for c in days_lacking_stage(store, "3d", JAN10, JAN10, NOW, 5)] == [1]
    kept = upsert_click_totals(store, "30d", [row(sid, 55, 70, fetched_30d) for sid in ids])
    table = click_table(store)
    # the 30-day fetch saw the first three days complete (55 > 40): the 3-day figure rises, with its fetch time
    assert (table[ids[0]]["clicks_3d"], table[ids[0]]["clicks_30d"]) == (55, 70)
    assert utc(table[ids[0]]["fetched_3d_at"]) == fetched_30d
    # a 3-day figure above the new one (Bit.ly revised a day down) is kept with its own time, and reported
    assert (table[ids[1]]["clicks_3d"], utc(table[ids[1]]["fetched_3d_at"])) == (900, fetched_3d)
    assert [(k["stories_id"], k["window"], k["stored"], k["fetched_now"]) for k in kept] == [
        (ids[1], "3d", 900, 55)
    ]
    assert table[ids[2]]["clicks_3d"] == 55 and utc(table[ids[2]]["fetched_3d_at"]) == fetched_30d  # filled
    assert days_lacking_stage(store, "30d", JAN10, JAN10, NOW, 5) == []
    count, flagged = clicks_30d_below_3d(store)
    assert count == 1 and flagged[0]["stories_id"] == ids[1] and flagged[0]["clicks_3d"] == 900
    # a re-run that found fewer clicks or bitlinks lowers nothing: not the figures, not their times or bitlinks
    upsert_click_totals(store, "3d", [row(ids[1], 60, None, fetched_30d)])
    upsert_click_totals(store, "30d", [row(ids[0], 0, 0, at(date(2024, 3, 1)), bitlinks=0)])
    after = click_table(store)
    assert after[ids[1]]["clicks_3d"] == 900 and after[ids[0]] == table[ids[0]]
    # a higher figure replaces the stored one, with its time and the bitlinks behind it
    upsert_click_totals(store, "30d", [row(ids[0], 55, 95, at(date(2024, 3, 2)), bitlinks=3)])
    raised = click_table(store)[ids[0]]
    assert (raised["clicks_30d"], utc(raised["fetched_30d_at"]), raised["bitlinks_found"]) == (
        95,
        at(date(2024, 3, 2)),
        3,
    )
    assert utc(raised["fetched_3d_at"]) == fetched_30d  # a tie keeps the stored 3-day figure's time
    rows = click_rows(store, JAN10, JAN10)
    assert [r["stories_id"] for r in rows] == sorted(ids) and rows[0]["url"] == stories[0].url


def test_facebook_statistics_selection_upsert_and_summary(store: TopicStore) -> None:
    urls = [story_url(JAN10, i) for i in range(4)] + ["https://www.google.com/search?q=climate"]
    ids = add_topic_stories(store, [NewStory(u, "t", "x", at(JAN10, 9)) for u in urls])
    add_plain_story(store, "https://elsewhere.example.net/2024/01/10/not-in-a-topic", at(JAN10, 9))
    topics_id = store.topic_row(TOPIC.name)["topics_id"]
    old, recent = NOW - timedelta(days=30), NOW - timedelta(days=1)

    def result(url: str, counts: tuple | None, error: str | None, when: datetime) -> EngagementResult:
        share, comment, reaction = counts or (None, None, None)
        return EngagementResult(url, share, comment, reaction, error, when)

    upsert_story_statistics(
        store,
        [
            (ids[urls[0]], result(urls[0], (5, 2, 9), None, recent)),
            (ids[urls[1]], result(urls[1], None, "no statistics returned for URL", old)),
            (ids[urls[2]], result(urls[2], None, "no statistics returned for URL", recent)),
            (ids[urls[4]], result(urls[4], None, "skipped: Google search URLs never return engagement", old)),
        ],
    )
    todo = stories_needing_statistics(store, topics_id, retry_errors_before=NOW - timedelta(days=7))
    # never measured (3) and the old soft failure (1); not the recent one, not the URL that can never work
    assert [row["stories_id"] for row in todo] == sorted([ids[urls[1]], ids[urls[3]]])
    upsert_story_statistics(store, [(ids[urls[1]], result(urls[1], (1, 0, 2), None, NOW))])
    summary = statistics_summary(store, topics_id)
    assert summary == {
        "stories_with_row": 4,
        "stories_with_error": 2,
        "share_count": 6,
        "comment_count": 2,
        "reaction_count": 11,
        "topic_stories": 5,
    }


def test_parquet_is_written_atomically_and_deterministically(tmp_path: Path) -> None:
    rows = [
        {
            "publish_day": JAN10,
            "stories_id": sid,
            "url": f"https://x.example.com/{sid}",
            "bitlinks_found": 1,
            "clicks_3d": 10 * sid,
            "clicks_30d": None if sid == 2 else 20 * sid,
            "fetched_3d_at": at(JAN10, 5),
            "fetched_30d_at": None,
        }
        for sid in (3, 1, 2)
    ]
    first = write_click_parquet(rows, tmp_path / "a" / "2024-01-10.parquet").read_bytes()
    second = write_click_parquet(list(reversed(rows)), tmp_path / "b" / "2024-01-10.parquet").read_bytes()
    assert first == second
    table = pq.read_table(tmp_path / "a" / "2024-01-10.parquet")
    assert table.column("stories_id").to_pylist() == [1, 2, 3]
    assert table.column("clicks_30d").to_pylist() == [20, None, 60]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["2024-01-10.parquet"]  # no temp file left


def test_canonical_link_is_found_made_absolute_and_never_raises() -> None:
    assert canonical_link(
        b'<link rel="Canonical" href="https://a.example.com/x">', "https://b.example.com/"
    ) == ("https://a.example.com/x")
    assert canonical_link(b'<link rel="stylesheet" href="/s.css">', "https://b.example.com/") is None
    assert (
        canonical_link(b'<link rel="canonical" href="javascript:void(0)">', "https://b.example.com/") is None
    )
    assert canonical_link(b"", "https://b.example.com/") is None
    assert canonical_link(b"\x00\x01", "https://b.example.com/") is None


# ---------------------------------------------------------------------------------------------- assets end to end
@pytest.fixture
def sqlite_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_store_url: str
) -> tuple[TopicStore, str]:
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    url = sqlite_store_url
    topic_store = TopicStore.open(url)
    yield topic_store, url
    topic_store.dispose()


def _freeze(monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    monkeypatch.setattr(refetch, "current_time", lambda: when)


def _expected(dataset, story: NewStory) -> tuple[int, int]:  # noqa: ANN001
    ts = story.publish_date
    window = click_window("30d", ts, NOW)
    daily = dataset.stories[story.url].expected_daily(*window)
    return clicks_until(daily, ts + timedelta(days=3)), clicks_until(daily, ts + timedelta(days=30))


def test_a_week_backfill_runs_in_one_run_and_writes_one_row_per_story(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, db_url = sqlite_store
    week = week_of_stories(JAN10, 7, 2)
    outside = week_of_stories(date(2024, 1, 17), 1, 1)
    counts = {story.url: (1, 2, 3, 0)[i % 4] for i, story in enumerate(week + outside)}
    dataset = dataset_for(week + outside, bitlink_counts=counts)
    # the 2nd bitlink answers to the other scheme (a story_urls row), the 3rd to a tracking variant (a redirect)
    other_scheme = {st.url: "http://" + st.url.removeprefix("https://") for st in week if counts[st.url] >= 2}
    tracking = {st.url: st.url + "?utm_source=standin" for st in week if counts[st.url] == 3}
    ids = add_topic_stories(store, week + outside, redirects=tracking, extra_urls=other_scheme)
    _freeze(monkeypatch, NOW)
    instance = click_instance()
    with run_standin_server(dataset, StandinFaults(rate_limit_every=7)) as server:
        result = dg.materialize(
            [click_totals, clicks_30d_not_below_3d],
            instance=instance,
            resources=social_resources(server, db_url, tmp_path),
            tags={
                refetch.RANGE_START_TAG: "2024-01-10",
                refetch.RANGE_END_TAG: "2024-01-16",
            },
        )
        assert any(r.outcome == "rate_limited" for r in server.request_log)  # retried, not failed
    materializations = result.asset_materializations_for_node("click_totals")
    assert sorted(m.partition for m in materializations) == [f"2024-01-{d}" for d in range(10, 17)]
    meta = materializations[0].metadata
    table = click_table(store)
    assert set(table) == {ids[st.url] for st in week}  # one row per story of the week, nothing outside it
    expected = {ids[st.url]: _expected(dataset, st) for st in week}
    assert {sid: (row["clicks_3d"], row["clicks_30d"]) for sid, row in table.items()} == expected
    assert {table[ids[st.url]]["bitlinks_found"] for st in week if counts[st.url] == 3} == {3}
    # each day's materialization carries that day's own figures (two stories a day), the run's range beside them
    by_day = {m.partition: m.metadata for m in materializations}
    assert {day: m["dagster/row_count"].value for day, m in by_day.items()} == dict.fromkeys(by_day, 2)
    assert meta["stories_fetched_30d"].value == 2 and meta["run_days"].value == "2024-01-10..2024-01-16"
    for day, day_meta in by_day.items():
        of_day = [st for st in week if st.publish_date.date().isoformat() == day]
        assert day_meta["clicks_30d_total"].value == sum(expected[ids[st.url]][1] for st in of_day)
        assert day_meta["bitlinks_found"].value == sum(counts[st.url] for st in of_day)
    assert (
        sum(m["clicks_30d_total"].value for m in by_day.values()) == sum(v[1] for v in expected.values()) > 0
    )
    assert result.get_asset_check_evaluations()[0].passed

    exports = tmp_path / "home" / "exports" / "click_totals"
    assert sorted(p.name for p in exports.iterdir()) == [f"2024-01-{d}.parquet" for d in range(10, 17)]
    day_table = pq.read_table(exports / "2024-01-12.parquet").to_pylist()
    assert [(r["stories_id"], r["clicks_30d"]) for r in day_table] == sorted(
        (ids[st.url], expected[ids[st.url]][1]) for st in week if st.publish_date.date() == date(2024, 1, 12)
    )
    # the raw answers are kept, so a story's totals are recomputed without refetching
    story = week[2]
    ts = story.publish_date
    variants = list(
        next(c for c in click_stories(store, ts.date(), ts.date(), NOW) if c.url == story.url).url_variants
    )
    again = recompute_from_raw(RawResponseStore(tmp_path / "raw"), variants, click_window("30d", ts, NOW))
    assert clicks_until(again.daily, ts + timedelta(days=30)) == expected[ids[story.url]][1]


def test_3d_then_30d_runs_keep_both_figures_and_the_check_flags_30d_below_3d(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, db_url = sqlite_store
    day = week_of_stories(JAN10, 1, 3)
    dataset = dataset_for(day, bitlink_counts={st.url: 1 for st in day})
    ids = add_topic_stories(store, day)
    instance = click_instance()
    with run_standin_server(dataset) as server:
        resources = social_resources(server, db_url, tmp_path)

        def run(stage: str) -> dg.ExecuteInProcessResult:
            return dg.materialize(
                [click_totals, clicks_30d_not_below_3d],
                instance=instance,
                resources=resources,
                partition_key=JAN10.isoformat(),
                run_config=dg.RunConfig(ops={"click_totals": {"config": {"stage": stage}}}),
            )

        _freeze(monkeypatch, at(date(2024, 1, 14), 0, 5))
        early = run("30d")  # not due yet: nothing is fetched or written
        assert (
            early.asset_materializations_for_node("click_totals")[0].metadata["stories_not_yet_due"].value
            == 3
        )
        assert click_table(store) == {}
        run("3d")
        after_3d = click_table(store)
        assert all(r["clicks_3d"] is not None and r["clicks_30d"] is None for r in after_3d.values())
        planted = ids[day[1].url]
        with store.engine.begin() as conn:  # a 3-day figure Bit.ly later revised down
            conn.execute(
                update(s.bitly_clicks_total)
                .where(s.bitly_clicks_total.c.stories_id == planted)
                .values(clicks_3d=10**9)
            )
        _freeze(monkeypatch, at(date(2024, 2, 10), 1))
        result = run("30d")
    table = click_table(store)
    for story in day:
        sid = ids[story.url]
        expected_3d, expected_30d = _expected(dataset, story)
        assert table[sid]["clicks_30d"] == expected_30d
        assert table[sid]["clicks_3d"] == (10**9 if sid == planted else expected_3d)  # never overwritten
        assert table[sid]["fetched_3d_at"] == after_3d[sid]["fetched_3d_at"]
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["stories_flagged"].value == 1
    assert check.metadata["flagged_stories_ids"].value == [planted]


def test_story_statistics_records_counts_and_soft_failures_and_stops_on_refused_credentials(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, db_url = sqlite_store
    stories = week_of_stories(JAN10, 2, 4)
    bad_param = stories[1].url
    never = "https://www.google.com/search?q=climate+story"
    dataset = dataset_for(stories)
    ids = add_topic_stories(store, [*stories, NewStory(never, "search", "x", at(JAN10, 9))])
    _freeze(monkeypatch, NOW)
    instance = click_instance()
    instance.add_dynamic_partitions("topics", [TOPIC.name])
    faults = StandinFaults(facebook_url_errors={bad_param: 100}, rate_limit_every=5)
    with run_standin_server(dataset, faults) as server:
        result = dg.materialize(
            [story_statistics],
            instance=instance,
            resources=social_resources(server, db_url, tmp_path),
            partition_key=TOPIC.name,
        )
        requested = {r.params["id"][0] for r in server.requests_for("facebook")}
        assert any(r.outcome == "rate_limited" for r in server.requests_for("facebook"))  # waited and retried
        meta = result.asset_materializations_for_node("story_statistics")[0].metadata
        with store.engine.connect() as conn:
            rows = {r.stories_id: r for r in conn.execute(select(s.story_statistics))}
        assert len(rows) == 9 and meta["dagster/row_count"].value == 9
        assert never not in requested  # known never to work: skipped without asking
        assert "skipped: Google search" in rows[ids[never]].facebook_api_error
        assert "error 100" in rows[ids[bad_param]].facebook_api_error
        for story in stories:
            counts = dataset.stories[story.url].facebook
            row = rows[ids[story.url]]
            if story.url == bad_param:
                continue
            if counts is None:
                assert row.facebook_api_error == "no statistics returned for URL"
            else:
                share, comment, reaction = counts
                assert (
                    row.facebook_share_count,
                    row.facebook_comment_count,
                    row.facebook_reaction_count,
                ) == (
                    share,
                    comment,
                    reaction,
                )
                assert row.facebook_api_error is None and row.facebook_api_collect_date is not None
        measured = [dataset.stories[st.url].facebook for st in stories if st.url != bad_param]
        assert meta["facebook_share_count_total"].value == sum(c[0] for c in measured if c)
        assert meta["soft_failures_this_run"].value == meta["stories_with_error"].value >= 2
        assert "skipped: Google search" in meta["soft_failures_by_kind"].value

        # a second run asks only about nothing: every story has statistics or a recent soft failure
        server.clear_log()
        again = dg.materialize(
            [story_statistics],
            instance=instance,
            resources=social_resources(server, db_url, tmp_path),
            partition_key=TOPIC.name,
        )
        assert (
            again.asset_materializations_for_node("story_statistics")[0]
            .metadata["stories_measured_this_run"]
            .value
            == 0
        )
        assert server.requests_for("facebook") == []

        # refused credentials stop the run with a clear message that does not contain the secret
        with store.engine.begin() as conn:
            conn.execute(s.story_statistics.delete())
        refused = dg.materialize(
            [story_statistics],
            instance=instance,
            resources=social_resources(server, db_url, tmp_path, app_secret="wrong-secret-123"),
            partition_key=TOPIC.name,
            raise_on_error=False,
        )
    assert not refused.success
    failure = next(e for e in refused.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.step_failure_data.error.to_string() if failure.step_failure_data.error else ""
    text = f"{failure.step_failure_data.user_failure_data.description}\n{message}"
    assert "refused the configured app credentials" in text and "wrong-secret-123" not in text


def test_click_totals_stop_clearly_on_a_refused_token(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, db_url = sqlite_store
    day = week_of_stories(JAN10, 1, 1)
    add_topic_stories(store, day)
    _freeze(monkeypatch, NOW)
    with run_standin_server(dataset_for(day)) as server:
        resources = social_resources(server, db_url, tmp_path, bitly_token="not-the-token-456")
        result = dg.materialize(
            [click_totals],
            instance=click_instance(),
            resources=resources,
            partition_key=JAN10.isoformat(),
            raise_on_error=False,
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    description = failure.step_failure_data.user_failure_data.description
    assert "refused the access token" in description and "not-the-token-456" not in description
    assert click_table(store) == {}


def test_one_unmeasurable_story_fails_the_run_after_the_others_are_written(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, db_url = sqlite_store
    day = week_of_stories(JAN10, 1, 3)
    dataset = dataset_for(day, bitlink_counts={st.url: 1 for st in day})
    broken = dataset.stories[day[1].url]
    broken.clicks.clear()  # Bit.ly knows the bitlink but answers NOT_FOUND for its clicks
    ids = add_topic_stories(store, day)
    _freeze(monkeypatch, NOW)
    with run_standin_server(dataset) as server:
        result = dg.materialize(
            [click_totals],
            instance=click_instance(),
            resources=social_resources(server, db_url, tmp_path),
            partition_key=JAN10.isoformat(),
            raise_on_error=False,
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "1 of 3 stories could not be measured" in failure.step_failure_data.user_failure_data.description
    assert set(click_table(store)) == {ids[day[0].url], ids[day[2].url]}  # the others are kept


def test_social_definitions_load_without_deprecations() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from orchestration.definitions import defs

        dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"click_totals", "story_statistics"} <= keys
    assert click_totals.backfill_policy == dg.BackfillPolicy.multi_run(max_partitions_per_run=31)
    # the publication days are the set the topic registry keeps (assets.partitions)
    assert publication_days.name == "click_days" and click_totals.partitions_def == publication_days
    assert story_statistics.partitions_def.name == "topics"
    assert dg.AssetKey("relevant_stories") in story_statistics.asset_deps[story_statistics.key]
    sensors = {defs.resolve_sensor_def(n).name for n in ("click_refetch_3d", "click_refetch_30d")}
    assert sensors == {"click_refetch_3d", "click_refetch_30d"}


def test_click_story_window_is_fixed_once_due() -> None:
    story = ClickStory(1, "https://x.example.com/a", at(JAN10, 15), JAN10, ("https://x.example.com/a",))
    first = click_window("30d", story.story_ts, NOW)
    assert first == click_window("30d", story.story_ts, NOW + timedelta(days=100))
    assert first == (at(date(2024, 1, 8), 15), at(date(2024, 2, 9), 15))
    assert click_window("3d", story.story_ts, at(JAN10, 20)) == (at(date(2024, 1, 8), 15), at(JAN10, 20))


def test_demo_backfill_ranges_span_at_most_31_days() -> None:
    from orchestration.social_demo import day_ranges

    days = [date(2024, 1, 1) + timedelta(days=i) for i in range(0, 70, 3)] + [date(2024, 6, 1)]
    ranges = day_ranges(days)
    assert ranges == [
        (date(2024, 1, 1), date(2024, 1, 31)),
        (date(2024, 2, 3), date(2024, 3, 4)),
        (date(2024, 3, 7), date(2024, 3, 10)),
        (date(2024, 6, 1), date(2024, 6, 1)),
    ]
    assert all((last - first).days < 31 for first, last in ranges)


def test_a_backfill_after_dedup_counts_the_merged_story_and_lowers_no_figure(
    sqlite_store: tuple[TopicStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's order: clicks fetched for two stories with the same lossy URL, dedup merges one into the other,
    then a UI backfill against the API stand-in taught the topic stories as they are now (`make demo-ui`).

    Before: the survivor kept its 3-day figure but its 30-day figure fell to 0 (no bitlink found: the merged
    story's URL was neither looked up nor known to the stand-in), and clicks_30d_not_below_3d failed for good."""
    from topicmap.dedup.store import merge_duplicate_stories

    store, db_url = sqlite_store
    published = at(JAN10, 9)
    survivor = NewStory(story_url(JAN10, 0), "Summit opens", "climate " * 50, published)
    # the same page by http: its other-scheme bitlink is the one the survivor's own URL finds
    merged = NewStory(survivor.url.replace("https://", "http://"), "Climate summit", "climate", published)
    counts = {survivor.url: 0, merged.url: 2}
    ids = add_topic_stories(store, [survivor, merged])
    _freeze(monkeypatch, NOW)
    instance = click_instance()

    def backfill(server: StandinServer) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [click_totals, clicks_30d_not_below_3d],
            instance=instance,
            resources=social_resources(server, db_url, tmp_path),
            tags={refetch.RANGE_START_TAG: "2024-01-10", refetch.RANGE_END_TAG: "2024-01-16"},
        )

    with run_standin_server(dataset_for([survivor, merged], bitlink_counts=counts)) as server:
        backfill(server)  # `make demo`: clicks before dedup
    before = click_table(store)[ids[survivor.url]]
    assert before["bitlinks_found"] == 1 and 0 < before["clicks_3d"] <= before["clicks_30d"]

    report = merge_duplicate_stories(store, store.topic_row(TOPIC.name)["topics_id"])
    assert report.merges == [
        {
            "source_stories_id": ids[merged.url],
            "target_stories_id": ids[survivor.url],
            "reason": "same lossy url",
        }
    ]
    # the survivor's figures predate the merge: its day lacks the 30-day stage again (the sensor re-requests it)
    (lacking,) = days_lacking_stage(store, "30d", JAN10, JAN10, NOW, 5)
    assert lacking.max_stories_id == ids[survivor.url] and lacking.last_merge_id > 0

    # `make demo-ui`: a fresh stand-in taught the topic stories as they are after dedup
    stamps = topic_story_timestamps(store, NOW)
    taught = StandinDataset.from_urls(list(stamps), seed=5, publish_date=stamps, bitlink_counts=counts)
    with run_standin_server(taught) as server:
        result = backfill(server)
        after = click_table(store)[ids[survivor.url]]
        (check,) = result.get_asset_check_evaluations()
        assert check.passed, check.metadata["flagged"]
        # the merged story's two bitlinks count towards the survivor, once each
        window = click_window("30d", published, NOW)
        daily = taught.stories[merged.url].expected_daily(*window)
        assert after["bitlinks_found"] == 2
        assert after["clicks_3d"] == clicks_until(daily, published + timedelta(days=3)) >= before["clicks_3d"]
        assert (
            after["clicks_30d"] == clicks_until(daily, published + timedelta(days=30)) > before["clicks_30d"]
        )
        # the merged story is counted in its survivor only: one row on the day, in the store's rows and the export
        day = next(
            m for m in result.asset_materializations_for_node("click_totals") if m.partition == "2024-01-10"
        )
        assert day.metadata["dagster/row_count"].value == 1
        assert day.metadata["clicks_30d_total"].value == after["clicks_30d"]
        assert [r["stories_id"] for r in click_rows(store, JAN10, JAN10)] == [ids[survivor.url]]
        exported = pq.read_table(tmp_path / "home" / "exports" / "click_totals" / "2024-01-10.parquet")
        assert exported.column("stories_id").to_pylist() == [ids[survivor.url]]
        assert days_lacking_stage(store, "30d", JAN10, JAN10, NOW, 5) == []

        # a re-run that finds nothing (every bitlink forgotten) lowers no figure, and says what it kept
        server.dataset.stories.clear()
        again = backfill(server)
    kept = click_table(store)[ids[survivor.url]]
    checks = ("checked_3d_at", "checked_30d_at")  # when each stage was last fetched, whatever the fetch saw
    assert {k: v for k, v in kept.items() if k not in checks} == {
        k: v for k, v in after.items() if k not in checks
    }
    assert kept["checked_30d_at"] > after["checked_30d_at"]
    assert again.get_asset_check_evaluations()[0].passed
    day = next(
        m for m in again.asset_materializations_for_node("click_totals") if m.partition == "2024-01-10"
    )
    assert day.metadata["figures_kept_over_lower_fetch"].value == 2  # the 3-day and the 30-day figure
