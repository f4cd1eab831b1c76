"""Weekly clusters follow new weeks and rebuilt stories through Dagster's declarative automation: evaluated as the
`cluster_weeks_automation` sensor evaluates them (dg.evaluate_automation_conditions, tick after tick), each topic
kept to its own weeks of the week dimension all topics share."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from assets.clusters import TOPIC_OF_WEEK
from assets.conditions import CLUSTER_WEEKS_CONDITION
from assets.partitions import apply_calendar, apply_declared_calendar, declared_topic_weeks, weeks_partitions
from orchestration.definitions import defs
from sensors.automation import cluster_weeks_automation
from topicmap.clusters.store import topic_weeks
from topicmap.topics.declarations import load_topics

CLUSTER_WEEKS = dg.AssetSelection.assets("cluster_weeks")
CLUSTER_WEEKS_KEY = dg.AssetKey("cluster_weeks")


def _stories_rebuilt(instance: dg.DagsterInstance, *topics: str) -> None:
    for topic in topics:
        instance.report_runless_asset_event(dg.AssetMaterialization("deduped_stories", partition=topic))


def _declare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *topics: str) -> None:
    """The topics file the condition reads, with ``topics`` as YAML flow mappings."""
    path = tmp_path / "topics.yaml"
    path.write_text("topics:\n" + "".join(f"  - {{{topic}}}\n" for topic in topics), encoding="utf-8")
    monkeypatch.setenv("TOPICMAP_TOPICS_FILE", str(path))


def _weeks_asset(weeks: dg.WeeklyPartitionsDefinition) -> list[dg.AssetSpec]:
    """deduped_stories [topic] and cluster_weeks [topic x ``weeks``] with the project's condition and mapping."""
    topics = dg.DynamicPartitionsDefinition(name="topics")
    stories = dg.AssetSpec("deduped_stories", partitions_def=topics)
    return [
        stories,
        dg.AssetSpec(
            "cluster_weeks",
            partitions_def=dg.MultiPartitionsDefinition({"topic": topics, "week": weeks}),
            automation_condition=CLUSTER_WEEKS_CONDITION,
            deps=[dg.AssetDep(stories, partition_mapping=TOPIC_OF_WEEK)],
        ),
    ]


def test_the_sensor_ticks_in_the_code_server_and_requests_one_backfill_of_the_topics_weeks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor as the code server ticks it (``use_user_code_server``: the daemon runs only Dagster's own
    conditions, and this one reads the topics file): one backfill, over the declared topic's weeks alone."""
    _declare(tmp_path, monkeypatch, "name: climate, query: a, start_date: 2026-01-20, end_date: 2026-02-10")
    repository = defs.get_repository_def()
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "undeclared"])
        apply_declared_calendar(
            instance
        )  # the weeks the declared topic spans, as the topic registry adds them
        weeks = instance.get_dynamic_partitions(weeks_partitions.name)
        assert weeks == ["2026-01-19", "2026-01-26", "2026-02-02", "2026-02-09"]
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
    assert set(subset.get_partition_keys()) == {f"climate|{week}" for week in weeks}


def test_a_topics_weeks_are_built_once_its_stories_land_and_again_when_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _declare(
        tmp_path,
        monkeypatch,
        "name: climate, query: a, start_date: 2026-03-02, end_date: 2026-04-12",
        "name: other, query: b, start_date: 2026-03-02, end_date: 2026-04-12",
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "other"])
        apply_declared_calendar(instance)
        weeks = instance.get_dynamic_partitions(weeks_partitions.name)
        assert len(weeks) == 6
        # no deduplicated stories yet: nothing to cluster
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS
        )
        assert result.total_requested == 0
        _stories_rebuilt(instance, "climate")
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        requested = result.get_requested_partitions(CLUSTER_WEEKS_KEY)
        # every week of that topic (built in order in one run), none of the topic whose stories are missing
        assert requested == {f"climate|{week}" for week in weeks}
        # the next tick: handled, nothing new
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        assert result.total_requested == 0
        # the stories are rebuilt (a new spider pass, a merge): the weeks follow
        _stories_rebuilt(instance, "climate")
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, cursor=result.cursor
        )
        assert result.get_requested_partitions(CLUSTER_WEEKS_KEY) == requested


def test_rebuilt_stories_request_only_the_topics_own_weeks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The week dimension runs from the earliest start to the latest end of all topics: a week of `early` after its
    end is a week of `late`, and a week before `late` starts one of `early`; neither is requested for the topic it
    does not belong to, nor any week of a topic the file no longer declares."""
    _declare(
        tmp_path,
        monkeypatch,
        "name: early, query: a, start_date: 2026-01-07, end_date: 2026-02-20",
        "name: late, query: b, start_date: 2026-02-10, end_date: 2026-04-30",
    )
    weeks = dg.WeeklyPartitionsDefinition(start_date="2026-01-05", end_date="2026-05-04", day_offset=1)
    assets = _weeks_asset(weeks)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["early", "late", "removed"])
        first = dg.evaluate_automation_conditions(defs=assets, instance=instance)
        _stories_rebuilt(instance, "early", "late", "removed")
        result = dg.evaluate_automation_conditions(defs=assets, instance=instance, cursor=first.cursor)
        requested = result.get_requested_partitions(CLUSTER_WEEKS_KEY)
    early = topic_weeks(date(2026, 1, 7), date(2026, 2, 20))
    late = topic_weeks(date(2026, 2, 10), date(2026, 4, 30))
    assert (early[0], early[-1], late[0], late[-1]) == (
        "2026-01-05",
        "2026-02-16",
        "2026-02-09",
        "2026-04-27",
    )
    assert requested == {f"early|{w}" for w in early} | {f"late|{w}" for w in late}


def test_a_new_week_is_requested_only_for_the_topics_it_belongs_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With weeks that run on (a topic without an end), the week that begins is requested for each topic whose
    stories are there and whose dates it falls in, and only that week: not for a topic that ended before it."""
    _declare(
        tmp_path,
        monkeypatch,
        "name: climate, query: a, start_date: 2026-01-05, end_date: open",
        "name: ended, query: b, start_date: 2026-01-05, end_date: 2026-01-25",
    )
    assets = _weeks_asset(dg.WeeklyPartitionsDefinition(start_date="2026-01-05", day_offset=1))
    monday = datetime(2026, 2, 2, 12, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "ended", "other"])
        before = dg.evaluate_automation_conditions(defs=assets, instance=instance, evaluation_time=monday)
        assert before.total_requested == 0  # no stories yet
        _stories_rebuilt(instance, "climate", "ended")
        first = dg.evaluate_automation_conditions(
            defs=assets, instance=instance, evaluation_time=monday, cursor=before.cursor
        )
        # the stories landed: each topic's weeks so far (a week is a partition once it is over)
        so_far = ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]
        assert first.get_requested_partitions(CLUSTER_WEEKS_KEY) == {
            *(f"climate|{week}" for week in so_far),
            *(f"ended|{week}" for week in so_far[:3]),  # it ended on Sunday 2026-01-25
        }
        same_week = dg.evaluate_automation_conditions(
            defs=assets,
            instance=instance,
            evaluation_time=monday + timedelta(days=3),
            cursor=first.cursor,
        )
        assert same_week.total_requested == 0
        next_week = dg.evaluate_automation_conditions(
            defs=assets,
            instance=instance,
            evaluation_time=monday + timedelta(days=7),
            cursor=same_week.cursor,
        )
        assert next_week.get_requested_partitions(CLUSTER_WEEKS_KEY) == {"climate|2026-02-02"}


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("topics", ["climate", "ended"])
        apply_calendar(instance, topics, monday.date())
        assert instance.get_dynamic_partitions("weeks") == [
            "2026-01-05",
            "2026-01-12",
            "2026-01-19",
            "2026-01-26",
        ]
        before = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=CLUSTER_WEEKS, evaluation_time=monday
        )
        _stories_rebuilt(instance, "climate", "ended")
        first = dg.evaluate_automation_conditions(
            defs=defs,
            instance=instance,
            asset_selection=CLUSTER_WEEKS,
            evaluation_time=monday,
            cursor=before.cursor,
        )
        assert len(first.get_requested_partitions(CLUSTER_WEEKS_KEY)) == 4 + 3
        for key in first.get_requested_partitions(CLUSTER_WEEKS_KEY):  # built
            instance.report_runless_asset_event(dg.AssetMaterialization("cluster_weeks", partition=key))
        # a week later the registry adds the week that ended
        apply_calendar(instance, topics, (monday + timedelta(days=7)).date())
        assert instance.get_dynamic_partitions("weeks")[-1] == "2026-02-02"
        later = dg.evaluate_automation_conditions(
            defs=defs,
            instance=instance,
            asset_selection=CLUSTER_WEEKS,
            evaluation_time=monday + timedelta(days=7),
            cursor=first.cursor,
        )
        assert later.get_requested_partitions(CLUSTER_WEEKS_KEY) == {"climate|2026-02-02"}
