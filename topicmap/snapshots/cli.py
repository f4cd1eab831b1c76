"""Print where a topic's snapshot files, GEXF link maps and pictures are, or list all its snapshots.

    python -m topicmap.snapshots.cli TOPIC [--snapshot-id N | --list] [--home DIR]

Without ``--snapshot-id`` the newest snapshot of the topic is shown; ``--list`` lists every snapshot of the topic,
oldest first, with when it was built, the topic's dates and stories it holds, and whether its folder is intact
(a topic that keeps running gets a snapshot per spidering pass; earlier ones are never rewritten). ``--home`` is
the TOPICMAP_HOME to use (default: the TOPICMAP_HOME environment variable, else ``.topicmap``); the store is the
one TOPICMAP_DATABASE_URL names, else the SQLite file under that home.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select

from topicmap.snapshots.folder import folder_is_complete
from topicmap.snapshots.store import snapshot_paths
from topicmap.store import schema as s
from topicmap.store.topic_store import StoreError, TopicStore, topicmap_home, utc


def list_snapshots(store: TopicStore, topic: str, home: Path) -> list[dict[str, Any]]:
    """Every recorded snapshot of ``topic``, oldest first: ``snapshots_id``, ``snapshot_date``, ``state``,
    ``snapshot_key``, ``start_date`` / ``end_date`` (the topic's dates it covers), ``stories``, ``iteration``,
    ``topic_version`` (the version of the topic's settings it was built from; None: none recorded),
    ``folder`` and ``intact`` (its folder holds every file of its manifest, at its size). Raises ``StoreError``
    for an unknown topic."""
    topics_id = int(store.topic_row(topic)["topics_id"])
    sn = s.snapshots
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(sn).where(sn.c.topics_id == topics_id).order_by(sn.c.snapshots_id)
        ).mappings()
        listed = []
        for row in rows:
            provenance = json.loads(row["provenance_json"])
            folder = Path(row["path"])
            folder = folder if folder.is_absolute() else home / folder
            listed.append(
                {
                    "snapshots_id": row["snapshots_id"],
                    "snapshot_date": utc(row["snapshot_date"]),
                    "state": row["state"],
                    "snapshot_key": row["snapshot_key"],
                    "start_date": provenance["topic"]["start_date"],
                    "end_date": provenance["topic"]["end_date"],
                    "stories": provenance.get("input_rows", {}).get("stories"),
                    "iteration": row["iteration"],
                    "topic_version": row["topic_version"],
                    "folder": folder,
                    "intact": folder_is_complete(folder, row["snapshot_key"]),
                }
            )
    return listed


def format_snapshot_list(topic: str, snapshots: list[dict[str, Any]]) -> str:
    if not snapshots:
        return f"topic {topic} has no snapshot yet"
    lines = [f"{len(snapshots)} snapshot(s) of topic {topic}, oldest first:"]
    for snap in snapshots:
        lines.append(
            f"  {snap['snapshots_id']:>5}  built {snap['snapshot_date']:%Y-%m-%d %H:%M UTC}  "
            f"version {snap['topic_version'] or '-'}  dates {snap['start_date']}..{snap['end_date']}  "
            f"{snap['stories']} stories  "
            f"key {snap['snapshot_key'][:16]}  {snap['state']}"
            f"{'' if snap['intact'] else ' (FOLDER INCOMPLETE)'}  {snap['folder']}"
        )
    return "\n".join(lines)


def format_snapshot_paths(paths: dict[str, Any], brief: bool = False) -> str:
    """The report ``snapshot_cli`` prints (``make demo`` prints the ``brief`` one: weekly timespans summed up)."""
    date = paths["snapshot_date"]
    folder = paths["folder"]
    lines = [
        f"snapshot {paths['snapshots_id']} of topic {paths['topic']}  (key {paths['snapshot_key'][:16]}, "
        f"iteration {paths['iteration']}, built {date:%Y-%m-%d %H:%M UTC})",
        f"  folder:          {folder}",
        f"  manifest:        {paths['manifest']}",
        f"  provenance:      {paths['provenance']}",
        f"  link map (PNG):  {paths['link_map_png'] or '-'}",
        f"  link map (GEXF): {paths['link_map_gexf'] or '-'}",
        f"  attention chart: {paths.get('attention_png') or '-'}",
        f"  timespans, each in {folder}/<timespan>/ (Parquet + CSV tables, link_map.gexf, link_map.png if drawn):",
    ]
    empty = [t for t in paths["timespans"] if t["empty"]]
    # The brief report (make demo) sums up the weekly timespans; both leave out the empty ones, which a topic
    # over decades has by the thousand: they are counted on one line instead.
    shown = [t for t in paths["timespans"] if not t["empty"] and not (brief and t["period"] == "weekly")]
    width = max((len(t["key"]) for t in shown), default=0)
    for ts in shown:
        counts = ts["counts"]
        maps = " + ".join(kind for kind in ("gexf", "png") if ts[kind]) or "no map"
        lines.append(
            f"    {ts['key']:<{width}}  {ts['start_date']}..{ts['last_date']}  "
            f"{counts.get('story_count', 0):>6} stories {counts.get('story_link_count', 0):>6} story links "
            f"{counts.get('medium_count', 0):>5} media  [{maps}]"
        )
    weekly = [t for t in paths["timespans"] if t["period"] == "weekly" and not t["empty"]]
    if brief and weekly:
        lines.append(
            f"    + {len(weekly)} weekly timespans ({weekly[0]['key']} .. {weekly[-1]['key']}): "
            f"python -m topicmap.snapshots.cli {paths['topic']} --snapshot-id {paths['snapshots_id']} lists them"
        )
    if empty:
        by_period = ", ".join(
            f"{sum(t['period'] == period for t in empty)} {period}"
            for period in dict.fromkeys(t["period"] for t in empty)
        )
        plural = "s" if len(empty) != 1 else ""
        lines.append(f"    + {len(empty)} timespan{plural} without stories ({by_period}): recorded, no files")
    if paths.get("foci"):
        lines.append(f"  foci, each in {folder}/foci/<focal set>/<focus>/<timespan>/ (the same files):")
        for focus in paths["foci"]:
            busy = [t for t in focus["timespans"] if not t["empty"]]
            overall = next((t for t in busy if t["period"] == "overall"), None)
            links = overall["counts"].get("story_link_count", 0) if overall else 0
            lines.append(
                f"    {focus['key']}  ({focus['focal_set']} / {focus['name']}): {focus['story_count']} stories, "
                f"{links} story links overall, {len(busy)} timespans with stories"
            )
            if focus["attention_png"]:
                lines.append(f"      attention: {focus['attention_png']}")
    if any(not t["empty"] for t in paths["timespans"]):
        lines.append(
            f"  summary tables in {folder}: top_words, stories_per_day, media_stories_per_day, top_media, top_stories "
            "(.parquet/.csv, keyed by focus and timespan)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topicmap.snapshots.cli", description="Print where a topic's snapshot files are."
    )
    parser.add_argument("topic", help="topic name (as in topics.yaml)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--snapshot-id", type=int, default=None, help="a snapshot id (default: the newest)")
    which.add_argument("--list", action="store_true", help="list every snapshot of the topic, oldest first")
    parser.add_argument("--home", type=Path, default=None, help="TOPICMAP_HOME (default: $TOPICMAP_HOME)")
    args = parser.parse_args(argv)
    if args.home is not None:
        if not args.home.is_dir():
            parser.error(f"--home {args.home}: no such folder")
        os.environ["TOPICMAP_HOME"] = str(args.home.resolve())
    home = topicmap_home()
    store = TopicStore.open(home=home)
    try:
        if args.list:
            report = format_snapshot_list(args.topic, list_snapshots(store, args.topic, home))
        else:
            report = format_snapshot_paths(snapshot_paths(store, args.topic, args.snapshot_id, home=home))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.dispose()
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
