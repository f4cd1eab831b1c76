"""A whole spider iteration (fetch, extract, relevance, store, mine links) in pages per second, next to the
extractor's own single-process throughput on the same pages (goal: at least 0.8 of it, per process used).

    .venv/bin/python benchmarks/bench_spider_iteration.py [--runs 3] [--pages 2000] [--domains 50]
        [--query said] [--skip-demo] [--database-url postgresql://...]

(A) news web, the headline. A loopback server in its OWN process (a real web server's CPU is not the
    crawler's; HTTP/1.1 keep-alive, no Nagle delay, each response built once and sent in one write: it
    costs ~0.2 ms of CPU a page, on the same 2 cores as the spider) serves ``--pages`` pages over
    ``--domains`` distinct sites, ``www.site00.test`` .. ``www.site49.test`` (each its own distinctive
    domain, so each is throttled as its own site; see bench_fetch.py). Page i lives at
    ``http://www.siteNN.test/news/2026/11/IIII/story.html`` and its body is a REAL news page of the shared
    corpus (tests/shared_data.py, about 170 gzipped pages from goose3, newspaper4k, htmldate and the
    Zyte article-extraction benchmark), served as stored; the corpus is cycled so that no site serves the
    same page twice while pages/domains <= corpus size (otherwise a site's second copy would have no new
    sentences and fail relevance for a reason that has nothing to do with speed). All the URLs are seeds of
    a topic, so the timed ``Spider.run_iteration()`` (iteration 0) fetches every one of them; /robots.txt
    answers 404.

    Why the query: the spider extracts a page only if the query may match it first (``TopicQuery.may_match``
    on the decoded page with its URLs, true unless no story drawn from the page can match); a page that fails
    it costs a fetch and a scan, not an extraction. If some served pages failed it, the iteration would do less work per page
    than the anchor, which extracts every page, and the ratio would flatter the spider. So the query is a
    common news word (``said``) measured over the corpus first, and only the pages that pass the raw match
    are served. Full relevance (title, description, URL, then sentences new to the site that week) still
    varies from page to page, so that stage does real work and some pages end "content match failed".
    The run checks afterwards that the spider stored a story for every page it fetched.

    Anchor, same run, same process, same bodies (the bytes as served): ``topicmap.web.extract.extract_story``
    in a plain loop; also a row for ``topicmap.web.links.extract_story_and_links``, the call the spider makes.
    Ratio = iteration pages/s / extract_story pages/s (target >= 0.8, one process). The spider's cost
    outside extraction is (iteration seconds - extract_story_and_links seconds) / pages. Each of ``--runs``
    runs uses a fresh store (SQLite in a temp dir, or a fresh PostgreSQL schema dropped afterwards with
    ``--database-url``), and times ``extract_story`` right before and right after the iteration (the anchor
    is the mean of the two: the machine's speed drifts over a minute), then ``extract_story_and_links``.

    Where the rest goes: each run also times the same iteration over pages fetched BEFORE it starts (same
    fetcher, outcomes held in memory, then handed to the spider one by one: ``PrefetchedSource``), in a
    second fresh store, between the live iteration and the second anchor. That row is the spider's own work
    (extraction, relevance, store, link mining, page compression) with nothing fetched while it runs; the gap
    from it to the live iteration is what concurrent fetching costs the extracting thread. Only part of that
    is the fetch threads' share of the GIL: most is the fetch work itself (client, kernel, this server) on the
    machine's other core (bench_fetch_placement.py measures where it goes).

(B) demo web, small synthetic pages (``python -m topicmap.demo.server``): the demo topic is seeded from
    its archive, iteration 0 mines the seeds' links, iteration 1 is timed; anchors on the pages it fetched.
    Many of those pages fail the raw match and are never extracted, so this ratio flatters the spider.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import re
import socketserver
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import urlsplit
from uuid import uuid4

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import func, select, text  # noqa: E402

from tests.shared_data import NEWS_HTML, news_pages  # noqa: E402
from topicmap.archive.drops import parse_drop  # noqa: E402
from topicmap.demo.web import generate_demo_web  # noqa: E402
from topicmap.spider.iteration import IterationReport, Spider  # noqa: E402
from topicmap.spider.sources import FetcherSource  # noqa: E402
from topicmap.spider.store import CONTENT_MATCH_FAILED  # noqa: E402
from topicmap.store import schema as s  # noqa: E402
from topicmap.store.throttle import SqlThrottle  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402
from topicmap.topics.declarations import TopicConfig, load_topics  # noqa: E402
from topicmap.topics.seeding import SeedingRequest, select_seeds  # noqa: E402
from topicmap.web.extract import decode_html, extract_story  # noqa: E402
from topicmap.web.fetch import FetchOutcome, WebFetcher  # noqa: E402
from topicmap.web.links import extract_story_and_links  # noqa: E402
from topicmap.web.netguard import AddressPolicy  # noqa: E402
from topicmap.web.throttle import throttle_domain  # noqa: E402

DEFAULT_QUERY = "said"
# Wide enough that neither the stories' own dates nor link mining is cut by the topic's date window.
TOPIC_START, TOPIC_END = date(1990, 1, 1), date(2030, 12, 31)


# ---------------------------------------------------------------------------------------------------------------
# The news web: which corpus page each URL serves, and the server process


def news_url(index: int, domains: int) -> str:
    return f"http://www.site{index % domains:02d}.test/news/2026/11/{index:04d}/story.html"


def news_plan(pages: int, domains: int, corpus_size: int) -> list[tuple[str, int]]:
    """(url, corpus index) of every page. Site d serves corpus pages d*n/domains, +1, +2, ... (mod n): every
    corpus page is used about equally, and no site repeats a page while pages/domains <= n."""
    return [
        (news_url(i, domains), (i // domains + (i % domains) * corpus_size // domains) % corpus_size)
        for i in range(pages)
    ]


def _response(status: str, body: bytes, content_type: str) -> bytes:
    """A whole HTTP/1.1 response, built once and sent in one write."""
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


_NOT_FOUND = _response("404 Not Found", b"not found", "text/plain")


class _NewsHandler(socketserver.StreamRequestHandler):
    """Keep-alive GET of prebuilt responses, and nothing more: the server shares the 2 cores with the spider it
    measures, and http.server's header parsing cost it 0.45-0.85 ms of CPU a page where this costs about 0.2."""

    disable_nagle_algorithm = True  # each response leaves in one write; no Nagle + delayed-ACK stall

    def handle(self) -> None:
        responses: dict[tuple[str, bytes], bytes] = self.server.responses  # type: ignore[attr-defined]
        while True:
            request_line = self.rfile.readline(65537)
            if not request_line:
                return  # the client closed its connection
            host = ""
            while (line := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"host":
                    host = value.strip().decode("latin-1").split(":")[0].lower()
            parts = request_line.split()
            path = parts[1] if len(parts) == 3 else b""
            # /robots.txt included: no robots rules, everything may be fetched. No charset parameter: the
            # corpus pages come from many sites and encodings; the fetcher decodes them as it would a server
            # that does not say (BOM, <meta>, UTF-8, detection).
            self.wfile.write(responses.get((host, path), _NOT_FOUND))


class _NewsServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True


def _serve_news(bodies: list[bytes], pages: int, domains: int, port_queue) -> None:  # noqa: ANN001 - mp.Queue
    server = _NewsServer(("127.0.0.1", 0), _NewsHandler)
    server.responses = {  # type: ignore[attr-defined]
        (urlsplit(url).hostname, urlsplit(url).path.encode("ascii")): _response(
            "200 OK", bodies[index], "text/html"
        )
        for url, index in news_plan(pages, domains, len(bodies))
    }
    port_queue.put(server.server_address[1])
    server.serve_forever(poll_interval=0.2)


@contextmanager
def news_server(bodies: list[bytes], pages: int, domains: int) -> Iterator[int]:
    context = multiprocessing.get_context("spawn")
    port_queue = context.Queue()
    server = context.Process(target=_serve_news, args=(bodies, pages, domains, port_queue), daemon=True)
    server.start()
    try:
        yield port_queue.get(timeout=120)
    finally:
        server.terminate()
        server.join(10)


@contextmanager
def demo_server(stories: int) -> Iterator[int]:
    server = subprocess.Popen(
        [sys.executable, "-m", "topicmap.demo.server", "--stories", str(stories)],
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


# ---------------------------------------------------------------------------------------------------------------
# Stores, fetchers, timing


@contextmanager
def fresh_store(database_url: str | None) -> Iterator[TopicStore]:
    """An empty topic store: SQLite in a temp dir, or a new PostgreSQL schema dropped afterwards."""
    if database_url is None:
        with tempfile.TemporaryDirectory() as tmp:
            store = TopicStore.open(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}")
            try:
                yield store
            finally:
                store.dispose()
        return
    schema = f"bench_{uuid4().hex[:8]}"
    store = TopicStore.open(database_url, schema=schema)
    try:
        yield store
    finally:
        with store.engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        store.dispose()


class PrefetchedSource:
    """Outcomes fetched before the timed iteration, handed out in the order asked (see the module docstring).
    Holds every page in memory until it is handed out: about 0.5 MB a news page, 1 GB for 2,000."""

    def __init__(self, source: FetcherSource, urls: Sequence[str]):
        self.outcomes = {outcome.url: outcome for outcome in source.fetch_many(urls)}

    @classmethod
    def fetched_now(cls, store: TopicStore, port: int, workers: int, urls: Sequence[str]) -> PrefetchedSource:
        """Fetch ``urls`` with the benchmark's own source (then closed) and hold the outcomes."""
        fetcher = make_source(store, port, workers)
        try:
            return cls(fetcher, urls)
        finally:
            fetcher.close()

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]:
        for url in urls:
            yield self.outcomes.pop(url)

    def close(self) -> None:
        self.outcomes.clear()


def news_fetcher(port: int, throttle: SqlThrottle | None = None) -> WebFetcher:
    """The fetcher for the loopback news web: its *.test sites on ``port``, no throttle interval."""
    return WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        throttle=throttle,
        interval_overrides={"*": 0.0},
    )


def make_source(store: TopicStore, port: int, workers: int) -> FetcherSource:
    fetcher = news_fetcher(port, SqlThrottle(store.engine, create_table=False))
    return FetcherSource(fetcher, workers, {"*": 0.0})


@dataclass
class Timed:
    pages: int
    wall: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.pages / self.wall


def timed(call: Callable[[], int]) -> Timed:
    """Wall clock and this process's CPU time (all its threads) of ``call``, which returns its page count."""
    wall, cpu = time.perf_counter(), time.process_time()
    pages = call()
    return Timed(pages, time.perf_counter() - wall, time.process_time() - cpu)


def extract_loop(
    extract: Callable[[bytes, str], object], pages: Sequence[tuple[str, bytes]]
) -> Callable[[], int]:
    def run() -> int:
        for url, body in pages:
            extract(body, url)
        return len(pages)

    return run


@dataclass
class Run:
    """One timed iteration with its anchors on the same pages."""

    iteration: Timed
    extract: Timed
    extract_and_links: Timed
    report: IterationReport
    stories_stored: int
    match_failures: Counter = field(default_factory=Counter)
    prefetched: Timed | None = None  # the same iteration over pages fetched before it started

    @property
    def ratio(self) -> float:
        return self.iteration.rate / self.extract.rate

    @property
    def prefetched_ratio(self) -> float | None:
        return None if self.prefetched is None else self.prefetched.rate / self.extract.rate

    @property
    def other_ms_per_page(self) -> float:
        """The spider's cost beyond its own extraction call, per fetched page."""
        return 1000 * (self.iteration.wall - self.extract_and_links.wall) / self.iteration.pages


def count_stories(store: TopicStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(s.stories)).scalar_one())


def match_failures(store: TopicStore, iteration: int) -> Counter:
    """Why pages of this iteration ended "content match failed" (raw page vs full relevance)."""
    f = s.topic_fetch_urls
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(f.c.message, func.count())
            .where(f.c.iteration == iteration, f.c.state == CONTENT_MATCH_FAILED)
            .group_by(f.c.message)
        ).all()
    return Counter({message or "": int(count) for message, count in rows})


def time_iteration(spider: Spider, store: TopicStore) -> tuple[Timed, IterationReport, int]:
    """One timed ``run_iteration``, its report, and how many stories it stored (= pages it extracted)."""
    before = count_stories(store)
    wall, cpu = time.perf_counter(), time.process_time()
    report = spider.run_iteration()
    result = Timed(report.fetched, time.perf_counter() - wall, time.process_time() - cpu)
    return result, report, count_stories(store) - before


# ---------------------------------------------------------------------------------------------------------------
# (A) news web


@dataclass
class Corpus:
    names: list[str]
    bodies: list[bytes]


def load_corpus() -> Corpus | None:
    pages = news_pages()
    return Corpus(list(pages), list(pages.values())) if pages else None


def news_topic(query: str) -> TopicConfig:
    return TopicConfig(
        name="bench-news", query=query, start_date=TOPIC_START, end_date=TOPIC_END, max_iterations=1
    )


def raw_matches(corpus: Corpus, topic: TopicConfig) -> list[bool]:
    """The spider's test before extraction (``topicmap.spider.judging.Judge.judge_fetched``): ``may_match`` on
    the whole page as the fetcher decodes it (this server declares no charset). Without the page's URLs, which
    the plan assigns later: a URL can only add a match, so a page that passes here passes in the spider
    (``check_raw_matches``)."""
    query = topic.parsed_query
    return [query.may_match(decode_html(body)) for body in corpus.bodies]


def check_raw_matches(pages: list[tuple[str, bytes]], topic: TopicConfig) -> None:
    """Every served page passes the test exactly as the spider calls it: with the URL it is fetched from (the
    server does not redirect, so the final URL is the same)."""
    query = topic.parsed_query
    failing = [url for url, body in pages if not query.may_match(decode_html(body), urls=(url,))]
    if failing:
        raise RuntimeError(f"{len(failing)} served pages fail the spider's raw-page test, e.g. {failing[0]}")


def run_news(
    port: int, topic: TopicConfig, pages: list[tuple[str, bytes]], database_url: str | None, workers: int
) -> Run:
    # The anchor is timed right before and right after the iteration and averaged: this machine's speed
    # drifts by several percent over a minute, and an anchor on one side only would carry that drift.
    extract_before = timed(extract_loop(extract_story, pages))
    with fresh_store(database_url) as store:
        seed_news_topic(store, topic, pages)
        source = make_source(store, port, workers)
        try:
            spider = Spider(store, topic, source, log=lambda _: None)
            iteration, report, stored = time_iteration(spider, store)
            failures = match_failures(store, report.iteration)
        finally:
            source.close()
    with fresh_store(database_url) as store:
        seed_news_topic(store, topic, pages)
        prefetched_source = PrefetchedSource.fetched_now(store, port, workers, [url for url, _ in pages])
        spider = Spider(store, topic, prefetched_source, log=lambda _: None)
        prefetched, prefetched_report, _ = time_iteration(spider, store)
        if prefetched_report.fetched != report.fetched:
            raise RuntimeError(
                f"the iteration over prefetched pages took {prefetched_report.fetched} pages, the live one "
                f"{report.fetched}"
            )
    extract = mean_timed([extract_before, timed(extract_loop(extract_story, pages))])
    extract_and_links = timed(extract_loop(extract_story_and_links, pages))
    return Run(iteration, extract, extract_and_links, report, stored, failures, prefetched)


def seed_news_topic(store: TopicStore, topic: TopicConfig, pages: list[tuple[str, bytes]]) -> None:
    topics_id = store.upsert_topic(topic)
    store.add_seed_urls(topics_id, [{"url": url, "source": "bench url list"} for url, _ in pages])


def bench_news(args: argparse.Namespace) -> None:
    print(f"## (A) news web: {args.pages:,} real news pages over {args.domains} sites\n")
    corpus = load_corpus()
    if corpus is None:
        print(f"(A) skipped: no news corpus (*.html.gz) under {NEWS_HTML} (set TOPICMAP_SHARED_DATA).\n")
        return
    topic = news_topic(args.query)
    matched = raw_matches(corpus, topic)
    served = Corpus(
        [n for n, ok in zip(corpus.names, matched, strict=True) if ok],
        [b for b, ok in zip(corpus.bodies, matched, strict=True) if ok],
    )
    print(
        f"Corpus: {len(corpus.bodies)} pages under {NEWS_HTML}. Query `{args.query}` passes the raw-page "
        f"test (`may_match` on the decoded page) on {len(served.bodies)} of them"
        + (
            "."
            if len(served.bodies) == len(corpus.bodies)
            else "; only those are served, so the spider extracts every page it fetches, as the anchor does."
        )
    )
    if not served.bodies:
        print("(A) skipped: no corpus page matches the query.\n")
        return
    plan = news_plan(args.pages, args.domains, len(served.bodies))
    assert len({throttle_domain(url) for url, _ in plan}) == min(args.pages, args.domains), (
        "sites must differ"
    )
    pages = [(url, served.bodies[index]) for url, index in plan]
    check_raw_matches(pages, topic)
    sizes = [len(body) for _, body in pages]
    repeats = (
        "no site serves a page twice"
        if args.pages <= args.domains * len(served.bodies)
        else ("sites serve some pages twice (more pages per site than corpus pages)")
    )
    print(
        f"Served bodies: mean {statistics.mean(sizes) / 1024:.0f} KiB, median "
        f"{statistics.median(sizes) / 1024:.0f} KiB, max {max(sizes) / 1024:.0f} KiB; {repeats}.\n"
    )
    for url, body in pages[:5]:  # warm up imports and lazy initialisation before anything is timed
        extract_story_and_links(body, url)
    runs: list[Run] = []
    with news_server(served.bodies, args.pages, args.domains) as port:
        for number in range(1, args.runs + 1):
            run = run_news(port, topic, pages, args.database_url, args.workers)
            runs.append(run)
            print(
                f"run {number}/{args.runs}: iteration {run.iteration.wall:.1f} s, extract_story "
                f"{run.extract.wall:.1f} s, ratio {run.ratio:.2f} (pages fetched beforehand: "
                f"{run.prefetched_ratio:.2f})",
                file=sys.stderr,
                flush=True,
            )
    empty = [
        name
        for name, body in zip(served.names, served.bodies, strict=True)
        if not extract_story(body, news_url(0, args.domains)).text
    ]
    print_table(
        runs,
        f"whole iteration {runs[0].report.iteration} (fetch, extract, relevance, store, mine links)",
        args.workers,
    )
    print(
        f"extract_story finds no text in {len(empty)} of the {len(served.bodies)} distinct served pages"
        + (f": {', '.join(empty)}." if empty else ".")
    )
    print_run_details(runs)


# ---------------------------------------------------------------------------------------------------------------
# (B) demo web


def bench_demo(args: argparse.Namespace) -> None:
    print("## (B) demo web: small synthetic pages (iteration 1 of the demo topic)\n")
    web = generate_demo_web(n_stories=args.stories)
    topic = load_topics(ROOT / "topics.yaml").topics[0]
    with (
        tempfile.TemporaryDirectory() as tmp,
        demo_server(args.stories) as port,
        fresh_store(args.database_url) as store,
    ):
        drop = Path(tmp) / "archive.parquet"
        web.write_archive_parquet(drop, include_html=True)
        store.add_stories(parse_drop(drop).stories, source="archive:bench")
        topics_id = store.upsert_topic(topic)
        store.add_seed_urls(topics_id, select_seeds(store, SeedingRequest(topic)).rows)
        source = make_source(store, port, args.workers)
        try:
            spider = Spider(store, topic, source, log=lambda _: None)
            spider.run_iteration()  # iteration 0: seeds and their links
            iteration, report, stored = time_iteration(spider, store)
            failures = match_failures(store, report.iteration)
        finally:
            source.close()
        f = s.topic_fetch_urls
        with store.engine.connect() as conn:
            urls = (
                conn.execute(select(f.c.url).where(f.c.iteration == report.iteration, f.c.code == 200))
                .scalars()
                .all()
            )
    found = [(url, web.lookup(url)) for url in urls]
    pages = [(url, page.body) for url, page in found if page is not None and page.status == 200]
    run = Run(
        iteration,
        timed(extract_loop(extract_story, pages)),
        timed(extract_loop(extract_story_and_links, pages)),
        report,
        stored,
        failures,
    )
    sizes = [len(body) for _, body in pages]
    print(f"Fetched pages: mean {statistics.mean(sizes) / 1024:.1f} KiB.\n")
    print_table([run], f"whole iteration {report.iteration}", args.workers)
    print_run_details([run])


# ---------------------------------------------------------------------------------------------------------------
# Output


def mean_timed(values: list[Timed]) -> Timed:
    return Timed(
        values[0].pages, statistics.mean(v.wall for v in values), statistics.mean(v.cpu for v in values)
    )


def median_timed(values: list[Timed]) -> Timed:
    return Timed(
        values[0].pages, statistics.median(v.wall for v in values), statistics.median(v.cpu for v in values)
    )


def print_table(runs: list[Run], iteration_label: str, workers: int) -> None:
    """Medians over the runs; the last column is the median of each run's own ratio to the anchor timed around
    it (the paired number: a ratio of the columns' medians mixes runs and can read 0.80 where the runs read
    0.84, 0.72 and 0.75)."""
    of = f", median of {len(runs)} runs" if len(runs) > 1 else ""
    print(f"| what{of} | pages | wall s | CPU s | pages/s | vs extract_story, same run |")
    print("|---|---:|---:|---:|---:|---:|")
    rows: list[tuple[str, list[tuple[Timed, Timed]]]] = [
        (f"{iteration_label}, {workers} fetch threads, 1 process", [(r.iteration, r.extract) for r in runs]),
        (
            "anchor: `extract_story` alone, same bodies, 1 process (mean of before and after the iteration)",
            [(r.extract, r.extract) for r in runs],
        ),
        (
            "`extract_story_and_links` alone (what the spider calls), 1 process",
            [(r.extract_and_links, r.extract) for r in runs],
        ),
    ]
    prefetched = [(r.prefetched, r.extract) for r in runs if r.prefetched is not None]
    if prefetched:
        rows.append(
            (
                "the same iteration over pages fetched before it started (no fetch threads beside it), "
                "1 process",
                prefetched,
            )
        )
    for label, pairs in rows:
        t = median_timed([timed_row for timed_row, _ in pairs])
        ratio = statistics.median(timed_row.rate / anchor.rate for timed_row, anchor in pairs)
        print(f"| {label} | {t.pages:,} | {t.wall:.1f} | {t.cpu:.1f} | {t.rate:.1f} | {ratio:.2f} |")
    print()


def print_run_details(runs: list[Run]) -> None:
    ratios = [r.ratio for r in runs]
    per_run = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    print(
        f"Ratio iteration / extract_story per run: {per_run}; median **{statistics.median(ratios):.2f}** "
        "(target >= 0.8 per process used; the spider used 1)."
    )
    prefetched = [r.prefetched_ratio for r in runs if r.prefetched_ratio is not None]
    if prefetched:
        print(
            "Ratio of the same iteration over pages fetched beforehand: "
            + ", ".join(f"{ratio:.2f}" for ratio in prefetched)
            + f"; median {statistics.median(prefetched):.2f} (the gap to the live iteration is what fetching while "
            "extracting costs it)."
        )
    other = statistics.median(r.other_ms_per_page for r in runs)
    print(f"Spider cost outside extract_story_and_links: {other:.1f} ms/page (median).")
    last = runs[-1]
    print(
        f"{'Last run' if len(runs) > 1 else 'Run'}: fetched {last.report.fetched:,}, stories stored (pages the spider extracted) "
        f"{last.stories_stored:,}, topic stories added {last.report.stories_added:,}, links added "
        f"{last.report.links_added:,}."
    )
    print(f"States: {dict(last.report.states)}")
    if last.match_failures:
        print(f"Content match failed, by message: {dict(last.match_failures)}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="(A) pages served and seeded")
    parser.add_argument("--domains", type=int, default=50, help="(A) distinct sites")
    parser.add_argument("--runs", type=int, default=3, help="(A) repetitions, each with a fresh store")
    parser.add_argument("--query", default=DEFAULT_QUERY, help="(A) topic query; see the module docstring")
    parser.add_argument("--workers", type=int, default=8, help="fetch threads")
    parser.add_argument("--stories", type=int, default=3000, help="(B) stories of the demo web")
    parser.add_argument("--skip-demo", action="store_true", help="run (A) only")
    parser.add_argument(
        "--database-url", help="PostgreSQL URL (a fresh schema per run); default: temp SQLite"
    )
    args = parser.parse_args()
    if args.pages < 1 or args.domains < 1 or args.runs < 1 or args.workers < 1:
        parser.error("--pages, --domains, --runs and --workers must be >= 1")
    if args.database_url and not args.database_url.startswith(("postgresql", "postgres://")):
        parser.error(f"--database-url must be a PostgreSQL URL, got {args.database_url!r}")

    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"# Spider iteration throughput ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(
        f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average at start {load} (other work may run concurrently). Store: "
        f"{'PostgreSQL (fresh schema per run)' if args.database_url else 'SQLite in a temp dir'}.\n"
    )
    bench_news(args)
    if not args.skip_demo:
        bench_demo(args)


if __name__ == "__main__":
    main()
