"""The demo topic on a small demo web, for tests that spider it in several processes or Celery workers.

web = generate_demo_web(**SMALL_WEB)
topic = demo_topic(web)
seed_demo_topic(store, web, topic, tmp_path)   # the archive part loaded, the topic and its seeds
... spider it ...
summary = store_summary(store, topic.name)     # what must not depend on how many workers spidered
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import aliased

from topicmap.archive.drops import parse_drop
from topicmap.demo.web import DemoWeb
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig, load_topics
from topicmap.topics.seeding import SeedingRequest, select_seeds

ROOT = Path(__file__).resolve().parent.parent
SMALL_WEB = {"seed": 11, "n_media": 14, "n_stories": 400, "months": 2}


def demo_topic(web: DemoWeb, name: str = "climate-demo") -> TopicConfig:
    """The demo topic of topics.yaml, with the web's own dates."""
    declared = load_topics(ROOT / "topics.yaml").by_name()["climate-demo"]
    return TopicConfig(
        name=name,
        query=declared.query,
        start_date=web.start,
        end_date=web.end,
        max_iterations=declared.max_iterations,
        max_stories=declared.max_stories,
    )


def topic_json(topic: TopicConfig) -> str:
    """The topic as tests/spider_worker.py reads it."""
    return json.dumps(
        {
            "name": topic.name,
            "query": topic.query,
            "start_date": topic.start_date.isoformat(),
            "end_date": topic.end_date.isoformat(),
            "max_iterations": topic.max_iterations,
        }
    )


def seed_demo_topic(store: TopicStore, web: DemoWeb, topic: TopicConfig, folder: Path) -> int:
    """Load the web's archived stories, register the topic and add its seeds; returns the seed count."""
    drop = folder / "demo_archive.parquet"
    if not drop.exists():
        web.write_archive_parquet(drop, include_html=True)
    store.add_stories(parse_drop(drop).stories, source="archive:demo")
    topics_id = store.upsert_topic(topic)
    return store.add_seed_urls(topics_id, select_seeds(store, SeedingRequest(topic)).rows)


def store_summary(store: TopicStore, topic: str) -> dict[str, object]:
    """What a topic's spidering produced, by URL (ids differ from store to store): every fetch URL's state,
    iteration and story, the topic's stories with their iteration, and its links with what they point at."""
    f, ts, tl, st = s.topic_fetch_urls, s.topic_stories, s.topic_links, s.stories
    ref = aliased(st)
    topics_id = store.topic_row(topic)["topics_id"]
    with store.engine.connect() as conn:
        fetch_urls = {
            r.url: (r.state, r.iteration, r.story_url)
            for r in conn.execute(
                select(f.c.url, f.c.state, f.c.iteration, st.c.url.label("story_url"))
                .outerjoin(st, st.c.stories_id == f.c.stories_id)
                .where(f.c.topics_id == topics_id)
            )
        }
        topic_stories = {
            r.url: r.iteration
            for r in conn.execute(
                select(st.c.url, ts.c.iteration)
                .join(st, st.c.stories_id == ts.c.stories_id)
                .where(ts.c.topics_id == topics_id)
            )
        }
        links = sorted(
            (r.source, r.url, r.target)
            for r in conn.execute(
                select(st.c.url.label("source"), tl.c.url, ref.c.url.label("target"))
                .join(st, st.c.stories_id == tl.c.stories_id)
                .outerjoin(ref, ref.c.stories_id == tl.c.ref_stories_id)
                .where(tl.c.topics_id == topics_id)
            )
        )
        stories = sorted(conn.execute(select(st.c.url, st.c.guid)).all())
    return {"fetch_urls": fetch_urls, "topic_stories": topic_stories, "links": links, "stories": stories}


def differences(expected: dict[str, object], got: dict[str, object], limit: int = 8) -> list[str]:
    """A readable list of what differs between two store summaries (empty when they are the same)."""
    problems: list[str] = []
    for key in expected:
        want, have = expected[key], got[key]
        if want == have:
            continue
        if isinstance(want, dict):
            keys = sorted(set(want) | set(have))
            diff = [(k, want.get(k), have.get(k)) for k in keys if want.get(k) != have.get(k)]
        else:
            diff = [("missing", x) for x in sorted(set(want) - set(have))] + [
                ("extra", x) for x in sorted(set(have) - set(want))
            ]
        problems.append(f"{key}: {len(diff)} differ, e.g. {diff[:limit]}")
    return problems
