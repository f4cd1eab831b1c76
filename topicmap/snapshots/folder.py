"""A snapshot's folder, ``TOPICMAP_HOME/exports/snapshots/<topic>/<key[:16]>/``, written once.

``write_snapshot_folder`` computes the snapshot and writes its tables per timespan, GEXF link maps, PNG pictures,
``provenance.json`` and a ``manifest.json`` listing every file with its sha256 into a staging folder, then
renames it into place, so a snapshot folder is either complete or absent. An existing complete folder for the
key is never rewritten; another key gets another folder, so an older snapshot is never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from topicmap.snapshots.charts import render_attention_chart, render_focal_set_chart
from topicmap.snapshots.checks import check_problems
from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.engine import OUT_OF_CORE_ROWS, compute_snapshot_ooc
from topicmap.snapshots.engine_input import TopicSource, frame_batches
from topicmap.snapshots.files import FOCI_FOLDER, SnapshotFilesWriter, sha256_of, timespan_folder
from topicmap.snapshots.inputs import SnapshotInputs
from topicmap.snapshots.key import SnapshotOptions, snapshot_provenance
from topicmap.snapshots.linkmap import render_link_map, tag_labels, write_gexf
from topicmap.snapshots.post_counts import add_all_post_counts, selection_for
from topicmap.snapshots.results import SnapshotResult
from topicmap.store.topic_store import StoreError, topicmap_home

MANIFEST_NAME = "manifest.json"
PROVENANCE_NAME = "provenance.json"
GEXF_NAME = "link_map.gexf"
PNG_NAME = "link_map.png"
ATTENTION_NAME = "attention.png"

_SAFE_TOPIC = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,62}$")


def snapshots_dir(topic_name: str, home: Path | None = None) -> Path:
    """``TOPICMAP_HOME/exports/snapshots/<topic>``: one sub-folder per snapshot key."""
    if not _SAFE_TOPIC.match(topic_name):
        raise ValueError(f"topic name {topic_name!r} cannot name a folder (expected [a-z0-9_-], 1-63 chars)")
    return (home or topicmap_home()) / "exports" / "snapshots" / topic_name


def snapshot_folder(topic_name: str, key: str, home: Path | None = None) -> Path:
    if not re.fullmatch(r"[0-9a-f]{64}", key):
        raise ValueError(f"snapshot key must be 64 hex digits, got {key!r}")
    return snapshots_dir(topic_name, home) / key[:16]


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when it is missing or unreadable."""
    try:
        return json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def folder_is_complete(folder: Path, key: str) -> bool:
    """True when ``folder`` holds the snapshot ``key``: its manifest names the key, records no consistency
    problem, and every listed file is there with its listed size (cheap; ``verify_snapshot_files`` also
    compares the checksums)."""
    manifest = read_manifest(folder)
    if not manifest or manifest.get("snapshot_key") != key or not isinstance(manifest.get("files"), dict):
        return False
    if manifest.get("problems"):
        return False  # written by code that got it wrong: the next run rebuilds it (the old one is set aside)
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != entry.get("bytes"):
            return False
    return True


def verify_snapshot_files(folder: Path) -> list[str]:
    """Problems of a snapshot folder against its manifest (missing, resized or altered files); empty if intact."""
    manifest = read_manifest(folder)
    if manifest is None:
        return [f"{folder}: no readable {MANIFEST_NAME}"]
    problems = []
    for name, entry in sorted(manifest.get("files", {}).items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{folder.name}/{name}: missing")
        elif path.stat().st_size != entry.get("bytes") or sha256_of(path) != entry.get("sha256"):
            problems.append(f"{folder.name}/{name}: changed since the snapshot was written")
    return problems


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _write_folder(
    result: SnapshotResult,
    inputs: SnapshotInputs,
    options: SnapshotOptions,
    key: str,
    provenance: dict[str, Any],
    staging: Path,
    log: Callable[[str], None],
    files: SnapshotFilesWriter,
) -> dict[str, list[str]]:
    """Everything of one snapshot into ``staging``; the manifest is written last and lists every file and the
    consistency problems found (returned per check).

    The tables are written and the checks run on background threads (pyarrow, hashlib and numpy's big loops
    release the GIL) while this thread draws the maps, so the pictures' cost overlaps the files' cost.
    """
    with ThreadPoolExecutor(max_workers=2) as background:
        tables = background.submit(files.finish, result)
        checks = background.submit(check_problems, result, inputs.start_date, inputs.end_date)
        try:
            extra = _write_maps(result, inputs, options, staging)
        finally:
            tables.result()  # wait (and raise its error) before anything reads the manifest
    found = checks.result()
    problems = [problem for check in found.values() for problem in check]
    _log_written(result, extra, log)
    _write_json(staging / PROVENANCE_NAME, provenance)
    extra.append(staging / PROVENANCE_NAME)
    manifest = read_manifest(staging)
    if manifest is None:
        raise StoreError(f"write_snapshot_files left no {MANIFEST_NAME} in {staging}")
    for path in extra:
        manifest["files"][path.relative_to(staging).as_posix()] = {
            "bytes": path.stat().st_size,
            "sha256": sha256_of(path),
        }
    manifest["snapshot_key"] = key
    manifest["topic"] = inputs.topic_name
    manifest["topic_version"] = inputs.topic_version
    manifest["provenance"] = PROVENANCE_NAME
    manifest["problems"] = problems
    tmp = staging / f".{MANIFEST_NAME}.tmp"
    _write_json(tmp, manifest)
    os.replace(tmp, staging / MANIFEST_NAME)
    return found


def version_note(inputs: SnapshotInputs) -> str:
    """The README's first line: the topic and the version of its settings the snapshot was built from."""
    config = json.loads(inputs.config_json)
    version = f"version {inputs.topic_version}" if inputs.topic_version is not None else "no recorded version"
    return (
        f"Topic {inputs.topic_name!r}, {version} (topic_version in manifest.json and provenance.json): query "
        f"{config.get('query', '')!r}, dates {inputs.start_date}..{inputs.end_date}; the stories are those of "
        "this version (stories an earlier query matched and this one does not are left out)."
    )


def _write_maps(
    result: SnapshotResult, inputs: SnapshotInputs, options: SnapshotOptions, staging: Path
) -> list[Path]:
    """A GEXF for every timespan with stories; a PNG link map for the timespans of ``options.picture_periods``
    (a focus's only with ``options.focus_pictures``); an attention chart for every overall timespan (the whole
    topic's and each focus's, the focus's with the topic's for comparison)."""
    extra: list[Path] = []
    tag_set = options.link_map_tag_set
    labels = tag_labels(inputs.media_tags)
    groups = labels.get(tag_set, {}) if tag_set else None
    overall = next((snap for snap in result.timespans if snap.timespan.period == "overall"), None)
    topic_days = overall.summary.days if overall is not None and overall.summary is not None else None
    for focus, snap in result.all_timespans():
        ts = snap.timespan
        if snap.empty:  # recorded in the manifest and the store, but no map of nothing
            continue
        folder = staging / timespan_folder(focus, ts)
        whose = (
            inputs.topic_name
            if focus is None
            else f"{inputs.topic_name} · focus {focus.focal_set} / {focus.name}"
        )
        label = f"{whose} · {ts.name} ({ts.start_date.isoformat()} to {ts.last_date.isoformat()})"
        extra.append(
            write_gexf(snap.medium_link_counts, snap.medium_links, folder / GEXF_NAME, label, labels)
        )
        if ts.period in options.picture_periods and (focus is None or options.focus_pictures):
            extra.append(
                render_link_map(
                    snap.medium_link_counts,
                    snap.medium_links,
                    folder / PNG_NAME,
                    title=f"Media link map · {label}",
                    top_labels=options.top_labels,
                    groups=groups,
                    groups_title=f"media by {tag_set}" if tag_set else "",
                )
            )
        if ts.period == "overall" and snap.summary is not None:
            summary = snap.summary
            apart = [
                f"{count} {what}"
                for count, what in (
                    (summary.undated_stories, "undated"),
                    (summary.outside_stories, "published outside the dates, linked from inside"),
                )
                if count
            ]
            extra.append(
                render_attention_chart(
                    summary.days,
                    folder / ATTENTION_NAME,
                    title=f"Stories per day · {whose}",
                    topic_days=topic_days if focus is not None else None,
                    note=f"not on a day: {', '.join(apart)}" if apart else "",
                )
            )
    extra += _focal_set_charts(result, inputs, staging)
    return extra


def _focal_set_charts(result: SnapshotResult, inputs: SnapshotInputs, staging: Path) -> list[Path]:
    """One chart per focal set, its foci's attention over the overall timespan side by side:
    ``foci/<focal set>/attention.png``."""
    sets: dict[str, dict[str, pd.DataFrame]] = {}
    names: dict[str, str] = {}
    for found in result.foci:
        overall = next((snap for snap in found.timespans if snap.timespan.period == "overall"), None)
        if overall is None or overall.summary is None or overall.empty:
            continue
        folder = found.focus.key.split("/")[0]
        sets.setdefault(folder, {})[found.focus.name] = overall.summary.days
        names[folder] = found.focus.focal_set
    return [
        render_focal_set_chart(
            foci,
            staging / FOCI_FOLDER / folder / ATTENTION_NAME,
            f"Stories per day by focus · {names[folder]}",
        )
        for folder, foci in sorted(sets.items())
    ]


def _log_written(result: SnapshotResult, extra: list[Path], log: Callable[[str], None]) -> None:
    spans = [snap for _, snap in result.all_timespans()]
    empty = sum(snap.empty for snap in spans)
    log(
        f"wrote {sum(p.suffix == '.gexf' for p in extra)} GEXF maps and {sum(p.suffix == '.png' for p in extra)} "
        f"pictures; {empty} of {len(spans)} timespans ({len(result.foci)} foci) have no stories "
        "(recorded, no files)"
    )


def _set_aside(folder: Path) -> Path:
    """Rename an incomplete or inconsistent folder out of the way (kept for inspection, never deleted)."""
    n = 1
    while (aside := folder.with_name(f"{folder.name}.set-aside-{n}")).exists():
        n += 1
    folder.rename(aside)
    return aside


@dataclass
class WrittenSnapshot:
    """A snapshot computed and, unless its folder was already complete, written."""

    result: SnapshotResult
    problems: dict[str, list[str]]  # per asset check (empty lists when consistent)
    written: bool  # False: the folder for this key already existed, complete, and was left alone


def write_snapshot_folder(
    inputs: SnapshotInputs,
    options: SnapshotOptions,
    key: str,
    folder: Path,
    log: Callable[[str], None] = lambda _msg: None,
    out_of_core: bool | None = None,
) -> WrittenSnapshot:
    """Compute the snapshot ``key`` and write it to ``folder`` unless it is already there, complete.

    The consistency problems found are recorded in the manifest; such a folder does not count as complete, so
    once the code is fixed the next run sets it aside and writes the snapshot again.

    The files go to a staging sibling first, which is renamed to ``folder`` at the end: a reader, a crash or a
    concurrent run never sees half a snapshot. If another process finished the same key first, its folder is
    kept (same key, same bytes) and ours is discarded. The whole topic's files are written while the foci are
    computed (``SnapshotFilesWriter``). ``out_of_core`` chooses the path (``compute_inputs``; None: by size).
    """
    if folder_is_complete(folder, key):
        result = compute_inputs(inputs, options, out_of_core=out_of_core)
        return WrittenSnapshot(result, check_problems(result, inputs.start_date, inputs.end_date), False)
    if folder.exists():
        log(f"{folder} is incomplete or inconsistent; moved to {_set_aside(folder)}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        with SnapshotFilesWriter(
            staging, csv=True, posts=inputs.posts, notes=(version_note(inputs),)
        ) as files:
            engine_folder = staging.with_name(f"{staging.name}.engine")
            result = compute_inputs(inputs, options, files, engine_folder, out_of_core)
            provenance = snapshot_provenance(inputs, options, key)
            problems = _write_folder(result, inputs, options, key, provenance, staging, log, files)
        try:
            staging.rename(folder)
        except OSError:
            if not folder_is_complete(folder, key):
                raise
            return WrittenSnapshot(result, problems, False)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return WrittenSnapshot(result, problems, True)


def compute_inputs(
    inputs: SnapshotInputs,
    options: SnapshotOptions,
    files: SnapshotFilesWriter | None = None,
    engine_folder: Path | None = None,
    out_of_core: bool | None = None,
) -> SnapshotResult:
    """``compute_snapshot`` of what was read, with the options' choices (``files``: write while computing), and
    the post counts of every timespan (``topicmap.snapshots.post_counts``).

    A topic given as record batches (``inputs.source``), or of more than ``OUT_OF_CORE_ROWS`` stories + links,
    is computed out of core by DuckDB (``topicmap.snapshots.engine``; its database and spill files in
    ``engine_folder``, removed afterwards): the same files, in bounded memory. A smaller one in memory by numpy,
    which is faster there. ``out_of_core`` True or False forces one path (a source is always out of core). A
    ``url_sharing`` topic is computed in memory (the engine selects timespans' stories by publication date
    only); given only as a source, it is refused (``compute_snapshot_ooc``)."""
    source = inputs.source
    if out_of_core is None:
        out_of_core = len(inputs.stories) + len(inputs.links) > OUT_OF_CORE_ROWS
    if inputs.mode == "url_sharing" and source is None:
        out_of_core = False
    if source is None and out_of_core:
        source = frames_source(inputs)
    if source is not None:
        try:
            return compute_snapshot_ooc(
                source,
                inputs.timespans,
                folder=engine_folder,
                count_syndicated_once=options.count_syndicated_once,
                foci=inputs.foci,
                media_tags=inputs.media_tags,
                texts=inputs.texts,
                word_sample=options.word_sample,
                files=files,
                posts=inputs.posts,
                mode=inputs.mode,
            )
        finally:
            if engine_folder is not None:
                shutil.rmtree(engine_folder, ignore_errors=True)
    result = compute_snapshot(
        inputs.stories,
        inputs.media,
        inputs.links,
        inputs.timespans,
        story_stats=inputs.story_stats,
        near_dup_groups=inputs.near_dup_groups,
        count_syndicated_once=options.count_syndicated_once,
        foci=inputs.foci,
        media_tags=inputs.media_tags,
        texts=inputs.texts,
        word_sample=options.word_sample,
        files=files,
        timespan_stories=selection_for(inputs.mode, inputs.posts, inputs.timespans),
    )
    add_all_post_counts(result, inputs.posts)
    return result


def frames_source(inputs: SnapshotInputs) -> TopicSource:
    """The frames of ``inputs`` as the engine reads them, a bounded batch at a time."""
    return TopicSource(
        stories=frame_batches(inputs.stories, "stories"),
        media=frame_batches(inputs.media, "media"),
        links=frame_batches(inputs.links, "links"),
        story_stats=frame_batches(inputs.story_stats, "story_stats"),
        near_dup_groups=frame_batches(inputs.near_dup_groups, "near_dup_groups"),
    )
