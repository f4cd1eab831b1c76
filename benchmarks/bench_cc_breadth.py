"""Benchmark: the Common Crawl outlet loader in depth mode (each outlet drained in turn) and breadth mode (one index
page per outlet in turn): how many captures, and how long, until every queued outlet has stories, and the whole load.

Setup: the pywb test archive of tests/test_commoncrawl_pywb.py (pywb 2.10.0 in its own virtualenv, the demo web's
outlets as WARC files, served as a ZipNum cluster index ``cc-zip`` with 3 lines a block, so each outlet spans
several index pages), its Range data server, and one loader process per mode on a SQLite store of its own.

Anchor: depth mode, the loader it re-creates (each worker takes "the next outlet" and loads all of it).

Run: .venv/bin/python benchmarks/bench_cc_breadth.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_commoncrawl_pywb import Collection, _demo_outlets  # noqa: E402
from topicmap.archive import cc_queue  # noqa: E402
from topicmap.archive.commoncrawl import CdxClient  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402

PAGE_DONE = re.compile(r": (\S+) in cc-zip: page (\d+)/(\d+) done")


def run_mode(collection: Collection, outlets: list[str], breadth: bool, folder: Path) -> dict:
    store = TopicStore.open(f"sqlite:///{folder / f'store-{breadth}-{time.monotonic_ns()}.sqlite3'}")
    cc_queue.enqueue_outlets(store, outlets, ["cc-zip"])
    started = time.perf_counter()
    covered: dict[str, float] = {}

    def progress(message: str) -> None:
        match = PAGE_DONE.search(message)
        if match and match.group(1) not in covered:
            covered[match.group(1)] = time.perf_counter() - started

    loader = cc_queue.OutletLoader(
        store, collection.settings(), worker_id="bench", breadth=breadth, progress=progress
    )
    report = loader.run()
    total = time.perf_counter() - started
    # captures loaded until every outlet had its first index page done, from the index: depth drains every outlet
    # but the last before that one's first page; breadth loads every outlet's first page first
    client = CdxClient(collection.settings())
    first_page = {o: len(client.captures("cc-zip", o, 0)) for o in outlets}
    if breadth:
        captures_to_cover = sum(first_page.values())
    else:
        whole = {
            o: sum(len(client.captures("cc-zip", o, p)) for p in range(client.num_pages("cc-zip", o)))
            for o in outlets
        }
        captures_to_cover = sum(whole[o] for o in outlets[:-1]) + first_page[outlets[-1]]
    store.dispose()
    return {
        "captures": report.captures,
        "stories": report.stories_added,
        "claims": len(report.outlets),
        "captures_to_cover": captures_to_cover,
        "seconds_to_cover": max(covered.values()),
        "seconds": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "cc").mkdir()
        collection = Collection(folder / "cc")
        try:
            outlets = _demo_outlets(collection)
            results: dict[str, list[dict]] = {"depth": [], "breadth": []}
            for _ in range(args.repeat):  # alternated, so drift in load falls on both
                for mode in ("depth", "breadth"):
                    results[mode].append(run_mode(collection, outlets, mode == "breadth", folder))
        finally:
            collection.close()
    print(f"outlets: {len(outlets)}; load average at the end: {os.getloadavg()}")
    print(
        "| mode | captures | stories | claims | captures until every outlet has its first index page | seconds until then "
        "(median) | whole load, s (median) |"
    )
    print("|---|---|---|---|---|---|---|")
    for mode, runs in results.items():
        first = runs[0]
        print(
            f"| {mode} | {first['captures']} | {first['stories']} | {first['claims']} | "
            f"{first['captures_to_cover']} | {statistics.median(r['seconds_to_cover'] for r in runs):.1f} | "
            f"{statistics.median(r['seconds'] for r in runs):.1f} |"
        )


if __name__ == "__main__":
    main()
