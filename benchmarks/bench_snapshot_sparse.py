"""A small topic over decades: does a snapshot cost follow the stories or the date range?

    .venv/bin/python benchmarks/bench_snapshot_sparse.py [--stories 133] [--links 400] [--start 2000-01-01]
        [--end 2026-12-31]

The synthetic topic of benchmarks/synthetic_topic.py (same generator, 25 media, stories published uniformly over
the topic's dates, 1.5 % undated, 1.5 % before the start) is written into a fresh SQLite store with dedup's traces
(benchmarks/bench_snapshot_store.py's ``build_store``, no custom timespans), then ``build_snapshot`` runs in a fresh
subprocess with the default options (pictures for overall, monthly and custom timespans): what one
materialization of the ``snapshots`` asset does. 2000-01-01..2026-12-31 gives 1 + 324 monthly + 1,410 weekly =
1,735 timespans: such a topic took 98 s and wrote 15,944 files and 324 pictures while every timespan got files.

Reported: timespans (all, with stories), files in the manifest (all, PNG, GEXF), MB, wall and CPU seconds and
peak RSS of the build.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_snapshot_store import TOPIC, build_store, peak_rss_mb  # noqa: E402

from topicmap.store.topic_store import TopicStore  # noqa: E402


def job(db: str, home: str) -> dict:
    from topicmap.snapshots.key import SnapshotOptions
    from topicmap.snapshots.store import build_snapshot

    store = TopicStore.open(f"sqlite:///{db}")
    wall, cpu = time.perf_counter(), time.process_time()
    built = build_snapshot(store, TOPIC, SnapshotOptions(), home=Path(home))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    files = json.loads((built.folder / "manifest.json").read_text())["files"]
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": peak_rss_mb(),
        "timespans": len(built.result.timespans),
        "timespans_with_stories": sum(snap.counts.story_count > 0 for snap in built.result.timespans),
        "files": len(files),
        "png": sum(name.endswith(".png") for name in files),
        "gexf": sum(name.endswith(".gexf") for name in files),
        "mb": sum(f["bytes"] for f in files.values()) / 1e6,
        "on_disk": sum(1 for p in built.folder.rglob("*") if p.is_file()),
        "problems": sum(len(p) for p in built.problems.values()),
        "overall_stories": built.result["overall"].counts.story_count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=133)
    parser.add_argument("--links", type=int, default=400)
    parser.add_argument("--media", type=int, default=25)
    parser.add_argument("--start", type=date.fromisoformat, default=date(2000, 1, 1))
    parser.add_argument("--end", type=date.fromisoformat, default=date(2026, 12, 31))
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--home", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        print(json.dumps(job(args.db, args.home)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db, home = Path(tmp) / "store.sqlite3", Path(tmp) / "home"
        sizes = build_store(
            db, args.stories, args.links, start=args.start, end=args.end, custom=(), n_media=args.media
        )
        out = subprocess.run(
            [sys.executable, __file__, "--job", "--db", str(db), "--home", str(home)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"topic {args.start}..{args.end}: {sizes}")
    print()
    print(
        "| timespans | with stories | files (manifest) | on disk | PNG | GEXF | MB | wall s | CPU s | peak RSS MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {r['timespans']:,} | {r['timespans_with_stories']:,} | {r['files']:,} | {r['on_disk']:,} | {r['png']} "
        f"| {r['gexf']:,} | {r['mb']:.1f} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mb']:.0f} |"
    )
    print(f"\noverall stories {r['overall_stories']}, consistency problems {r['problems']}")


if __name__ == "__main__":
    main()
