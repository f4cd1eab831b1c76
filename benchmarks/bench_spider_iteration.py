"""A whole spider iteration (fetch, extract, relevance, store, mine links) in pages per second, next to the
extractor's own single-process throughput on the same pages (issue 4's anchor).

    .venv/bin/python benchmarks/bench_spider_iteration.py [--stories 3000]

The demo web is served on loopback by a separate process (as a real web server would be: its CPU is not
the crawler's); the demo topic is seeded from its archive, iteration 0 mines the seeds' links, then
iteration 1 is timed. The same pages that iteration fetched are then extracted again in a plain
loop (`topicmap.extract.extract_story`), single process: that is the anchor rate.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import select  # noqa: E402

from topicmap import schema as s  # noqa: E402
from topicmap.archive import parse_drop  # noqa: E402
from topicmap.demo_web import generate_demo_web  # noqa: E402
from topicmap.extract import extract_story  # noqa: E402
from topicmap.fetch import WebFetcher  # noqa: E402
from topicmap.netguard import AddressPolicy  # noqa: E402
from topicmap.seeding import select_seeds  # noqa: E402
from topicmap.sources import FetcherSource  # noqa: E402
from topicmap.spider import Spider  # noqa: E402
from topicmap.store import TopicStore  # noqa: E402
from topicmap.throttle import SqlThrottle  # noqa: E402
from topicmap.topics import load_topics  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def _server_process(stories: int) -> Iterator[int]:
    server = subprocess.Popen(
        [sys.executable, "-m", "topicmap.demo_server", "--stories", str(stories)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in server.stdout:
            found = re.search(r"\(port (\d+)\)", line)
            if found:
                yield int(found.group(1))
                return
        raise RuntimeError("the demo server did not start")
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stories", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    web = generate_demo_web(n_stories=args.stories)
    topic = load_topics(ROOT / "topics.yaml").topics[0]
    with tempfile.TemporaryDirectory() as tmp, _server_process(args.stories) as port:
        store = TopicStore.open(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}")
        drop = Path(tmp) / "archive.parquet"
        web.write_archive_parquet(drop, include_html=True)
        store.add_stories(parse_drop(drop).stories, source="archive:bench")
        topics_id = store.upsert_topic(topic)
        store.add_seed_urls(topics_id, select_seeds(store, topic).rows)
        fetcher = WebFetcher(
            policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
            host_overrides={"*.test": f"127.0.0.1:{port}"},
            throttle=SqlThrottle(store.engine, create_table=False),
            interval_overrides={"*": 0.0},
        )
        spider = Spider(store, topic, FetcherSource(fetcher, args.workers, {"*": 0.0}), log=lambda _: None)
        spider.run_iteration()  # iteration 0: seeds and their links
        started = time.perf_counter()
        report = spider.run_iteration()
        elapsed = time.perf_counter() - started
        f = s.topic_fetch_urls
        with store.engine.connect() as conn:
            urls = (
                conn.execute(select(f.c.url).where(f.c.iteration == report.iteration, f.c.code == 200))
                .scalars()
                .all()
            )
    pages = [(u, web.lookup(u)) for u in urls]
    bodies = [(u, p.body) for u, p in pages if p is not None and p.status == 200]
    started = time.perf_counter()
    for url, body in bodies:
        extract_story(body, url)
    extract_elapsed = time.perf_counter() - started
    iteration_rate = report.fetched / elapsed
    extract_rate = len(bodies) / extract_elapsed
    print(f"## Spider iteration throughput ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, 2 cores)\n")
    print("| what | pages | seconds | pages/s |")
    print("|---|---:|---:|---:|")
    print(
        f"| whole iteration {report.iteration} ({args.workers} fetch threads, 1 process) | {report.fetched} | {elapsed:.1f} | {iteration_rate:.1f} |"
    )
    print(
        f"| anchor: extract_story alone on the same fetched pages, 1 process | {len(bodies)} | {extract_elapsed:.1f} | {extract_rate:.1f} |"
    )
    print(f"\nratio iteration / extractor: {iteration_rate / extract_rate:.2f} (target ≥ 0.8)")
    print(f"states: {dict(report.states)}")


if __name__ == "__main__":
    main()
