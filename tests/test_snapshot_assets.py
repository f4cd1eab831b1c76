"""The snapshots asset, its checks, the store side (topicmap.snapshots.store) and the snapshot_cli command.

A small topic is built in the store by hand (SQLite and PostgreSQL), 2026-01-05 (Monday) to 2026-02-08
(Sunday), with a custom timespan "launch" = 2026-01-12..2026-01-18. Every count below is worked out by hand.

    media: 1 Alpha, 2 Beta, 3 Gamma, 4 Alpha Mirror (dup_media_id 1), 6 Alpha Archive (dup_media_id 4: a chain)

    story  medium            published     note
    11     Alpha             2026-01-06    near-duplicate group with 12
    12     Alpha             2026-01-20
    21     Beta              2026-01-13
    22     Beta              2026-02-03
    31     Gamma             2026-01-14
    41     Alpha Mirror → 1  2026-01-15    counts as Alpha
    61     Alpha Archive → 1 2026-01-16    counts as Alpha (through 4)
    99     Gamma             2026-03-01    a topic story published AFTER the topic: in no timespan
    50     Beta              2026-01-13    merged into 21 by dedup (not a topic story any more)

    links                 fate
    11 -> 21   A->B       counts
    21 -> 11   B->A       counts
    41 -> 11   A->A       same medium once the duplicate medium is merged: never counts
    61 -> 12   A->A       same medium (through the dup chain): never counts
    31 -> 41   C->A       counts
    31 -> 21   C->B       counts
    12 -> 50   A->B       50 was merged into 21: counts as 12 -> 21
    22 -> 31   B->C       counts
    99 -> 22   C->B       source published after the topic: never counts
    11 -> 11   A->A       self link: never counts
    21 -> ?               unresolved (no ref story): ignored

Overall: 6 story links (11>21, 21>11, 31>41, 31>21, 12>21, 22>31); 7 stories (all but 99); 3 media;
medium links A>B 2, B>A 1, C>A 1, C>B 1, B>C 1 (5 pairs, 6 links). January: 5 links, 6 stories (not 22),
4 medium links. February: 22>31 only. Weeks: Jan 5: 11>21; Jan 12 (= launch): 21>11, 31>41, 31>21 with
stories 11, 21, 31, 41, 61; Jan 19: 12>21; Jan 26: nothing; Feb 2: 22>31.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import warnings
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, insert, select, text

from assets.metadata import (
    EMBED_MAX_BYTES,
    MARKDOWN_INLINE_LIMIT,
    PAGE_PICTURE_WIDTH,
    page_picture,
    png_markdown,
)
from assets.snapshots import snapshot_files_intact, snapshots
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap.snapshots import folder as snapshot_folders
from topicmap.snapshots import store as snapshot_store
from topicmap.snapshots.checks import check_problems
from topicmap.snapshots.cli import format_snapshot_paths
from topicmap.snapshots.cli import main as snapshot_cli
from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.inputs import read_snapshot_inputs, resolve_chains
from topicmap.snapshots.key import SnapshotOptions, snapshot_key
from topicmap.snapshots.names import CHECK_DATES, CHECK_LINK_COUNTS, CHECK_TOPIC_STORIES
from topicmap.snapshots.store import build_snapshot, snapshot_paths
from topicmap.snapshots.timespans import Timespan
from topicmap.store import schema as s
from topicmap.store.topic_store import StoreError, TopicStore
from topicmap.topics.declarations import load_topics

TOPIC = "snaptest"
TOPICS_YAML = f"""topics:
  - name: {TOPIC}
    query: 'climate'
    start_date: 2026-01-05
    end_date: 2026-02-08
    timespans:
      - {{name: launch, start_date: 2026-01-12, end_date: 2026-01-18}}
"""
A, B, C, MIRROR, ARCHIVE = 1, 2, 3, 4, 6
MEDIA = [
    (A, "Alpha", None),
    (B, "Beta", None),
    (C, "Gamma", None),
    (MIRROR, "Alpha Mirror", A),
    (ARCHIVE, "Alpha Archive", MIRROR),
]
STORIES = [
    (11, A, "2026-01-06"),
    (12, A, "2026-01-20"),
    (21, B, "2026-01-13"),
    (22, B, "2026-02-03"),
    (31, C, "2026-01-14"),
    (41, MIRROR, "2026-01-15"),
    (61, ARCHIVE, "2026-01-16"),
    (99, C, "2026-03-01"),
    (50, B, "2026-01-13"),
]
TOPIC_STORY_IDS = [11, 12, 21, 22, 31, 41, 61, 99]
LINKS = [
    (11, 21),
    (21, 11),
    (41, 11),
    (61, 12),
    (31, 41),
    (31, 21),
    (12, 50),
    (22, 31),
    (99, 22),
    (11, 11),
    (21, None),
]
# only the overall picture in most runs: each picture costs ~0.4 s
FAST = {"ops": {"snapshots": {"config": {"picture_periods": ["overall"]}}}}
# no link map picture at all, for the runs whose pictures no test looks at
NO_PICTURES = {"ops": {"snapshots": {"config": {"picture_periods": []}}}}

# (key, stories, story links, media, medium links) per timespan, by hand (see the module docstring)
EXPECTED_COUNTS = [
    ("overall", 7, 6, 3, 5),
    ("monthly_2026-01-01", 6, 5, 3, 4),
    ("monthly_2026-02-01", 2, 1, 2, 1),
    ("weekly_2026-01-05", 2, 1, 2, 1),
    ("weekly_2026-01-12", 5, 3, 3, 3),
    ("weekly_2026-01-19", 2, 1, 2, 1),
    ("weekly_2026-01-26", 0, 0, 0, 0),
    ("weekly_2026-02-02", 2, 1, 2, 1),
    ("custom_launch", 5, 3, 3, 3),
]


def _day(text_date: str, hour: int = 12) -> datetime:
    return datetime.fromisoformat(text_date).replace(hour=hour, tzinfo=UTC)


def build_topic(store: TopicStore, topics_file: Path) -> int:
    """The hand-made topic of the module docstring, written straight into the store's tables."""
    topics_id = store.upsert_topic(load_topics(topics_file).topics[0])
    now = datetime(2026, 3, 5, tzinfo=UTC)
    with store.engine.begin() as conn:
        for media_id, name, dup in MEDIA:  # in order: a duplicate's target exists before it
            conn.execute(
                insert(s.media).values(
                    media_id=media_id,
                    name=name,
                    url=f"https://{name.lower().replace(' ', '')}.test/",
                    normalized_url=f"{name.lower().replace(' ', '')}.test",
                    dup_media_id=dup,
                )
            )
        conn.execute(
            insert(s.stories),
            [
                {
                    "stories_id": sid,
                    "media_id": mid,
                    "url": f"https://m{mid}.test/story/{sid}",
                    "guid": f"https://m{mid}.test/story/{sid}",
                    "title": f"Story {sid}",
                    "publish_date": _day(day),
                    "collect_date": now,
                    "source": "spider",
                }
                for sid, mid, day in STORIES
            ],
        )
        conn.execute(
            insert(s.topic_stories),
            [
                {"topics_id": topics_id, "stories_id": sid, "iteration": 1, "added_at": now}
                for sid in TOPIC_STORY_IDS
            ],
        )
        conn.execute(
            insert(s.topic_links),
            [
                {
                    "topics_id": topics_id,
                    "stories_id": src,
                    "url": f"https://x.test/{i}",
                    "ref_stories_id": ref,
                }
                for i, (src, ref) in enumerate(LINKS)
            ],
        )
        conn.execute(
            insert(s.topic_merged_stories_map).values(
                topics_id=topics_id,
                source_stories_id=50,
                target_stories_id=21,
                reason="same title and day",
                merged_at=now,
            )
        )
        conn.execute(
            insert(s.topic_near_dup_groups),
            [
                {"topics_id": topics_id, "stories_id": sid, "group_stories_id": 11, "group_size": 2}
                for sid in (11, 12)
            ],
        )
        conn.execute(
            insert(s.story_statistics),
            [{"stories_id": 11, "facebook_share_count": 10}, {"stories_id": 21, "facebook_share_count": 5}],
        )
        conn.execute(
            insert(s.bitly_clicks_total).values(
                stories_id=21, publish_day=date(2026, 1, 13), clicks_3d=3, clicks_30d=7
            )
        )
        conn.execute(
            insert(s.topic_spider_metrics).values(
                topics_id=topics_id,
                iteration=2,
                links_processed=11,
                stories_added=0,
                links_added=0,
                frontier_left=0,
                elapsed_time=1.0,
                throttle_wait_time=0.0,
                states_json="{}",
                processed_date=now,
            )
        )
    return topics_id


def _store_resource(store: TopicStore) -> TopicStoreResource:
    url = store.engine.url.render_as_string(hide_password=False)
    if store.dialect != "postgresql":
        return TopicStoreResource(database_url=url)
    with store.engine.connect() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
    return TopicStoreResource(database_url=url, schema_name=schema)


def cli_database_url(store: TopicStore) -> str:
    """The store's URL as TOPICMAP_DATABASE_URL; on PostgreSQL the test's schema rides along as search_path."""
    url = store.engine.url.render_as_string(hide_password=False)
    if store.dialect != "postgresql":
        return url
    with store.engine.connect() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
    return f"{url}?options=-csearch_path%3D{schema}"


def make_project(store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TOPICMAP_HOME", str(home))
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML, encoding="utf-8")
    topics_id = build_topic(store, topics_file)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    return {
        "store": store,
        "home": home,
        "topics_id": topics_id,
        "instance": instance,
        "resources": {
            "store": _store_resource(store),
            "topics_file": TopicsFileResource(path=str(topics_file)),
        },
    }


@pytest.fixture
def project(store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The hand-made topic on SQLite and on PostgreSQL."""
    return make_project(store, tmp_path, monkeypatch)


@pytest.fixture
def sqlite_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_store_url: str) -> Iterator[dict]:
    """The hand-made topic on SQLite only, for what does not depend on the database (checks, files)."""
    store = TopicStore.open(sqlite_store_url)
    yield make_project(store, tmp_path, monkeypatch)
    store.dispose()


def materialize(
    project: dict, run_config: dict | None = FAST, raise_on_error: bool = True
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [snapshots, snapshot_files_intact],
        partition_key=TOPIC,
        instance=project["instance"],
        resources=project["resources"],
        run_config=run_config or {},
        raise_on_error=raise_on_error,
    )


def snapshot_meta(result: dg.ExecuteInProcessResult) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node("snapshots")[0].metadata.items()}


def file_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ----------------------------------------------------------------------------------------------- store (both DBs)


def test_reading_the_topic_merges_duplicate_media_and_stories(project: dict) -> None:
    inputs = read_snapshot_inputs(project["store"], TOPIC)
    stories = inputs.stories.set_index("stories_id")["media_id"].to_dict()
    assert stories == {11: A, 12: A, 21: B, 22: B, 31: C, 41: A, 61: A, 99: C}  # 50 merged away
    assert inputs.media["media_id"].tolist() == [A, B, C]  # duplicates never appear as media of their own
    links = set(map(tuple, inputs.links.to_numpy().tolist()))
    assert (12, 21) in links and (12, 50) not in links  # the link to the merged story goes to its survivor
    assert len(inputs.links) == 10  # the unresolved link is not an input
    assert inputs.iteration == 2
    assert inputs.dedup_state == {
        "merged_stories": 1,
        "merged_stories_by_reason": {"same title and day": 1},
        "merged_stories_still_listed": 0,
        "duplicate_media_merged": 2,
        "stories_on_duplicate_media": 2,
        "links_pointing_at_merged_stories": 1,
        "near_dup_groups": 1,
        "stories_in_near_dup_groups": 2,
    }
    stats = inputs.story_stats.set_index("stories_id")
    assert stats.loc[11, "facebook_share_count"] == 10 and pd.isna(stats.loc[11, "bitly_clicks_3d"])
    assert stats.loc[21, "bitly_clicks_30d"] == 7
    assert [t.key for t in inputs.timespans] == [k for k, *_ in EXPECTED_COUNTS]

    key = snapshot_key(inputs, SnapshotOptions())
    assert key == snapshot_key(read_snapshot_inputs(project["store"], TOPIC), SnapshotOptions())
    assert key == snapshot_key(inputs, SnapshotOptions(picture_periods=("custom", "monthly", "overall")))
    assert key != snapshot_key(inputs, SnapshotOptions(count_syndicated_once=True))
    shuffled = replace(inputs, links=inputs.links.iloc[::-1].reset_index(drop=True))
    assert key != snapshot_key(
        shuffled, SnapshotOptions()
    )  # the reader sorts; the key hashes what it is given


def test_materialized_snapshot_matches_the_hand_counts(project: dict) -> None:
    result = materialize(project)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        CHECK_LINK_COUNTS: True,
        CHECK_TOPIC_STORIES: True,
        CHECK_DATES: True,
        "snapshot_files_intact": True,
    }
    meta = snapshot_meta(result)
    folder = Path(meta["snapshot_folder"])
    assert folder.parent == project["home"] / "exports" / "snapshots" / TOPIC
    assert folder.name == meta["snapshot_key"][:16] and meta["written_now"] is True
    counts = [
        (
            r.data["timespan"],
            int(r.data["stories"]),
            int(r.data["story links"]),
            int(r.data["media"]),
            int(r.data["medium links"]),
        )
        for r in meta["timespan_counts"].records
    ]
    # the empty week is recorded (store, manifest) but listed in the metadata only as a number
    assert counts == [c for c in EXPECTED_COUNTS if c[1]]
    # "stories" is Media Cloud's story_count, linked and undated stories included, and the page says so (the
    # stories published in a timespan are its published_story_count in timespans.parquet)
    described = {column.name: column.description for column in meta["timespan_counts"].schema.columns}
    assert "story_count" in described["stories"] and "link to" in described["stories"]
    assert meta["timespan_totals"] == {"recorded": 9, "empty": 1, "empty_by_period": {"weekly": 1}}
    # the topic runs from Monday 5 January to Sunday 8 February: whole weeks, both months cut by its dates
    days = {r.data["timespan"]: r.data["days"] for r in meta["timespans"].records}
    assert days == {
        "overall": "35",
        "monthly_2026-01-01": "27, partial",
        "monthly_2026-02-01": "8, partial",
        **{key: "7" for key, stories, *_ in EXPECTED_COUNTS if key.startswith("weekly") and stories},
        "custom_launch": "7",
    }
    assert meta["dagster/row_count"] == 7 and meta["iteration"] == 2
    top = [(r.data["medium"], r.data["media inlinks"]) for r in meta["top_media"].records]
    # each medium with its id; ties: more inlinks first (B 3, A 2)
    assert top == [("Beta (2)", "2"), ("Alpha (1)", "2"), ("Gamma (3)", "1")]
    assert meta["link_map"] == str(folder / "overall" / "link_map.png")
    assert meta["link_map_preview"].startswith("![media link map of snaptest](data:image/png;base64,iVBOR")

    overall = pd.read_parquet(folder / "overall" / "medium_links.parquet")
    assert sorted(map(tuple, overall.to_numpy().tolist())) == [
        (A, B, 2),
        (B, A, 1),
        (B, C, 1),
        (C, A, 1),
        (C, B, 1),
    ]
    media = pd.read_csv(folder / "overall" / "media.csv").fillna(-1)  # -1: no known shares (Gamma)
    columns = ["media_id", "story_count", "media_inlink_count", "inlink_count", "facebook_share_count"]
    assert media[columns].astype(int).to_numpy().tolist() == [
        [B, 2, 2, 3, 5],
        [A, 4, 2, 2, 10],
        [C, 1, 1, 1, -1],
    ]
    stories = pd.read_csv(folder / "overall" / "stories.csv").set_index("stories_id")
    assert stories.loc[21, ["inlink_count", "media_inlink_count", "bitly_clicks_30d"]].tolist() == [3, 2, 7]
    assert 99 not in stories.index and 50 not in stories.index
    timespans = json.loads((folder / "manifest.json").read_text())["timespans"]
    assert {t["key"]: t["counts"]["syndicated_repeat_link_count"] for t in timespans}[
        "overall"
    ] == 1  # 11, 12 -> 21

    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["topic"]["name"] == TOPIC and provenance["iteration"] == 2
    assert provenance["dedup"]["merged_stories"] == 1 and provenance["input_rows"]["stories"] == 8

    store = project["store"]
    with store.engine.connect() as conn:
        row = conn.execute(select(s.snapshots)).mappings().one()
        spans = conn.execute(
            select(
                s.timespans.c.period,
                s.timespans.c.start_date,
                s.timespans.c.end_date,
                s.timespans.c.story_count,
            )
            .where(s.timespans.c.snapshots_id == row["snapshots_id"])
            .order_by(s.timespans.c.period, s.timespans.c.start_date)
        ).all()
    assert (
        row["snapshots_id"] == meta["snapshot_id"] and row["state"] == "completed" and row["iteration"] == 2
    )
    assert json.loads(row["provenance_json"]) == provenance
    assert len(spans) == 9
    assert ("monthly", date(2026, 1, 5), date(2026, 2, 1), 6) in [tuple(r) for r in spans]  # end exclusive


def test_an_evening_story_in_new_york_exports_its_utc_instant_and_its_day_there(project: dict) -> None:
    """Story 22, re-dated to 19:05 EST on Monday 2 February (00:05 UTC on the 3rd): the exports give the instant
    with its zone and the day the publisher printed, which is also the day its timespans count."""
    store = project["store"]
    with store.engine.begin() as conn:
        conn.execute(
            s.stories.update()
            .where(s.stories.c.stories_id == 22)
            .values(publish_date=datetime(2026, 2, 3, 0, 5, tzinfo=UTC), publish_utc_offset=-300)
        )
    built = snapshot_store.build_snapshot(
        store, TOPIC, SnapshotOptions(picture_periods=()), home=project["home"]
    )
    for key in ("overall", "monthly_2026-02-01", "weekly_2026-02-02"):
        listed = pd.read_csv(built.folder / key / "stories.csv", dtype=str).set_index("stories_id")
        assert tuple(listed.loc["22", ["publish_date_utc", "publish_day_local"]]) == (
            "2026-02-03T00:05:00Z",
            "2026-02-02",
        ), key
        assert "publish_date" not in listed.columns  # no column leaves its zone to a guess
    table = pd.read_parquet(built.folder / "overall" / "story_link_counts.parquet").set_index("stories_id")
    assert table.loc[22, "publish_date_utc"] == pd.Timestamp("2026-02-03 00:05", tz="UTC")
    assert table.loc[22, "publish_day_local"] == date(2026, 2, 2)
    assert table.loc[21, "publish_day_local"] == date(2026, 1, 13)  # no offset stored: the UTC day


def test_same_inputs_keep_the_snapshot_and_new_inputs_make_a_new_one(
    project: dict, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = snapshot_meta(materialize(project))
    folder = Path(first["snapshot_folder"])
    hashes = file_hashes(folder)
    mtimes = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}

    again = snapshot_meta(materialize(project))
    assert again["written_now"] is False
    assert (again["snapshot_id"], again["snapshot_key"]) == (
        first["snapshot_id"],
        first["snapshot_key"],
    )
    assert file_hashes(folder) == hashes and {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == mtimes

    # A damaged folder (a file lost) is not complete for its key: it is set aside (kept, never deleted) and
    # the snapshot is written again from the store, from scratch, to the same bytes (Parquet, CSV, GEXF, PNG,
    # provenance, manifest): same inputs, byte-identical files.
    (folder / "monthly_2026-01-01" / "story_links.csv").unlink()
    rebuilt = snapshot_meta(materialize(project))
    assert rebuilt["written_now"] is True and rebuilt["snapshot_id"] == first["snapshot_id"]
    assert file_hashes(folder) == hashes
    aside = folder.with_name(f"{folder.name}.set-aside-1")
    assert (
        not (aside / "monthly_2026-01-01" / "story_links.csv").exists()
        and (aside / "manifest.json").is_file()
    )

    # a new cross-media link (Beta -> Gamma in February): a new key, a new folder, the old one untouched
    store = project["store"]
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.topic_links).values(
                topics_id=project["topics_id"], stories_id=22, url="https://x.test/new", ref_stories_id=41
            )
        )
    changed = snapshot_meta(materialize(project))
    new_folder = Path(changed["snapshot_folder"])
    assert changed["snapshot_key"] != first["snapshot_key"] and new_folder != folder
    assert changed["snapshot_id"] != first["snapshot_id"]
    assert file_hashes(folder) == hashes
    feb = {r.data["timespan"]: int(r.data["story links"]) for r in changed["timespan_counts"].records}
    assert feb["monthly_2026-02-01"] == 2 and feb["overall"] == 7
    assert store.table_count(s.snapshots) == 2 and store.table_count(s.timespans) == 18

    # the command prints where the files are: the newest snapshot, or the one asked for
    home = str(project["home"])
    monkeypatch.setenv("TOPICMAP_DATABASE_URL", cli_database_url(store))
    capsys.readouterr()
    assert snapshot_cli([TOPIC, "--home", home]) == 0
    out = capsys.readouterr().out
    assert f"snapshot {changed['snapshot_id']} of topic {TOPIC}" in out
    assert f"link map (PNG):  {new_folder / 'overall' / 'link_map.png'}" in out
    assert f"each in {new_folder}/<timespan>/" in out
    words = " ".join(out.split())
    assert "weekly_2026-01-26" not in words  # no stories: counted, not listed
    assert "+ 1 timespan without stories (1 weekly): recorded, no files" in words
    assert "custom_launch 2026-01-12..2026-01-18 5 stories 3 story links 3 media [gexf]" in words
    assert "overall 2026-01-05..2026-02-08 7 stories 7 story links 3 media [gexf + png]" in words
    brief = format_snapshot_paths(snapshot_paths(store, TOPIC, home=project["home"]), brief=True)
    assert (
        "weekly_2026-01-26" not in brief
        and "+ 4 weekly timespans (weekly_2026-01-05 .. weekly_2026-02-02)" in brief
        and "+ 1 timespan without stories (1 weekly): recorded, no files" in brief
    )
    assert snapshot_cli([TOPIC, "--snapshot-id", str(first["snapshot_id"]), "--home", home]) == 0
    assert f"folder:          {folder}" in capsys.readouterr().out
    paths = snapshot_paths(store, TOPIC, first["snapshot_id"], home=project["home"])
    assert paths["link_map_png"] == folder / "overall" / "link_map.png"
    assert paths["link_map_gexf"] == folder / "overall" / "link_map.gexf"
    assert [t["png"] is not None for t in paths["timespans"]] == [
        key == "overall" for key, *_ in EXPECTED_COUNTS
    ]  # FAST: the overall picture only


def test_a_topic_not_spidered_yet_gets_an_empty_consistent_snapshot(
    store: TopicStore, tmp_path: Path
) -> None:
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML, encoding="utf-8")
    store.upsert_topic(load_topics(topics_file).topics[0])
    built = build_snapshot(store, TOPIC, SnapshotOptions(picture_periods=("overall",)), home=tmp_path)
    assert built.written and not any(built.problems.values())
    assert all(snap.counts.story_count == 0 for snap in built.result.timespans)
    # every timespan is recorded, none has files: no folder, map or picture of nothing
    manifest = json.loads((built.folder / "manifest.json").read_text())
    assert [t["key"] for t in manifest["timespans"]] == [key for key, *_ in EXPECTED_COUNTS]
    assert all(t["empty"] for t in manifest["timespans"])
    assert sorted(manifest["files"]) == [
        "README.md",
        "datapackage.json",
        "provenance.json",
        "schemas/timespans.json",
        "timespans.csv",
        "timespans.parquet",
    ]
    assert sorted(p.name for p in built.folder.iterdir()) == [
        "README.md",
        "datapackage.json",
        "manifest.json",
        "provenance.json",
        "schemas",
        "timespans.csv",
        "timespans.parquet",
    ]
    paths = snapshot_paths(store, TOPIC, home=tmp_path)
    assert paths["snapshots_id"] == built.snapshots_id and paths["link_map_png"] is None
    assert all(t["empty"] and t["folder"] is None and not t["files"] for t in paths["timespans"])
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.timespans)).scalar_one() == 9


# ----------------------------------------------------------------------------------------------- checks


def test_a_planted_inconsistency_fails_its_blocking_check(
    sqlite_project: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = sqlite_project
    real = snapshot_folders.compute_snapshot

    def off_by_one(*args, **kwargs):  # a medium link counted twice in January
        result = real(*args, **kwargs)
        links = result["monthly_2026-01-01"].medium_links
        links.loc[0, "link_count"] += 1
        return result

    monkeypatch.setattr(snapshot_folders, "compute_snapshot", off_by_one)
    result = materialize(project, NO_PICTURES, raise_on_error=False)
    assert not result.success  # blocking: the run fails, nothing downstream would run on it
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks[CHECK_LINK_COUNTS].passed is False
    assert "monthly_2026-01-01: medium link counts sum to 6, but there are 5 story links" in (
        checks[CHECK_LINK_COUNTS].metadata["problems"].value
    )
    assert checks[CHECK_TOPIC_STORIES].passed and checks[CHECK_DATES].passed
    # written for inspection, recorded as inconsistent, and not reused: once the code is right again, the
    # same inputs (same key) are written afresh and the bad folder is kept aside
    folder = Path(snapshot_meta(result)["snapshot_folder"])
    assert json.loads((folder / "manifest.json").read_text())["problems"] == [
        "monthly_2026-01-01: medium link counts sum to 6, but there are 5 story links"
    ]
    with project["store"].engine.connect() as conn:
        assert conn.execute(select(s.snapshots.c.state)).scalar_one() == "inconsistent"
    monkeypatch.setattr(snapshot_folders, "compute_snapshot", real)
    fixed = materialize(project, NO_PICTURES)
    assert fixed.success and snapshot_meta(fixed)["written_now"] is True
    assert snapshot_meta(fixed)["snapshot_folder"] == str(folder)
    assert json.loads((folder / "manifest.json").read_text())["problems"] == []
    assert json.loads((folder.parent / f"{folder.name}.set-aside-1" / "manifest.json").read_text())[
        "problems"
    ]
    with project["store"].engine.connect() as conn:
        assert conn.execute(select(s.snapshots.c.state)).scalar_one() == "completed"


def test_pictures_per_period_and_the_files_intact_check(sqlite_project: dict) -> None:
    project = sqlite_project
    folder = Path(snapshot_meta(materialize(project, run_config=None))["snapshot_folder"])
    # default options: a GEXF for every timespan with stories; pictures for overall, monthly and custom, not
    # weekly; a timespan without stories gets no folder at all
    for key, stories, *_ in EXPECTED_COUNTS:
        assert (folder / key / "link_map.gexf").is_file() == (stories > 0)
        assert (folder / key / "link_map.png").is_file() == (stories > 0 and not key.startswith("weekly"))
    assert not (folder / "weekly_2026-01-26").exists()

    stories_csv = folder / "overall" / "stories.csv"
    original = stories_csv.read_bytes()
    stories_csv.write_bytes(original + b"1,2,3\n")
    result = dg.materialize(
        [snapshots, snapshot_files_intact],
        selection=dg.AssetSelection.checks(snapshot_files_intact),
        instance=project["instance"],
        resources=project["resources"],
    )
    evaluation = result.get_asset_check_evaluations()[0]
    assert evaluation.passed is False
    assert f"{folder.name}/overall/stories.csv: changed since the snapshot was written" in (
        evaluation.metadata["problems"].value
    )


def _small_result():
    stories = pd.DataFrame(
        {
            "stories_id": [1, 2, 3],
            "media_id": [10, 20, 30],
            "publish_date": pd.to_datetime(["2026-01-02", "2026-01-03", "2026-01-04"], utc=True),
            "url": ["u1", "u2", "u3"],
            "title": ["t1", "t2", "t3"],
        }
    )
    media = pd.DataFrame({"media_id": [10, 20, 30], "name": ["a", "b", "c"], "url": ["ma", "mb", "mc"]})
    links = pd.DataFrame({"stories_id": [1, 2, 3], "ref_stories_id": [2, 3, 1]})
    spans = [Timespan("overall", date(2026, 1, 1), date(2026, 1, 11), "overall", "overall")]
    return compute_snapshot(stories, media, links, spans)


def test_check_problems_sorts_each_planted_inconsistency_into_its_check() -> None:
    assert check_problems(_small_result(), "2026-01-01", "2026-01-10") == {
        CHECK_LINK_COUNTS: [],
        CHECK_TOPIC_STORIES: [],
        CHECK_DATES: [],
    }
    dropped_story = _small_result()
    dropped_story.stories = dropped_story.stories[dropped_story.stories["stories_id"] != 3]
    problems = check_problems(dropped_story, "2026-01-01", "2026-01-10")
    assert problems[CHECK_TOPIC_STORIES] and not problems[CHECK_LINK_COUNTS] and not problems[CHECK_DATES]

    # the topic is declared shorter than the timespan: a timespan outside the topic's dates
    problems = check_problems(_small_result(), "2026-01-01", "2026-01-05")
    assert problems[CHECK_DATES] == ["overall: 2026-01-01..2026-01-10 is outside the topic's dates"]
    assert not problems[CHECK_LINK_COUNTS] and not problems[CHECK_TOPIC_STORIES]

    doubled = _small_result()
    doubled.timespans[0].medium_links["link_count"] *= 2
    problems = check_problems(doubled, "2026-01-01", "2026-01-10")
    assert problems[CHECK_LINK_COUNTS] == [
        "overall: medium link counts sum to 6, but there are 3 story links"
    ]


# ----------------------------------------------------------------------------------------------- pure helpers


def test_duplicate_chains_resolve_vectorized_and_cycles_are_named() -> None:
    sources, finals = resolve_chains(np.array([6, 4, 9, 8, 7]), np.array([4, 1, 8, 7, 2]), "duplicate-media")
    assert dict(zip(sources.tolist(), finals.tolist(), strict=True)) == {4: 1, 6: 1, 7: 2, 8: 2, 9: 2}
    long_chain = np.arange(1, 1001)
    _, ends = resolve_chains(long_chain, long_chain + 1, "merged-stories map")
    assert set(ends.tolist()) == {1001}
    with pytest.raises(
        StoreError, match=r"duplicate-media cycle: (5 -> 3 -> 4 -> 5|3 -> 4 -> 5 -> 3|4 -> 5 -> 3 -> 4)"
    ):
        resolve_chains(np.array([2, 3, 4, 5]), np.array([3, 4, 5, 3]), "duplicate-media")
    with pytest.raises(StoreError, match=r"id\(s\) \[2\] point at more than one target"):
        resolve_chains(np.array([2, 2]), np.array([3, 4]), "duplicate-media")


def test_ids_map_through_an_empty_chain_table_unchanged() -> None:
    # a topic with no duplicate media and no merges (found by the daemon end-to-end run)
    from topicmap.snapshots.ids import to_finals

    ids = np.array([3, 1, 2])
    empty = np.array([], dtype=np.int64)
    assert to_finals(ids, empty, empty).tolist() == [3, 1, 2]


def test_options_and_names_are_validated() -> None:
    with pytest.raises(ValueError, match="picture_periods: unknown period"):
        SnapshotOptions(picture_periods=("daily",))
    with pytest.raises(ValueError, match="top_labels"):
        SnapshotOptions(top_labels=-1)
    with pytest.raises(ValueError, match="cannot name a folder"):
        snapshot_folders.snapshots_dir("../escape")


def test_a_large_picture_is_embedded_smaller(tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    noisy = tmp_path / "noisy.png"  # noise does not compress: ~4 MB, and still ~1 MB at 800 px wide
    Image.fromarray(rng.integers(0, 255, (1200, 1200, 3), dtype=np.uint8)).save(noisy)
    assert noisy.stat().st_size > 4 * EMBED_MAX_BYTES
    markdown = png_markdown(noisy, "map").md_str
    assert markdown.startswith("![map](data:image/png;base64,")
    embedded = base64.b64decode(markdown[len("![map](data:image/png;base64,") : -1])
    assert len(embedded) <= EMBED_MAX_BYTES
    with Image.open(io.BytesIO(embedded)) as image:
        assert image.width < 1200 and abs(image.width - image.height) <= 1  # smaller, same proportions
    small = tmp_path / "small.png"
    Image.new("RGB", (30, 20), "white").save(small)
    assert base64.b64decode(png_markdown(small, "x").md_str[len("![x](data:image/png;base64,") : -1]) == (
        small.read_bytes()
    )  # small pictures go in as they are


def test_a_picture_on_the_asset_page_is_served_by_the_webserver_at_a_width_that_fits(tmp_path: Path) -> None:
    """The markdown names the pictures by the URL of the webserver's compute-log download, short enough for the UI
    to show it inline; the files it names are the picture made to fit the page, linked to the picture itself."""
    from PIL import Image

    wide = tmp_path / "map.png"
    Image.radial_gradient("L").resize((1200, 1260)).convert("RGB").save(wide)
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster")) as instance:
        logs = instance.compute_log_manager  # what the webserver's /logs/<key...>/<extension> route reads

        def served(url: str) -> Path:
            *key, extension = url.removeprefix("/logs/").split("/")
            return Path(logs.get_captured_local_path(key, extension))

        served_as = ["snapshots", "climate", "0123abcd", "overall", "link_map.png"]
        markdown = page_picture(instance, wide, served_as, "media link map of climate").md_str
        assert len(markdown) < MARKDOWN_INLINE_LIMIT
        shown_url, full_url = (
            markdown.removeprefix("[![media link map of climate](").removesuffix(")").split(")](")
        )
        assert full_url == "/logs/topicmap/snapshots/climate/0123abcd/overall/link_map/png"
        assert served(full_url).read_bytes() == wide.read_bytes()
        with Image.open(served(shown_url)) as shown:
            assert shown.size == (PAGE_PICTURE_WIDTH, round(1260 * PAGE_PICTURE_WIDTH / 1200))
        # the same picture again: the same markdown, its files left as they are
        written = {url: served(url).stat().st_mtime_ns for url in (shown_url, full_url)}
        assert page_picture(instance, wide, served_as, "media link map of climate").md_str == markdown
        assert {url: served(url).stat().st_mtime_ns for url in written} == written

        narrow = tmp_path / "chart.png"
        Image.new("RGB", (300, 100), "white").save(narrow)
        markdown = page_picture(instance, narrow, ["charts", "chart.png"], "chart").md_str
        assert markdown == "![chart](/logs/topicmap/charts/chart/png)"  # shown as it is
        assert served("/logs/topicmap/charts/chart/png").read_bytes() == narrow.read_bytes()
    # an instance without a local compute-log folder (here: none at all) gets the picture inlined
    inlined = page_picture(dg.DagsterInstance.ephemeral(), narrow, ["charts", "chart.png"], "chart")
    assert inlined is not None and inlined.md_str.startswith("![chart](data:image/png;base64,")


def test_a_summary_keeps_as_many_top_words_as_the_ui_shows_inline() -> None:
    from types import SimpleNamespace

    from assets.snapshots import SHOWN_WORDS, summary_markdown

    words = pd.DataFrame(
        {"word": [f"{i:02d}" + "w" * 30 for i in range(40)], "share": np.linspace(0.9, 0.1, 40)}
    )
    snap = SimpleNamespace(
        counts=SimpleNamespace(story_count=40, story_link_count=9, medium_count=3, medium_link_count=2),
        summary=SimpleNamespace(top_words=words, words_sampled=40, outside_stories=5, undated_stories=1),
        timespan=SimpleNamespace(start_date=date(2026, 1, 1), last_date=date(2026, 2, 28)),
        empty=False,
    )
    heading = "focus Subtopics / Clean energy (query: " + " OR ".join(["renewable"] * 12) + ")"
    text = summary_markdown(heading, snap)
    assert len(text) < MARKDOWN_INLINE_LIMIT  # shown on the page, not behind "[Show Markdown]"
    shown = text.split("counted): ")[1].split(" · ")
    # the first words, each cut to 24 characters, and how many more the files hold of the SHOWN_WORDS
    assert (
        shown[0] == "00wwwwwwwwwwwwwwwwwwwww… 90%" and shown[-1] == f"… {SHOWN_WORDS - len(shown) + 1} more"
    )
    assert 10 < len(shown) - 1 < SHOWN_WORDS
    assert text.startswith(f"### {heading}\n\n2026-01-01 to 2026-02-28: **40** stories, **9** cross-media")
    assert "34 published in the timespan, 5 linked from it, 1 undated" in text


def test_cli_reports_unknown_topics_and_topics_without_snapshots(
    tmp_path: Path, capsys, monkeypatch, fresh_sqlite_store
) -> None:
    monkeypatch.delenv("TOPICMAP_DATABASE_URL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    store = TopicStore.open(fresh_sqlite_store(home / "topicmap.sqlite3"))  # the store of the CLI's --home
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML, encoding="utf-8")
    store.upsert_topic(load_topics(topics_file).topics[0])
    store.dispose()
    assert snapshot_cli(["nosuch", "--home", str(home)]) == 1
    assert "unknown topic 'nosuch'" in capsys.readouterr().err
    assert snapshot_cli([TOPIC, "--home", str(home)]) == 1
    assert "has no snapshot yet" in capsys.readouterr().err


def test_code_location_wires_the_snapshots_asset() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from orchestration.definitions import defs

        dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    node = graph.get(dg.AssetKey("snapshots"))
    assert {k.to_user_string() for k in node.parent_keys} == {
        "relevant_stories",
        "topic_links",
        "deduped_stories",
        "near_duplicates",
        "story_statistics",
        "media_tags",  # media-tag foci and link map colours
        "click_totals",  # every publication day (AllPartitionMapping): the snapshot reads the stories' clicks
    }
    spec = snapshots.specs_by_key[dg.AssetKey("snapshots")]
    assert spec.group_name == "snapshots" and set(spec.kinds) == {"python", "parquet"}
    assert node.partitions_def == graph.get(dg.AssetKey("relevant_stories")).partitions_def
    check_names = {key.name for key in graph.asset_check_keys if key.asset_key == dg.AssetKey("snapshots")}
    assert check_names == {
        CHECK_LINK_COUNTS,
        CHECK_TOPIC_STORIES,
        CHECK_DATES,
        "snapshot_files_intact",
        "timespan_counts_consistent",
        "snapshots_fresh",  # the freshness check (assets/freshness.py)
    }


def test_the_stored_timespan_counts_of_a_real_snapshot_are_consistent(project: dict) -> None:
    from sqlalchemy import update

    from assets.checks import CHECKS_BY_NAME

    timespan_counts_consistent = CHECKS_BY_NAME["timespan_counts_consistent"]
    result = dg.materialize(
        [snapshots, timespan_counts_consistent],
        partition_key=TOPIC,
        instance=project["instance"],
        resources=project["resources"],
        run_config=NO_PICTURES,
    )
    (check,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "timespan_counts_consistent"
    ]
    assert (
        check.passed
        and check.metadata["timespans_checked"].value > 3
        and check.metadata["topics"].value == TOPIC
    )
    # the store's overall count drifts from the snapshot's files
    with project["store"].engine.begin() as conn:
        conn.execute(
            update(s.timespans)
            .where(s.timespans.c.period == "overall")
            .values(medium_link_count=s.timespans.c.medium_link_count + 1)
        )
    context = dg.build_asset_check_context(resources={"store": project["resources"]["store"]})
    drifted = timespan_counts_consistent(context)
    problems = [record.data["problem"] for record in drifted.metadata["found"].records]
    assert not drifted.passed and any("!= files" in p for p in problems), problems
