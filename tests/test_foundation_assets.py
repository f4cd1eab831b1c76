"""The foundation assets and the topic registry sensor, run through Dagster in process."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from assets.archive import archive_stories
from assets.seeds import seeds
from resources.archive import ArchiveDropsResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.topics import topic_registry
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

DROP = """url,title,text,publish_date,medium
https://www.herald.test/2026/01/10/a,Climate summit opens,Delegates discuss carbon emissions.,2026-01-10,Herald
https://www.herald.test/2026/01/11/b,Local football,The match ended in a draw.,2026-01-11,Herald
https://ledger.test/2026/02/02/c,Carbon tax vote,Parliament votes on a carbon tax today.,2026-02-02,Ledger
https://ledger.test/2026/02/03/d,Carbon at the stadium,Sports fans and carbon emissions.,2026-02-03,Ledger
https://ledger.test/2026/05/03/e,Late climate story,Climate again but after the topic ends.,2026-05-03,Ledger
not-a-url,Broken,Broken row,2026-02-03,Ledger
"""

TOPICS = """topics:
  - name: climate
    query: '(climate OR "carbon tax" OR emission*) AND NOT sports'
    start_date: 2026-01-01
    end_date: 2026-04-30
    seed_urls: [extra_seeds.csv]
  - name: broken
    query: 'climate AND ('
    start_date: 2026-01-01
    end_date: 2026-04-30
"""


@pytest.fixture
def project(tmp_path: Path, fresh_sqlite_store: Callable[[Path], str]) -> dict:
    drops = tmp_path / "drops"
    drops.mkdir()
    (drops / "drop.csv").write_text(DROP, encoding="utf-8")
    (tmp_path / "topics.yaml").write_text(TOPICS, encoding="utf-8")
    (tmp_path / "extra_seeds.csv").write_text("url\nhttps://example.org/story\nnot a url\n", encoding="utf-8")
    db = fresh_sqlite_store(tmp_path / "store.sqlite3")
    return {
        "tmp": tmp_path,
        "db": db,
        "resources": {
            "store": TopicStoreResource(database_url=db),
            "topics_file": TopicsFileResource(path=str(tmp_path / "topics.yaml")),
            "drops": ArchiveDropsResource(drops_dir=str(drops)),
        },
    }


def test_code_location_loads_without_deprecation_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from orchestration.definitions import defs

        dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"archive_stories", "seeds", "fetched_links", "relevant_stories", "topic_links"} <= keys


def test_archive_then_seeds_with_metadata_and_no_duplicates_on_rerun(project: dict) -> None:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["climate"])
    first = dg.materialize([archive_stories], instance=instance, resources=project["resources"])
    meta = first.asset_materializations_for_node("archive_stories")[0].metadata
    assert meta["dagster/row_count"].value == 5 and meta["rows_rejected"].value == 1
    again = dg.materialize([archive_stories], instance=instance, resources=project["resources"])
    assert (
        again.asset_materializations_for_node("archive_stories")[0].metadata["files_already_loaded"].value
        == 1
    )

    result = dg.materialize(
        [archive_stories, seeds],
        selection=[seeds],
        partition_key="climate",
        instance=instance,
        resources=project["resources"],
    )
    meta = result.asset_materializations_for_node("seeds")[0].metadata
    # climate summit (Jan) + carbon tax vote (Feb); the sports story is excluded by NOT, the May story by date;
    # plus one URL from the seed CSV (the bad CSV row is reported, not loaded).
    assert meta["dagster/row_count"].value == 3
    assert meta["bad_seed_rows"].value == 1
    assert (
        "| 2026-01 | 1 |" in meta["seeds_per_month"].value
        and "| 2026-02 | 1 |" in meta["seeds_per_month"].value
    )
    dg.materialize(
        [archive_stories, seeds],
        selection=[seeds],
        partition_key="climate",
        instance=instance,
        resources=project["resources"],
    )
    store = TopicStore.open(project["db"])
    assert store.table_count(s.topic_seed_urls) == 3
    assert store.table_count(s.stories) == 5


def test_seeds_fail_clearly_when_more_than_max_stories_match(project: dict) -> None:
    topics = project["tmp"] / "topics.yaml"
    topics.write_text(
        TOPICS.replace("    seed_urls: [extra_seeds.csv]\n", "    max_stories: 1\n"), encoding="utf-8"
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["climate"])
    dg.materialize([archive_stories], instance=instance, resources=project["resources"])
    result = dg.materialize(
        [archive_stories, seeds],
        selection=[seeds],
        partition_key="climate",
        instance=instance,
        resources=project["resources"],
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "more than max_stories=1" in str(failure.event_specific_data.error.message)
    assert TopicStore.open(project["db"]).topic_row("climate")["state"] == "error"


def test_topic_registry_adds_partitions_requests_seeds_and_reports_removed(project: dict) -> None:
    instance = dg.DagsterInstance.ephemeral()
    resources = {key: project["resources"][key] for key in ("store", "topics_file")}
    result = topic_registry(dg.build_sensor_context(instance=instance, resources=resources))
    assert [r.partition_keys for r in result.dynamic_partitions_requests] == [["climate"]]
    assert [r.partition_key for r in result.run_requests] == ["climate"]
    cursor = result.cursor
    # "retired" was spidered before it left the file; "typo" was added in the launch dialog and never run
    instance.add_dynamic_partitions("topics", ["climate", "retired", "typo"])
    _run_for_partition(instance, "retired")
    tidy = topic_registry(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))
    assert tidy.run_requests == []
    (delete,) = tidy.dynamic_partitions_requests
    assert isinstance(delete, dg.DeleteDynamicPartitionsRequest) and delete.partition_keys == ["typo"]
    instance.delete_dynamic_partition("topics", "typo")  # what the daemon does with the request
    # the retired topic keeps its partition (and data); once reported, later ticks say so and request nothing
    quiet = topic_registry(
        dg.build_sensor_context(instance=instance, cursor=tidy.cursor, resources=resources)
    )
    assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []
    assert "retired" in str(quiet.skip_reason) and "typo" not in str(quiet.skip_reason)
    # A changed declaration re-seeds the topic with a new run key.
    topics = project["tmp"] / "topics.yaml"
    topics.write_text(TOPICS.replace("2026-04-30", "2026-04-29", 1), encoding="utf-8")
    changed = topic_registry(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))
    assert [r.partition_key for r in changed.run_requests] == ["climate"]
    assert changed.run_requests[0].run_key != result.run_requests[0].run_key
    assert json.loads(changed.cursor)["declared"].keys() == {"climate"}
    # a cursor written before the registry kept what it reported is read as the declared topics
    old = json.dumps(json.loads(cursor)["declared"])
    assert topic_registry(
        dg.build_sensor_context(instance=instance, cursor=old, resources=resources)
    ).run_requests


@dg.op
def _noop() -> None:
    pass


@dg.job
def _topic_job() -> None:
    _noop()


def _run_for_partition(instance: dg.DagsterInstance, topic: str) -> None:
    instance.create_run_for_job(
        _topic_job, status=dg.DagsterRunStatus.SUCCESS, tags={"dagster/partition": topic}
    )


def test_runs_for_an_undeclared_topic_fail_at_once_naming_the_topic_and_the_file(project: dict) -> None:
    from assets.spider import spider_iteration
    from resources.fetcher import PageSourceResource

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["typo"])  # "Add a partition" in the launch dialog
    resources = {**project["resources"], "page_source": PageSourceResource()}
    for asset in (seeds, spider_iteration):  # the spider has a retry policy: an undeclared topic skips it
        result = dg.materialize(
            [asset], partition_key="typo", instance=instance, resources=resources, raise_on_error=False
        )
        assert not result.success
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        assert not [e for e in result.all_events if e.is_step_up_for_retry]
        description = failure.step_failure_data.user_failure_data.description
        assert (
            "'typo' is not declared in" in description and str(project["tmp"] / "topics.yaml") in description
        )


def test_dagster_cli_validates_the_code_location() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    binaries = Path(sys.executable).parent
    validate = subprocess.run(
        [str(binaries / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert validate.returncode == 0, validate.stderr[-3000:]
    assert "All code locations passed validation" in validate.stderr + validate.stdout
    check = subprocess.run(
        [str(binaries / "dg"), "check", "defs"], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stderr[-3000:]
    # our own code raises no deprecation warning (the CLI's own "superseded" notice is not ours)
    assert "DeprecationWarning" not in validate.stderr + check.stderr
