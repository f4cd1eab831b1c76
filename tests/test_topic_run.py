"""`topicmap topic run NAME`: one command drives a topic from seeds to snapshot without the daemon, as named jobs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from orchestration.cli import main
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.spider import SpiderSensorConfig, spider_iterations
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

ROOT = Path(__file__).resolve().parent.parent
DROP = """url,title,text,publish_date,medium
https://www.herald.test/2026/01/10/a,Climate summit opens,Delegates discuss carbon emissions.,2026-01-10,Herald
https://ledger.test/2026/02/02/c,Carbon tax vote,Parliament votes on a carbon tax today.,2026-02-02,Ledger
https://ledger.test/2026/02/03/d,Local football,The match ended in a draw.,2026-02-03,Ledger
"""
TOPICS = """topics:
  - name: run-climate
    query: climate OR "carbon tax"
    start_date: 2026-01-01
    end_date: 2026-03-31
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    (home / "drops").mkdir(parents=True)
    (home / "drops" / "drop.csv").write_text(DROP, encoding="utf-8")
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    env = {
        "TOPICMAP_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("TOPICMAP_DATABASE_URL", "TOPICMAP_BITLY_TOKEN", "TOPICMAP_FACEBOOK_APP_ID"):
        monkeypatch.delenv(name, raising=False)
    return env


def test_an_undeclared_topic_is_named_with_the_declared_ones(
    project: dict, capsys: pytest.CaptureFixture
) -> None:
    assert main(["topic", "run", "no-such-topic"]) == 2
    out = capsys.readouterr().out
    assert "'no-such-topic' is not a valid topic" in out and "declared topics: run-climate" in out


@pytest.mark.deployment
def test_topic_run_drives_a_topic_to_its_snapshot_as_named_jobs(project: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "topic", "run", "run-climate", "--load-archive"],
        cwd=ROOT,
        env={**os.environ, **project},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "added partition 'run-climate'" in done.stdout and "post_spider_job: snapshot 1" in done.stdout
    home = Path(project["TOPICMAP_HOME"])
    store = TopicStore.open(f"sqlite:///{home / 'topicmap.sqlite3'}")
    topics_id = store.topic_row("run-climate")["topics_id"]
    assert store.table_count(s.topic_stories, topics_id=topics_id) == 2
    assert store.topic_row("run-climate")["state"] == "spidering completed"
    store.dispose()
    with dg.DagsterInstance.from_config(project["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs()
        assert {r.job_name for r in runs} == {
            "archive_job",
            "seeds_job",
            "spider_iteration_job",
            "post_spider_job",
        }
        spider = [r for r in runs if r.job_name == "spider_iteration_job"]
        assert all(r.tags["topicmap/spider_topic"] == "run-climate" for r in spider)
        # tagged as the spider sensor's own requests: a daemon started now would not repeat them
        assert all(r.tags["dagster/sensor_name"] == "spider_iterations" for r in spider)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        # each is a run of the code location's job, as the UI launches one: its job's page lists it (the page's
        # filter is the job name and this repository tag) and the UI can re-execute it (tests/test_ui_runs.py)
        for run in runs:
            assert run.remote_job_origin is not None and run.remote_job_origin.location_name == "topicmap"
            on_job_page = instance.get_runs(
                dg.RunsFilter(job_name=run.job_name, tags={".dagster/repository": "__repository__@topicmap"})
            )
            assert run.run_id in {r.run_id for r in on_job_page}
        assert instance.has_dynamic_partition("topics", "run-climate")
        # the spider sensor, asked now, requests nothing: the post-spider run it would request was launched under
        # its name and run key, and its tick says so (as a daemon started now would show it)
        result = spider_iterations(
            dg.build_sensor_context(
                instance=instance,
                resources={
                    "store": TopicStoreResource(database_url=f"sqlite:///{home / 'topicmap.sqlite3'}"),
                    "topics_file": TopicsFileResource(path=project["TOPICMAP_TOPICS_FILE"]),
                    "spider_sensor_config": SpiderSensorConfig(),
                },
            )
        )
        (post,) = [r for r in runs if r.job_name == "post_spider_job"]
        assert not result.run_requests
        assert (
            f"already launched under run key {post.tags['dagster/run_key']}"
            in result.skip_reason.skip_message
        )
