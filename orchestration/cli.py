"""The `topicmap` command. Commands that drive Dagster live here; the store look-ups are topicmap.cli's
(the library stays free of Dagster, and `topicmap near-dups` does not pay for loading it).

topicmap topic add NAME                    add a declared topic's partition and seed it (seeds_job), as the
                                           topic_registry sensor does; the daemon's sensors spider it from there
topicmap topic run NAME [--load-archive]   start and drive one topic without the daemon: add its partition, seed
                                           it, run spider iterations until done, then the post-spider stages
topicmap ui [DAGSTER DEV OPTIONS]          the Dagster UI and daemon (`dagster dev` on workspace.yaml, e.g. -p 3300)
                                           on the instance under DAGSTER_HOME; SIGTERM or SIGINT stops every
                                           process it started
topicmap demo-ui [DAGSTER DEV OPTIONS]     the same on the demo's instance with the demo's settings: the demo web
                                           and the Bit.ly/Facebook stand-ins served while it runs
topicmap near-dups ... | snapshot ...      see topicmap.cli
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from topicmap import settings

if TYPE_CHECKING:
    import dagster as dg

    from topicmap.topics.declarations import TopicConfig

ROOT = Path(__file__).resolve().parent.parent


def prepare_instance_environment() -> None:
    """TOPICMAP_HOME and DAGSTER_HOME as `make` sets them (the state folder of the checkout by default)."""
    from orchestration.demo import _prepare_environment

    _prepare_environment(Path(settings.HOME.value() or ROOT / ".topicmap").resolve())


def declared_topic(name: str, say: Callable[[str], None] = print) -> TopicConfig | None:
    """The declaration of topic ``name`` in the topics file (TOPICMAP_TOPICS_FILE, topics.yaml), or None after
    saying why it is not a valid topic there and which topics are."""
    from topicmap.topics.declarations import load_topics

    topics_file = settings.TOPICS_FILE.value()
    loaded = load_topics(topics_file)
    topic = loaded.by_name().get(name)
    if topic is None:
        problems = [str(e) for e in loaded.errors if e.topic == name]
        known = ", ".join(sorted(loaded.by_name())) or "none"
        say(
            f"topic {name!r} is not a valid topic in {topics_file}: {problems[0] if problems else 'not declared'}"
        )
        say(f"declared topics: {known}")
    return topic


def add_and_seed(topic: TopicConfig, instance: dg.DagsterInstance, say: Callable[[str], None]) -> None:
    """Add the topic's `topics` partition (if missing) and run its `seeds_job`, as the `topic_registry` sensor
    would (its run key: the sensor finds the work done)."""
    from assets.partitions import apply_declared_calendar
    from orchestration.definitions import defs
    from orchestration.runs import seed_topic

    if not instance.has_dynamic_partition("topics", topic.name):
        instance.add_dynamic_partitions("topics", [topic.name])
        say(f"added partition {topic.name!r} of `topics`")
    apply_declared_calendar(
        instance
    )  # the days and weeks the declared topics span, as the registry keeps them
    result = seed_topic(defs, instance, topic)
    meta = result.metadata("seeds")
    say(
        f"seeds_job: {meta['dagster/row_count'].value} seeds ({meta['seeds_new'].value} new; archive read: "
        f"{meta['archive_read'].value})"
    )


def add_topic(name: str, say: Callable[[str], None] = print) -> int:
    """`topicmap topic add NAME`: a declared topic's partition, seeded. Returns the exit code."""
    topic = declared_topic(name, say)
    if topic is None:
        return 2
    import dagster as dg

    add_and_seed(topic, dg.DagsterInstance.get(), say)
    say(
        f"topic {name!r} is seeded; with the daemon running (make ui) the spider_iterations sensor spiders it, "
        f"or run `topicmap topic run {name}`"
    )
    return 0


def run_topic(name: str, load_archive: bool = False, say: Callable[[str], None] = print) -> int:
    """Drive topic ``name`` from seeds to snapshot in-process, as the sensors would (same jobs, tags, run keys: a
    daemon started afterwards finds the work done). Returns the exit code."""
    topic = declared_topic(name, say)
    if topic is None:
        return 2
    import dagster as dg

    from assets.jobs import topic_run_tags
    from orchestration.definitions import defs
    from orchestration.runs import as_sensor_run, run_job
    from topicmap.spider.plan import decide, read_spider_facts
    from topicmap.store.topic_store import TopicStore

    instance = dg.DagsterInstance.get()
    if load_archive:
        meta = run_job(defs, instance, "archive_job").metadata("archive_stories")
        say(f"archive_job: {meta['stories_added'].value} stories added")
    add_and_seed(topic, instance, say)
    store = TopicStore.open()
    while True:
        facts = read_spider_facts(store, name, topic.max_iterations)
        decision = decide(facts, None, time.time())
        if decision.action == "run_iteration":
            result = run_job(
                defs,
                instance,
                "spider_iteration_job",
                name,
                tags={
                    **topic_run_tags(name, decision.iteration, "spider"),
                    **as_sensor_run("spider_iterations", decision.run_key),
                },
            )
            fetched, stories = result.metadata("fetched_links"), result.metadata("relevant_stories")
            say(
                f"spider_iteration_job: iteration {fetched['iteration'].value}: "
                f"{fetched['urls_processed_this_iteration'].value} URLs, {stories['new_stories'].value} new "
                f"stories, {fetched['frontier_left'].value} pending"
            )
            continue
        if decision.action == "post_spider":
            say(f"spidering done: {decision.reason}")
            result = run_job(
                defs,
                instance,
                "post_spider_job",
                name,
                tags={
                    **topic_run_tags(name, decision.iteration, "post-spider"),
                    **as_sensor_run("spider_iterations", decision.run_key),
                },
            )
            snapshot = result.metadata("snapshots")
            say(
                f"post_spider_job: snapshot {snapshot['snapshot_id'].value} in {snapshot['snapshot_folder'].value} "
                f"(run {result.run_id})"
            )
            return 0
        say(f"topic {name!r}: {decision.action}: {decision.reason}")
        return 1 if decision.action == "fail" else 0


def demo_ui(dagster_args: Sequence[str] = ()) -> int:
    """`dagster dev` with the demo's settings, serving the demo web and the API stand-ins for as long as it runs."""
    from contextlib import ExitStack

    from orchestration.demo import _write_demo_topics, _write_media_dups, _write_media_tags, demo_page_source
    from orchestration.devserver import run_dagster_dev
    from orchestration.social_demo import demo_social_config, teach_standin
    from topicmap.demo.server import serve_demo_web
    from topicmap.demo.standins import StandinDataset, run_standin_server
    from topicmap.demo.web import generate_demo_web

    home = Path(settings.HOME.value())
    web = generate_demo_web()
    with ExitStack() as stack:
        server = stack.enter_context(serve_demo_web(web))
        standin = stack.enter_context(run_standin_server(StandinDataset()))
        taught = teach_standin(standin)
        # the demo's curated files, as `make demo` writes them: each sets its variable in os.environ, so the
        # sensors that watch them (media_dups_changed, media_tags_changed) see the files under the UI too
        _write_media_dups(web, home / "media_dups.csv")
        _write_media_tags(web, home / "media_tags.csv")
        _write_demo_topics(web, home)
        env = {
            **os.environ,
            **demo_social_config(standin),
            "TOPICMAP_PAGE_SOURCE_JSON": json.dumps(demo_page_source(server.port)),
        }
        print(
            f"demo web on 127.0.0.1:{server.port}, Bit.ly/Facebook stand-ins on {standin.base_url} "
            f"({taught} topic stories); they stop when the UI stops (Ctrl-C or SIGTERM)",
            flush=True,
        )
        return run_dagster_dev(dagster_args, env)


#: what `topicmap ui` and `topicmap demo-ui` add to `dagster dev`, for their --help
UI_COMMANDS = {
    "ui": "The Dagster UI and daemon (`dagster dev -w workspace.yaml`) on the instance under DAGSTER_HOME.",
    "demo-ui": "The Dagster UI and daemon on the demo's instance with the demo's settings: the demo web and the "
    "Bit.ly/Facebook stand-ins are served while it runs.",
}


def _dagster_dev_help(command: str) -> int:
    """`topicmap ui --help` / `demo-ui --help`: say what the command adds, then `dagster dev --help` (its options
    are passed on), without starting anything."""
    print(f"usage: topicmap {command} [DAGSTER DEV OPTIONS]\n\n{UI_COMMANDS[command]}")
    print(
        "SIGTERM or SIGINT stops every process it started. The options are those of `dagster dev`:\n",
        flush=True,
    )
    dagster = Path(sys.executable).parent / "dagster"
    return subprocess.call([str(dagster), "dev", "--help"])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if args[:1] == ["topic"]:
        parser = argparse.ArgumentParser(prog="topicmap topic", description="Drive a topic with Dagster.")
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser(
            "add",
            help="add a declared topic's `topics` partition and seed it (seeds_job), as the topic_registry sensor "
            "does, in the Dagster instance (DAGSTER_HOME); the daemon's sensors spider it from there",
        )
        add.add_argument(
            "name", help="a topic declared in the topics file (TOPICMAP_TOPICS_FILE, topics.yaml)"
        )
        run = sub.add_parser(
            "run",
            help="add the topic's partition, seed it, spider it until done, then dedup/statistics/WARC/clusters/"
            "snapshot: every step a named job in the Dagster instance (DAGSTER_HOME), no daemon needed",
        )
        run.add_argument(
            "name", help="a topic declared in the topics file (TOPICMAP_TOPICS_FILE, topics.yaml)"
        )
        run.add_argument(
            "--load-archive", action="store_true", help="load new archive drops (archive_job) before seeding"
        )
        options = parser.parse_args(args[1:])
        prepare_instance_environment()
        try:
            if options.action == "add":
                return add_topic(options.name)
            return run_topic(options.name, load_archive=options.load_archive)
        except SystemExit as exc:  # run_job's message naming the failed job
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
                return 1
            raise
    if args[:1] in (["ui"], ["demo-ui"]):
        if {"-h", "--help"} & set(args[1:]):
            return _dagster_dev_help(args[0])
        prepare_instance_environment()
        if args[0] == "ui":
            from orchestration.devserver import run_dagster_dev

            return run_dagster_dev(args[1:])
        return demo_ui(args[1:])
    from topicmap.cli import main as library_main

    return library_main(args)


if __name__ == "__main__":
    sys.exit(main())
