"""The seeds' check (the queries of the other stages' checks are in topicmap.store.integrity)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select

from topicmap.store import schema as s
from topicmap.store.integrity import Finding, topic_ids
from topicmap.store.topic_store import TopicStore
from topicmap.topics.seeding import read_seed_url_csv


def seed_urls_not_recorded(
    store: TopicStore, topic_seed_files: dict[str, Sequence[Path]], topics: Sequence[str] | None
) -> Finding:
    """Seed URLs the topic should have but the store lacks: a valid URL of one of the topic's seed CSV files with
    no ``topic_seed_urls`` row, an archive seed whose story is gone, and a seed marked processed that never became
    a URL of the spider (``topic_fetch_urls``). ``topic_seed_files``: topic name → its declared seed CSV files."""
    finding = Finding()
    seeds, f, st = s.topic_seed_urls, s.topic_fetch_urls, s.stories
    with store.engine.connect() as conn:
        names = topic_ids(conn, topics, finding)
        for topics_id, name in names.items():
            recorded = set(conn.execute(select(seeds.c.url).where(seeds.c.topics_id == topics_id)).scalars())
            finding.checked += len(recorded)
            for path in topic_seed_files.get(name, ()):
                rows, _errors = read_seed_url_csv(Path(path))  # bad rows are the seeds asset's to report
                for url in dict.fromkeys(row["url"] for row in rows):
                    if url not in recorded:
                        finding.add(
                            {"topic": name, "url": url, "problem": f"in {Path(path).name}, not recorded"}
                        )
            lost = conn.execute(
                select(seeds.c.url, seeds.c.stories_id)
                .where(
                    seeds.c.topics_id == topics_id,
                    seeds.c.stories_id.is_not(None),
                    ~select(st.c.stories_id).where(st.c.stories_id == seeds.c.stories_id).exists(),
                )
                .order_by(seeds.c.topic_seed_urls_id)
            ).all()
            for row in lost:
                finding.add({"topic": name, "url": row.url, "problem": f"its story {row.stories_id} is gone"})
            unfetched = conn.execute(
                select(seeds.c.url)
                .where(
                    seeds.c.topics_id == topics_id,
                    seeds.c.processed.is_(True),
                    ~select(f.c.topic_fetch_urls_id)
                    .where(f.c.topics_id == seeds.c.topics_id, f.c.url == seeds.c.url)
                    .exists(),
                )
                .order_by(seeds.c.topic_seed_urls_id)
            ).scalars()
            for url in unfetched:
                finding.add({"topic": name, "url": url, "problem": "processed, but not a URL of the spider"})
    return finding


# ---------------------------------------------------------------------------------------------- clusters
