"""Reading a media-tags file: time against its size, and peak memory, at 200,000 and 2,000,000 rows.

Run: .venv/bin/python benchmarks/bench_media_tags_read.py [--rows 200000 2000000] [--repeats 2] [--no-load]

A tags file has a row per tag of a medium (``medium_url,tag_set,tag``); 2,000,000 rows are about 70 MB (the size
``topicmap.store.media_tags.MAX_FILE_BYTES`` was set for). The files are synthetic: ten tags for each medium
across five tag sets (a few hundred distinct tags), medium URLs in three spellings (``outlet1.com``,
``https://www.outlet2.com/``, ``http://m.site3.co.uk/news/``), so each URL is normalized once for ten rows.

Each size is read in a process of its own (its peak memory is its own; the best of ``--repeats`` runs counts):

* ``read_media_tags_csv``: the reader as the ``media_tags`` asset calls it, CPU seconds and peak RSS above the
  process after its imports;
* ``normalize_url_lossy`` alone over the file's distinct medium URLs, in the same process, its caches emptied
  first: its share of the read;
* anchor: a bare ``csv.reader`` loop over the same file (the fields split, nothing checked or kept), the floor of
  reading a CSV in Python, in the same process;
* ``load_media_tags`` of the rows read into a SQLite store that knows a medium for each URL (by its exact or its
  normalized URL), as the asset loads them: CPU and wall seconds, and the process's peak with the read (in the
  first run only; ``--no-load`` skips it).

Time proportional to size: the 2,000,000-row file takes about 10 times the 200,000-row one, for the reader as
for the anchor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TAG_SETS = {
    "media_type": ["newspaper", "digital_native", "broadcast", "magazine", "blog"],
    "partisanship": ["left", "center-left", "center", "center-right", "right"],
    "country": ["usa", "gbr", "ind", "nga", "bra", "deu", "fra"],
    "language": ["en", "es", "pt", "fr", "de"],
    "collection": [f"c{i}" for i in range(400)],
}
TAGS_PER_MEDIUM = 10


def write_tags_file(path: Path, rows: int) -> None:
    """``rows`` rows, ten tags a medium: one of each of the first four tag sets and six collections."""
    names = list(TAG_SETS)
    with path.open("w", encoding="utf-8") as out:
        out.write("medium_url,tag_set,tag\n")
        for row in range(rows):
            medium, k = divmod(row, TAGS_PER_MEDIUM)
            url = (
                f"outlet{medium}.com",
                f"https://www.outlet{medium}.com/",
                f"http://m.site{medium}.co.uk/news/",
            )[medium % 3]
            tag_set = names[k] if k < 4 else "collection"
            values = TAG_SETS[tag_set]
            out.write(f"{url},{tag_set},{values[(medium * 7 + k * 37) % len(values)]}\n")


READ = textwrap.dedent(
    """
    import csv, json, os, re, sys, time
    from pathlib import Path

    import topicmap.web.urls as url_module
    from topicmap.store.media_tags import read_media_tags_csv
    from topicmap.web.urls import normalize_url_lossy

    def backend_seconds(pid):  # CPU seconds (user + system) of a PostgreSQL backend here; 0 for none (SQLite)
        if pid is None:
            return 0.0
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(field):
        return int(re.search(field + r":\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024

    path, step = sys.argv[1], sys.argv[2]
    base = rss_mib("VmRSS")
    start = time.process_time()
    found = read_media_tags_csv(path)
    figures = {"read_seconds": time.process_time() - start, "peak_mib": rss_mib("VmHWM") - base}
    urls = sorted({row.medium_url for row in found.rows})
    for cached in vars(url_module).values():  # the read warmed its caches: start cold, as the read did
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()
    start = time.process_time()
    for url in urls:
        normalize_url_lossy(url)
    figures["normalize_seconds"] = time.process_time() - start
    figures.update(rows=len(found.rows), problems=len(found.problems), distinct_urls=len(urls))
    start = time.process_time()
    with open(path, encoding="utf-8", newline="") as handle:
        figures["anchor_rows"] = sum(1 for _ in csv.reader(handle)) - 1
    figures["anchor_seconds"] = time.process_time() - start
    if step == "load":  # into a store that knows a medium for each URL (its setup is not timed)
        from sqlalchemy import insert
        from topicmap.store import schema as s
        from topicmap.store.media_tags import load_media_tags
        from topicmap.store.topic_store import TopicStore
        database_url = sys.argv[4] if len(sys.argv) > 4 else ""
        schema = f"bench_media_tags_{os.getpid()}" if database_url else None
        store = TopicStore.open(database_url or f"sqlite:///{sys.argv[3]}", schema=schema)
        media = [
            {"url": url.replace("m.site", "site").replace("www.", ""), "name": f"medium {n}",
             "normalized_url": normalize_url_lossy(url)}
            for n, url in enumerate(urls)
        ]
        with store.engine.begin() as conn:
            conn.execute(insert(s.media), media)
            if schema:  # statistics, as autovacuum keeps them in a store in use: else each lookup scans media
                conn.exec_driver_sql("ANALYZE media")
        del media
        server = None
        if schema:  # the PostgreSQL backend's CPU counts too: the merge runs there
            with store.engine.connect() as conn:
                server = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        wall, start, server_start = time.perf_counter(), time.process_time(), backend_seconds(server)
        loaded = load_media_tags(store, found.rows)
        figures.update(
            load_seconds=time.process_time() - start, load_wall=time.perf_counter() - wall,
            load_peak_mib=rss_mib("VmHWM") - base, map_rows=loaded.added, unknown_media=len(loaded.unknown_media),
            server_seconds=backend_seconds(server) - server_start,
        )
        wall, start, server_start = time.perf_counter(), time.process_time(), backend_seconds(server)
        again = load_media_tags(store, found.rows)  # the same file again: nothing to add or remove
        figures.update(
            reload_seconds=time.process_time() - start + backend_seconds(server) - server_start,
            reload_wall=time.perf_counter() - wall, reload_changes=again.added + again.removed,
        )
        if schema:
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    print(json.dumps(figures))
    """
)


def measure(path: Path, repeats: int, load: bool, database_url: str = "") -> dict:
    """The best run's seconds (read, normalize, anchor: each its minimum) and the largest peak of a read; the
    load into a store is measured once, in the first run."""
    runs = []
    for repeat in range(repeats):
        step = "load" if load and repeat == 0 else "read"
        store = path.with_suffix(f".{repeat}.sqlite3")
        done = subprocess.run(
            [sys.executable, "-c", READ, str(path), step, str(store), database_url],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout))
    best = {
        key: min(run[key] for run in runs) for key in ("read_seconds", "normalize_seconds", "anchor_seconds")
    }
    return {**runs[0], **best, "peak_mib": max(run["peak_mib"] for run in runs)}


def print_tables(results: list[dict], load: bool) -> None:
    print(
        "| rows | MB | read CPU s | µs/row | normalize_url_lossy (share) | peak MiB | MiB/MB "
        "| anchor csv.reader s | read/anchor |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        share = r["normalize_seconds"] / r["read_seconds"]
        print(
            f"| {r['rows']:,} | {r['megabytes']:.1f} | {r['read_seconds']:.2f} "
            f"| {1e6 * r['read_seconds'] / r['rows']:.1f} "
            f"| {r['normalize_seconds']:.2f} s for {r['distinct_urls']:,} URLs ({share:.0%}) "
            f"| {r['peak_mib']:.0f} | {r['peak_mib'] / r['megabytes']:.1f} | {r['anchor_seconds']:.2f} "
            f"| {r['read_seconds'] / r['anchor_seconds']:.1f}x |"
        )
    if load:
        print(
            "\n| rows | load_media_tags CPU s (client + server) | wall s | µs/row | read + load µs/row "
            "| map rows added | reload CPU s (changes) | peak MiB, read and load |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in results:
            cpu = r["load_seconds"] + r["server_seconds"]
            print(
                f"| {r['rows']:,} | {cpu:.2f} ({r['load_seconds']:.2f} + {r['server_seconds']:.2f}) "
                f"| {r['load_wall']:.2f} | {1e6 * cpu / r['rows']:.2f} "
                f"| {1e6 * (cpu + r['read_seconds']) / r['rows']:.2f} | {r['map_rows']:,} "
                f"| {r['reload_seconds']:.2f} ({r['reload_changes']}) | {r['load_peak_mib']:.0f} |"
            )
    if len(results) < 2:
        return
    small, large = results[0], results[-1]

    def ratio(key: str) -> str:
        return f"{large[key] / small[key]:.1f}x"

    line = (
        f"\nlarger/smaller file: size {ratio('megabytes')}, read time {ratio('read_seconds')}, anchor time "
        f"{ratio('anchor_seconds')}, read peak {ratio('peak_mib')}"
    )
    if load:
        line += (
            f", load time {(large['load_seconds'] + large['server_seconds']) / (small['load_seconds'] + small['server_seconds']):.1f}x"
            f", read and load peak {ratio('load_peak_mib')}"
        )
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-load", action="store_true", help="read only: no load into a store")
    parser.add_argument(
        "--database-url",
        default="",
        help="load into this PostgreSQL database (a schema of its own, dropped after) instead of SQLite",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for rows in args.rows:
            path = Path(folder) / f"tags_{rows}.csv"
            write_tags_file(path, rows)
            result = measure(path, args.repeats, load=not args.no_load, database_url=args.database_url)
            assert result["rows"] == result["anchor_rows"] == rows and result["problems"] == 0, result
            assert args.no_load or (
                result["map_rows"],
                result["unknown_media"],
                result["reload_changes"],
            ) == (
                rows,
                0,
                0,
            ), result
            results.append({**result, "megabytes": path.stat().st_size / 1e6})
    load_after = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    print(f"commit {commit.stdout.strip()}, load average {load_before:.1f} before, {load_after:.1f} after\n")
    print_tables(results, load=not args.no_load)


if __name__ == "__main__":
    main()
