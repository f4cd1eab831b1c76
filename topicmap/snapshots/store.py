"""Snapshots against the topic store: build one (read, key, write its folder once, record it) and find it again.

``topicmap.snapshots.compute`` computes a snapshot from DataFrames and ``topicmap.snapshots.linkmap`` draws it;
the modules here know the store and the file layout (no Dagster here):

* ``topicmap.snapshots.inputs``: ``read_snapshot_inputs`` reads a topic as dedup left it.
* ``topicmap.snapshots.key``: ``snapshot_key`` is a sha256 over a canonical serialization of all of that plus the
  options and the code and library versions that shape the files: same inputs, same key.
* ``topicmap.snapshots.folder``: ``write_snapshot_folder`` writes ``TOPICMAP_HOME/exports/snapshots/<topic>/
  <key[:16]>/`` once, complete or not at all.
* this module: ``build_snapshot`` does all of that and records one ``snapshots`` row (+ ``timespans`` rows),
  idempotently on ``(topics_id, snapshot_key)``; ``snapshot_paths`` says where a recorded snapshot's files are
  (for ``python -m topicmap.snapshots.cli``).

Media Cloud's snapshot ids were database sequence numbers and its dumps were regenerated in place; here the
id is still the ``snapshots_id`` row, but the folder is named by content, which is what makes re-runs safe.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select

from topicmap.snapshots.engine import OUT_OF_CORE_ROWS
from topicmap.snapshots.foci import Focus
from topicmap.snapshots.folder import (
    ATTENTION_NAME,
    GEXF_NAME,
    MANIFEST_NAME,
    PNG_NAME,
    PROVENANCE_NAME,
    read_manifest,
    snapshot_folder,
    write_snapshot_folder,
)
from topicmap.snapshots.inputs import SnapshotInputs, read_snapshot_inputs
from topicmap.snapshots.key import SnapshotOptions, snapshot_key, snapshot_provenance
from topicmap.snapshots.results import SnapshotResult, TimespanSnapshot
from topicmap.snapshots.store_stream import read_streamed_inputs, topic_rows
from topicmap.store import schema as s
from topicmap.store.topic_store import StoreError, TopicStore, now_utc, topicmap_home, utc

SNAPSHOT_STATE = "completed"
#: state of a snapshot whose consistency checks failed: kept for inspection, rebuilt by the next run
INCONSISTENT_STATE = "inconsistent"


# ----------------------------------------------------------------------------------------------- recording


def _stored_path(folder: Path, home: Path) -> str:
    """Relative to TOPICMAP_HOME when inside it, so a moved home keeps its snapshots findable."""
    try:
        return folder.resolve().relative_to(home.resolve()).as_posix()
    except ValueError:
        return str(folder.resolve())


def record_snapshot(
    store: TopicStore,
    inputs: SnapshotInputs,
    result: SnapshotResult,
    key: str,
    folder: Path,
    provenance: dict[str, Any],
    home: Path | None = None,
    consistent: bool = True,
) -> int:
    """Insert the ``snapshots`` row and its ``timespans`` rows (idempotent on their unique keys); returns
    ``snapshots_id``. A re-run keeps the first row (its date and provenance) and only refreshes the path
    and the state (``completed``, or ``inconsistent`` when the consistency checks failed).

    ``timespans.end_date`` is exclusive (the day after the last day), as Media Cloud's was.
    """
    home = home or topicmap_home()
    row = {
        "topics_id": inputs.topics_id,
        "snapshot_key": key,
        "snapshot_date": now_utc(),
        "state": SNAPSHOT_STATE if consistent else INCONSISTENT_STATE,
        "iteration": inputs.iteration,
        "topic_version": inputs.topic_version,
        "provenance_json": json.dumps(provenance, sort_keys=True),
        "path": _stored_path(folder, home),
    }
    with store.engine.begin() as conn:
        store.upsert(conn, s.snapshots, [row], ["topics_id", "snapshot_key"], ["path", "state"])
        snapshots_id = int(
            conn.execute(
                select(s.snapshots.c.snapshots_id).where(
                    s.snapshots.c.topics_id == inputs.topics_id, s.snapshots.c.snapshot_key == key
                )
            ).scalar_one()
        )
        rows = [{"snapshots_id": snapshots_id, **_timespan_row(snap)} for snap in result.timespans]
        store.insert_ignore(conn, s.timespans, rows, ["snapshots_id", "period", "start_date", "end_date"])
        _record_foci(store, conn, snapshots_id, result)
    return snapshots_id


def _record_foci(store: TopicStore, conn: Connection, snapshots_id: int, result: SnapshotResult) -> None:
    """The snapshot's focal sets, foci and focus timespans (Media Cloud's focal_sets / foci / timespans with a
    foci_id), idempotent on their unique keys."""
    if not result.foci:
        return
    set_names = list(dict.fromkeys(found.focus.focal_set for found in result.foci))
    store.insert_ignore(
        conn,
        s.focal_sets,
        [{"snapshots_id": snapshots_id, "name": n} for n in set_names],
        ["snapshots_id", "name"],
    )
    set_ids = dict(
        conn.execute(
            select(s.focal_sets.c.name, s.focal_sets.c.focal_sets_id).where(
                s.focal_sets.c.snapshots_id == snapshots_id
            )
        ).all()
    )
    store.insert_ignore(
        conn,
        s.foci,
        [
            {
                "focal_sets_id": set_ids[found.focus.focal_set],
                "name": found.focus.name,
                "arguments": json.dumps(found.focus.definition(), sort_keys=True),
                "story_count": found.story_count,
            }
            for found in result.foci
        ],
        ["focal_sets_id", "name"],
    )
    foci_ids = {
        (int(set_id), name): int(foci_id)
        for foci_id, set_id, name in conn.execute(
            select(s.foci.c.foci_id, s.foci.c.focal_sets_id, s.foci.c.name).where(
                s.foci.c.focal_sets_id.in_(list(set_ids.values()))
            )
        )
    }
    rows = [
        {"foci_id": foci_ids[(int(set_ids[found.focus.focal_set]), found.focus.name)], **_timespan_row(snap)}
        for found in result.foci
        for snap in found.timespans
    ]
    store.insert_ignore(conn, s.focus_timespans, rows, ["foci_id", "period", "start_date", "end_date"])


# ----------------------------------------------------------------------------------------------- building


@dataclass
class BuiltSnapshot:
    """One materialization's outcome: the recorded snapshot, its result in memory and its checks."""

    snapshots_id: int
    snapshot_key: str
    folder: Path
    written: bool  # False: the folder for this key already existed, complete, and was left alone
    inputs: SnapshotInputs
    result: SnapshotResult
    provenance: dict[str, Any]
    problems: dict[str, list[str]]

    def gexf(self, timespan_key: str) -> Path:
        return self.folder / timespan_key / GEXF_NAME

    def picture(self, timespan_key: str) -> Path | None:
        path = self.folder / timespan_key / PNG_NAME
        return path if path.is_file() else None


def build_snapshot(
    store: TopicStore,
    topic_name: str,
    options: SnapshotOptions | None = None,
    home: Path | None = None,
    log: Callable[[str], None] = lambda _msg: None,
    foci: Sequence[Focus] = (),
) -> BuiltSnapshot:
    """Read, key, compute, write (once) and record the snapshot of ``topic_name`` with its ``foci``."""
    options = options or SnapshotOptions()
    home = home or topicmap_home()
    row = store.topic_row(topic_name)
    topics_id = int(row["topics_id"])
    # read in batches, computed out of core; a url_sharing topic in memory (the engine computes 'web' topics)
    web = (json.loads(row["config_json"]).get("mode") or "web") == "web"
    if web and topic_rows(store, topics_id) > OUT_OF_CORE_ROWS:
        inputs = read_streamed_inputs(store, topic_name, foci)
    else:
        inputs = read_snapshot_inputs(store, topic_name, foci)
    rows = inputs.row_counts()
    log(
        f"{topic_name}: {rows['stories']} stories, {rows['media']} media, {rows['links']} links, "
        f"{len(inputs.timespans)} timespans, {len(inputs.foci)} foci, {len(inputs.media_tags)} media tags"
    )
    key = snapshot_key(inputs, options)
    log(f"{topic_name}: snapshot key {key[:16]}")
    folder = snapshot_folder(topic_name, key, home)
    done = write_snapshot_folder(inputs, options, key, folder, log)
    result, problems, written = done.result, done.problems, done.written
    flat = [problem for found in problems.values() for problem in found]
    if not written:
        log(f"{folder} already holds this snapshot: left as it is")
    provenance = snapshot_provenance(inputs, options, key)
    snapshots_id = record_snapshot(store, inputs, result, key, folder, provenance, home, consistent=not flat)
    return BuiltSnapshot(
        snapshots_id=snapshots_id,
        snapshot_key=key,
        folder=folder,
        written=written,
        inputs=inputs,
        result=result,
        provenance=provenance,
        problems=problems,
    )


# ----------------------------------------------------------------------------------------------- finding


def _snapshot_row(store: TopicStore, topics_id: int, snapshot_id: int | None) -> dict[str, Any] | None:
    sn = s.snapshots
    query = select(sn).where(sn.c.topics_id == topics_id)
    query = query.where(sn.c.snapshots_id == snapshot_id) if snapshot_id is not None else query
    with store.engine.connect() as conn:
        row = conn.execute(query.order_by(sn.c.snapshots_id.desc()).limit(1)).mappings().first()
    return dict(row) if row else None


def latest_snapshot_ids(store: TopicStore) -> dict[str, int]:
    """The newest snapshot id of every topic that has one."""
    sn, tp = s.snapshots, s.topics
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(tp.c.name, func.max(sn.c.snapshots_id))
            .join(sn, sn.c.topics_id == tp.c.topics_id)
            .group_by(tp.c.name)
            .order_by(tp.c.name)
        ).all()
    return {name: int(snapshots_id) for name, snapshots_id in rows}


def snapshot_paths(
    store: TopicStore, topic: str, snapshot_id: int | None = None, home: Path | None = None
) -> dict[str, Any]:
    """Where a snapshot's files are: the newest snapshot of ``topic``, or ``snapshot_id`` (of that topic).

    Returns ``snapshots_id``, ``snapshot_key``, ``snapshot_date``, ``iteration``, ``folder``, ``manifest``,
    ``provenance``, ``link_map_png`` / ``link_map_gexf`` / ``attention_png`` (of the overall timespan, None if
    absent), ``timespans``: one dict per timespan (key, period, name, start_date, last_date, counts, empty,
    folder, files, gexf, png, attention_png); an empty timespan (no stories) has no files and no folder; and
    ``foci``: one dict per focus (key, focal_set, name, story_count, link_map_png, attention_png, timespans). Raises ``StoreError`` for an unknown topic, a missing snapshot or a vanished folder.
    """
    home = home or topicmap_home()
    topics_id = int(store.topic_row(topic)["topics_id"])
    row = _snapshot_row(store, topics_id, snapshot_id)
    if row is None:
        which = f"no snapshot {snapshot_id}" if snapshot_id is not None else "no snapshot yet"
        raise StoreError(f"topic {topic!r} has {which}: materialize the snapshots asset for it")
    folder = Path(row["path"])
    folder = folder if folder.is_absolute() else home / folder
    manifest = read_manifest(folder)
    if manifest is None:
        raise StoreError(
            f"snapshot {row['snapshots_id']} of {topic!r}: {folder} has no readable {MANIFEST_NAME}"
        )
    files = sorted(manifest.get("files", {}))

    def timespan_entry(entry: dict[str, Any], described: dict[str, Any]) -> dict[str, Any]:
        where = entry.get("folder", entry["key"])  # a focus's timespans name their folder
        own = [folder / name for name in files if name.startswith(f"{where}/")]
        gexf, png, chart = (folder / where / name for name in (GEXF_NAME, PNG_NAME, ATTENTION_NAME))
        counts = entry.get("counts", {})
        return {
            **{k: described[k] for k in ("key", "period", "name", "start_date", "last_date")},
            "counts": counts,
            # format 1 wrote files for empty timespans too and had no flag
            "empty": bool(entry.get("empty", counts.get("story_count", 0) == 0)),
            "folder": None if not own else folder / where,
            "files": own,
            "gexf": gexf if gexf in own else None,
            "png": png if png in own else None,
            "attention_png": chart if chart in own else None,
        }

    timespans = [timespan_entry(entry, entry) for entry in manifest.get("timespans", [])]
    described = {t["key"]: t for t in manifest.get("timespans", [])}
    foci = []
    for entry in manifest.get("foci", []):
        spans = [timespan_entry(span, described[span["key"]]) for span in entry["timespans"]]
        focus_overall = next((t for t in spans if t["period"] == "overall"), None)
        foci.append(
            {
                "key": entry["key"],
                "focal_set": entry["focal_set"],
                "name": entry["name"],
                "story_count": entry["story_count"],
                "timespans": spans,
                "link_map_png": focus_overall["png"] if focus_overall else None,
                "attention_png": focus_overall["attention_png"] if focus_overall else None,
            }
        )
    overall = next((t for t in timespans if t["period"] == "overall"), None)
    return {
        "topic": topic,
        "snapshots_id": int(row["snapshots_id"]),
        "snapshot_key": row["snapshot_key"],
        "snapshot_date": utc(row["snapshot_date"]),
        "iteration": int(row["iteration"]),
        "folder": folder,
        "manifest": folder / MANIFEST_NAME,
        "provenance": folder / PROVENANCE_NAME,
        "link_map_png": overall["png"] if overall else None,
        "link_map_gexf": overall["gexf"] if overall else None,
        "attention_png": overall["attention_png"] if overall else None,
        "timespans": timespans,
        "foci": foci,
    }


def timespan_rows(result: SnapshotResult) -> list[dict[str, Any]]:
    """One plain dict per timespan (for metadata and reports): key, period, dates, whether it is partial (a week
    or month cut by the topic's dates) and its days, counts, empty."""
    return [
        {
            "key": snap.timespan.key,
            "period": snap.timespan.period,
            "name": snap.timespan.name,
            "start_date": snap.timespan.start_date.isoformat(),
            "last_date": snap.timespan.last_date.isoformat(),
            "partial": snap.timespan.partial,
            "day_count": snap.timespan.day_count,
            **asdict(snap.counts),
            "empty": snap.empty,
        }
        for snap in result.timespans
    ]


def _timespan_row(snap: TimespanSnapshot) -> dict[str, object]:
    """A timespan's row (the topic's in ``timespans``, a focus's in ``focus_timespans``) but for its owner's id."""
    return {
        "period": snap.timespan.period,
        "start_date": snap.timespan.start_date,
        "end_date": snap.timespan.end_date,
        "story_count": snap.counts.story_count,
        "story_link_count": snap.counts.story_link_count,
        "medium_count": snap.counts.medium_count,
        "medium_link_count": snap.counts.medium_link_count,
    }
