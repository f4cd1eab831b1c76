"""CC-NEWS history by backfill under the real daemon: loopback servers give a month of CC-NEWS (warc.paths.gz,
WARC files named by timestamp, two a day), a backfill over a week of `ccnews_stories` is launched as the UI
launches it (GraphQL on dagster-webserver) and the daemon runs it one day per run. Every day is materialized with
its own figures, the archive holds each story once (a page captured on two days included), and a backfill over
days already loaded loads no file twice and stores nothing new. The `ccnews_yesterday` schedule, evaluated by the
code location at a morning tick, asks for the day before, and its run loads it. The whole month is benchmarks/bench_ccnews_backfill.py.
Waits on progress (runs, backfill states), never on a wall-clock deadline."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import func, select

from tests.ccservers import DataServer, write_ccnews_month
from tests.dagster_deploy import local_dagster
from topicmap.demo.web import generate_demo_web
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

pytestmark = pytest.mark.daemon
WEEK = [(date(2026, 1, 5) + timedelta(days=n)).isoformat() for n in range(7)]
FILES_PER_DAY, PAGES_PER_FILE = 2, 3


def story_pages(count: int) -> list[tuple[str, int, str, bytes]]:
    web = generate_demo_web(seed=5, n_media=3, n_stories=100, months=1)
    pages = [
        (url, page.status, page.content_type, page.body)
        for url, page in sorted(web.pages.items())
        if page.status == 200 and page.content_type == "text/html" and "/2026/" in url
    ]
    return pages[:count]


def ccnews_env(tmp_path: Path, store: TopicStore, data: DataServer) -> dict[str, str]:
    """The code location's settings: its own home and store, no topic, CC-NEWS from ``data`` (January 2026 on)."""
    (tmp_path / "topics.yaml").write_text("topics: []\n", encoding="utf-8")
    return {
        **os.environ,
        "TOPICMAP_HOME": str(tmp_path / "home"),
        "TOPICMAP_DATABASE_URL": str(store.engine.url),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
        "TOPICMAP_CCNEWS_START": "2026-01-01",
        "TOPICMAP_CC_DATA_URL": data.url,
        "TOPICMAP_CC_ALLOW_NETWORKS": f"127.0.0.1:{data.port}",
        "TOPICMAP_EXECUTOR": "in_process",  # steps in the run worker: the backfill is the subject
    }


def day_figures(instance: dg.DagsterInstance) -> dict[str, list[dict[str, object]]]:
    """Each day's materializations of ccnews_stories, oldest first, as plain metadata values."""
    records = instance.fetch_materializations(dg.AssetKey("ccnews_stories"), limit=1000).records
    figures: dict[str, list[dict[str, object]]] = {}
    for record in sorted(records, key=lambda r: r.storage_id):
        values = {k: v.value for k, v in record.asset_materialization.metadata.items()}
        figures.setdefault(record.partition_key, []).append(values)
    return figures


def test_a_week_backfill_loads_each_day_once_with_its_own_figures(tmp_path: Path) -> None:
    # 30 pages for 42 page captures: the last days capture pages the first days already stored
    pages = story_pages(30)
    by_day = write_ccnews_month(tmp_path / "cc", 2026, 1, pages, FILES_PER_DAY, PAGES_PER_FILE)
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    data = DataServer(tmp_path / "cc")
    env = ccnews_env(tmp_path, store, data)
    try:
        with (
            local_dagster(tmp_path, env) as dagster,
            dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
        ):
            # the topic registry adds the CC-NEWS days: here every day from TOPICMAP_CCNEWS_START (no topic)
            tick = dagster.next_sensor_tick("topic_registry")
            # stopped again: its later ticks would only find the days it added
            dagster.graphql.set_sensor(
                next(sensor for sensor in dagster.graphql.sensors() if sensor["name"] == "topic_registry"),
                running=False,
            )
            days = instance.get_dynamic_partitions("ccnews_days")
            assert days[0] == "2026-01-01" and days == sorted(days) and set(WEEK) <= set(days), tick
            first = dagster.launch_backfill("ccnews_stories", WEEK)
            # the days are read once the backfill's runs have ended; the backfill's own end (a turn of the
            # backfill daemon later) is awaited with the backfill below, which that turn picks up
            dagster.wait_for_backfill_runs(first, count=len(WEEK))
            figures = day_figures(instance)
            assert sorted(figures) == WEEK

            captured = [url for url, *_ in pages]
            expected_new: dict[str, int] = {}
            seen: set[str] = set()
            for index, day in enumerate(WEEK):
                start = index * FILES_PER_DAY * PAGES_PER_FILE
                urls = [captured[(start + i) % len(captured)] for i in range(FILES_PER_DAY * PAGES_PER_FILE)]
                expected_new[day] = len(set(urls) - seen)
                seen |= set(urls)
            for day in WEEK:
                (meta,) = figures[day]
                assert meta["files"] == len(by_day[date.fromisoformat(day)]) == FILES_PER_DAY
                assert meta["files_already_loaded"] == 0 and meta["files_failed"] == 0
                assert meta["records"] == FILES_PER_DAY * (PAGES_PER_FILE + 2)
                assert meta["rejected"] == 2 * FILES_PER_DAY
                assert "| http 404 | 2 |" in meta["rejected_by_reason"]
                assert "| not html | 2 |" in meta["rejected_by_reason"]
                assert meta["stories_added"] == expected_new[day], day
                assert meta["stories_added"] + meta["stories_already_known"] == FILES_PER_DAY * PAGES_PER_FILE
            # the last two days captured only pages stored before: known, not added again
            assert [expected_new[d] for d in WEEK[-2:]] == [0, 0]

            def stored() -> tuple[int, int]:
                with store.engine.connect() as conn:
                    urls = select(s.stories.c.url).where(s.stories.c.source == "cc-news")
                    rows = conn.execute(select(func.count()).select_from(urls.subquery())).scalar_one()
                    distinct = conn.execute(
                        select(func.count(func.distinct(s.stories.c.url))).where(
                            s.stories.c.source == "cc-news"
                        )
                    ).scalar_one()
                return rows, distinct

            assert stored() == (len(seen), len(seen))  # each story once

            # Backfilled again (the last two days, whose pages were partly seen before; the month's benchmark
            # repeats the whole backfill): every file is already loaded, nothing is stored twice.
            again = dagster.launch_backfill("ccnews_stories", WEEK[-2:])
            # The schedule, evaluated by the code location for the tick of 2026-01-13 06:00 UTC (the UI's "Test
            # schedule"), asks for the day before; its run, launched as the UI launches it (beside the backfill:
            # another day), loads that day.
            tick = datetime(2026, 1, 13, 6, 0, tzinfo=UTC).timestamp()
            (request,) = dagster.schedule_dry_run("ccnews_yesterday", tick)
            assert (
                request["tags"]["dagster/partition"] == "2026-01-12"
                and request["runKey"] == "ccnews:2026-01-12"
            )
            run_id = dagster.launch_job(request["jobName"] or "ccnews_daily", request["tags"])

            assert dagster.wait_for_backfill(first) == "COMPLETED_SUCCESS", dagster.log_tails()
            runs = dagster.backfill_runs(first)
            # BackfillPolicy.multi_run(1): one run per day, so a failing day fails (and retries) alone
            # (a backfill policy's run names its days as a range, here of one day)
            ranges = [
                (
                    r["tags"]["dagster/asset_partition_range_start"],
                    r["tags"]["dagster/asset_partition_range_end"],
                )
                for r in runs
            ]
            assert sorted(ranges) == [(day, day) for day in WEEK]
            assert all(r["status"] == "SUCCESS" for r in runs)

            assert dagster.wait_for_backfill(again) == "COMPLETED_SUCCESS", dagster.log_tails()
            figures = day_figures(instance)
            assert [len(figures[day]) for day in WEEK] == [1] * 5 + [2, 2]
            for day in WEEK[-2:]:
                latest = figures[day][-1]
                assert latest["files_already_loaded"] == FILES_PER_DAY
                assert latest["records"] == 0 and latest["stories_added"] == 0
            assert stored() == (len(seen), len(seen))

            assert dagster.wait_for_run(run_id) == "SUCCESS", dagster.log_tails()
            (yesterday,) = day_figures(instance)["2026-01-12"]
            # its files are read (their pages all captured before: known, not added twice)
            assert yesterday["files"] == FILES_PER_DAY and yesterday["files_already_loaded"] == 0
            assert (
                yesterday["records"] == FILES_PER_DAY * (PAGES_PER_FILE + 2)
                and yesterday["stories_added"] == 0
            )
            assert stored() == (len(seen), len(seen))
    finally:
        data.close()
        store.dispose()
