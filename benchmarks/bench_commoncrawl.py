"""Benchmark: the Common Crawl outlet loader, records per minute per process, 1 and 2 worker processes.

Setup, all on loopback: pywb 2.10.0 (its own virtualenv, as in the tests) serves the CDX index of a collection
of WARC files; a Range-honouring data server in its own process serves the records; worker processes
(`python -m topicmap.archive.cc_queue`) claim outlets from the queue in PostgreSQL, list their captures,
fetch each record by HTTP Range, extract it (topicmap.web.extract, as the spider does) and store stories.

Pages are the real news pages of the news-page corpus (tests/shared_data.py: goose3, newspaper4k, htmldate and
Zyte test pages), repeated under `--outlets` synthetic outlets up to `--records` captures; without that corpus, the demo web's.

Anchor: the SQLite-queue Common Crawl loader this stage replaces, 50 news a minute per process (200 a minute
with 4 processes, its ceiling because SQLite lets one writer in). Its code is not available, so the anchor is
its published figure. The
extraction-only rate on the same pages (one process, no I/O, no store) is measured in the same run: it is
the ceiling a loader that is "bounded by extraction" approaches.

Run: .venv/bin/python benchmarks/bench_commoncrawl.py [--records 2400] [--outlets 8] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ccservers import PywbServer, capture_time, ensure_pywb_venv, write_pages_warc  # noqa: E402
from tests.conftest import postgres_url  # noqa: E402
from tests.shared_data import news_pages  # noqa: E402
from topicmap.archive import cc_queue  # noqa: E402
from topicmap.archive.commoncrawl import FetchedPage, StoryRejected, story_from_page  # noqa: E402
from topicmap.store import schema as s  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402


def corpus() -> list[bytes]:
    pages = [body for _name, body in sorted(news_pages().items())]
    if pages:
        return pages
    from topicmap.demo.web import generate_demo_web

    web = generate_demo_web(seed=11, n_media=10, n_stories=400)
    return [p.body for p in web.pages.values() if p.status == 200 and p.content_type == "text/html"]


def extraction_rate(pages: list[bytes], n: int) -> tuple[float, float]:
    """Records per minute (wall, CPU) that extraction alone allows (one process, no I/O)."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        page = FetchedPage(f"http://x{i}.bench.test/a/{i}", 200, "text/html", pages[i % len(pages)], None)
        # rejected pages count: the loader pays their extraction too
        with contextlib.suppress(StoryRejected):
            story_from_page(page)
    return n / (time.perf_counter() - start) * 60, n / (time.process_time() - cpu) * 60


def run(workers: int, outlets: list[str], index_url: str, data_url: str, ports: list[int]) -> dict:
    schema = f"bench_cc_{uuid.uuid4().hex[:8]}"
    url = postgres_url()
    store = TopicStore.open(url, schema=schema)
    cc_queue.enqueue_outlets(store, outlets, ["cc"])
    command = [
        sys.executable,
        "-m",
        "topicmap.archive.cc_queue",
        "--index-url",
        index_url,
        "--data-url",
        data_url,
        "--schema",
        schema,
        "--index-min-interval",
        "0",
    ]
    command += [arg for port in ports for arg in ("--allow-network", f"127.0.0.1:{port}")]
    env = {**os.environ, "TOPICMAP_DATABASE_URL": url}
    started = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [
        subprocess.Popen(
            [*command, "--worker-id", f"bench{n}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for n in range(workers)
    ]
    reports = [json.loads(p.communicate()[0]) for p in procs]
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, all waited for above
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    q = s.cc_outlet_queue
    with store.engine.connect() as conn:
        first, last, captures, stories = conn.execute(
            select(
                func.min(q.c.started_at),
                func.max(q.c.completed_at),
                func.sum(q.c.captures_found),
                func.sum(q.c.stories_stored),
            )
        ).one()
    store.dispose()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()
    loading = (last - first).total_seconds()
    return {
        "workers": workers,
        "captures": int(captures),
        "stories": int(stories),
        "rejected": sum(sum(o["rejected"].values()) for r in reports for o in r["outlets"]),
        "wall_s": wall,
        "loading_s": loading,
        "per_min": captures / loading * 60,
        "per_min_per_process": captures / loading * 60 / workers,
        "cpu_s": cpu,
        "per_cpu_min": captures / cpu * 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2400)
    parser.add_argument("--outlets", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    pages = corpus()
    venv, reason = ensure_pywb_venv()
    if venv is None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="bench_cc_") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "src").mkdir()
        outlets = [f"outlet{k}.bench.test" for k in range(args.outlets)]
        per_outlet: dict[str, list] = {o: [] for o in outlets}
        for i in range(args.records):
            outlet = outlets[i % len(outlets)]
            per_outlet[outlet].append(
                (f"http://{outlet}/news/{i}", 200, "text/html; charset=utf-8", pages[i % len(pages)])
            )
        warcs = []
        for outlet, records in per_outlet.items():
            path = tmp_path / "src" / f"{outlet}.warc.gz"
            write_pages_warc(path, records, capture_time())
            warcs.append(path)
        pywb = PywbServer(tmp_path / "pywb", venv)
        pywb.root.mkdir()
        pywb.build(warcs)
        pywb.start()
        data = subprocess.Popen(
            [sys.executable, "-m", "tests.ccservers", str(pywb.archive_dir)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        data_port = int(data.stdout.readline())
        try:
            extraction, extraction_cpu = extraction_rate(pages, min(600, args.records))
            results = [
                run(w, outlets, pywb.index_url(), f"http://127.0.0.1:{data_port}/", [pywb.port, data_port])
                for w in args.workers
            ]
        finally:
            data.stdin.close()
            data.wait()
            pywb.stop()
    print(
        f"\n{datetime.now(UTC):%Y-%m-%d}, {os.cpu_count()} cores, {platform.machine()}, {len(pages)} distinct pages, "
        f"{args.records} captures over {args.outlets} outlets"
    )
    print(f"load average at the end: {os.getloadavg()}")
    print(
        f"extraction alone (1 process, no I/O): {extraction:,.0f} records/min, {extraction_cpu:,.0f} per CPU-minute"
    )
    print(
        "| worker processes | captures | stories | rejected | loading time (s) | records/min | per process "
        "| vs the stated 50/min/process | worker CPU (s) | records per CPU-minute |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['workers']} | {r['captures']} | {r['stories']} | {r['rejected']} | {r['loading_s']:.1f} | "
            f"{r['per_min']:,.0f} | {r['per_min_per_process']:,.0f} | {r['per_min_per_process'] / 50:.0f}x | "
            f"{r['cpu_s']:.0f} | {r['per_cpu_min']:,.0f} |"
        )
    if len(results) > 1:
        print(
            f"speed-up with {results[1]['workers']} processes: {results[1]['per_min'] / results[0]['per_min']:.2f}x"
        )


if __name__ == "__main__":
    main()
