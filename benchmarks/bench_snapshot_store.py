"""Snapshot from the topic store at scale: read the deduplicated topic, key it, build and re-run the snapshot.

    .venv/bin/python benchmarks/bench_snapshot_store.py [--stories 100000] [--links 1000000]

The synthetic topic of benchmarks/synthetic_topic.py (same seed) is written into a fresh SQLite store, with
dedup's traces added: 10 % of the media are duplicates (``dup_media_id``, some in chains of two), 1 % of the
stories were merged away (in ``topic_merged_stories_map``, no longer topic stories, still named by links),
near-duplicate groups, Facebook and Bit.ly statistics, one spider metrics row. Links to stories outside the
topic are left out (the store's foreign keys would refuse them).

Each job runs in a fresh subprocess (peak RSS = its VmHWM):
* read_snapshot_inputs: the deduplicated topic as DataFrames;
* + snapshot_key: the sha256 over all inputs;
* build_snapshot: read, key, compute, write Parquet/CSV, GEXF for every timespan, PNGs for overall/monthly/custom,
  record the rows (what one materialization of the `snapshots` asset does);
* build_snapshot again: same inputs, same key, the folder is left alone (what a re-materialization costs);
* anchor: ``TopicStore.media.final_medium`` for each distinct story medium (one query per step of each chain), the
  per-medium lookup the vectorized ``resolve_chains`` replaces, against ``resolve_chains`` itself.
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_topic import CUSTOM, TOPIC_END, TOPIC_START, synthetic_topic  # noqa: E402

from topicmap.store.topic_store import TopicStore  # noqa: E402
from topicmap.topics.declarations import CustomTimespan, TopicConfig  # noqa: E402

TOPIC = "bench"


def _maybe_int(value: object) -> int | None:
    return None if pd.isna(value) else int(value)


def build_store(
    db: Path,
    n_stories: int,
    n_links: int,
    seed: int = 7,
    start: date = TOPIC_START,
    end: date = TOPIC_END,
    custom: tuple[tuple[str, str, str], ...] = tuple(CUSTOM),
    n_media: int = 300,
) -> dict[str, int]:
    """The synthetic topic (``start``..``end``, ``custom`` timespans) with dedup's traces in a SQLite store."""
    topic = synthetic_topic(n_stories, n_links, n_media=n_media, seed=seed, start=start, end=end)
    rng = np.random.default_rng(seed + 1)
    store = TopicStore.open(f"sqlite:///{db}")
    config = TopicConfig(
        name=TOPIC,
        query="bench",
        start_date=start,
        end_date=end,
        timespans=tuple(
            CustomTimespan(n, datetime.fromisoformat(a).date(), datetime.fromisoformat(b).date())
            for n, a, b in custom
        ),
    )
    topics_id = store.upsert_topic(config)
    store.dispose()

    media, stories, links = topic["media"], topic["stories"], topic["links"]
    media_ids = media["media_id"].to_numpy()
    n_media = len(media_ids)
    # 10 % duplicate media among the smaller ones, a third of them pointing at another duplicate (chains of 2)
    dup_pos = rng.choice(np.arange(n_media // 3, n_media), size=n_media // 10, replace=False)
    finals = rng.choice(np.setdiff1d(np.arange(n_media), dup_pos), size=len(dup_pos))
    dup_of = dict(zip(media_ids[dup_pos].tolist(), media_ids[finals].tolist(), strict=True))
    dup_list = list(dup_of)
    for i in range(0, len(dup_list) // 3 * 2, 2):
        dup_of[dup_list[i + 1]] = dup_list[i]  # chain: i+1 -> i -> final
    story_ids = stories["stories_id"].to_numpy()
    merged = rng.choice(len(story_ids), size=len(story_ids) // 100, replace=False)
    keep = np.setdiff1d(np.arange(len(story_ids)), merged)
    merge_target = story_ids[rng.choice(keep, size=len(merged))]
    existing = set(story_ids.tolist())
    links = links[links["ref_stories_id"].isin(existing) & links["stories_id"].isin(existing)]
    now = datetime.now(UTC).isoformat(sep=" ")

    conn = sqlite3.connect(db)  # plain sqlite3 for bulk loading: no per-row SQLAlchemy overhead
    conn.executemany(
        "INSERT INTO media (media_id, url, name, normalized_url, foreign_rss_links, is_spidered) "
        "VALUES (?, ?, ?, ?, 0, 0)",
        [(int(m), u, n, u) for m, u, n in zip(media_ids, media["url"], media["name"], strict=True)],
    )
    conn.executemany(
        "UPDATE media SET dup_media_id = ? WHERE media_id = ?", [(t, s) for s, t in dup_of.items()]
    )
    dates = stories["publish_date"].dt.strftime("%Y-%m-%d %H:%M:%S.%f").tolist()
    conn.executemany(
        "INSERT INTO stories (stories_id, media_id, url, guid, title, publish_date, collect_date, source) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'spider')",
        [
            (int(i), int(m), u, u, t, None if isinstance(d, float) else d, now)
            for i, m, u, t, d in zip(
                story_ids, stories["media_id"], stories["url"], stories["title"], dates, strict=True
            )
        ],
    )
    conn.executemany(
        "INSERT INTO topic_stories (topics_id, stories_id, iteration, link_mined, valid_foreign_rss_story, added_at) "
        "VALUES (?, ?, 1, 1, 0, ?)",
        [(topics_id, int(i), now) for i in story_ids[keep]],
    )
    conn.executemany(
        "INSERT INTO topic_merged_stories_map (topics_id, source_stories_id, target_stories_id, reason, merged_at) "
        "VALUES (?, ?, ?, 'same title and day', ?)",
        [(topics_id, int(s), int(t), now) for s, t in zip(story_ids[merged], merge_target, strict=True)],
    )
    conn.executemany(
        "INSERT INTO topic_links (topics_id, stories_id, url, ref_stories_id, link_spidered) VALUES (?, ?, ?, ?, 1)",
        [
            (topics_id, int(s), f"https://l.example/{n}", int(r))
            for n, (s, r) in enumerate(zip(links["stories_id"], links["ref_stories_id"], strict=True))
        ],
    )
    stats = topic["story_stats"]
    conn.executemany(
        "INSERT INTO story_statistics (stories_id, facebook_share_count) VALUES (?, ?)",
        [
            (int(i), _maybe_int(v))
            for i, v in zip(stats["stories_id"], stats["facebook_share_count"], strict=True)
        ],
    )
    conn.executemany(
        "INSERT INTO bitly_clicks_total (stories_id, publish_day, clicks_3d, clicks_30d) VALUES (?, '2026-01-01', ?, ?)",
        [
            (int(i), _maybe_int(a), _maybe_int(b))
            for i, a, b in zip(
                stats["stories_id"], stats["bitly_clicks_3d"], stats["bitly_clicks_30d"], strict=True
            )
        ],
    )
    groups = topic["near_dup_groups"]
    first = groups.groupby("group_id")["stories_id"].transform("min")
    size = groups.groupby("group_id")["stories_id"].transform("size")
    conn.executemany(
        "INSERT INTO topic_near_dup_groups (topics_id, stories_id, group_stories_id, group_size) VALUES (?, ?, ?, ?)",
        [
            (topics_id, int(i), int(g), int(n))
            for i, g, n in zip(groups["stories_id"], first, size, strict=True)
        ],
    )
    conn.execute(
        "INSERT INTO topic_spider_metrics (topics_id, iteration, links_processed, stories_added, links_added, "
        "frontier_left, elapsed_time, throttle_wait_time, states_json, processed_date) "
        "VALUES (?, 5, 0, 0, 0, 0, 1.0, 0.0, '{}', ?)",
        (topics_id, now),
    )
    conn.commit()
    conn.close()
    return {"stories": len(keep), "links": len(links), "media": n_media, "duplicate_media": len(dup_of)}


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork + exec, so a
    child would report at least its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def job(name: str, db: str, home: str) -> dict:
    from topicmap.snapshots.inputs import read_snapshot_inputs, resolve_chains
    from topicmap.snapshots.key import SnapshotOptions, snapshot_key
    from topicmap.snapshots.store import build_snapshot

    store = TopicStore.open(f"sqlite:///{db}")
    wall, cpu = time.perf_counter(), time.process_time()
    extra: dict = {}
    if name == "read":
        inputs = read_snapshot_inputs(store, TOPIC)
        extra = inputs.row_counts()
    elif name == "read_key":
        inputs = read_snapshot_inputs(store, TOPIC)
        extra = {"key": snapshot_key(inputs, SnapshotOptions())[:16]}
    elif name in ("build", "build_again"):
        built = build_snapshot(store, TOPIC, SnapshotOptions(), home=Path(home))
        files = json.loads((built.folder / "manifest.json").read_text())["files"]
        extra = {
            "written": built.written,
            "files": len(files),
            "mb": round(sum(f["bytes"] for f in files.values()) / 1e6),
            "timespans": len(built.result.timespans),
            "problems": sum(len(p) for p in built.problems.values()),
        }
    elif name == "anchor_final_medium":
        with store.engine.connect() as conn:
            media = [r[0] for r in conn.exec_driver_sql("SELECT DISTINCT media_id FROM stories")]
            wall, cpu = time.perf_counter(), time.process_time()
            finals = {m: store.media.final_medium(conn, m) for m in media}
        extra = {"media": len(finals)}
    elif name == "resolve_chains":
        with store.engine.connect() as conn:
            edges = conn.exec_driver_sql(
                "SELECT media_id, dup_media_id FROM media WHERE dup_media_id IS NOT NULL"
            ).all()
            wall, cpu = time.perf_counter(), time.process_time()
            sources, _ = resolve_chains(
                np.array([e[0] for e in edges]), np.array([e[1] for e in edges]), "media"
            )
        extra = {"media": len(sources)}
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "rss_mb": peak_rss_mb(),
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=1_000_000)
    parser.add_argument("--job", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--db", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--home", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        print(json.dumps(job(args.job, args.db, args.home)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        db, home = Path(tmp) / "store.sqlite3", Path(tmp) / "home"
        started = time.perf_counter()
        sizes = build_store(db, args.stories, args.links)
        print(f"store built in {time.perf_counter() - started:.0f} s: {sizes}", file=sys.stderr)
        rows = []
        for name, label in [
            ("read", "read_snapshot_inputs (deduplicated topic → DataFrames)"),
            ("read_key", "read_snapshot_inputs + snapshot_key"),
            (
                "build",
                "build_snapshot: read, key, compute, write, GEXF ×all, PNG ×overall/monthly/custom, rows",
            ),
            ("build_again", "build_snapshot again (same key: folder left alone)"),
            ("resolve_chains", "resolve_chains, all duplicate media (vectorized)"),
            ("anchor_final_medium", "anchor: TopicStore.media.final_medium per story medium"),
        ]:
            out = subprocess.run(
                [sys.executable, __file__, "--job", name, "--db", str(db), "--home", str(home)],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append((label, result))
            print(f"{name}: {result}", file=sys.stderr)
    print(f"\nSynthetic topic: {sizes}\n")
    print("| job (each in a fresh process) | wall s | CPU s | peak RSS MB | notes |")
    print("|---|---:|---:|---:|---|")
    for label, r in rows:
        notes = {k: v for k, v in r.items() if k not in ("wall", "cpu", "rss_mb")}
        wall = f"{r['wall']:.3f}" if r["wall"] < 1 else f"{r['wall']:.2f}"
        cpu = f"{r['cpu']:.3f}" if r["cpu"] < 1 else f"{r['cpu']:.2f}"
        print(f"| {label} | {wall} | {cpu} | {r['rss_mb']:.0f} | {json.dumps(notes)} |")


if __name__ == "__main__":
    main()
