"""Near-duplicate lookup service: latency against 1,000,000 stored fingerprints, and requests/s.

    .venv/bin/python benchmarks/bench_near_dup_service.py [--fingerprints 1000000] [--requests 1000]
        [--clients 1,4,16] [--containment-stories 100000]

Setup: a SQLite store in a temporary folder holds the real articles of the news-page corpus (tests/shared_data.py)
(expected.jsonl ``text``, skipped cleanly when absent) and an edited copy of each (3% of words substituted, a
footer added), so every query has real near-duplicates to find, read and verify. The catalog loads them, then
random 64-bit fingerprints are added to the in-memory index until it holds ``--fingerprints`` (their ids have no
story: they cost what a million stored stories cost the index, and a random fingerprint is within 6 bits of a
query with probability ~5e-12, so none of them reaches the database stage). The containment index likewise gets
``--containment-stories`` stories of random keys (as many keys each as a real article has, added 5,000 stories at
a time as a refresh adds them); its cost per story is printed, so a larger store can be extrapolated.

Measured:
1. lookup in process (``FingerprintCatalog.lookup``: tokenize the text, fingerprint, shingles and containment
   keys, query both indexes, read the candidates' texts, Jaccard and containment): p50/p99 over ``--requests``
   queries (each article's edited copy, in turn), four ways taken in turn for each query (paired, so machine
   load hits all alike): two anchors, the lookup before the shingle cache (``previous_lookup`` below: Python-set
   shingles, the text tokenized twice) and the whole-document lookup before the containment search
   (``whole_document_lookup``, warm shingle cache), then the lookup with its shingle cache emptied first (every
   candidate shingled from its text) and with the cache as it is (warm); every query's whole-document answers
   (the matches with Jaccard >= 0.7, their distances and similarities) are checked equal;
1b. part lookups in process (warm): a paragraph of 40+ words from the middle of each article and a quote of three
   of its sentences; a query counts as found when its article is a match with containment >= 0.99;
2. the same through HTTP (uvicorn on loopback, ``POST /near-duplicates``, one client): p50/p99;
3. requests/s with N concurrent clients (threads with their own connection), and their p50/p99;
4. warm lookups in process while 5,000 new fingerprints are added every 0.5 s (a refresh as stories land),
   the previous locking and the current one taken in turn (``lookups_while_fingerprints_land``); this grows
   the index past 1,000,000, so it runs last.
Wall-clock latencies depend on what else the machine runs; the CPU time of a lookup (the "CPU" rows) does not.

Goal: p99 <= 20 ms for a lookup against 1,000,000 fingerprints.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.dedup.catalog import MAX_CANDIDATES, FingerprintCatalog, Match, ShingleCache  # noqa: E402
from topicmap.dedup.containment import containment_keys_many  # noqa: E402
from topicmap.dedup.service import create_app  # noqa: E402
from topicmap.dedup.shingles import jaccard, jaccard_sorted, shingle_set  # noqa: E402
from topicmap.dedup.simhash import DEFAULT_MIN_JACCARD, fingerprint, fingerprint_and_shingles  # noqa: E402
from topicmap.dedup.tokens import tokenize  # noqa: E402
from topicmap.store.topic_store import NewStory, TopicStore  # noqa: E402

FOOTER = " This story was first published by a partner newspaper and is republished with permission."


def edited(text: str, rng: random.Random, vocabulary: list[str], rate: float = 0.03) -> str:
    words = text.split()
    for _ in range(max(1, int(len(words) * rate))):
        words[rng.randrange(len(words))] = rng.choice(vocabulary)
    return " ".join(words) + FOOTER


# A whole-document match: (stories_id, Hamming distance, word-bigram Jaccard), in the lookup's order.
WholeDocumentMatch = tuple[int, int, float]


def previous_lookup(catalog: FingerprintCatalog, text: str) -> tuple[int, list[WholeDocumentMatch]]:
    """``FingerprintCatalog.lookup`` as it was before the shingle cache (default options), for the paired
    comparison: the text tokenized for its fingerprint and again for its shingles, every candidate's text
    shingled into a Python set on every lookup."""
    value = fingerprint(text)
    found = catalog.candidates(value, catalog.max_distance)[:MAX_CANDIDATES]
    if not found:
        return value, []
    details = catalog.candidate_details([i for i, _ in found])  # the same query as before
    own = shingle_set(text)
    matches = []
    for stories_id, distance in found:
        row = details.get(stories_id)
        if row is None:
            continue
        similarity = jaccard(own, shingle_set(row.text or ""))
        if similarity >= DEFAULT_MIN_JACCARD:
            matches.append((stories_id, distance, similarity))
    matches.sort(key=lambda m: (m[1], -m[2], m[0]))
    return value, matches[:20]


def whole_document_lookup(catalog: FingerprintCatalog, text: str) -> tuple[int, list[WholeDocumentMatch]]:
    """``FingerprintCatalog.lookup`` as it was before the containment search (default options), for the paired
    comparison: simhash candidates only, their shingles from the catalog's (warm) cache."""
    value, own = fingerprint_and_shingles(text)
    found = catalog.candidates(value, catalog.max_distance)[:MAX_CANDIDATES]
    if not found:
        return value, []
    details = catalog.candidate_details([i for i, _ in found])
    matches = []
    for stories_id, distance in found:
        row = details.get(stories_id)
        if row is None:
            continue
        similarity = jaccard_sorted(own, catalog.shingle_cache.shingles(stories_id, row.text or ""))
        if similarity >= DEFAULT_MIN_JACCARD:
            matches.append((stories_id, distance, similarity))
    matches.sort(key=lambda m: (m[1], -m[2], m[0]))
    return value, matches[:20]


COPIES_BEYOND_DISTANCE: list[WholeDocumentMatch] = []  # copies only the containment search found, per lookup


def whole_document_part(
    answer: tuple[int, list[Match]], max_distance: int
) -> tuple[int, list[WholeDocumentMatch]]:
    """The whole-document matches of a lookup's answer within ``max_distance`` bits, in the anchors' order (to
    check the answers agree); copies farther away, which the anchors cannot find, go to COPIES_BEYOND_DISTANCE."""
    value, matches = answer
    copies = [
        (m.stories_id, m.hamming_distance, m.shingle_similarity)
        for m in matches
        if m.shingle_similarity >= DEFAULT_MIN_JACCARD
    ]
    COPIES_BEYOND_DISTANCE.extend(c for c in copies if c[1] is None or c[1] > max_distance)
    within = [c for c in copies if c[1] is not None and c[1] <= max_distance]
    return value, sorted(within, key=lambda m: (m[1], -m[2], m[0]))  # type: ignore[arg-type, return-value]


def add_containment_filler(catalog: FingerprintCatalog, stories: int, articles: list[str]) -> float:
    """Random keys for ``stories`` stories without a stored story (negative ids), as many keys each as a real
    article has, added 5,000 stories at a time; returns the seconds the adds took."""
    real_counts = np.bincount(containment_keys_many([tokenize(text) for text in articles])[0])
    rng = np.random.default_rng(31)
    seconds, next_id = 0.0, -1
    for start in range(0, stories, 5000):
        count = min(5000, stories - start)
        per_story = rng.choice(real_counts, size=count)
        doc = np.repeat(np.arange(count), per_story)
        keys = rng.integers(0, 2**32, size=len(doc), dtype=np.uint32)
        ids = range(next_id, next_id - count, -1)
        began = time.perf_counter()
        catalog.containment.add_keys(ids, doc, keys)
        seconds += time.perf_counter() - began
        next_id -= count
    return seconds


def middle_paragraph(text: str) -> str | None:
    paragraphs = [p.strip() for p in text.split("\n") if len(p.split()) >= 40]
    return paragraphs[len(paragraphs) // 2] if paragraphs else None


def three_sentence_quote(text: str) -> str | None:
    sentences = [s for s in re.split(r"(?<=[.!?\u201d\"])\s+", text.replace("\n", " ")) if s.strip()]
    for start in range(len(sentences) // 2, len(sentences) - 2):
        quote = " ".join(sentences[start : start + 3])
        if len(quote.split()) >= 25:
            return quote
    return None


def part_lookups(
    catalog: FingerprintCatalog, articles: list[str], urls: list[str], requests: int
) -> list[tuple]:
    """Warm lookups of a paragraph and of a three-sentence quote of each article: wall and CPU rows."""
    parts: dict[str, list[tuple[str, str]]] = {"paragraph of 40+ words": [], "3-sentence quote": []}
    for text, url in zip(articles, urls, strict=True):
        for name, part in zip(parts, (middle_paragraph(text), three_sentence_quote(text)), strict=True):
            if part is not None:
                parts[name].append((part, url))
    rows = []
    for name, queries in parts.items():
        for part, _ in queries:  # warm-up: candidates' shingles in the cache, as for the page-sized rows
            catalog.lookup(part)
        wall, cpu, found = [], [], 0
        for n in range(requests):
            part, url = queries[n % len(queries)]
            began, began_cpu = time.perf_counter(), time.thread_time()
            _, matches = catalog.lookup(part)
            cpu.append(time.thread_time() - began_cpu)
            wall.append(time.perf_counter() - began)
            found += any(m.url == url and m.containment >= 0.99 for m in matches)
        rows.append(
            in_process_row(f"part lookup, {name} ({len(queries)} texts), wall clock", wall, found / requests)
        )
        rows.append(in_process_row(f"part lookup, {name}, CPU time", cpu, found / requests))
    return rows


def lookups_while_fingerprints_land(
    catalog: FingerprintCatalog, queries: list[str], requests: int, next_id: int
) -> list[tuple]:
    """Warm lookups while batches of 5,000 new fingerprints are added (a refresh as stories land), paired:
    the previous catalog held one lock over each add and each index query (so a lookup arriving during an add
    waited for all of it); now a lookup never waits (the index publishes an add's arrays in one assignment)."""
    lock = threading.Lock()
    stop = threading.Event()
    adds: list[float] = []

    def land() -> None:
        rng, start = np.random.default_rng(22), next_id
        while not stop.is_set():
            batch = rng.integers(0, 2**64, size=5000, dtype=np.uint64)
            began = time.perf_counter()
            with lock:
                catalog.index.add(range(start, start - len(batch), -1), batch)
            adds.append(time.perf_counter() - began)
            start -= len(batch)
            stop.wait(0.5)

    def locked_candidates(value: int, max_distance: int) -> list[tuple[int, int]]:
        with lock:
            return catalog.index.query(value, max_distance)  # type: ignore[return-value]

    unlocked_candidates = catalog.candidates
    wall: dict[str, list[float]] = {"previous: lock over adds and queries": [], "now: no lock": []}
    found = 0
    lander = threading.Thread(target=land)
    lander.start()
    try:
        for n in range(2 * requests):
            name = list(wall)[n % 2]
            catalog.candidates = locked_candidates if n % 2 == 0 else unlocked_candidates  # type: ignore[method-assign]
            began = time.perf_counter()
            _, matches = catalog.lookup(queries[(n // 2) % len(queries)])
            wall[name].append(time.perf_counter() - began)
            found += bool(matches)
    finally:
        catalog.candidates = unlocked_candidates  # type: ignore[method-assign]
        stop.set()
        lander.join()
    print(f"while landing: {len(adds)} adds of 5,000 fingerprints, median {np.median(adds) * 1000:.0f} ms each, "
          f"index at {len(catalog):,}")  # fmt: skip
    share = found / (2 * requests)
    return [
        in_process_row(f"lookup (warm) while fingerprints land, {name}, wall clock", samples, share)
        for name, samples in wall.items()
    ]


def in_process_row(name: str, samples: list[float], share: float) -> tuple:
    """A table row for lookups one after another in process: the rate is 1 / mean latency."""
    p50, p99 = percentiles(samples)
    return (name, 1, p50, p99, len(samples) / sum(samples), share)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def load_articles() -> list[str]:
    expected = NEWS_HTML / "expected.jsonl"
    if not expected.exists():
        return []
    rows = [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines()]
    return [
        row["text"] for row in rows if isinstance(row.get("text"), str) and len(row["text"].split()) >= 80
    ]


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--fingerprints", type=int, default=1_000_000)
    arguments.add_argument("--requests", type=int, default=1000)
    arguments.add_argument("--clients", default="1,4,16")
    arguments.add_argument(
        "--containment-stories",
        type=int,
        default=100_000,
        help="stories of random keys in the containment index",
    )
    options = arguments.parse_args(argv)
    articles = load_articles()
    if not articles:
        print(f"skipped: no articles at {NEWS_HTML}")
        return 0
    rng = random.Random(21)
    vocabulary = sorted({word for text in articles for word in text.split()})
    copies = [edited(text, rng, vocabulary) for text in articles]
    queries = [edited(text, rng, vocabulary) for text in articles]
    with tempfile.TemporaryDirectory() as folder:
        store = TopicStore.open(f"sqlite:///{Path(folder) / 'store.sqlite3'}")
        stories = [
            NewStory(f"https://site{i % 7}.test/story/{i}", f"Story {i}", text, None)
            for i, text in enumerate(articles + copies)
        ]
        store.add_stories(stories, "benchmark")
        catalog = FingerprintCatalog(store)
        began, began_cpu = time.perf_counter(), time.process_time()
        real = catalog.refresh()
        refresh_seconds, refresh_cpu = time.perf_counter() - began, time.process_time() - began_cpu
        keys_per_story = catalog.containment.postings / len(catalog.containment)
        words = sum(len(tokenize(text)) for text in articles + copies)
        print(f"refresh of {real} stories ({words / real:.0f} words each): {refresh_seconds / real * 1000:.2f} ms "
              f"a story ({refresh_cpu / real * 1000:.2f} ms CPU; fingerprints and containment keys); "
              f"{keys_per_story:.0f} containment keys a story, {keys_per_story * 8:.0f} bytes "
              f"({keys_per_story * 8 / (words / real):.2f} bytes a word)")  # fmt: skip
        filler_seconds = add_containment_filler(catalog, options.containment_stories, articles)
        index = catalog.containment
        print(f"containment index: {len(index):,} stories, {index.postings:,} keys, {index.nbytes / 1e6:.0f} MB "
              f"in {index.segment_count} segments; filler added 5,000 stories at a time in {filler_seconds:.1f} s")  # fmt: skip
        started = time.perf_counter()
        filler = options.fingerprints - real
        ids = np.arange(-1, -filler - 1, -1).tolist()  # negative ids: never a stories_id
        values = np.random.default_rng(21).integers(0, 2**64, size=filler, dtype=np.uint64)
        catalog.index.add(ids, values)
        build_seconds = time.perf_counter() - started
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{len(catalog):,} fingerprints ({real} stored stories), filler added in {build_seconds:.1f} s, "
              f"peak RSS {rss_mb:.0f} MB")  # fmt: skip

        # Warm-up: token hash cache, SQLite page cache, and every query's candidates in the (warm) shingle cache.
        for query in queries:
            catalog.lookup(query)
            previous_lookup(catalog, query)
            whole_document_lookup(catalog, query)

        # Cold and warm lookups each have a shingle cache of their own, so the order of the three ways never
        # warms the cold one's or empties the warm one's.
        warm_cache, cold_cache = catalog.shingle_cache, ShingleCache(catalog.shingle_cache.max_bytes)

        def cold_lookup(text: str) -> tuple[int, list[Match]]:
            cold_cache.clear()  # inside the timing: clearing a dict of a few entries costs microseconds
            catalog.shingle_cache = cold_cache
            try:
                return catalog.lookup(text)
            finally:
                catalog.shingle_cache = warm_cache

        ways = {
            "anchor: lookup before the shingle cache": lambda text: previous_lookup(catalog, text),
            "anchor: whole-document lookup before containment (warm)": lambda text: whole_document_lookup(
                catalog, text
            ),
            "lookup, shingle cache cold": lambda text: whole_document_part(
                cold_lookup(text), catalog.max_distance
            ),
            "lookup, shingle cache warm": lambda text: whole_document_part(
                catalog.lookup(text), catalog.max_distance
            ),
        }
        wall: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        found = 0
        names = list(ways)
        for n in range(options.requests):
            query = queries[n % len(queries)]
            answers = []
            turn = n % len(names)
            for name in names[turn:] + names[:turn]:  # rotate the order: none always runs first
                began, began_cpu = time.perf_counter(), time.thread_time()
                answers.append(ways[name](query))
                cpu[name].append(time.thread_time() - began_cpu)
                wall[name].append(time.perf_counter() - began)
            if any(answer != answers[0] for answer in answers):
                raise AssertionError(f"query {n}: the lookups found different copies: {answers}")
            found += bool(answers[0][1])
        beyond = {c[0] for c in COPIES_BEYOND_DISTANCE}
        print(f"copies (Jaccard >= {DEFAULT_MIN_JACCARD}) beyond {catalog.max_distance} bits that only the containment "
              f"search found: {len(COPIES_BEYOND_DISTANCE) // 2} in {options.requests} lookups "
              f"({len(beyond)} distinct stories)")  # fmt: skip
        rows = [
            in_process_row(f"{name} in process, {kind}", samples, found / options.requests)
            for name in names
            for kind, samples in (("wall clock", wall[name]), ("CPU time", cpu[name]))
        ]
        rows.extend(
            part_lookups(
                catalog,
                articles,
                [f"https://site{i % 7}.test/story/{i}" for i in range(len(articles))],
                options.requests,
            )
        )
        print(f"warm shingle cache after the in-process lookups: {len(warm_cache)} stories, "
              f"{warm_cache.bytes / 1e6:.1f} MB (bound {warm_cache.max_bytes / 1e6:.0f} MB), "
              f"{warm_cache.hits} hits, {warm_cache.misses} misses")  # fmt: skip

        app = create_app(catalog, refresh_seconds=0, load_on_start=False)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

        def client_run(count: int, offset: int, out: list[float], hits: list[int]) -> None:
            with httpx.Client(base_url=base, timeout=60) as client:
                for n in range(count):
                    query = queries[(offset + n) % len(queries)]
                    began = time.perf_counter()
                    response = client.post("/near-duplicates", json={"text": query})
                    out.append(time.perf_counter() - began)
                    response.raise_for_status()
                    hits.append(bool(response.json()["matches"]))

        for clients in [int(c) for c in options.clients.split(",")]:
            per_client = max(1, options.requests // clients)
            latencies: list[float] = []
            hits: list[int] = []
            workers = [
                threading.Thread(target=client_run, args=(per_client, i * 37, latencies, hits))
                for i in range(clients)
            ]
            began = time.perf_counter()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            elapsed = time.perf_counter() - began
            p50, p99 = percentiles(latencies)
            rows.append(
                (
                    f"HTTP POST, {clients} client(s)",
                    clients,
                    p50,
                    p99,
                    len(latencies) / elapsed,
                    sum(hits) / len(hits),
                )
            )
        server.should_exit = True
        thread.join()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS after the HTTP rows ({len(catalog):,} fingerprints): {rss_mb:.0f} MB")
        rows.extend(lookups_while_fingerprints_land(catalog, queries, options.requests, -filler - 1))
        store.dispose()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS at the end (index grown while fingerprints landed): {rss_mb:.0f} MB")

    print(f"\nload average while measuring (2 cores, shared): {os.getloadavg()[0]:.1f}")
    print("| lookup | concurrent clients | p50 ms | p99 ms | requests/s | queries with a match |")
    print("|---|---|---|---|---|---|")
    for name, clients, p50, p99, rate, share in rows:
        print(f"| {name} | {clients} | {p50:.2f} | {p99:.2f} | {rate:.0f} | {share:.0%} |")
    print("| goal | | | ≤ 20 | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
