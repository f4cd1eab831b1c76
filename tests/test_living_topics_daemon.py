"""A topic that keeps running, under the real daemon: an open-ended topic grows over two archive days.

dagster-webserver and dagster-daemon run on workspace.yaml with the instance of deploy/dagster.local.yaml (the run
queue that names every run's job); each run's steps run in its own process (TOPICMAP_EXECUTOR=in_process), which
spares its eight small runs a process per step. Each day a drop lands and `archive_job` loads it, run in the test
process on the deployment's instance (`test_daemon_e2e.py` loads a drop with a run launched from the UI through the
run queue); from then on only the sensors act: `topic_registry` seeds the topic on the first day, `archive_growth` seeds it
again on the second for the new stories alone, `spider_iterations` spiders each day's new seeds forward (a small
link web on loopback: a page the topic already has is never fetched again) and runs the post-spider stages, whose
snapshot joins the earlier ones, which stay as they were. Waits on progress (runs, their states, the processes'
logs), never on a wall-clock deadline.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import defs
from tests.dagster_deploy import LocalDagster, local_dagster
from tests.linkweb import LinkWeb, page_url
from tests.test_spider import page
from topicmap.snapshots.cli import list_snapshots
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

pytestmark = pytest.mark.daemon
TOPIC = "running"
HOSTS = 2
SECRETS = ("TOPICMAP_FACEBOOK_APP_ID", "TOPICMAP_FACEBOOK_APP_SECRET", "TOPICMAP_BITLY_TOKEN")
SENSORS = ("topic_registry", "archive_growth", "spider_iterations")


def day_drop(folder: Path, day: int, published: str) -> str:
    """Day ``day``'s drop: a climate story linking to link-web pages ``day`` and ``day + 1`` (page ``day`` is also
    linked by the day before: the topic has it already), and a football story. Returns the climate story's URL."""
    url = f"https://archive.test/{published}/climate-{day}"
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["url", "title", "text", "publish_date", "medium", "html"])
    links = [page_url(day, HOSTS), page_url(day + 1, HOSTS)]
    html = page(f"Climate day {day}", "Climate reporting of the day.", links, published)
    writer.writerow(
        [url, f"Climate day {day}", "Climate reporting of the day.", published, "archive.test", html]
    )
    sport = f"https://archive.test/{published}/football-{day}"
    writer.writerow([sport, "Football", "The match ended in a draw.", published, "archive.test", ""])
    (folder / f"day-{day}.csv").write_text(out.getvalue(), encoding="utf-8")
    return url


def sensor_ticks(dagster: LocalDagster, name: str) -> list[dict]:
    data = dagster.graphql.query(
        "query($sel: SensorSelector!) { sensorOrError(sensorSelector: $sel) { __typename ... on Sensor { "
        "sensorState { ticks(limit: 500) { status skipReason runKeys } } } } }",
        sel={**dagster.graphql.repository, "sensorName": name},
    )
    return data["sensorOrError"]["sensorState"]["ticks"]


def load_archive(instance: dg.DagsterInstance) -> None:
    """A run of the code location's ``archive_job`` (the drops' new stories into the archive, and the job's check)
    in this process: the day's drop is loaded at once, with no run queue or run worker between. Its resources read
    the store and the drops folder from the environment, as the deployment's do."""
    assert defs.resolve_job_def("archive_job").execute_in_process(instance=instance).success


def manifest_digest(folder: Path) -> str:
    return hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()


@pytest.mark.usefixtures("store_resource_cache")  # the code location's archive_job opens this test's store
def test_an_open_ended_topic_grows_with_two_archive_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=n)).isoformat() for n in (2, 1)]
    home = tmp_path / "home"
    drops = home / "drops"
    drops.mkdir(parents=True)
    (tmp_path / "topics.yaml").write_text(
        "topics:\n"
        f"  - name: {TOPIC}\n"
        "    query: climate\n"
        f"    start_date: {today - timedelta(days=10)}\n"
        "    end_date: open\n"
        "    max_iterations: 1\n"
        "    snapshot_periods: [overall]\n",
        encoding="utf-8",
    )
    store_url = f"sqlite:///{home / 'topicmap.sqlite3'}"
    store = TopicStore.open(store_url)
    with LinkWeb(n=10, hosts=HOSTS) as web:
        env = {k: v for k, v in os.environ.items() if k not in SECRETS and k != "TOPICMAP_DATABASE_URL"}
        env.update(
            TOPICMAP_HOME=str(home),
            TOPICMAP_DROPS_DIR=str(drops),
            TOPICMAP_TOPICS_FILE=str(tmp_path / "topics.yaml"),
            # each sensor ticks every other turn of the daemon's 5 s sensor loop: a tick of three sensors is
            # code server and daemon CPU, and every hop of the topic's runs still waits 10 s at most
            TOPICMAP_SENSOR_INTERVAL_SECONDS="10",
            TOPICMAP_EXECUTOR="in_process",
            TOPICMAP_PAGE_SOURCE_JSON=json.dumps({**web.page_source_settings(), "default_interval": 0.0}),
        )
        # the runs of archive_job in this process: the deployment's home and drops, and its store named outright
        monkeypatch.setenv("TOPICMAP_HOME", str(home))
        monkeypatch.setenv("TOPICMAP_DROPS_DIR", str(drops))
        monkeypatch.setenv("TOPICMAP_DATABASE_URL", store_url)
        with (
            local_dagster(tmp_path, env) as dagster,
            dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
        ):
            topic_runs = lambda: dagster.graphql.runs({"topicmap/topic": TOPIC})  # noqa: E731

            def passes_done(count: int) -> bool:
                runs = topic_runs()
                done = [r for r in runs if r["jobName"] == "post_spider_job" and r["status"] == "SUCCESS"]
                busy = [r for r in runs if r["status"] not in ("SUCCESS", "FAILURE", "CANCELED")]
                failed = [r for r in runs if r["status"] == "FAILURE"]
                assert not failed, [dagster.graphql.run_messages(r["runId"])[-20:] for r in failed]
                return len(done) == count and not busy

            stories: list[str] = []
            folders: dict[int, str] = {}
            for day, published in enumerate(days, start=1):
                stories.append(day_drop(drops, day, published))
                load_archive(instance)
                if day == 1:  # the topic's sensors start once the first day is in the archive
                    for sensor in dagster.graphql.sensors():
                        if sensor["name"] in SENSORS:
                            dagster.graphql.set_sensor(sensor, running=True)
                dagster.wait_for(f"the topic's spidering pass {day}", lambda day=day: passes_done(day))
                snapshots = list_snapshots(store, TOPIC, home)
                assert len(snapshots) == day and all(snap["intact"] for snap in snapshots)
                # the new snapshot holds every story so far; the earlier ones are as they were written
                with store.engine.connect() as conn:
                    in_topic = set(
                        conn.execute(
                            s.stories.select()
                            .with_only_columns(s.stories.c.url)
                            .join(s.topic_stories, s.topic_stories.c.stories_id == s.stories.c.stories_id)
                        ).scalars()
                    )
                linked = {page_url(n, HOSTS) for n in range(1, day + 2)}
                assert in_topic == set(stories) | linked
                assert snapshots[-1]["stories"] == len(in_topic)
                # an open-ended topic's dates reach the day it was last seeded or spidered (the test may span midnight)
                assert snapshots[-1]["end_date"] >= today.isoformat()
                for snap in snapshots[:-1]:
                    assert manifest_digest(snap["folder"]) == folders[snap["snapshots_id"]]
                folders[snapshots[-1]["snapshots_id"]] = manifest_digest(snapshots[-1]["folder"])

            # Every page was fetched once, though each day links to a page the day before linked.
            fetched = Counter(path for _, _, path in web.story_hits())
            assert fetched == {f"/story/{n}": 1 for n in range(1, 4)}, fetched

            # Day 1 was seeded by the registry; day 2 by archive_growth, reading only its new stories.
            runs = topic_runs()
            seeds_runs = sorted(
                (r for r in runs if r["jobName"] == "seeds_job"), key=lambda r: r["creationTime"]
            )
            assert [r["tags"]["dagster/sensor_name"] for r in seeds_runs] == [
                "topic_registry",
                "archive_growth",
            ]
            assert all(
                re.fullmatch(rf"archive:{TOPIC}:\d{{4}}-\d\d-\d\d:\d+", r["tags"]["dagster/run_key"])
                for r in seeds_runs[1:]
            )
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("seeds"), asset_partitions=[TOPIC]), limit=10
            ).records
            scanned = [r.asset_materialization.metadata["archive_stories_scanned"].value for r in records]
            assert sorted(scanned) == [2, 2]  # each day's two stories, never the day before again
            # every run is a run of a named job
            assert {r["jobName"] for r in dagster.graphql.runs()} == {
                "archive_job",
                "seeds_job",
                "spider_iteration_job",
                "post_spider_job",
            }
            # the sensor says why on each tick: the new stories it found, or that the archive did not grow
            ticks = sensor_ticks(dagster, "archive_growth")
            assert any("unchanged since the last tick" in (t["skipReason"] or "") for t in ticks)
            assert {key for t in ticks for key in t["runKeys"]} == {
                r["tags"]["dagster/run_key"] for r in seeds_runs[1:]
            }
    store.dispose()
