"""Topics that keep running: open-ended or future end dates, seeding again for what the archive gained (and only
that), the spider going on from its new seeds without fetching a URL twice, the `archive_growth` sensor that
requests it, the week and click partitions of an open-ended topic, and `topicmap topic add`."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import update

from assets.seeds import seeds
from orchestration.cli import main
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.archive_growth import archive_growth
from sensors.topics import topic_registry
from tests.test_spider import DictSource, page
from topicmap.archive.drops import load_drop
from topicmap.spider.iteration import Spider
from topicmap.spider.plan import decide, read_spider_facts
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfigError, load_topics, parse_topic
from topicmap.topics.seeding import (
    SeedingRequest,
    TooManySeedsError,
    select_seeds,
    unread_archive_stories,
)

ROOT = Path(__file__).resolve().parent.parent
#: the day the seeding tests take as today (an open-ended topic's dates reach it)
TODAY = date(2026, 3, 20)


def topic_from(text: str, tmp_path: Path, today: date | None = None):  # noqa: ANN201 - a TopicConfig
    path = tmp_path / "topics.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = load_topics(path, today=today)
    assert not loaded.errors, loaded.errors
    return loaded.topics[0]


def load_day(store: TopicStore, folder: Path, name: str, stories: list[tuple[str, str, str, str]]) -> None:
    """An archive drop (url, title, text, day), each story linking to nothing but what its text names."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["url", "title", "text", "publish_date", "medium", "html"])
    for url, title, text, day in stories:
        links = text.split("links:", 1)[1].split() if "links:" in text else []
        writer.writerow([url, title, text, day, url.split("/")[2], page(title, text, links, day).decode()])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(out.getvalue(), encoding="utf-8")
    assert load_drop(store, folder / name).state == "loaded"


# ---------------------------------------------------------------------------------------------- declarations


@pytest.mark.parametrize("end", ["end_date: open", "end_date: ~", "", "end_date: 2031-06-30"])
def test_a_topic_may_keep_running_open_ended_or_to_a_future_end(tmp_path: Path, end: str) -> None:
    topic = topic_from(
        f"topics:\n  - name: running\n    query: climate\n    start_date: 2026-01-01\n    {end}\n"
        "    timespans: [{name: later, start_date: 2026-02-01, end_date: 2026-12-31}]\n",
        tmp_path,
        today=date(2026, 11, 27),
    )
    if "2031" in end:
        assert (topic.end_date, topic.last_day(date(2026, 11, 27))) == (date(2031, 6, 30),) * 2
        return
    # open-ended: its dates reach the current day, whichever day that is
    assert topic.open_ended and topic.end_date is None
    assert topic.last_day(date(2026, 11, 27)) == date(2026, 11, 27)
    assert topic.last_day(date(2027, 2, 1)) == date(2027, 2, 1)
    assert json.loads(topic.to_json())["end_date"] is None


def test_a_misspelt_open_end_is_refused_naming_the_field_and_the_word() -> None:
    with pytest.raises(TopicConfigError) as refused:
        parse_topic(
            {"name": "x", "query": "climate", "start_date": "2026-01-01", "end_date": "opne"}, Path(".")
        )
    assert refused.value.field == "end_date" and "'open'" in str(refused.value)


def _apply(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """The registry's partition requests, applied in order as the sensor daemon applies them."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.DeleteDynamicPartitionsRequest):
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        else:
            new = [
                k
                for k in request.partition_keys
                if not instance.has_dynamic_partition(request.partitions_def_name, k)
            ]
            instance.add_dynamic_partitions(request.partitions_def_name, new)


def test_the_registry_keeps_the_days_and_weeks_to_the_declared_topics_tick_by_tick(
    tmp_path: Path, fresh_sqlite_store: Callable[[Path], str]
) -> None:
    """An open-ended topic's days reach yesterday, an ended topic's stop at its end; a topic extended or declared
    in the file brings its days on the next tick, in date order; a day no longer declared goes unless it holds
    data. The freshness checks are evaluated with the tick (once an hour)."""
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    path = tmp_path / "topics.yaml"

    def declare(*lines: str) -> None:
        path.write_text("topics:\n" + "".join(f"  - {{{line}}}\n" for line in lines), encoding="utf-8")

    def span(first: date, last: date) -> list[str]:
        return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]

    ended = (today - timedelta(days=40), today - timedelta(days=30))
    declare(f"name: ended, query: a, start_date: {ended[0]}, end_date: {ended[1]}")
    resources = {
        "topics_file": TopicsFileResource(path=str(path)),
        "store": TopicStoreResource(database_url=fresh_sqlite_store(tmp_path / "store.sqlite3")),
    }
    instance = dg.DagsterInstance.ephemeral()
    # a day materialized under the earlier time partitions (which ran 30 days past the end): it holds data
    earlier_key = (ended[1] + timedelta(days=10)).isoformat()
    instance.report_runless_asset_event(dg.AssetMaterialization("click_totals", partition=earlier_key))
    first = topic_registry(dg.build_sensor_context(instance=instance, resources=resources))
    _apply(instance, first)
    assert instance.get_dynamic_partitions("click_days") == [*span(*ended), earlier_key]
    assert instance.get_dynamic_partitions("ccnews_days") == span(*ended)
    assert {e.check_name for e in first.asset_events} == {"clicks_fresh", "snapshots_fresh"}
    # a day of its days holds data: it stays when the topic is shortened
    instance.report_runless_asset_event(
        dg.AssetMaterialization("click_totals", partition=ended[1].isoformat())
    )

    running = today - timedelta(days=9)
    older = (today - timedelta(days=70), today - timedelta(days=60))
    declare(
        f"name: ended, query: a, start_date: {ended[0]}, end_date: {ended[1] - timedelta(days=2)}",
        f"name: running, query: b, start_date: {running}, end_date: open",
        f"name: older, query: c, start_date: {older[0]}, end_date: {older[1]}",
    )
    second = topic_registry(
        dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
    )
    _apply(instance, second)
    declared = [*span(*older), *span(ended[0], ended[1] - timedelta(days=2)), *span(running, yesterday)]
    assert instance.get_dynamic_partitions("click_days") == sorted(
        [*declared, ended[1].isoformat(), earlier_key]
    )
    assert instance.get_dynamic_partitions("ccnews_days") == declared  # no data there: the shortened days go
    # each topic's weeks, a topic's in date order; the running topic's to the last week that is over
    weeks = instance.get_dynamic_partitions("topic_weeks")
    assert weeks == sorted(weeks) and {key.split("|")[0] for key in weeks} == {"ended", "older", "running"}
    last_week = (today - timedelta(days=today.weekday() + 7)).isoformat()
    assert [key for key in weeks if key.startswith("running|")][-1] == f"running|{last_week}"
    # nothing changed: the next tick asks for nothing
    third = topic_registry(
        dg.build_sensor_context(instance=instance, resources=resources, cursor=second.cursor)
    )
    assert not third.dynamic_partitions_requests


# ---------------------------------------------------------------------------------------------- seeding again


OPEN_TOPIC = """topics:
  - name: running
    query: climate
    start_date: 2026-03-01
    end_date: open
    max_stories: 6
"""


def test_seeding_again_reads_only_the_stories_and_dates_the_topic_gained(
    store: TopicStore, tmp_path: Path
) -> None:
    drops = tmp_path / "drops"
    topic = topic_from(OPEN_TOPIC, tmp_path)
    topics_id = store.upsert_topic(topic)
    load_day(
        store,
        drops,
        "day1.csv",
        [
            ("https://a.test/1", "Climate one", "The climate summit.", "2026-03-10"),
            ("https://a.test/2", "Football", "A draw.", "2026-03-10"),
            ("https://a.test/3", "Early climate", "Climate before the topic.", "2026-02-20"),
        ],
    )

    def seed(topic, previous=None, today=TODAY):  # noqa: ANN001, ANN202
        known = {row["url"] for row in store.seed_rows(topics_id)}
        selection = select_seeds(
            store,
            SeedingRequest(topic, previous=previous, topics_id=topics_id, known_urls=known, today=today),
        )
        store.add_seed_urls(topics_id, selection.rows)
        return selection

    first = seed(topic)
    assert first.plan.reason == "first reading of the archive for this topic" and not first.plan.incremental
    assert (first.scanned, [r["url"] for r in first.rows]) == (2, ["https://a.test/1"])
    assert (first.plan.scan.start_date, first.plan.scan.end_date) == (date(2026, 3, 1), TODAY)

    # The archive gains a day: two stories in the topic's dates, one before its start.
    load_day(
        store,
        drops,
        "day2.csv",
        [
            ("https://a.test/4", "Climate two", "The climate plan.", "2026-03-15"),
            ("https://a.test/5", "Cooking", "Stir the sauce.", "2026-03-16"),
            ("https://a.test/6", "Early climate again", "Climate in February.", "2026-02-25"),
        ],
    )
    assert unread_archive_stories(store, topic, first.plan.scan, first_id(store) + 5, TODAY) == 2
    second = seed(topic, first.plan.scan)
    assert second.plan.incremental
    # the stories read before are not read again
    assert (second.scanned, [r["url"] for r in second.rows]) == (2, ["https://a.test/4"])
    assert unread_archive_stories(store, topic, second.plan.scan, second.plan.scan.through_id, TODAY) == 0

    # A story dated the next day (loaded early): the open-ended topic reaches it the day after.
    load_day(store, drops, "day3.csv", [("https://a.test/7", "Climate three", "Climate news.", "2026-03-21")])
    newest = second.plan.scan.through_id + 1
    assert unread_archive_stories(store, topic, second.plan.scan, newest, TODAY) == 0
    assert unread_archive_stories(store, topic, second.plan.scan, newest, TODAY + timedelta(days=1)) == 1
    third = seed(topic, second.plan.scan, TODAY + timedelta(days=1))
    assert (third.scanned, [r["url"] for r in third.rows]) == (1, ["https://a.test/7"])
    assert "new dates 2026-03-21..2026-03-21" in third.plan.reason

    # The start moved earlier: only the dates gained are read, whole.
    earlier = topic_from(OPEN_TOPIC.replace("2026-03-01", "2026-02-15"), tmp_path)
    fourth = seed(earlier, third.plan.scan, TODAY + timedelta(days=1))
    assert fourth.scanned == 2 and {r["url"] for r in fourth.rows} == {"https://a.test/3", "https://a.test/6"}
    assert "2026-02-15..2026-02-28" in fourth.plan.reason

    # A changed query reads the topic's dates whole; so does an archive that changed below what was read.
    other = topic_from(OPEN_TOPIC.replace("2026-03-01", "2026-02-15").replace("climate", "sauce"), tmp_path)
    assert seed(other, fourth.plan.scan, TODAY + timedelta(days=1)).plan.reason == "the query changed"
    with store.engine.begin() as conn:  # a story redated into the topic's dates after it was read
        conn.execute(
            update(s.stories)
            .where(s.stories.c.url == "https://a.test/3")
            .values(publish_date=datetime(2025, 1, 1, tzinfo=UTC))
        )
    again = seed(earlier, fourth.plan.scan, TODAY + timedelta(days=1))
    assert again.plan.reason.startswith("the archive changed below story") and not again.plan.incremental

    # The stored seeds count towards max_stories with the new ones.
    load_day(
        store,
        drops,
        "day4.csv",
        [(f"https://b.test/{n}", "Climate", "Climate again.", "2026-03-18") for n in range(3)],
    )
    with pytest.raises(TooManySeedsError, match="max_stories=6"):
        seed(earlier, again.plan.scan, TODAY + timedelta(days=1))


def first_id(store: TopicStore) -> int:
    return min(int(row["stories_id"]) for row in store_stories(store))


def store_stories(store: TopicStore) -> list[dict]:
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(s.stories.select()).mappings()]


def test_the_spider_goes_on_from_the_new_seeds_without_fetching_a_url_twice(
    store: TopicStore, tmp_path: Path
) -> None:
    drops = tmp_path / "drops"
    topic = topic_from(OPEN_TOPIC.replace("max_stories: 6", "max_iterations: 1"), tmp_path)
    topics_id = store.upsert_topic(topic)
    web = {
        "https://web.test/shared": page("Climate shared", "A climate report."),
        "https://web.test/first": page("Climate first", "Climate found first."),
        "https://web.test/second": page("Climate second", "Climate found next."),
    }
    source = DictSource(web)
    load_day(
        store,
        drops,
        "day1.csv",
        [
            (
                "https://a.test/1",
                "Climate one",
                "Climate. links: https://web.test/shared https://web.test/first",
                "2026-03-10",
            )
        ],
    )

    def seed_and_spider(previous=None):  # noqa: ANN001, ANN202
        selection = select_seeds(
            store, SeedingRequest(topic, previous=previous, topics_id=topics_id, today=TODAY)
        )
        store.add_seed_urls(topics_id, selection.rows)
        spider = Spider(store, topic, source, log=lambda _: None)
        keys = []
        while (
            decision := decide(read_spider_facts(store, topic.name, topic.max_iterations), None, 0.0)
        ).action == ("run_iteration"):
            keys.append(decision.run_key)
            spider.run_iteration()
        assert decision.action == "post_spider"
        return selection, [*keys, decision.run_key]

    first, first_keys = seed_and_spider()
    assert sorted(source.fetched) == ["https://web.test/first", "https://web.test/shared"]
    load_day(
        store,
        drops,
        "day2.csv",
        [
            (
                "https://a.test/2",
                "Climate two",
                "Climate. links: https://web.test/shared https://web.test/second",
                "2026-03-12",
            )
        ],
    )
    _, second_keys = seed_and_spider(first.plan.scan)
    # the new story's links are fetched, the one the topic had is not fetched again
    assert sorted(source.fetched) == [
        "https://web.test/first",
        "https://web.test/second",
        "https://web.test/shared",
    ]
    with store.engine.connect() as conn:
        in_topic = set(
            conn.execute(
                s.stories.select()
                .with_only_columns(s.stories.c.url)
                .join(s.topic_stories, s.topic_stories.c.stories_id == s.stories.c.stories_id)
                .where(s.topic_stories.c.topics_id == topics_id)
            ).scalars()
        )
    assert in_topic == {"https://a.test/1", "https://a.test/2", *web}
    # the second pass ran under run keys of its own (Dagster skips a key it already launched)
    assert not set(first_keys) & set(second_keys), (first_keys, second_keys)


# ---------------------------------------------------------------------------------------------- the sensor


def sensor_project(tmp_path: Path, fresh_sqlite_store: Callable[[Path], str]) -> dict:
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    topics = tmp_path / "topics.yaml"
    topics.write_text(
        "topics:\n"
        f"  - {{name: running, query: climate, start_date: {today - timedelta(days=20)}, end_date: open}}\n"
        f"  - {{name: until-next-year, query: climate, start_date: {today - timedelta(days=20)}, "
        f"end_date: {today.replace(year=today.year + 1, day=1)}}}\n"
        "  - {name: ended, query: climate, start_date: 2024-01-01, end_date: 2024-02-01}\n",
        encoding="utf-8",
    )
    db = fresh_sqlite_store(tmp_path / "store.sqlite3")
    return {
        "days": (today - timedelta(days=2), yesterday),
        "store": TopicStore.open(db),
        "resources": {
            "store": TopicStoreResource(database_url=db),
            "topics_file": TopicsFileResource(path=str(topics)),
        },
    }


def test_the_archive_growth_sensor_reseeds_the_topics_whose_dates_hold_the_new_stories(
    tmp_path: Path, fresh_sqlite_store: Callable[[Path], str]
) -> None:
    project = sensor_project(tmp_path, fresh_sqlite_store)
    store, resources = project["store"], project["resources"]
    first_day, next_day = project["days"]
    drops = tmp_path / "drops"
    load_day(
        store, drops, "day1.csv", [("https://a.test/1", "Climate one", "Climate.", first_day.isoformat())]
    )
    instance = dg.DagsterInstance.ephemeral()
    names = ["ended", "running", "until-next-year"]
    instance.add_dynamic_partitions("topics", names)

    def tick(cursor: str | None = None) -> dg.SensorResult:
        return archive_growth(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))

    unseeded = tick()
    assert not unseeded.run_requests and "running: not seeded yet" in str(unseeded.skip_reason)
    for name in names:
        dg.materialize([seeds], instance=instance, resources=resources, partition_key=name)
    quiet = tick(unseeded.cursor)
    assert not quiet.run_requests
    assert "unchanged since the last tick" in str(quiet.skip_reason)
    assert "running: no archive story in its dates" in str(quiet.skip_reason)

    # A new archive day: the two topics whose dates hold it are seeded again, the ended one is not.
    load_day(
        store, drops, "day2.csv", [("https://a.test/2", "Climate two", "Climate.", next_day.isoformat())]
    )
    grown = tick(quiet.cursor)
    newest = json.loads(grown.cursor)["newest_story"]
    assert newest > json.loads(quiet.cursor)["newest_story"]
    by_topic = {r.partition_key: r for r in grown.run_requests}
    assert sorted(by_topic) == ["running", "until-next-year"]
    today = datetime.now(UTC).date()
    assert by_topic["running"].run_key == f"archive:running:{today}:{newest}"
    assert by_topic["running"].tags["topicmap/seeds_reason"] == "archive-growth"
    # a replayed tick asks for the same runs (Dagster launches a run key once)
    assert [r.run_key for r in tick(quiet.cursor).run_requests] == [r.run_key for r in grown.run_requests]
    # a topic with a seeds run in progress, even one launched from the asset graph (`__ASSET_JOB`), waits for it
    busy = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id=str(uuid.uuid4()),
        status=dg.DagsterRunStatus.STARTED,
        tags={"topicmap/topic": "running"},
        asset_selection=frozenset({dg.AssetKey("seeds")}),
    )
    instance.add_run(busy)
    assert [r.partition_key for r in tick(quiet.cursor).run_requests] == ["until-next-year"]
    instance.delete_run(busy.run_id)

    # the runs it asked for read only the new story, after which nothing is left unread
    for name in by_topic:
        result = dg.materialize([seeds], instance=instance, resources=resources, partition_key=name)
        meta = result.asset_materializations_for_node("seeds")[0].metadata
        assert meta["archive_stories_scanned"].value == 1 and meta["seeds_new"].value == 1
    assert not tick(grown.cursor).run_requests
    store.dispose()


def test_a_partition_added_by_hand_for_a_declared_topic_is_seeded_by_the_registry(
    tmp_path: Path, fresh_sqlite_store: Callable[[Path], str]
) -> None:
    project = sensor_project(tmp_path, fresh_sqlite_store)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["running"])  # the launch dialog's "Add partition"
    result = topic_registry(dg.build_sensor_context(instance=instance, resources=project["resources"]))
    assert "running" in [r.partition_key for r in result.run_requests]
    project["store"].dispose()


# ---------------------------------------------------------------------------------------------- topicmap topic add


def test_topic_add_validates_the_name_then_adds_and_seeds_the_partition_as_a_named_job(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    fresh_sqlite_store: Callable[[Path], str],
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = TopicStore.open(fresh_sqlite_store(home / "topicmap.sqlite3"))
    load_day(store, home / "drops", "day.csv", [("https://a.test/1", "Climate", "Climate.", "2026-03-10")])
    (tmp_path / "topics.yaml").write_text(OPEN_TOPIC, encoding="utf-8")
    env = {
        "TOPICMAP_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TOPICMAP_DATABASE_URL", raising=False)
    assert main(["topic", "add", "runing"]) == 2
    assert "'runing' is not a valid topic" in capsys.readouterr().out
    # as a user runs it: a process of its own, which loads the code location with this environment
    done = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "topic", "add", "running"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "TOPICMAP_DATABASE_URL"} | env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "added partition 'running'" in done.stdout and "seeds_job: 1 seeds (1 new" in done.stdout
    with dg.DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        assert instance.get_dynamic_partitions("topics") == ["running"]
        (run,) = instance.get_runs()
        assert run.job_name == "seeds_job" and run.tags["dagster/partition"] == "running"
        # the registry finds the topic seeded: nothing more to request
        resources = {
            "topics_file": TopicsFileResource(path=str(tmp_path / "topics.yaml")),
            "store": TopicStoreResource(database_url=f"sqlite:///{home / 'topicmap.sqlite3'}"),
        }
        assert not topic_registry(
            dg.build_sensor_context(instance=instance, resources=resources)
        ).run_requests
    store.dispose()
