"""One spider iteration's pages per second with 1 and 2 worker processes sharing it through claims.

    .venv/bin/python benchmarks/bench_spider_scaling.py [--rounds 3] [--pages 1000] [--domains 50]
        [--interval 0.5] [--skip-demo] [--partition pool|shards] [--shards N]

Each worker process is what a Celery worker runs for one shard step (``Spider.process_pending``: claim pending
URLs a few dozen at a time, fetch with 8 threads, extract, judge relevance, write a batch at a time), without
Dagster's per-step start (1-2 s a step, seen in tests/test_celery_spider.py). ``--partition`` says what each of
N workers takes: ``pool`` (default) the whole iteration from one pool of claims (N processes on one topic);
``shards`` the iteration's URL-hash shards, ``--shards`` of them (default N), handed to the workers one at a
time as each finishes the last, as Celery hands out the shard steps of the fan-out. Workers start,
import and open the store first, then all begin at one signal; the clock runs from the signal to the last
worker's exit, plus the iteration's finish (link mining, metrics) in the parent.

(A) the real news pages of the corpus (tests/shared_data.py), served on loopback by bench_spider_iteration.py's server (its own
    process), ``--pages`` seed URLs over ``--domains`` sites, query ``said`` (every served page passes the raw
    match, so every page is extracted): iteration 0.
(B) the demo web (``topicmap.demo.server``, its own process): the demo topic's iteration 1 (iteration 0 mines
    the archive seeds' links and is not timed).

Two politeness settings: none (interval 0), and ``--interval`` seconds per site (news: 50 sites at 0.5 s
allow at most 100 pages/s in all; the demo web's ~20 sites far fewer). SQLite store (WAL), as the embedded
default. Rounds alternate 1 and 2 workers; the table gives medians. The 2 cores also run the web server, the
store, and (on this machine) other people's work: note the load beside the numbers.
"""

from __future__ import annotations

import argparse
import os
import platform
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_spider_iteration import (  # noqa: E402
    demo_server,
    load_corpus,
    news_plan,
    news_server,
    news_topic,
    raw_matches,
    seed_news_topic,
)
from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.archive.drops import parse_drop  # noqa: E402
from topicmap.demo.web import generate_demo_web  # noqa: E402
from topicmap.spider.iteration import Spider  # noqa: E402
from topicmap.spider.sources import FetcherSource  # noqa: E402
from topicmap.store.throttle import SqlThrottle  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402
from topicmap.topics.declarations import TopicConfig, load_topics  # noqa: E402
from topicmap.topics.seeding import SeedingRequest, select_seeds  # noqa: E402
from topicmap.web.fetch import WebFetcher  # noqa: E402
from topicmap.web.netguard import AddressPolicy  # noqa: E402

WORKER = """
import json, sys
sys.path.insert(0, {root!r})
from topicmap.spider.claims import Shard
from topicmap.spider.iteration import Spider
from topicmap.spider.sources import FetcherSource
from topicmap.store.throttle import shared_politeness
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig
from topicmap.web.fetch import WebFetcher
from topicmap.web.netguard import AddressPolicy
from datetime import date

db, port, interval, iteration, raw = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
partition, count = sys.argv[6], int(sys.argv[7])
db, _, schema = db.partition("|")
topic = TopicConfig(name=raw["name"], query=raw["query"], start_date=date.fromisoformat(raw["start"]),
                    end_date=date.fromisoformat(raw["end"]), max_iterations=raw["max_iterations"])
store = TopicStore.open(db, schema=schema or None)
fetcher = WebFetcher(policy=AddressPolicy(allow=[f"127.0.0.1:{{port}}"]), host_overrides={{"*.test": f"127.0.0.1:{{port}}"}},
                     interval_overrides={{"*": interval}}, **shared_politeness(store.engine))
spider = Spider(store, topic, FetcherSource(fetcher, 8, {{"*": interval}}), log=lambda _: None)
print("READY", flush=True)
# the parent hands out the work: "pool" (the whole iteration), a shard index, or "stop"
while (order := sys.stdin.readline().strip()) != "stop":
    shard = Shard() if order == "pool" else Shard(int(order), count)
    print("DONE", spider.process_pending(iteration, shard).urls_processed, flush=True)
"""


def topic_arg(topic: TopicConfig) -> str:
    import json

    return json.dumps(
        {
            "name": topic.name,
            "query": topic.query,
            "start": topic.start_date.isoformat(),
            "end": topic.end_date.isoformat(),
            "max_iterations": topic.max_iterations,
        }
    )


def run_iteration(
    db: str,
    port: int,
    topic: TopicConfig,
    interval: float,
    workers: int,
    prepare: Callable[[TopicStore], int],
    partition: str = "pool",
    shards: int = 0,
) -> tuple[float, int, list[int]]:
    """(seconds, URLs processed, each worker's share) of one iteration over ``workers`` processes, which take the
    whole iteration from one pool of claims or ``shards`` shards (default: one per worker) one at a time."""
    url, _, schema = db.partition("|")
    store = TopicStore.open(url, schema=schema or None)
    iteration = prepare(store)
    spider = Spider(store, topic, source=None, log=lambda _: None)  # type: ignore[arg-type]
    plan = spider.begin_iteration()
    assert plan.pending_iteration == iteration, plan
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER.format(root=str(ROOT)),
                db,
                str(port),
                str(interval),
                str(iteration),
                topic_arg(topic),
                partition,
                str(shards or workers),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "READY"
    orders = ["pool"] * workers if partition == "pool" else [str(i) for i in range(shards or workers)]
    shares = [0] * workers
    started = time.perf_counter()
    with selectors.DefaultSelector() as ready:
        for worker, proc in enumerate(procs):
            ready.register(proc.stdout, selectors.EVENT_READ, worker)
            _order(proc, orders.pop(0) if orders else "stop")
        while ready.get_map():
            for key, _ in ready.select():
                worker, proc = key.data, procs[key.data]
                line = proc.stdout.readline()
                if not line:  # the worker has exited
                    ready.unregister(proc.stdout)
                    assert proc.wait() == 0, f"worker {worker} failed"
                    continue
                shares[worker] += int(line.split()[1])
                _order(proc, orders.pop(0) if orders else "stop")
    spider.finish_iteration(plan, [])
    seconds = time.perf_counter() - started
    store.dispose()
    return seconds, sum(shares), shares


def _order(proc: subprocess.Popen, order: str) -> None:
    proc.stdin.write(order + "\n")
    proc.stdin.flush()


def drop_schema(url: str, schema: str) -> None:
    from sqlalchemy import text

    store = TopicStore.open(url, upgrade=False)
    with store.engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    store.dispose()


def news_case(args: argparse.Namespace):  # noqa: ANN201 - (label, server context, topic, prepare)
    corpus = load_corpus()
    if corpus is None:
        return None
    topic = news_topic("said")
    served = [body for body, ok in zip(corpus.bodies, raw_matches(corpus, topic), strict=True) if ok]
    pages = [(url, served[index]) for url, index in news_plan(args.pages, args.domains, len(served))]

    def prepare(store: TopicStore) -> int:
        seed_news_topic(store, topic, pages)
        return 0

    return (
        f"news web, {args.pages} real pages over {args.domains} sites",
        news_server(served, args.pages, args.domains),
        topic,
        prepare,
    )


def demo_case(args: argparse.Namespace):  # noqa: ANN201
    web = generate_demo_web(n_stories=args.stories)
    declared = load_topics(ROOT / "topics.yaml").topics[0]
    topic = TopicConfig(
        name=declared.name, query=declared.query, start_date=web.start, end_date=web.end, max_iterations=15
    )
    folder = Path(tempfile.mkdtemp())
    drop = folder / "archive.parquet"
    web.write_archive_parquet(drop, include_html=True)
    stories = parse_drop(drop).stories

    def prepare_with(port: int) -> Callable[[TopicStore], int]:
        def prepare(store: TopicStore) -> int:
            store.add_stories(stories, source="archive:bench")
            topics_id = store.upsert_topic(topic)
            store.add_seed_urls(topics_id, select_seeds(store, SeedingRequest(topic)).rows)
            fetcher = WebFetcher(
                policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
                host_overrides={"*.test": f"127.0.0.1:{port}"},
                throttle=SqlThrottle(store.engine, create_table=False),
                interval_overrides={"*": 0.0},
            )
            Spider(store, topic, FetcherSource(fetcher, 8, {"*": 0.0}), log=lambda _: None).run_iteration()
            return 1

        return prepare

    return f"demo web ({args.stories} stories), iteration 1", demo_server(args.stories), topic, prepare_with


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--domains", type=int, default=50)
    parser.add_argument("--stories", type=int, default=3000)
    parser.add_argument(
        "--interval", type=float, default=0.5, help="the realistic politeness, seconds per site"
    )
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument(
        "--partition",
        choices=("pool", "shards"),
        default="pool",
        help="what each worker takes: the whole iteration's pool of claims, or URL-hash shards one at a time",
    )
    parser.add_argument(
        "--shards", type=int, default=0, help="shards per iteration (default: one per worker)"
    )
    parser.add_argument("--skip-news", action="store_true")
    parser.add_argument(
        "--database-url", help="a PostgreSQL URL (a fresh schema per run) instead of SQLite files"
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()}"
    )
    cases = []
    if not args.skip_news:
        case = news_case(args)
        if case is None:
            print(f"news web skipped: no news-page corpus at {NEWS_HTML}")
        else:
            cases.append(case)
    if not args.skip_demo:
        cases.append(demo_case(args))
    print("| case | partition | politeness | workers | pages/s per round | median pages/s | 2 workers / 1 |")
    print("|---|---|---|---:|---|---:|---:|")
    for label, server, topic, prepare in cases:
        with server as port:
            ready = prepare(port) if label.startswith("demo") else prepare
            for interval in (0.0, args.interval):
                rates: dict[int, list[float]] = {1: [], 2: []}
                for _ in range(args.rounds):
                    for workers in (1, 2):
                        with tempfile.TemporaryDirectory() as tmp:
                            schema = f"bench_scaling_{uuid4().hex[:8]}"
                            db = (
                                f"{args.database_url}|{schema}"
                                if args.database_url
                                else f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
                            )
                            try:
                                seconds, processed, shares = run_iteration(
                                    db, port, topic, interval, workers, ready, args.partition, args.shards
                                )
                            finally:
                                if args.database_url:
                                    drop_schema(args.database_url, schema)
                        rates[workers].append(processed / seconds)
                        print(
                            f"  {label}, interval {interval}, {workers} workers: {processed} URLs in {seconds:.1f} s, shares {shares}, load {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                        )
                medians = {w: statistics.median(r) for w, r in rates.items()}
                for workers in (1, 2):
                    ratio = f"{medians[2] / medians[1]:.2f}" if workers == 2 else ""
                    print(
                        f"| {label} | {args.partition}{f' x{args.shards}' if args.shards else ''} | {interval:g} s/site | {workers} | "
                        f"{', '.join(f'{r:.1f}' for r in rates[workers])} | {medians[workers]:.1f} | {ratio} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
