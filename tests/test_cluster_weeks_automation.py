"""Weekly clusters follow new weeks and rebuilt stories through Dagster's declarative automation: evaluated as the
`cluster_weeks_automation` sensor evaluates them (dg.evaluate_automation_conditions, tick after tick), each topic's
weeks following its own stories."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Protocol

import dagster as dg
import pytest

from assets.partitions import (
    apply_calendar,
    apply_declared_calendar,
    declared_topic_weeks,
    topic_weeks_partitions,
)
from orchestration.definitions import defs
from sensors.automation import cluster_weeks_automation
from tests.conftest import FreshInstance
from topicmap.clusters.store import topic_weeks
from topicmap.topics.declarations import load_topics

CLUSTER_WEEKS = dg.AssetSelection.assets("cluster_weeks")
CLUSTER_WEEKS_KEY = dg.AssetKey("cluster_weeks")


def _stories_rebuilt(instance: dg.DagsterInstance, *topics: str) -> None:
    for topic in topics:
        instance.report_runless_asset_event(dg.AssetMaterialization("deduped_stories", partition=topic))


class Evaluation(Protocol):
    """What these tests read of an evaluation (dg.evaluate_automation_conditions' result)."""

    cursor: str | None
    total_requested: int

    def get_requested_partitions(self, asset_key: dg.AssetKey) -> set[str]: ...


def _tick(
    instance: dg.DagsterInstance, previous: Evaluation | None = None, at: datetime | None = None
) -> Evaluation:
    """One evaluation of the code location's `cluster_weeks` condition, after ``previous`` (its cursor), at ``at``."""
    return dg.evaluate_automation_conditions(
        defs=defs,
        instance=instance,
        asset_selection=CLUSTER_WEEKS,
        cursor=previous.cursor if previous else None,
        evaluation_time=at,
    )


def _declare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *topics: str) -> None:
    """The topics file the condition reads, with ``topics`` as YAML flow mappings."""
    path = tmp_path / "topics.yaml"
    path.write_text("topics:\n" + "".join(f"  - {{{topic}}}\n" for topic in topics), encoding="utf-8")
    monkeypatch.setenv("TOPICMAP_TOPICS_FILE", str(path))


def test_the_sensor_ticks_in_the_code_server_and_requests_one_backfill_of_the_topics_weeks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_instance: FreshInstance
) -> None:
    """The sensor as the code server ticks it (``use_user_code_server``: the daemon runs only Dagster's own
    conditions, and this one reads the topics file): one backfill, over the declared topic's weeks alone."""
    _declare(tmp_path, monkeypatch, "name: climate, query: a, start_date: 2026-01-20, end_date: 2026-02-10")
    repository = defs.get_repository_def()
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "undeclared"])
        apply_declared_calendar(
            instance
        )  # the weeks the declared topic spans, as the topic registry adds them
        weeks = instance.get_dynamic_partitions(topic_weeks_partitions.name)
        assert weeks == [
            "climate|2026-01-19",
            "climate|2026-01-26",
            "climate|2026-02-02",
            "climate|2026-02-09",
        ]
        first = cluster_weeks_automation.evaluate_tick(
            dg.build_sensor_context(instance=instance, repository_def=repository)
        )
        _stories_rebuilt(instance, "climate", "undeclared")
        tick = cluster_weeks_automation.evaluate_tick(
            dg.build_sensor_context(instance=instance, repository_def=repository, cursor=first.cursor)
        )
    (backfill,) = tick.run_requests
    assert backfill.asset_graph_subset is not None
    (subset,) = backfill.asset_graph_subset.partitions_subsets_by_asset_key.values()
    assert set(subset.get_partition_keys()) == set(weeks)


def test_a_topics_weeks_are_built_once_its_stories_land_and_again_when_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_instance: FreshInstance
) -> None:
    _declare(
        tmp_path,
        monkeypatch,
        "name: climate, query: a, start_date: 2026-03-02, end_date: 2026-04-12",
        "name: other, query: b, start_date: 2026-03-02, end_date: 2026-04-12",
    )
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "other"])
        apply_declared_calendar(instance)
        weeks = [key.split("|")[1] for key in instance.get_dynamic_partitions(topic_weeks_partitions.name)]
        assert len(weeks) == 2 * 6 and weeks[:6] == weeks[6:]
        weeks = weeks[:6]
        # no deduplicated stories yet: nothing to cluster
        result = _tick(instance)
        assert result.total_requested == 0
        _stories_rebuilt(instance, "climate")
        result = _tick(instance, result)
        requested = result.get_requested_partitions(CLUSTER_WEEKS_KEY)
        # every week of that topic (built in order in one run), none of the topic whose stories are missing
        assert requested == {f"climate|{week}" for week in weeks}
        # the next tick: handled, nothing new
        result = _tick(instance, result)
        assert result.total_requested == 0
        # the stories are rebuilt (a new spider pass, a merge): the weeks follow
        _stories_rebuilt(instance, "climate")
        result = _tick(instance, result)
        assert result.get_requested_partitions(CLUSTER_WEEKS_KEY) == requested


def test_a_topics_weeks_wait_while_its_own_stories_are_being_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_instance: FreshInstance
) -> None:
    """The stories are read per topic: a topic whose stories a run is building again waits, the other topic's weeks
    do not (nor do they wait for a topic whose stories were never built)."""
    _declare(
        tmp_path,
        monkeypatch,
        "name: climate, query: a, start_date: 2026-03-02, end_date: 2026-03-22",
        "name: other, query: b, start_date: 2026-03-02, end_date: 2026-03-22",
        "name: unbuilt, query: c, start_date: 2026-03-02, end_date: 2026-03-22",
    )
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "other", "unbuilt"])
        apply_declared_calendar(instance)
        first = _tick(instance)
        _stories_rebuilt(instance, "climate", "other")
        instance.create_run_for_job(
            defs.resolve_job_def("post_spider_job"),
            status=dg.DagsterRunStatus.STARTED,
            tags={"dagster/partition": "climate"},
        )
        result = _tick(instance, first)
    requested = result.get_requested_partitions(CLUSTER_WEEKS_KEY)
    assert {key.split("|")[0] for key in requested} == {"other"} and len(requested) == 3


def test_rebuilt_stories_request_only_the_topics_own_weeks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_instance: FreshInstance
) -> None:
    """Each topic is offered its own weeks only; a rebuild of its stories requests them, not a week the registry
    keeps because it holds data (a week past the topic's shortened end, a week of a topic no longer declared)."""
    _declare(
        tmp_path,
        monkeypatch,
        "name: early, query: a, start_date: 2026-01-07, end_date: 2026-02-20",
        "name: late, query: b, start_date: 2026-02-10, end_date: 2026-04-30",
    )
    held = ["early|2026-03-02", "removed|2026-01-05"]
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", ["early", "late", "removed"])
        for key in held:
            instance.report_runless_asset_event(dg.AssetMaterialization("cluster_weeks", partition=key))
        apply_declared_calendar(instance)
        early = topic_weeks(date(2026, 1, 7), date(2026, 2, 20))
        late = topic_weeks(date(2026, 2, 10), date(2026, 4, 30))
        assert (early[0], early[-1], late[0], late[-1]) == (
            "2026-01-05",
            "2026-02-16",
            "2026-02-09",
            "2026-04-27",
        )
        declared = {f"early|{w}" for w in early} | {f"late|{w}" for w in late}
        # the set: each topic's own weeks, a topic's in date order, and the keys that hold data
        offered = instance.get_dynamic_partitions(topic_weeks_partitions.name)
        assert offered == sorted(declared | set(held))
        first = _tick(instance)
        _stories_rebuilt(instance, "early", "late", "removed")
        result = _tick(instance, first)
        assert result.get_requested_partitions(CLUSTER_WEEKS_KEY) == declared
        result = _tick(instance, result)  # the next tick: handled
        assert result.total_requested == 0
        # one topic rebuilt: its weeks alone
        _stories_rebuilt(instance, "late")
        result = _tick(instance, result)
        assert result.get_requested_partitions(CLUSTER_WEEKS_KEY) == {f"late|{w}" for w in late}


def test_a_topics_declared_weeks_run_from_the_week_of_its_start_to_the_week_of_its_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "topics.yaml"
    path.write_text(
        "topics:\n"
        "  - {name: closed, query: a, start_date: 2026-01-07, end_date: 2026-02-20}\n"
        "  - {name: running, query: a, start_date: 2026-03-04, end_date: open}\n"
        "  - {name: closed, query: a, start_date: 2027-01-01, end_date: 2027-02-01}\n"  # declared twice: the first counts
        "  - {name: undated, query: a}\n"
        "  - {name: unparsable, query: 'a AND', start_date: 2026-01-01, end_date: 2026-02-01}\n"  # rejected: no weeks
        "  - {query: a, start_date: 2026-01-01, end_date: 2026-02-01}\n",  # no name
        encoding="utf-8",
    )
    assert declared_topic_weeks(path, today=date(2026, 11, 27)) == {
        "closed": (date(2026, 1, 5), date(2026, 2, 16)),
        "running": (date(2026, 3, 2), date(2026, 11, 23)),  # to the current week
    }


def test_a_week_the_registry_adds_is_requested_for_the_topic_it_belongs_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_instance: FreshInstance
) -> None:
    """The code location's condition on the registry's week set: a week that comes in (an open-ended topic's, once
    it is over) is requested for the topics whose stories are there and whose dates hold it, and only that week."""
    _declare(
        tmp_path,
        monkeypatch,
        "name: climate, query: a, start_date: 2026-01-05, end_date: open",
        "name: ended, query: b, start_date: 2026-01-05, end_date: 2026-01-25",
    )
    monday = datetime(2026, 2, 2, 12, tzinfo=UTC)
    topics = load_topics(tmp_path / "topics.yaml", monday.date()).topics
    with fresh_instance() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "ended"])
        apply_calendar(instance, topics, monday.date())
        so_far = ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]
        # the ended topic's weeks to the week of its last day (Sunday 2026-01-25), the open one's so far
        assert instance.get_dynamic_partitions("topic_weeks") == [
            *(f"climate|{week}" for week in so_far),
            *(f"ended|{week}" for week in so_far[:3]),
        ]
        before = _tick(instance, at=monday)
        _stories_rebuilt(instance, "climate", "ended")
        first = _tick(instance, before, at=monday)
        assert len(first.get_requested_partitions(CLUSTER_WEEKS_KEY)) == 4 + 3
        for key in first.get_requested_partitions(CLUSTER_WEEKS_KEY):  # built
            instance.report_runless_asset_event(dg.AssetMaterialization("cluster_weeks", partition=key))
        # a week later the registry adds the week that ended: in date order among the topic's weeks, before the
        # other topic's (moved after it), built alone; the other topic's weeks stay built
        apply_calendar(instance, topics, (monday + timedelta(days=7)).date())
        assert instance.get_dynamic_partitions("topic_weeks")[4] == "climate|2026-02-02"
        # (the next tick: Dagster keeps the previous tick's requested keys as ranges of the set's order, one of
        # which the new week now falls in)
        later = _tick(instance, first, at=monday + timedelta(days=7))
        assert later.get_requested_partitions(CLUSTER_WEEKS_KEY) == {"climate|2026-02-02"}
        same_week = _tick(instance, later, at=monday + timedelta(days=9))
        assert same_week.total_requested == 0
