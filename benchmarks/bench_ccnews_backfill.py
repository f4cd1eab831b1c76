"""Benchmark: a month of CC-NEWS filled by one backfill under the real daemon, then the same backfill again.

Setup, all on loopback: a Range-honouring data server serves CC-NEWS' layout for January 2026
(`tests.ccservers.write_ccnews_month`: warc.paths.gz, `--files-per-day` WARC files a day named by timestamp, each
with `--pages-per-file` demo-web story pages plus a PDF and a 404 capture); dagster-webserver and dagster-daemon
run on workspace.yaml with a DAGSTER_HOME from deploy/dagster.local.yaml (SQLite, the run queue and its limits);
the backfill over the 31 days of `ccnews_stories` is launched through GraphQL as the UI launches it.

Reported: wall time from launch to the backfill's end (first run and re-run), runs, each run's duration
(start to end: process start, code location load, the day's files), and checks: every day materialized with
its own figures, each story stored once, the re-run loading no file and storing nothing.

Run: .venv/bin/python benchmarks/bench_ccnews_backfill.py [--files-per-day 2] [--pages-per-file 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ccservers import DataServer, write_ccnews_month  # noqa: E402
from tests.dagster_deploy import local_dagster  # noqa: E402
from tests.test_ccnews_daemon import ccnews_env, day_figures, story_pages  # noqa: E402
from topicmap.store import schema as s  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402

MONTH = [(date(2026, 1, 1) + timedelta(days=n)).isoformat() for n in range(31)]


def run_seconds(runs: list[dict]) -> list[float]:
    return sorted(r["endTime"] - r["startTime"] for r in runs if r["startTime"] and r["endTime"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files-per-day", type=int, default=2)
    parser.add_argument("--pages-per-file", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        pages = story_pages(200)
        write_ccnews_month(tmp / "cc", 2026, 1, pages, args.files_per_day, args.pages_per_file)
        store = TopicStore.open(f"sqlite:///{tmp / 'store.sqlite3'}")
        data = DataServer(tmp / "cc")
        env = ccnews_env(tmp, store, data)
        result: dict[str, object] = {
            "machine": f"{platform.node()} {os.cpu_count()} cpus",
            "files_per_day": args.files_per_day,
            "pages_per_file": args.pages_per_file,
            "load_before": os.getloadavg(),
        }
        try:
            with (
                local_dagster(tmp, env) as dagster,
                dg.DagsterInstance.from_config(str(dagster.dagster_home)) as instance,
            ):
                for label in ("first", "again"):
                    started, launched = time.monotonic(), time.time()
                    backfill = dagster.launch_backfill("ccnews_stories", MONTH)
                    status = dagster.wait_for_backfill(backfill)
                    wall = time.monotonic() - started
                    runs = dagster.backfill_runs(backfill)
                    durations = run_seconds(runs)
                    figures = {day: metas[-1] for day, metas in day_figures(instance).items()}
                    result[label] = {
                        "status": status,
                        "wall_seconds": round(wall, 1),
                        "runs": len(runs),
                        "run_seconds_median": round(statistics.median(durations), 2),
                        "run_seconds_max": round(durations[-1], 2),
                        "queued_seconds_median": round(
                            statistics.median(
                                r["startTime"] - r["creationTime"] for r in runs if r["startTime"]
                            ),
                            2,
                        ),
                        "first_run_created_after_launch": round(
                            min(r["creationTime"] for r in runs) - launched, 1
                        ),
                        "backfill_done_after_last_run": round(
                            time.time() - max(r["endTime"] for r in runs), 1
                        ),
                        "days_materialized": len(figures),
                        "stories_added": sum(f["stories_added"] for f in figures.values()),
                        "files_already_loaded": sum(f["files_already_loaded"] for f in figures.values()),
                        "load_after": os.getloadavg(),
                    }
                    print(label, json.dumps(result[label]), flush=True)
                with store.engine.connect() as conn:
                    where = s.stories.c.source == "cc-news"
                    rows = conn.execute(select(func.count()).where(where)).scalar_one()
                    distinct = conn.execute(
                        select(func.count(func.distinct(s.stories.c.url))).where(where)
                    ).scalar_one()
                result["stories_stored"], result["distinct_urls"] = rows, distinct
        finally:
            data.close()
            store.dispose()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
