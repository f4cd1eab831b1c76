"""Where fetching runs, and what it costs the extracting thread: one spider iteration over the same news pages
with its pages fetched (1) by the fetcher's threads in the spider's process, as the spider does; (2) by the
same fetcher in a CHILD process, outcomes sent through a pipe (no fetch thread shares the spider's GIL; the
fetch work still runs on this machine's other core); (3) before the iteration starts (nothing is fetched while
it runs). Each iteration runs between two anchor loops (``extract_story`` over the same bodies) and its ratio
is taken to their mean, as in bench_spider_iteration.py; the placements alternate order round by round, because
this VM's speed drifts by a third from minute to minute.

    .venv/bin/python benchmarks/bench_fetch_placement.py [--pages 600] [--rounds 4] [--domains 50]

(2) is a measuring device, not a product path: its child uses an in-memory throttle (the intervals are zero
here), and the spider's goal is per process used, where a fetcher process would count as a second process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection

from bench_spider_iteration import (
    DEFAULT_QUERY,
    PrefetchedSource,
    extract_loop,
    fresh_store,
    load_corpus,
    make_source,
    news_fetcher,
    news_plan,
    news_server,
    news_topic,
    raw_matches,
    seed_news_topic,
    time_iteration,
    timed,
)

from topicmap.spider.iteration import Spider
from topicmap.web.extract import extract_story
from topicmap.web.fetch import FetchOutcome

PLACEMENTS = ("in fetch threads of the spider's process", "in a child process", "before the iteration")


def _fetch_in_child(conn: Connection, port: int, urls: list[str], workers: int) -> None:
    for outcome in news_fetcher(port).fetch_many(urls, max_workers=workers):
        conn.send(outcome)  # blocks while the spider is behind: the pipe is the backpressure
    conn.send(None)
    conn.close()


class ChildProcessSource:
    """Pages fetched by a WebFetcher in a child process, handed over through a pipe as they come."""

    def __init__(self, port: int, workers: int):
        self.port, self.workers = port, workers

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]:
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(
            target=_fetch_in_child, args=(sender, self.port, list(urls), self.workers), daemon=True
        )
        child.start()
        sender.close()
        while (outcome := receiver.recv()) is not None:
            yield outcome
        child.join()

    def close(self) -> None:
        pass


def iteration_ratio(placement: str, port: int, pages: list[tuple[str, bytes]], workers: int) -> float:
    topic = news_topic(DEFAULT_QUERY)
    before = timed(extract_loop(extract_story, pages))
    with fresh_store(None) as store:
        seed_news_topic(store, topic, pages)
        if placement == PLACEMENTS[0]:
            source = make_source(store, port, workers)
        elif placement == PLACEMENTS[1]:
            source = ChildProcessSource(port, workers)
        else:
            source = PrefetchedSource.fetched_now(store, port, workers, [url for url, _ in pages])
        try:
            iteration, report, stored = time_iteration(
                Spider(store, topic, source, log=lambda _: None), store
            )
        finally:
            source.close()
    if stored != len(pages):
        raise RuntimeError(f"{placement}: the spider stored {stored} of {len(pages)} pages ({report.states})")
    after = timed(extract_loop(extract_story, pages))
    return iteration.rate / (len(pages) / ((before.wall + after.wall) / 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the three placements")
    parser.add_argument("--domains", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    corpus = load_corpus()
    if corpus is None:
        print("skipped: no news corpus (see bench_spider_iteration.py)")
        return
    matched = raw_matches(corpus, news_topic(DEFAULT_QUERY))
    bodies = [body for body, ok in zip(corpus.bodies, matched, strict=True) if ok]
    pages = [(url, bodies[index]) for url, index in news_plan(args.pages, args.domains, len(bodies))]
    for url, body in pages[:5]:  # imports and lazy set-up before anything is timed
        extract_story(body, url)
    ratios: dict[str, list[float]] = {placement: [] for placement in PLACEMENTS}
    with news_server(bodies, args.pages, args.domains) as port:
        for round_number in range(args.rounds):
            order = PLACEMENTS if round_number % 2 == 0 else PLACEMENTS[::-1]
            for placement in order:
                ratio = iteration_ratio(placement, port, pages, args.workers)
                ratios[placement].append(ratio)
                print(
                    f"round {round_number + 1}: pages fetched {placement}: ratio {ratio:.3f}",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"| pages fetched ({args.pages} pages, {args.rounds} rounds) | median ratio to extract_story | runs |"
    )
    print("|---|---:|---|")
    for placement, values in ratios.items():
        runs = ", ".join(f"{value:.2f}" for value in values)
        print(f"| {placement} | {statistics.median(values):.2f} | {runs} |")


if __name__ == "__main__":
    main()
