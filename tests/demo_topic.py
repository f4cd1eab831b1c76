"""A small topic on the demo web, for the tests that run it as deployed (daemon end to end, browser).

`prepare(home, server_port)` writes what the processes read (archive drop, topics file, fetch settings) and
returns the environment; `python -m tests.demo_topic [--post-spider]` runs the topic in process (the way
`make demo` does) in that environment and prints the store's counts as JSON: the reference a deployed run
must match row for row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from sqlalchemy import func, select

from topicmap.demo.web import DemoWeb, generate_demo_web
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

TOPIC = "deploy-climate"
#: a 400-story web: big enough for several spider iterations and a snapshot, small enough for 2 cores. Its size is
#: not where these tests' CPU goes: the in-process build up to the snapshot costs ~11.5 CPU s with 400 stories and
#: ~10.7 with 200 (imports, Dagster's runs and the snapshot's pictures, not the pages), and the deployed run's cost
#: is its processes (a run worker, a forkserver and step processes per run, the daemon's and code server's ticks).
#: A smaller web would save little and shorten the spider iterations, which the daemon test's kill -9 must catch
#: while one is writing (several batches at its politeness interval, on the demo web's 14 media).
WEB = {"seed": 11, "n_media": 14, "n_stories": 400, "months": 2}
SPIDER_ASSETS = ["fetched_links", "relevant_stories", "topic_links"]
DEDUP_ASSETS = ["deduped_media", "deduped_stories", "near_duplicates"]
#: the later post-spider stages up to the snapshot the browser test shows (its metadata and pictures): the snapshot
#: and the story statistics it reads; the WARC archive and the clusters, which no page there shows, are left unbuilt
LATER_ASSETS = ["story_statistics", "snapshots"]
SECRETS = ("TOPICMAP_FACEBOOK_APP_ID", "TOPICMAP_FACEBOOK_APP_SECRET", "TOPICMAP_BITLY_TOKEN")


def demo_web() -> DemoWeb:
    return generate_demo_web(**WEB)


def topics_yaml(
    web: DemoWeb, max_iterations: int = 2, snapshot_periods: tuple[str, ...] | None = None
) -> str:
    """The demo topic's declaration; ``snapshot_periods`` (e.g. ``("overall",)``) left out: every period."""
    start = min(story["publish_date"] for story in web.archive_stories)[:10]
    end = max(story["publish_date"] for story in web.archive_stories)[:10]
    periods = f"    snapshot_periods: [{', '.join(snapshot_periods)}]\n" if snapshot_periods else ""
    return (
        "topics:\n"
        f"  - name: {TOPIC}\n"
        f"    query: '{web.topic_query_for('climate')}'\n"
        f"    start_date: {start}\n"
        f"    end_date: {end}\n"
        f"    max_iterations: {max_iterations}\n"
        f"{periods}"
    )


def prepare(
    home: Path,
    web: DemoWeb,
    server_port: int,
    interval: float,
    declare_topic: bool = True,
    max_iterations: int = 2,
    snapshot_periods: tuple[str, ...] | None = None,
    archive_from: Path | None = None,
) -> dict[str, str]:
    """Write the archive drop and the topics file under ``home``; the environment every process needs. With
    ``archive_from`` (the drops folder of an earlier ``prepare`` of the same web) its archive drop is copied."""
    drops = home / "drops"
    drops.mkdir(parents=True, exist_ok=True)
    if archive_from is None:
        web.write_archive_parquet(drops / "archive.parquet", include_html=True)
    else:
        shutil.copyfile(archive_from / "archive.parquet", drops / "archive.parquet")
    topics_file = home / "topics.yaml"
    topics_file.write_text(
        topics_yaml(web, max_iterations, snapshot_periods) if declare_topic else "topics: []\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in SECRETS and k != "TOPICMAP_DATABASE_URL"}
    env.update(
        {
            "TOPICMAP_HOME": str(home),
            "TOPICMAP_DROPS_DIR": str(drops),
            "TOPICMAP_TOPICS_FILE": str(topics_file),
            "TOPICMAP_PAGE_SOURCE_JSON": json.dumps(
                {
                    "allow_networks": [f"127.0.0.1:{server_port}"],
                    "host_overrides": {"*.test": f"127.0.0.1:{server_port}"},
                    "default_interval": interval,
                    "max_workers": 4,
                }
            ),
        }
    )
    return env


def store_counts(store: TopicStore, topic: str = TOPIC) -> dict[str, int]:
    """Rows the topic owns, plus the duplicates that must never exist (every URL once per topic, ...)."""
    counts: dict[str, int] = {}
    with store.engine.connect() as conn:
        topics_id = conn.execute(select(s.topics.c.topics_id).where(s.topics.c.name == topic)).scalar_one()
        for table in (s.topic_seed_urls, s.topic_fetch_urls, s.topic_stories, s.topic_links):
            counts[table.name] = conn.execute(
                select(func.count()).select_from(table).where(table.c.topics_id == topics_id)
            ).scalar_one()
        for table in (s.stories, s.downloads, s.story_urls):
            counts[table.name] = conn.execute(select(func.count()).select_from(table)).scalar_one()
        counts["topic_fetch_urls_pending"] = conn.execute(
            select(func.count()).where(
                s.topic_fetch_urls.c.topics_id == topics_id,
                s.topic_fetch_urls.c.state.in_(("pending",)),
            )
        ).scalar_one()
        f = s.topic_fetch_urls
        dup_urls = (
            select(f.c.url).where(f.c.topics_id == topics_id).group_by(f.c.url).having(func.count() > 1)
        )
        counts["duplicate_fetch_urls"] = conn.execute(
            select(func.count()).select_from(dup_urls.subquery())
        ).scalar_one()
        st = s.stories
        dup_stories = select(st.c.url).group_by(st.c.media_id, st.c.url).having(func.count() > 1)
        counts["duplicate_stories"] = conn.execute(
            select(func.count()).select_from(dup_stories.subquery())
        ).scalar_one()
    return counts


def run_in_process(post_spider: bool, ephemeral: bool = False) -> dict[str, int]:
    """archive_stories, seeds, every spider iteration, dedup (and with ``post_spider`` the later stages); with
    ``ephemeral`` in a Dagster instance held in memory (its runs are not kept: only the store's counts are wanted)."""
    import dagster as dg

    from assets.partitions import apply_declared_calendar
    from orchestration.definitions import defs
    from orchestration.runs import run_job
    from topicmap.spider.plan import decide, read_spider_facts
    from topicmap.topics.declarations import load_topics

    instance = dg.DagsterInstance.ephemeral() if ephemeral else dg.DagsterInstance.get()
    topic = load_topics(os.environ["TOPICMAP_TOPICS_FILE"]).by_name()[TOPIC]
    if not instance.has_dynamic_partition("topics", TOPIC):
        instance.add_dynamic_partitions("topics", [TOPIC])
    apply_declared_calendar(instance)  # the topic's days and weeks, as the topic registry adds them
    run_job(defs, instance, "archive_job")
    run_job(defs, instance, "seeds_job", TOPIC)
    store = TopicStore.open()
    while True:
        decision = decide(read_spider_facts(store, TOPIC, topic.max_iterations), None, time.time())
        if decision.action != "run_iteration":
            break
        run_job(defs, instance, "spider_iteration_job", TOPIC)
    stages = DEDUP_ASSETS + (LATER_ASSETS if post_spider else [])
    run_job(defs, instance, "post_spider_job", TOPIC, asset_selection=stages)
    return store_counts(store)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--post-spider", action="store_true", help="also the later stages, up to the snapshot"
    )
    parser.add_argument(
        "--ephemeral", action="store_true", help="the Dagster instance in memory: only the counts are kept"
    )
    arguments = parser.parse_args()
    print(json.dumps(run_in_process(arguments.post_spider, arguments.ephemeral)))
    sys.exit(0)
