"""End to end: the real Dagster daemon on the code location launches the runs its sensors decide on.

The topic registry sensor sees a new topic in the topics file, adds its partition and launches its seeds
run; then the spider sensor launches the topic's first iteration. Both are real runs, launched by the daemon
in subprocesses that load workspace.yaml, exactly as in production.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.daemon

DROP = """url,title,text,publish_date,medium
https://www.herald.test/2026/01/10/a,Climate summit opens,Delegates discuss carbon emissions.,2026-01-10,Herald
https://ledger.test/2026/02/02/c,Carbon tax vote,Parliament votes on a carbon tax today.,2026-02-02,Ledger
https://ledger.test/2026/02/03/d,Local football,The match ended in a draw.,2026-02-03,Ledger
"""
TOPICS = """topics:
  - name: daemon-climate
    query: climate OR "carbon tax"
    start_date: 2026-01-01
    end_date: 2026-03-31
"""


def _runs(instance: dg.DagsterInstance, stage: str) -> list[dg.DagsterRun]:
    return [
        r
        for r in instance.get_runs()
        if (
            r.tags.get("topicmap/stage") == stage
            or (stage == "seeds" and r.tags.get("dagster/sensor_name") == "topic_registry")
        )
    ]


def test_daemon_sensors_launch_seeds_and_spider_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    drops = home / "drops"
    drops.mkdir()
    (drops / "drop.csv").write_text(DROP, encoding="utf-8")
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "TOPICMAP_HOME": str(home),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
        "TOPICMAP_SENSOR_INTERVAL_SECONDS": "1",
    }
    for name in (
        "TOPICMAP_DATABASE_URL",
        "TOPICMAP_FACEBOOK_APP_ID",
        "TOPICMAP_FACEBOOK_APP_SECRET",
        "TOPICMAP_BITLY_TOKEN",
    ):
        env.pop(name, None)
    # The archive is loaded first, as an operator would; the sensors take it from there.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster",
            "asset",
            "materialize",
            "--select",
            "archive_stories",
            "-m",
            "orchestration.definitions",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    log = open(tmp_path / "daemon.log", "wb")  # noqa: SIM115 - closed in finally
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.environ["DAGSTER_HOME"], previous = str(dagster_home), os.environ.get("DAGSTER_HOME")
    try:
        instance = dg.DagsterInstance.get()
        deadline = time.monotonic() + 300
        spider_runs: list[dg.DagsterRun] = []
        post_runs: list[dg.DagsterRun] = []
        while time.monotonic() < deadline:
            spider_runs = [r for r in _runs(instance, "spider") if r.status == dg.DagsterRunStatus.SUCCESS]
            post_runs = _runs(instance, "post-spider")
            if any(r.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE) for r in post_runs):
                break
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(2)
        seeds_runs = [r for r in instance.get_runs() if r.tags.get("dagster/sensor_name") == "topic_registry"]
        assert seeds_runs, (
            "the topic registry sensor launched no run:\n" + (tmp_path / "daemon.log").read_text()[-3000:]
        )
        assert seeds_runs[-1].status == dg.DagsterRunStatus.SUCCESS
        assert spider_runs, (
            "the spider sensor launched no successful run:\n" + (tmp_path / "daemon.log").read_text()[-3000:]
        )
        assert spider_runs[0].tags["topicmap/topic"] == "daemon-climate"
        assert spider_runs[0].tags["dagster/partition"] == "daemon-climate"
        # once no pending link is left, the post-spider stages run (dedup, statistics without Facebook
        # credentials configured, the WARC export) as one run the sensor requested
        assert post_runs and post_runs[0].status == dg.DagsterRunStatus.SUCCESS, (
            "post-spider run missing or failed:\n" + (tmp_path / "daemon.log").read_text()[-3000:]
        )
        store = TopicStore.open(f"sqlite:///{home / 'topicmap.sqlite3'}")
        topics_id = store.topic_row("daemon-climate")["topics_id"]
        assert store.table_count(s.topic_seed_urls, topics_id=topics_id) == 2
        assert store.table_count(s.topic_stories, topics_id=topics_id) == 2
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
        log.close()
        if previous is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = previous
