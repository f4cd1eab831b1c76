"""`make demo`: the whole asset graph on the embedded demo web, end to end, with a printed summary.

It generates the deterministic demo news web, drops its archive part into the archive folder, serves the
web on loopback, and materializes every asset for the demo topics in the Dagster instance under
DAGSTER_HOME, so `make ui` shows the same runs afterwards. Running it again is safe: every write is keyed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from topicmap import settings

if TYPE_CHECKING:
    import dagster as dg

    from orchestration.runs import FinishedRun
    from topicmap.store.topic_store import TopicStore
    from topicmap.topics.declarations import TopicConfig

ROOT = Path(__file__).resolve().parent.parent


def _prepare_environment(home: Path) -> None:
    os.environ.setdefault("TOPICMAP_HOME", str(home))
    dagster_home = Path(os.environ.setdefault("DAGSTER_HOME", str(home / "dagster_home")))
    dagster_home.mkdir(parents=True, exist_ok=True)
    config = dagster_home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    os.environ.setdefault("TOPICMAP_TOPICS_FILE", str(ROOT / "topics.yaml"))


def _say(line: str = "") -> None:
    print(line, flush=True)


def _write_media_dups(web, path: Path) -> None:  # noqa: ANN001
    """The demo's renamed outlets and mobile sites, declared as a curator would (medium → canonical medium)."""
    urls = {m["name"]: m["url"] for m in web.media}
    lines = ["medium_url,dup_of_medium_url"]
    lines += [f"{m['url']},{urls[m['dup_of']]}" for m in web.media if m["dup_of"]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.environ["TOPICMAP_MEDIA_DUPS_FILE"] = str(path)


def _write_media_tags(web, path: Path) -> None:  # noqa: ANN001
    """The demo's media tags, as a curator keeps them: each outlet's media_type (the wire service, the specialist
    sites, the rest newspapers). A renamed outlet is tagged under its old name: the tag follows its dup_media_id
    to the outlet. Link maps are coloured by media_type."""
    from topicmap.demo.outlets import OUTLETS

    url_of = {m["name"]: m["url"] for m in web.media}
    lines = ["medium_url,tag_set,tag"]
    for spec in OUTLETS:
        kind = (
            "wire" if spec.name == "Atlas Wire Service" else "digital_native" if spec.focus else "newspaper"
        )
        named = spec.renamed_from[0] if spec.renamed_from and spec.renamed_from[0] in url_of else spec.name
        if named in url_of:
            lines.append(f"{url_of[named]},media_type,{kind}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.environ["TOPICMAP_MEDIA_TAGS_FILE"] = str(path)
    os.environ.setdefault("TOPICMAP_LINK_MAP_TAG_SET", "media_type")


def _write_demo_topics(web, home: Path) -> None:  # noqa: ANN001
    """The demo's topics file, unless TOPICMAP_TOPICS_FILE names one: the repository's topics.yaml with the demo
    topic's post source added (a generic-post CSV of posts sharing demo stories, ``topicmap.demo.posts``), both
    written to the demo's home, so the snapshot's post, author and channel counts are filled."""
    if settings.TOPICS_FILE.is_set():
        return
    from topicmap.demo.posts import write_demo_posts

    posts = write_demo_posts(web, home / "demo_posts" / "climate-demo.csv")
    lines = (ROOT / "topics.yaml").read_text(encoding="utf-8").splitlines()
    at = lines.index("  - name: climate-demo") + 1
    lines[at:at] = [
        "    # written by `make demo`: posts sharing demo stories (their URLs are seeds too)",
        "    posts:",
        f"      - {{platform: generic_post, path: {json.dumps(str(posts))}}}",
    ]
    topics_file = home / "topics.yaml"
    topics_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.environ["TOPICMAP_TOPICS_FILE"] = str(topics_file)


def _print_foci(meta: dict) -> None:
    """Each focus of the snapshot: its size and top words."""
    if "foci" not in meta:
        return
    for record in meta["foci"].value.records:
        focus = record.data
        _say(
            f"  focus {focus['focus']} ({focus['definition']}): {focus['stories']} stories, "
            f"{focus['story links']} story links; top words: {focus['top words'] or '-'}"
        )


def demo_page_source(port: int) -> dict:
    """Page-source settings that point the spider at the demo web on loopback (and nothing else private)."""
    return {
        # the demo web lives on loopback: allow exactly its server, nothing else private
        "allow_networks": [f"127.0.0.1:{port}"],
        "host_overrides": {"*.test": f"127.0.0.1:{port}"},
        # the demo server is ours: a short politeness interval keeps the demo quick
        "default_interval": 0.02,
        "max_workers": 8,
    }


def _print_metadata(run: FinishedRun, asset: str, keys: Sequence[str]) -> None:
    for materialization in run.materializations(asset):
        meta = materialization.metadata
        shown = ", ".join(f"{k.replace('_', ' ')} {meta[k].value}" for k in keys if k in meta)
        _say(f"  {asset}: {shown}")


def build_cluster_weeks(
    defs: dg.Definitions, instance: dg.DagsterInstance, topic: TopicConfig
) -> FinishedRun | None:
    """The topic's weeks of `cluster_weeks` (those of its dates that are partitions: a week is one once it is
    over) in ONE `cluster_weeks_job` run over their range, as a backfill from the UI or the automation sensor
    runs them (``BackfillPolicy.single_run``): built in order in one pass, each from the state the week before
    left. None when none of its weeks is a partition yet."""

    from assets.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
    from assets.partitions import topic_weeks_partitions
    from orchestration.runs import run_job
    from topicmap.clusters.store import topic_weeks
    from topicmap.topics.calendar import topic_week_key

    partitions = set(instance.get_dynamic_partitions(topic_weeks_partitions.name))
    keys = [
        key
        for key in (
            topic_week_key(topic.name, week) for week in topic_weeks(topic.start_date, topic.last_day())
        )
        if key in partitions
    ]
    if not keys:
        _say(f"  no week of {topic.name} is a partition yet")
        return None
    first, last = keys[0], keys[-1]
    return run_job(
        defs,
        instance,
        "cluster_weeks_job",
        tags={ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last},
    )


def refresh_snapshot(
    defs: dg.Definitions, instance: dg.DagsterInstance, store: TopicStore, topic: str
) -> FinishedRun | None:
    """The topic's snapshot taken again, as the snapshot_refresh sensor requests it (its run key and tags), when
    clicks or statistics arrived after it; None when it is up to date."""
    from orchestration.runs import as_sensor_run, run_job
    from sensors.automation import SNAPSHOT_REFRESH, SPIDERED_STATE, snapshot_request
    from topicmap.snapshots.freshness import topic_freshness

    freshness = topic_freshness(store, topic)
    if freshness is None or freshness.state != SPIDERED_STATE or not freshness.stale(metrics_only=True):
        return None
    request = snapshot_request(freshness, metrics_only=True, reason="late-metrics")
    _say(
        f"\n== snapshot [{topic}] (snapshot_job, as snapshot_refresh requests it: clicks arrived after the snapshot)"
    )
    return run_job(
        defs,
        instance,
        "snapshot_job",
        topic,
        tags={**request.tags, **as_sensor_run(SNAPSHOT_REFRESH, request.run_key or "")},
    )


def main(argv: Sequence[str] | None = None) -> int:
    home = Path(settings.HOME.value() or ROOT / ".topicmap").resolve()
    topics_declared = settings.TOPICS_FILE.is_set()
    _prepare_environment(home)

    from topicmap.demo.server import serve_demo_web
    from topicmap.demo.web import generate_demo_web

    started = time.monotonic()
    _say("topicmap demo: generating the demo news web ...")
    web = generate_demo_web()
    drops = home / "drops"
    drops.mkdir(parents=True, exist_ok=True)
    web.write_archive_parquet(drops / "demo_archive.parquet", include_html=True)
    _write_media_dups(web, home / "media_dups.csv")
    _write_media_tags(web, home / "media_tags.csv")  # before the code location loads: it reads the settings
    if not topics_declared:
        os.environ.pop("TOPICMAP_TOPICS_FILE")
        _write_demo_topics(web, home)
    _say(
        f"  {len(web.media)} media, {len(web.pages)} pages, {len(web.archive_stories)} stories already archived"
    )

    from orchestration.snapshots import report_snapshot
    from orchestration.social_demo import demo_social_config, run_click_demo, statistics_line, teach_standin
    from topicmap.demo.standins import StandinDataset, run_standin_server
    from topicmap.snapshots.post_counts import sharing_summary

    with ExitStack() as stack:
        server = stack.enter_context(serve_demo_web(web))
        # the demo's own stand-in of the Bit.ly and Facebook APIs (made-up figures, never the real services)
        standin = stack.enter_context(run_standin_server(StandinDataset()))
        os.environ.update(demo_social_config(standin))
        os.environ["TOPICMAP_PAGE_SOURCE_JSON"] = json.dumps(demo_page_source(server.port))
        _say(f"  demo web served on 127.0.0.1:{server.port} (hosts *.test)")

        import dagster as dg

        from assets.jobs import topic_run_tags
        from assets.partitions import apply_declared_calendar
        from orchestration.definitions import defs
        from orchestration.runs import as_sensor_run, run_job, seed_topic
        from topicmap.spider.plan import decide, read_spider_facts
        from topicmap.store import schema
        from topicmap.store.topic_store import TopicStore
        from topicmap.topics.declarations import load_topics

        instance = dg.DagsterInstance.get()
        topics = load_topics(settings.TOPICS_FILE.value())
        for error in topics.errors:
            _say(f"  rejected topic: {error}")
        names = [t.name for t in topics.topics]
        instance.add_dynamic_partitions(
            "topics", [n for n in names if not instance.has_dynamic_partition("topics", n)]
        )
        apply_declared_calendar(
            instance
        )  # the days and weeks the topics span, as the topic registry keeps them

        # Every run is a named job, tagged as the sensor that would have requested it (its run key), so the
        # sensors find this work done when the daemon starts (`make ui`) and request nothing again.
        _say("\n== archive_stories (archive_job)")
        run_job(defs, instance, "archive_job")
        store = TopicStore.open()
        _say(f"  stories in the archive: {store.story_count(archive_only=True)}")

        topic_sizes: dict[str, int] = {}
        for topic in topics.topics:
            _say(f"\n== seeds [{topic.name}] (seeds_job)  query: {topic.query}")
            result = seed_topic(defs, instance, topic)
            meta = result.metadata("seeds")
            _say(f"  seeds: {meta['dagster/row_count'].value}  (new: {meta['seeds_new'].value})")
            _say("  " + meta["seeds_per_month"].value.replace("\n", "\n  "))

            _say(f"\n== spider [{topic.name}] (spider_iteration_job)")
            for _ in range(topic.max_iterations + 2):
                facts = read_spider_facts(store, topic.name, topic.max_iterations)
                decision = decide(facts, None, time.time())
                if decision.action != "run_iteration":
                    _say(f"  {decision.reason}")
                    break
                result = run_job(
                    defs,
                    instance,
                    "spider_iteration_job",
                    topic.name,
                    tags={
                        **topic_run_tags(topic.name, decision.iteration, "spider"),
                        **as_sensor_run("spider_iterations", decision.run_key),
                    },
                )
                f_meta, r_meta = result.metadata("fetched_links"), result.metadata("relevant_stories")
                _say(
                    f"  iteration {f_meta['iteration'].value}: URLs by state "
                    f"{json.dumps(f_meta['urls_by_state_this_iteration'].value, sort_keys=True)}; "
                    f"stories added {r_meta['new_stories'].value}; pending {f_meta['frontier_left'].value}"
                )
            facts = read_spider_facts(store, topic.name, topic.max_iterations)
            topics_id = store.topic_row(topic.name)["topics_id"]
            topic_sizes[topic.name] = store.table_count(schema.topic_stories, topics_id=topics_id)
            _say(f"  final size: {topic_sizes[topic.name]} stories after {facts.iterations_done} iterations")

        # the stand-in APIs learn every topic story now: the post-spider runs fetch Facebook statistics, before the
        # click backfill (which runs after dedup) would teach them
        teach_standin(standin)
        post_spider: dict[str, FinishedRun] = {}
        for topic in topics.topics:
            facts = read_spider_facts(store, topic.name, topic.max_iterations)
            decision = decide(facts, None, time.time())
            _say(
                f"\n== post-spider [{topic.name}] (post_spider_job: dedup, statistics, WARC, clusters, snapshot)"
            )
            result = run_job(
                defs,
                instance,
                "post_spider_job",
                topic.name,
                tags={
                    **topic_run_tags(topic.name, decision.iteration, "post-spider"),
                    **(
                        as_sensor_run("spider_iterations", decision.run_key)
                        if decision.action == "post_spider"
                        else {}
                    ),
                },
            )
            post_spider[topic.name] = result
            for node, keys in (
                (
                    "deduped_media",
                    ["dup_media_declared_now", "merged_now", "stories_moved_now", "cross_media_links_after"],
                ),
                ("media_tags", ["rows_loaded", "bad_rows", "topic_media", "dagster/row_count"]),
                ("deduped_stories", ["merged_now", "cross_media_links_after"]),
                ("near_duplicates", ["stories", "groups", "dagster/row_count"]),
                ("story_warc_archive", ["dagster/row_count", "folder"]),
                ("clusters", ["dagster/row_count", "k", "k_reason", "timeline_png"]),
            ):
                _print_metadata(result, node, keys)
            _say(
                f"\n== clusters week by week [{topic.name}] (one cluster_weeks_job run over the topic's weeks, "
                "each week from the one before)"
            )
            weekly = build_cluster_weeks(defs, instance, topic)
            if weekly is not None:
                _print_metadata(weekly, "cluster_weeks", ["dagster/row_count", "k", "stories_moved"])
            topics_id = store.topic_row(topic.name)["topics_id"]
            size_after = store.table_count(schema.topic_stories, topics_id=topics_id)
            _say(f"  topic size after dedup: {size_after} stories (before: {topic_sizes[topic.name]})")
            stats = result.metadata("story_statistics")
            _say(statistics_line(stats, topic.name))

        # After dedup, so each story's clicks are fetched once with the URLs of the stories merged into it: fetched
        # before, the survivors' figures would predate their merges and the refetch sensors would fetch them again.
        _say("\n== click totals by publication day (click_totals_job, backfilled over the topics' days)")
        run_click_demo(defs, instance, standin, say=_say)

        found: dict[str, dict] = {}
        for topic in topics.topics:
            result = refresh_snapshot(defs, instance, store, topic.name) or post_spider[topic.name]
            found[topic.name] = report_snapshot(result, topic.name, say=_say)
            _say("  " + sharing_summary(found[topic.name]["folder"]))
            _print_foci(result.metadata("snapshots"))

    for name, paths in found.items():
        _say(f"\n{name}: link map {paths['link_map_png']}  (files: python -m topicmap.snapshots.cli {name})")

    _say(
        f"\ndone in {time.monotonic() - started:.0f} s. Open the UI with `make ui` (DAGSTER_HOME="
        f"{settings.DAGSTER_HOME.value()}): the runs above are its named jobs; the sensors find this work done. "
        "`make demo-ui` opens it with the demo's settings and stand-ins, so runs launched there (e.g. a "
        "click_totals backfill) use them."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
