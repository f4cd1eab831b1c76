"""Snapshot at scale: 100,000 stories and 1,000,000 links, every timespan, time and peak memory.

    .venv/bin/python benchmarks/bench_snapshot.py [--stories 100000] [--links 1000000] [--skip-naive]
    .venv/bin/python benchmarks/bench_snapshot.py --scaling 100000 300000 1000000   # links: 10 per story
    .venv/bin/python benchmarks/bench_snapshot.py --foci-scaling 1000000   # the cost of each focus

``--scaling`` runs, for each size, only the whole snapshot as one materialization writes it (compute, the
consistency checks, Parquet/CSV for every timespan, GEXF for every timespan, PNG for overall/monthly/custom,
manifest with sha256 sums: ``write_snapshot_folder``; the store read, key and rows are left out) and prints
one row per size with wall, CPU (all threads) and user CPU seconds and peak RSS, and the seconds per million
stories + links, which stay flat when the cost is linear.

Each measurement runs in a fresh subprocess that generates the same seeded synthetic topic (about 300 media
with Zipf-like sizes and popularity, 4 months, 1.5 % undated stories, 1.5 % dated outside the topic, 8 %
same-medium links, 3 % duplicate links, 1 % links to stories outside the topic, syndication groups,
Facebook/Bit.ly statistics, a 30-word text per story drawn from a 5,000-word Zipf vocabulary with topical
phrases, one tag set ``partisanship`` of five tags over 80 % of the media) and then times one job; peak memory
is the subprocess's ru_maxrss, so it includes the input DataFrames (the "inputs only" row is that baseline).

``--foci-scaling N`` times the whole snapshot of N stories with foci: one media-tag focus, the five foci of
the one tag set (Media Cloud's partisanship quintiles, one focus per tag, together the stories of the tagged 80 %
of the media), one query focus (about 12 % of the stories), and the five media-tag foci plus the query focus;
the anchor is the same snapshot without foci, so the difference per focus is what each focus costs.

Anchor: ``naive_snapshot`` below, a direct pandas translation of Media Cloud's per-timespan SQL: for every
timespan it joins the links with their two stories again, filters cross-media, deduplicates and counts with
groupby/nunique. The "verify" job checks that it and ``compute_snapshot`` produce identical tables for
every timespan, so the speed-up is measured on the same answers.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# topicmap before pandas, which loads pyarrow: topicmap sets pyarrow's allocator to keep the pages it frees
import topicmap  # noqa: E402, F401, I001

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from synthetic_topic import CUSTOM, PARTISANSHIP, TAG_SET, TOPIC_END, TOPIC_START, synthetic_topic  # noqa: E402

from topicmap.snapshots.compute import compute_snapshot  # noqa: E402
from topicmap.snapshots.files import write_snapshot_files  # noqa: E402
from topicmap.snapshots.foci import Focus  # noqa: E402
from topicmap.snapshots.linkmap import render_link_map, write_gexf  # noqa: E402
from topicmap.snapshots.results import SnapshotResult  # noqa: E402
from topicmap.snapshots.timespans import Timespan, build_timespans  # noqa: E402
from topicmap.topics.focus_kinds import MediaTagSelection, QuerySelection  # noqa: E402

#: the media-tag foci of --foci-scaling: the partisanship quintiles, one focus per tag
TAG_FOCI: tuple[tuple[str, str, dict[str, list[str]]], ...] = tuple(
    ("Partisanship", tag.replace("-", " ").title(), {TAG_SET: [tag]}) for tag in PARTISANSHIP
)
#: the query focus of --foci-scaling (about 12 % of the stories)
QUERY_FOCUS = ("Subtopics", "Climate", "climate OR emission*")


def bench_foci(n_tags: int, n_queries: int = 0) -> list[Focus]:
    """The first ``n_tags`` media-tag foci of TAG_FOCI, and the query focus if ``n_queries``."""
    foci = [Focus(focal_set, name, MediaTagSelection(what)) for focal_set, name, what in TAG_FOCI[:n_tags]]
    if n_queries:
        focal_set, name, query = QUERY_FOCUS
        foci.append(Focus(focal_set, name, QuerySelection(query)))
    return foci


def timespans() -> list[Timespan]:
    return build_timespans(TOPIC_START, TOPIC_END, custom=CUSTOM)


# ----------------------------------------------------------------------------------------------- anchor


def naive_snapshot(
    stories: pd.DataFrame,
    media: pd.DataFrame,
    links: pd.DataFrame,
    spans: list[Timespan],
    story_stats: pd.DataFrame,
) -> dict[str, dict[str, pd.DataFrame]]:
    """Media Cloud's per-timespan queries in pandas: join, filter, dedupe and group again for every timespan."""
    story = stories[["stories_id", "media_id", "publish_date"]]
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for ts in spans:
        lo = pd.Timestamp(ts.start_date, tz="UTC")
        hi = pd.Timestamp(ts.end_date, tz="UTC")
        joined = links.merge(
            story.rename(columns={"media_id": "source_media_id", "publish_date": "source_date"}),
            on="stories_id",
        ).merge(
            story.rename(columns={"stories_id": "ref_stories_id", "media_id": "ref_media_id"})[
                ["ref_stories_id", "ref_media_id"]
            ],
            on="ref_stories_id",
        )
        cross = joined[joined["source_media_id"] != joined["ref_media_id"]].drop_duplicates(
            ["stories_id", "ref_stories_id"]
        )
        window = (cross["source_date"] >= lo) & (cross["source_date"] < hi)
        dated = (story["publish_date"] >= lo) & (story["publish_date"] < hi)
        if ts.period == "overall":
            window |= cross["source_date"].isna()
            dated |= story["publish_date"].isna()
        period_links = cross[window]
        period_ids = pd.Index(story.loc[dated, "stories_id"]).union(
            pd.Index(period_links["ref_stories_id"].unique())
        )

        inlinks = period_links.groupby("ref_stories_id").agg(
            inlink_count=("stories_id", "nunique"), media_inlink_count=("source_media_id", "nunique")
        )
        outlinks = period_links.groupby("stories_id").agg(outlink_count=("ref_stories_id", "nunique"))
        slc = (
            story[story["stories_id"].isin(period_ids)][["stories_id", "media_id"]]
            .merge(inlinks, left_on="stories_id", right_index=True, how="left")
            .merge(outlinks, left_on="stories_id", right_index=True, how="left")
            .merge(story_stats, on="stories_id", how="left")
        )
        for column in ("inlink_count", "outlink_count", "media_inlink_count"):
            slc[column] = slc[column].fillna(0).astype(np.int64)
        medium_links = (
            period_links.groupby(["source_media_id", "ref_media_id"])
            .size()
            .rename("link_count")
            .reset_index()
        )
        mlc = slc.groupby("media_id").agg(
            story_count=("stories_id", "size"),
            inlink_count=("inlink_count", "sum"),
            outlink_count=("outlink_count", "sum"),
            sum_media_inlink_count=("media_inlink_count", "sum"),
        )
        for column in ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d"):
            mlc[column] = slc.groupby("media_id")[column].sum(min_count=1)
        media_inlinks = medium_links.groupby("ref_media_id")["source_media_id"].nunique()
        mlc["media_inlink_count"] = media_inlinks.reindex(mlc.index).fillna(0).astype(np.int64)
        mlc = mlc.reset_index().merge(media, on="media_id")
        out[ts.key] = {
            "story_links": period_links[["stories_id", "ref_stories_id"]].rename(
                columns={"stories_id": "source_stories_id"}
            ),
            "story_link_counts": slc,
            "medium_links": medium_links,
            "medium_link_counts": mlc,
        }
    return out


def same_tables(ours: SnapshotResult, naive: dict[str, dict[str, pd.DataFrame]]) -> list[str]:
    """Differences between our result and the anchor's, table by table (empty when identical)."""
    sort_keys = {
        "story_links": ["source_stories_id", "ref_stories_id"],
        "story_link_counts": ["stories_id"],
        "medium_links": ["source_media_id", "ref_media_id"],
        "medium_link_counts": ["media_id"],
    }
    problems = []
    for snap in ours.timespans:
        for table, keys in sort_keys.items():
            mine = getattr(snap, table)
            theirs = naive[snap.timespan.key][table][list(mine.columns)]
            theirs = theirs.sort_values(keys).reset_index(drop=True).astype(mine.dtypes.to_dict())
            try:
                pd.testing.assert_frame_equal(mine.reset_index(drop=True), theirs, check_dtype=False)
            except AssertionError as err:
                problems.append(f"{snap.timespan.key}/{table}: {str(err).splitlines()[0]}")
    return problems


# ----------------------------------------------------------------------------------------------- jobs


def _peak_mb() -> float:
    """Peak RSS of this process: VmHWM (ru_maxrss carries a parent's peak over fork + exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


class _Clock:
    """Wall and CPU seconds of a phase: the machine is shared, so wall time alone can mislead."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.user = resource.getrusage(resource.RUSAGE_SELF).ru_utime

    def read(self) -> dict[str, float]:
        return {
            "wall": time.perf_counter() - self.wall,
            "cpu": time.process_time() - self.cpu,
            "user": resource.getrusage(resource.RUSAGE_SELF).ru_utime - self.user,
        }


def whole_snapshot(
    data: dict[str, pd.DataFrame] | Path,
    folder: Path,
    n_foci: int = 0,
    n_queries: int = 0,
    out_of_core: bool | None = None,
) -> dict[str, object]:
    """What one materialization does after reading the store: compute, check, write the folder (files, maps,
    pictures, manifest), with ``bench_foci(n_foci, n_queries)`` and the link maps coloured by the tag set.
    Returns the clock and what was written."""
    from topicmap.snapshots.folder import write_snapshot_folder
    from topicmap.snapshots.key import SnapshotOptions

    spans = timespans()
    if isinstance(data, Path):  # the topic's Parquet files: computed out of core, read a batch at a time
        inputs = _file_inputs(data, spans, n_foci, n_queries)
    else:
        inputs = _frame_inputs(data, spans, n_foci, n_queries)
    options = SnapshotOptions(link_map_tag_set=TAG_SET)
    clock = _Clock()
    target = folder / "snapshot"
    # compute (the files of each group of timespans written as soon as it is computed), check, maps, manifest
    done = write_snapshot_folder(inputs, options, "0" * 64, target, out_of_core=out_of_core)
    total = clock.read()
    result = done.result
    problems = [problem for found in done.problems.values() for problem in found]
    files = json.loads((target / "manifest.json").read_text())["files"]
    return {
        "total": total,
        "files": len(files),
        "png": sum(name.endswith(".png") for name in files),
        "mb": sum(f["bytes"] for f in files.values()) / 1e6,
        "problems": len(problems),
        "story_links_all_timespans": sum(s.counts.story_link_count for s in result.timespans),
        "focus_stories": [f.story_count for f in result.foci],
        "sha256": {name: f["sha256"] for name, f in files.items()},
    }


def _file_inputs(folder: Path, spans: list[Timespan], n_foci: int, n_queries: int) -> object:
    import pyarrow.parquet as pq
    from synthetic_topic_files import INPUTS

    from topicmap.snapshots.engine_input import TopicSource, parquet_batches
    from topicmap.snapshots.inputs import SnapshotInputs

    empty = pd.DataFrame()
    source = TopicSource(**{name: parquet_batches(folder / f"{name}.parquet", name) for name in INPUTS[:-1]})
    return SnapshotInputs(
        topic_name="bench",
        topics_id=1,
        config_json="{}",
        start_date=TOPIC_START,
        end_date=TOPIC_END,
        timespans=spans,
        stories=empty,
        media=empty,
        links=empty,
        story_stats=empty,
        near_dup_groups=empty,
        iteration=1,
        media_tags=pd.read_parquet(folder / "media_tags.parquet"),
        foci=tuple(bench_foci(n_foci, n_queries)),
        source=source,
        source_rows={name: pq.ParquetFile(folder / f"{name}.parquet").metadata.num_rows for name in INPUTS},
    )


def _frame_inputs(
    data: dict[str, pd.DataFrame], spans: list[Timespan], n_foci: int, n_queries: int
) -> object:
    from topicmap.snapshots.inputs import SnapshotInputs

    return SnapshotInputs(
        topic_name="bench",
        topics_id=1,
        config_json="{}",
        start_date=TOPIC_START,
        end_date=TOPIC_END,
        timespans=spans,
        stories=data["stories"],
        media=data["media"],
        links=data["links"],
        story_stats=data["story_stats"],
        near_dup_groups=data["near_dup_groups"],
        iteration=1,
        media_tags=data["media_tags"],
        foci=tuple(bench_foci(n_foci, n_queries)),
    )


def run_job(
    job: str, n_stories: int, n_links: int, n_foci: int = 0, n_queries: int = 0, files: Path | None = None
) -> dict[str, object]:
    if job in ("generate", "whole-duckdb", "whole-numpy"):  # the topic in Parquet files (--scaling)
        assert files is not None
        return _file_job(job, n_stories, n_links, n_foci, n_queries, files)
    data = synthetic_topic(n_stories, n_links)
    spans = timespans()
    report: dict[str, object] = {"job": job, "timespans": len(spans)}
    if job in ("compute", "compute+write", "maps"):
        clock = _Clock()
        result = compute_snapshot(**data, timespans=spans)
        report["compute"] = clock.read()
        report["story_links_overall"] = result["overall"].counts.story_link_count
        report["story_links_all_timespans"] = sum(s.counts.story_link_count for s in result.timespans)
        report["dropped"] = result.dropped_links
        with tempfile.TemporaryDirectory() as folder:
            if job == "compute+write":
                clock = _Clock()
                files = write_snapshot_files(result, folder, csv=True)
                report["write"] = clock.read()
                report["files"] = sum(len(v) for v in files.values())
                report["bytes"] = sum(p.stat().st_size for v in files.values() for p in v)
            if job == "maps":
                clock = _Clock()
                for snap in result.timespans:
                    write_gexf(
                        snap.medium_link_counts, snap.medium_links, Path(folder) / f"{snap.timespan.key}.gexf"
                    )
                report["gexf"] = clock.read()
                clock = _Clock()
                overall = result["overall"]
                render_link_map(
                    overall.medium_link_counts, overall.medium_links, Path(folder) / "overall.png"
                )
                report["png"] = clock.read()
    elif job == "whole":
        with tempfile.TemporaryDirectory() as folder:
            report.update(whole_snapshot(data, Path(folder), n_foci, n_queries))
    elif job == "naive":
        clock = _Clock()
        naive_snapshot(data["stories"], data["media"], data["links"], spans, data["story_stats"])
        report["naive"] = clock.read()
    elif job == "verify":
        result = compute_snapshot(**data, timespans=spans)
        naive = naive_snapshot(data["stories"], data["media"], data["links"], spans, data["story_stats"])
        report["differences"] = same_tables(result, naive)
    elif job != "inputs":
        raise ValueError(f"unknown job {job!r}")
    report["peak_mb"] = _peak_mb()
    return report


def _file_job(
    job: str, n_stories: int, n_links: int, n_foci: int, n_queries: int, files: Path
) -> dict[str, object]:
    """Write the topic's files (``generate``), or the whole snapshot of them out of core (``whole-duckdb``:
    read a batch at a time) or in memory (``whole-numpy``: read into DataFrames first, as the store's reader
    does)."""
    from synthetic_topic_files import topic_frames, write_topic_files

    report: dict[str, object] = {"job": job}
    with tempfile.TemporaryDirectory(dir=files.parent) as folder:
        if job == "generate":
            write_topic_files(n_stories, n_links, files)
        elif job == "whole-duckdb":
            report.update(whole_snapshot(files, Path(folder), n_foci, n_queries, out_of_core=True))
        else:
            data = topic_frames(files)
            report.update(whole_snapshot(data, Path(folder), n_foci, n_queries, out_of_core=False))
    report["peak_mb"] = _peak_mb()
    return report


def _in_subprocess(
    job: str, n_stories: int, n_links: int, n_foci: int = 0, n_queries: int = 0, files: Path | None = None
) -> dict[str, object]:
    command = [sys.executable, __file__, "--job", job, "--stories", str(n_stories), "--links", str(n_links)]
    command += ["--foci", str(n_foci), "--query-foci", str(n_queries)]
    if files is not None:
        command += ["--files", str(files)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=1_000_000)
    parser.add_argument("--skip-naive", action="store_true", help="skip the anchor and the cross-check")
    parser.add_argument("--scaling", type=int, nargs="+", metavar="STORIES", help="sizes (10 links a story)")
    parser.add_argument(
        "--foci-scaling", type=int, metavar="STORIES", help="the cost of each focus at this size"
    )
    parser.add_argument("--foci", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--query-foci", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--numpy-up-to",
        type=int,
        default=1_000_000,
        metavar="STORIES",
        help="--scaling: also time the in-memory path up to this size (it needs ~3.3 GB per million stories)",
    )
    parser.add_argument(
        "--scaling-foci", action="store_true", help="--scaling: with the six foci of --foci-scaling"
    )
    args = parser.parse_args()
    if args.job:
        report = run_job(args.job, args.stories, args.links, args.foci, args.query_foci, args.files)
        print(json.dumps(report))
        return
    if args.scaling:
        scaling(args.scaling, args.numpy_up_to, args.scaling_foci)
        return
    if args.foci_scaling:
        foci_scaling(args.foci_scaling)
        return

    jobs = ["inputs", "compute", "compute+write", "maps"] + ([] if args.skip_naive else ["naive", "verify"])
    reports = {job: _in_subprocess(job, args.stories, args.links) for job in jobs}
    compute = reports["compute"]
    n_spans = compute["timespans"]
    print(f"synthetic topic: {args.stories:,} stories, {args.links:,} links, 300 media, {n_spans} timespans")
    print(f"dropped links: {compute['dropped']}")
    print(
        f"story links: overall {compute['story_links_overall']:,}, "
        f"all timespans {compute['story_links_all_timespans']:,}"
    )
    print()

    def row(label: str, phase: dict[str, float] | None, peak: object) -> None:
        wall = f"{phase['wall']:.2f}" if phase else "-"
        cpu = f"{phase['cpu']:.2f}" if phase else "-"
        print(f"| {label} | {wall} | {cpu} | {peak} |")

    print("| job (each in a fresh process) | wall s | CPU s | peak RSS MB |")
    print("|---|---:|---:|---:|")
    row("inputs only (the synthetic topic in memory)", None, f"{reports['inputs']['peak_mb']:.0f}")
    row(f"compute_snapshot, all {n_spans} timespans", compute["compute"], f"{compute['peak_mb']:.0f}")
    write = reports["compute+write"]
    total = {k: write["compute"][k] + write["write"][k] for k in ("wall", "cpu")}
    row(
        f"compute_snapshot + write_snapshot_files ({write['files']} Parquet/CSV files, {write['bytes'] / 1e6:.0f} MB)",
        total,
        f"{write['peak_mb']:.0f}",
    )
    row("  of which write_snapshot_files", write["write"], "")
    maps = reports["maps"]
    row(f"write_gexf, all {n_spans} timespans (after compute)", maps["gexf"], f"{maps['peak_mb']:.0f}")
    row("render_link_map, overall timespan (PNG)", maps["png"], "(same process)")
    if not args.skip_naive:
        naive = reports["naive"]
        row("anchor: naive per-timespan pandas joins", naive["naive"], f"{naive['peak_mb']:.0f}")
        differences = reports["verify"]["differences"]
        print()
        print(
            f"anchor / compute_snapshot: {naive['naive']['wall'] / compute['compute']['wall']:.1f}x wall, "
            f"{naive['naive']['cpu'] / compute['compute']['cpu']:.1f}x CPU; "
            f"tables identical to the anchor's for every timespan: {not differences}"
        )
        for line in differences[:20]:
            print(f"  DIFFERENCE {line}")


def scaling(sizes: list[int], numpy_up_to: int, with_foci: bool) -> None:
    """The whole snapshot at several sizes, each in a fresh process, out of core (DuckDB) and, up to
    ``numpy_up_to`` stories, in memory (numpy) on the same topic files: the cost per million rows stays flat,
    and both paths write the same bytes."""
    n_foci, n_queries = (len(TAG_FOCI), 1) if with_foci else (0, 0)
    print(
        "| stories | links | path | story links, all timespans | files (PNG) | MB "
        "| whole snapshot s wall | CPU | user CPU | CPU s per M stories+links | peak RSS MB | same files |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as folder:
            files = Path(folder) / "topic"
            _in_subprocess("generate", n, 10 * n, files=files)
            runs = {"duckdb": _in_subprocess("whole-duckdb", n, 10 * n, n_foci, n_queries, files)}
            if n <= numpy_up_to:
                runs["numpy"] = _in_subprocess("whole-numpy", n, 10 * n, n_foci, n_queries, files)
        same = "-"
        if len(runs) == 2:
            a, b = runs["duckdb"]["sha256"], runs["numpy"]["sha256"]
            differ = sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))
            same = "all" if not differ else f"{len(differ)} differ: {', '.join(differ[:4])}"
        for path, r in runs.items():
            w = r["total"]
            print(
                f"| {n:,} | {10 * n:,} | {path} | {r['story_links_all_timespans']:,} | {r['files']} ({r['png']}) "
                f"| {r['mb']:.0f} | {w['wall']:.2f} | {w['cpu']:.2f} | {w['user']:.2f} "
                f"| {w['cpu'] / (11 * n / 1e6):.2f} | {r['peak_mb']:.0f} | {same} |",
                flush=True,
            )


#: (label, media-tag foci, query foci, foci counted for the cost per focus) of --foci-scaling
FOCI_PLAN: tuple[tuple[str, int, int], ...] = (
    ("no focus (anchor)", 0, 0),
    ("1 media-tag focus", 1, 0),
    ("5 media-tag foci, one tag set", len(TAG_FOCI), 0),
    ("1 query focus", 0, 1),
    ("5 media-tag foci + 1 query focus", len(TAG_FOCI), 1),
)


def foci_scaling(n: int) -> None:
    """The whole snapshot of ``n`` stories with each set of foci of FOCI_PLAN, each in a fresh process; the
    anchor is the run without foci (the topic's own timespans, top words and summaries): the rest is what the
    foci cost."""
    print(
        "| foci | stories in the foci | files (PNG) | MB | whole snapshot s wall | CPU | peak RSS MB "
        "| extra wall s per focus | extra CPU s per focus | extra MB per focus |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    anchor: dict[str, object] | None = None
    for label, n_tags, n_queries in FOCI_PLAN:
        r = _in_subprocess("whole", n, 10 * n, n_tags, n_queries)
        w = r["total"]
        per_focus = ["-", "-", "-"]
        count = n_tags + n_queries
        if anchor is None:
            anchor = r
        else:
            a = anchor["total"]
            per_focus = [
                f"{(w['wall'] - a['wall']) / count:.2f}",
                f"{(w['cpu'] - a['cpu']) / count:.2f}",
                f"{(r['peak_mb'] - anchor['peak_mb']) / count:.0f}",
            ]
        sizes = ", ".join(f"{s:,}" for s in r["focus_stories"]) or "-"
        print(
            f"| {label} | {sizes} | {r['files']} ({r['png']}) | {r['mb']:.0f} "
            f"| {w['wall']:.2f} | {w['cpu']:.2f} | {r['peak_mb']:.0f} | {' | '.join(per_focus)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
