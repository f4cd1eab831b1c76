"""Runs as the Dagster UI sees and launches them, on dagster-webserver + dagster-daemon (deploy/dagster.local.yaml),
driven through GraphQL as the UI drives it.

* A run the project started itself (the seeds run of `topicmap topic add`, which `topicmap topic run` and `make demo`
  start the same way) is listed on its job's page and re-executes from the UI (the Re-execute button's mutation, by
  parent run id), and so does its re-execution.
* A run launched from the asset graph (Materialize on `__ASSET_JOB`, a partition backfill) keeps Dagster's job name,
  is tagged with the named job that holds its assets (`topicmap/named_job`) and carries the project's tags and pools,
  so the run queue's limits hold: a second spider run of a topic stays queued while the first is in progress, while
  a spider run of another topic starts; a backfill's runs stay queued while the backfill limit is taken.

Waits on progress (runs, their states, the processes' logs), never on a wall-clock deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest
import yaml

from assets.jobs import SPIDER_ASSETS, topic_run_tags
from tests.dagster_deploy import DEPLOY, ROOT, LocalDagster

pytestmark = pytest.mark.daemon

TOPIC, OTHER_TOPIC = "ui-climate", "ui-carbon"
TOPICS = f"""topics:
  - {{name: {TOPIC}, query: climate, start_date: 2026-01-01, end_date: 2026-03-31}}
  - {{name: {OTHER_TOPIC}, query: '"carbon tax"', start_date: 2026-01-01, end_date: 2026-03-31}}
"""


def _backfill_run_limit() -> int:
    """The instance's limit on backfill runs in progress at once (deploy/dagster.local.yaml)."""
    config = yaml.safe_load((DEPLOY / "dagster.local.yaml").read_text(encoding="utf-8"))
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    (limit,) = [limit["limit"] for limit in limits if limit["key"] == "dagster/backfill"]
    return limit


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalDagster, dg.DagsterInstance]]:
    """The webserver and daemon on an instance where `topicmap topic add` has already seeded TOPIC (its spider and
    post-spider runs, which no test here reads, are left out). The runs' steps run in their run worker: no test
    here is about step processes."""
    tmp_path = tmp_path_factory.mktemp("ui_runs")
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TOPICMAP_", "DAGSTER_HOME"))},
        "TOPICMAP_HOME": str(home),
        "TOPICMAP_TOPICS_FILE": str(tmp_path / "topics.yaml"),
        "TOPICMAP_EXECUTOR": "in_process",
    }
    dagster = LocalDagster(tmp_path, env)
    # the instance's SQLite storage is made here, before the processes below open it at once (two processes
    # making it at the same time collide)
    with dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance:
        # `topic add` runs while the code server and the webserver start, and has ended before the daemon starts
        add_log = tmp_path / "topic_add.log"
        with add_log.open("wb") as log:
            add = subprocess.Popen(
                [sys.executable, "-m", "orchestration.cli", "topic", "add", TOPIC],
                cwd=ROOT,
                env=dagster.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def added() -> None:
            assert add.wait() == 0, add_log.read_text(errors="replace")[-5000:]

        try:
            dagster.start(before_daemon=added)
            yield dagster, instance
        finally:
            if add.poll() is None:
                add.kill()
                add.wait()
            dagster.stop()


def test_runs_launched_from_the_asset_graph_carry_the_projects_tags_and_limits(
    deployment: tuple[LocalDagster, dg.DagsterInstance],
) -> None:
    # first in the module: its backfills are launched before the backfill daemon's first turn (every 30 s) reads them
    dagster, instance = deployment
    graphql = dagster.graphql
    graphql.add_partition("topics", OTHER_TOPIC)

    # a backfill from the asset graph: one run per topic, each tagged as seeds_job's work on its topic, submitted
    # to the queue; backfill runs of other backfills in progress take the queue's backfill limit, so the queue holds
    # these back (the test reads their tags and pools, not their work). Launched first, with the one over publication
    # days below: the backfill daemon submits both in one turn while the spider runs below are looked at.
    for _ in range(_backfill_run_limit()):
        instance.add_run(
            dg.DagsterRun(
                job_name="seeds_job",
                run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.STARTED,
                tags={"dagster/backfill": "elsewhere"},
            )
        )
    backfill = dagster.launch_backfill("seeds", [TOPIC, OTHER_TOPIC])
    clicks = dagster.launch_backfill("click_totals", ["2026-01-10", "2026-01-11"])

    # a spider run of TOPIC in progress (as the spider sensor leaves one): the queue must hold a second one back
    instance.add_run(
        dg.DagsterRun(
            job_name="spider_iteration_job",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.STARTED,
            tags=topic_run_tags(TOPIC, 7, "spider"),
        )
    )
    second = graphql.launch_assets(*SPIDER_ASSETS, tags={"dagster/partition": TOPIC})
    other = graphql.launch_assets(*SPIDER_ASSETS, tags={"dagster/partition": OTHER_TOPIC})

    def stored(run_id: str) -> dict:
        return next(r for r in graphql.runs() if r["runId"] == run_id)

    def cancel(run_id: str) -> None:
        """As the UI's Terminate dialog does with "Force termination"."""
        canceled = graphql.query(
            "mutation($id: String!) { terminateRun(runId: $id, terminatePolicy: MARK_AS_CANCELED_IMMEDIATELY) { "
            "__typename ... on TerminateRunFailure { message } ... on PythonError { message } } }",
            id=run_id,
        )["terminateRun"]
        assert canceled["__typename"] == "TerminateRunSuccess", canceled

    for run_id, topic in ((second, TOPIC), (other, OTHER_TOPIC)):
        run = stored(run_id)
        assert run["jobName"] == "__ASSET_JOB", run
        assert {
            k: run["tags"].get(k)
            for k in ("topicmap/named_job", "topicmap/topic", "topicmap/spider_topic", "topicmap/stage")
        } == {
            "topicmap/named_job": "spider_iteration_job",
            "topicmap/topic": topic,
            "topicmap/spider_topic": topic,
            "topicmap/stage": "spider",
        }
        assert instance.get_run_by_id(run_id).run_op_concurrency.all_pools == {"spider"}
    # the Runs list filtered on the tag shows them, as the README says to read such a run
    named = {r["runId"] for r in graphql.runs({"topicmap/named_job": "spider_iteration_job"})}
    assert {second, other} <= named
    # the queue starts the other topic's spider run (queued after the second) and holds the second back
    dagster.wait_for(
        "the other topic's spider run to leave the queue", lambda: stored(other)["status"] != "QUEUED"
    )
    assert stored(second)["status"] == "QUEUED"
    # what the other topic's spider run goes on to do is no concern of this test: it is canceled (its worker, once
    # up, does not start the steps)
    cancel(other)

    def submitted(backfill_id: str, count: int) -> list[dict] | None:
        """The backfill's runs once the daemon has created and submitted (queued) all ``count`` of them."""
        runs = dagster.backfill_runs(backfill_id)
        return runs if len(runs) == count and all(r["status"] != "NOT_STARTED" for r in runs) else None

    runs = dagster.wait_for("the backfill's two runs", lambda: submitted(backfill, 2))
    assert sorted((r["tags"].get("topicmap/named_job"), r["tags"].get("topicmap/topic")) for r in runs) == [
        ("seeds_job", OTHER_TOPIC),
        ("seeds_job", TOPIC),
    ], runs
    # and the one over publication days: click_totals_job's work, counted against the Bit.ly limit
    (click_run,) = dagster.wait_for("the click backfill's run", lambda: submitted(clicks, 1))
    assert (
        click_run["tags"]["topicmap/named_job"] == "click_totals_job"
        and click_run["tags"]["topicmap/api"] == "bitly"
    )
    assert instance.get_run_by_id(click_run["runId"]).run_op_concurrency.all_pools == {"social_api"}
    assert {r["status"] for r in [*runs, click_run]} == {"QUEUED"}
    # the runs held back never run: the module's other test finds a quiet queue
    for run_id in [second, *(r["runId"] for r in [*runs, click_run])]:
        cancel(run_id)


def test_a_run_the_project_started_is_on_its_job_page_and_re_executes_from_the_ui(
    deployment: tuple[LocalDagster, dg.DagsterInstance],
) -> None:
    dagster, _ = deployment
    graphql = dagster.graphql
    # the seeds run of `topicmap topic add` (tagged as the topic registry sensor's request)
    (seeds_run,) = graphql.runs({"topicmap/topic": TOPIC, "dagster/sensor_name": "topic_registry"})
    assert seeds_run["jobName"] == "seeds_job"
    assert seeds_run["runId"] in graphql.job_page_runs("seeds_job")

    again = graphql.reexecute(seeds_run["runId"])
    assert dagster.wait_for_run(again) == "SUCCESS", graphql.run_messages(again)[-10:]
    (rerun,) = [r for r in graphql.runs() if r["runId"] == again]
    assert rerun["jobName"] == "seeds_job" and rerun["tags"]["dagster/parent_run_id"] == seeds_run["runId"]
    # launched by hand, though it carries the sensor's name that Dagster copied from its parent
    assert (
        rerun["tags"]["topicmap/launched_by"] == "manual"
        and seeds_run["tags"]["topicmap/launched_by"] == "manual"
    )
    assert again in graphql.job_page_runs("seeds_job")
    # the re-execution is itself a run of the code location: it re-executes too
    assert dagster.wait_for_run(graphql.reexecute(again)) == "SUCCESS"
