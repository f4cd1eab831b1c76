"""All weeks of a long topic in one run: `cluster_weeks` over 800 weeks and 100,000 stories, and where time goes.

A topic of ``--weeks`` weeks from 2009-01-05 gets ``--stories`` stories of ``--words`` words (20 subjects whose
share drifts over the years, a Zipf-distributed shared vocabulary; the weekly count rises and falls and some
weeks are empty), written to a SQLite topic store. Then, in this order:

- **one run** (measured): ``cluster_weeks`` materialized in process over the whole range of weeks, as a
  single-run backfill or ``dagster asset materialize --partition-range`` runs it, on a Dagster instance whose
  storage is PostgreSQL as deploy/dagster.yaml's (``--dagster-storage sqlite``: SQLite files, as
  deploy/dagster.local.yaml's). Every week's materialization says what it took by phase (``seconds``); the rest
  of the run is Dagster's own (the run's planned and materialization events, one pair a week, and log lines);
- **anchor**: the same weeks through ``mutation.stream_batches`` in memory (the stream alone: no store, no
  files, no Dagster), the stories read once beforehand;
- **one week per run**: the last weeks rebuilt one run each, as the daemon's backfill did one week per 30 s
  tick before (each such run also redraws the topic's cumulative pictures).

    .venv/bin/python benchmarks/bench_cluster_weeks.py [--weeks 800] [--stories 100000] [--words 150]
        [--dagster-storage postgres|sqlite] [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOPIC = "long-topic"
FIRST_WEEK = date(2009, 1, 5)
SUBJECTS = 20


def weekly_counts(weeks: int, stories: int, rng: np.random.Generator) -> np.ndarray:
    """Stories per week: a rate that rises and falls over the years, one week in ten empty, summing to
    ``stories``."""
    t = np.arange(weeks)
    rate = np.maximum(0.0, 1.0 + 0.8 * np.sin(t / 40.0) + 0.5 * np.sin(t / 7.0 + 1.0))
    rate[rng.random(weeks) < 0.1] = 0.0
    counts = np.floor(rate / rate.sum() * stories).astype(int)
    counts[np.argmax(rate)] += stories - counts.sum()
    return counts


def make_topic(store_url: str, weeks: int, stories: int, words: int, seed: int = 0) -> None:
    """The topic and its stories in the store at ``store_url``."""
    from topicmap.store import schema as s
    from topicmap.store.topic_store import NewStory, TopicStore, now_utc
    from topicmap.topics.declarations import TopicConfig

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(36000)])
    shared, own = vocabulary[:30000], vocabulary[30000:].reshape(SUBJECTS, 300)
    cumulative = np.cumsum(1.0 / np.arange(1, 30001) ** 1.05)
    cumulative /= cumulative[-1]
    store = TopicStore.open(store_url)
    last_day = FIRST_WEEK + timedelta(weeks=weeks) - timedelta(days=1)
    store.upsert_topic(TopicConfig(name=TOPIC, query="news", start_date=FIRST_WEEK, end_date=last_day))
    topics_id = store.topic_row(TOPIC)["topics_id"]
    batch: list[NewStory] = []

    def flush() -> None:
        ids = store.add_stories(batch, source="bench").stories_ids
        with store.engine.begin() as conn:
            store.insert_ignore(
                conn,
                s.topic_stories,
                [
                    {"topics_id": topics_id, "stories_id": i, "iteration": 0, "added_at": now_utc()}
                    for i in ids
                ],
                ["topics_id", "stories_id"],
            )
        batch.clear()

    n = 0
    for week, count in enumerate(weekly_counts(weeks, stories, rng)):
        monday = datetime.combine(FIRST_WEEK + timedelta(weeks=week), datetime.min.time(), tzinfo=UTC)
        # the subjects' mix drifts: each period of the topic has its own leading subjects
        weights = np.exp(np.sin(np.arange(SUBJECTS) + week / 60.0) * 2.0)
        for subject in rng.choice(SUBJECTS, size=count, p=weights / weights.sum()):
            from_subject = rng.random(words) < 0.35
            common = np.minimum(np.searchsorted(cumulative, rng.random(words)), 29999)
            text = " ".join(np.where(from_subject, own[subject][rng.integers(0, 300, words)], shared[common]))
            published = monday + timedelta(seconds=int(rng.integers(0, 7 * 86400)))
            batch.append(
                NewStory(f"https://site{n % 50}.test/{n}", f"story {n} {text[:40]}", text, published)
            )
            n += 1
            if len(batch) == 2000:
                flush()
    if batch:
        flush()
    store.dispose()


def week_keys(weeks: int) -> list[str]:
    return [(FIRST_WEEK + timedelta(weeks=w)).isoformat() for w in range(weeks)]


def run_range(store_url: str, instance, first: str, last: str):  # noqa: ANN001, ANN201
    import dagster as dg

    from assets.clusters import cluster_weeks
    from assets.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
    from resources.store import TopicStoreResource

    keys = [f"{TOPIC}|{week}" for week in (first, last)]
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[1]}
    return dg.materialize(
        [cluster_weeks],
        instance=instance,
        resources={"store": TopicStoreResource(database_url=store_url)},
        tags=tags,
    )


def run_anchor(store_url: str, weeks: list[str]) -> tuple[float, float]:
    """(seconds to read the stories, seconds of stream_batches over them)."""
    from assets.clusters import ClusterWeeksConfig
    from topicmap.clusters.mutation import stream_batches
    from topicmap.clusters.store import topic_story_texts, week_of
    from topicmap.store.topic_store import TopicStore

    store = TopicStore.open(store_url)
    started = time.perf_counter()
    frame = topic_story_texts(store, store.topic_row(TOPIC)["topics_id"])
    frame["week"] = week_of(frame["publish_date"])
    by_week = {week: rows for week, rows in frame.groupby("week")}
    batches = []
    for week in weeks:
        rows = by_week.get(week)
        if rows is None:
            batches.append((week, [], [], []))
        else:
            batches.append((week, rows["stories_id"].tolist(), rows["title"].tolist(), rows["text"].tolist()))
    read = time.perf_counter() - started
    started = time.perf_counter()
    stream_batches(batches, ClusterWeeksConfig().stream_config())
    store.dispose()
    return read, time.perf_counter() - started


@contextlib.contextmanager
def dagster_instance(storage: str, postgres_url: str, folder: Path) -> Iterator:
    """A Dagster instance on a new PostgreSQL database (dropped afterwards) or on SQLite files in ``folder``."""
    import dagster as dg
    from sqlalchemy import create_engine, make_url, text

    if storage == "sqlite":
        folder.mkdir()
        with dg.instance_for_test(temp_dir=str(folder)) as instance:
            yield instance
        return
    url = make_url(postgres_url)
    name = f"bench_cluster_weeks_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url.set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    db = {
        "username": url.username or "postgres",
        "password": url.password or "",
        "hostname": url.host or "127.0.0.1",
        "db_name": name,
        "port": url.port or 5432,
        "scheme": "postgresql+psycopg2",
    }
    try:
        with dg.instance_for_test(overrides={"storage": {"postgres": {"postgres_db": db}}}) as instance:
            yield instance
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=800)
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=150)
    parser.add_argument("--single-runs", type=int, default=5, help="last weeks rebuilt one run each")
    parser.add_argument("--dagster-storage", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "TOPICMAP_TEST_DATABASE_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
        ),
        help="a PostgreSQL server where a database may be created (for --dagster-storage postgres)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        os.environ["TOPICMAP_HOME"] = str(Path(folder) / "home")
        # the code location's weekly partitions follow the topics file it reads: declare the topic there
        last_day = FIRST_WEEK + timedelta(weeks=args.weeks) - timedelta(days=1)
        topics_file = Path(folder) / "topics.yaml"
        topics_file.write_text(
            f"topics:\n  - {{name: {TOPIC}, query: news, start_date: {FIRST_WEEK}, end_date: {last_day}}}\n"
        )
        os.environ["TOPICMAP_TOPICS_FILE"] = str(topics_file)
        store_url = f"sqlite:///{Path(folder) / 'store.sqlite3'}"
        started = time.perf_counter()
        make_topic(store_url, args.weeks, args.stories, args.words)
        print(
            f"topic: {args.weeks} weeks, {args.stories} stories x {args.words} words, made in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        weeks = week_keys(args.weeks)
        with dagster_instance(args.dagster_storage, args.postgres_url, Path(folder) / "dagster") as instance:
            # the topic and its weeks, as the topic registry adds them
            instance.add_dynamic_partitions("topics", [TOPIC])
            instance.add_dynamic_partitions("topic_weeks", [f"{TOPIC}|{week}" for week in weeks])
            started = time.perf_counter()
            # what a run imports first (scikit-learn, matplotlib, kneed), timed apart from the run
            import kneed  # noqa: F401
            import matplotlib.pyplot  # noqa: F401

            import assets.clusters  # noqa: F401
            import topicmap.clusters.store  # noqa: F401

            print(f"libraries imported in {time.perf_counter() - started:.1f} s", flush=True)
            load_before = " ".join(f"{load:.1f}" for load in os.getloadavg())
            started, cpu_started = time.perf_counter(), time.process_time()
            result = run_range(store_url, instance, weeks[0], weeks[-1])
            one_run = time.perf_counter() - started
            one_run_cpu = time.process_time() - cpu_started
            load_after = " ".join(f"{load:.1f}" for load in os.getloadavg())
            materialized = result.asset_materializations_for_node("cluster_weeks")
            run_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            phases: dict[str, float] = {}
            for week in materialized:  # each week's materialization says what it took, by phase
                for phase, spent in week.metadata["seconds"].value.items():
                    phases[phase] = phases.get(phase, 0.0) + spent
            print(
                f"one run: {one_run:.1f} s ({one_run_cpu:.1f} s of CPU) for {len(materialized)} weeks",
                flush=True,
            )
            singles = []
            for week in weeks[-args.single_runs :]:
                started = time.perf_counter()
                run_range(store_url, instance, week, week)
                singles.append(time.perf_counter() - started)
        read, anchor = run_anchor(store_url, weeks)
        print(f"anchor: read {read:.1f} s, stream {anchor:.1f} s", flush=True)

    print()
    print(
        f"load average before/after the one run: {load_before} / {load_after}; its CPU time: {one_run_cpu:.1f} s"
    )
    print("| path | weeks | seconds | seconds per week |")
    print("|---|---:|---:|---:|")
    print(
        f"| one run over the range (`cluster_weeks`, single-run backfill) | {args.weeks} | {one_run:.1f} | "
        f"{one_run / args.weeks:.3f} |"
    )
    print(
        f"| anchor: `stream_batches` in memory (stories read beforehand in {read:.1f} s) | {args.weeks} | "
        f"{anchor:.1f} | {anchor / args.weeks:.3f} |"
    )
    print(
        f"| one week per run (median of the last {args.single_runs}; the daemon added a 30 s tick each) | 1 | "
        f"{float(np.median(singles)):.2f} | {float(np.median(singles)):.2f} |"
    )
    print()
    print("| phase of the one run | seconds | share |")
    print("|---|---:|---:|")
    for phase, spent in sorted(phases.items(), key=lambda item: -item[1]):
        print(f"| {phase} | {spent:.1f} | {spent / one_run:.0%} |")
    dagster = one_run - sum(phases.values())
    print(
        f"| Dagster's own ({args.dagster_storage} storage: a planned and a materialization event a week, log "
        f"lines) | {dagster:.1f} | "
        f"{dagster / one_run:.0%} |"
    )
    print(
        f"\npeak memory of the process by the end of the one run (the topic made, then the run): {run_peak:.0f} MiB"
    )
    print(f"Dagster storage: {args.dagster_storage}")


if __name__ == "__main__":
    main()
