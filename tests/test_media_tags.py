"""Media tags from a curated CSV: bad rows named by line, media found by URL, the file as the source of truth,
tags of duplicate media counted for their final medium, the asset and the sensor that re-runs snapshots."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import select, text, update

from assets.media_tags import media_tags
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from sensors.media_tags import media_tags_changed
from topicmap.store import media_tags as media_tags_module
from topicmap.store import schema as s
from topicmap.store.media_tags import (
    STAGING_TABLE,
    declared_media_tags,
    final_media_tags,
    load_media_tags,
    read_media_tags_csv,
    topic_tag_coverage,
)
from topicmap.store.names import StoreError
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

TOPIC = "tagged"


def write(tmp_path: Path, text: str, name: str = "tags.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def build_topic(store: TopicStore) -> tuple[int, dict[str, int]]:
    """Stories of four media: herald.test, www.ledger.test, m.ledger-mobile.test (a duplicate of the ledger),
    other.test; the first three in the topic."""
    topics_id = store.upsert_topic(
        TopicConfig(name=TOPIC, query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    )
    when = datetime(2026, 2, 3, 9, tzinfo=UTC)
    urls = [
        "https://herald.test/2026/02/03/a",
        "https://herald.test/2026/02/04/b",
        "https://www.ledger.test/2026/02/03/c",
        "https://ledger-mobile.test/2026/02/03/d",
        "https://other.test/2026/02/03/e",
    ]
    ids = store.add_stories(
        [NewStory(url, f"Story {i}", "Climate text.", when) for i, url in enumerate(urls)], source="test"
    ).stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [
                {"topics_id": topics_id, "stories_id": i, "iteration": 0, "added_at": now_utc()}
                for i in ids[:4]
            ],
            ["topics_id", "stories_id"],
        )
        media = {url: int(m) for m, url in conn.execute(select(s.media.c.media_id, s.media.c.url))}
        ledger = next(m for url, m in media.items() if "ledger.test" in url and "mobile" not in url)
        mobile = next(m for url, m in media.items() if "ledger-mobile" in url)
        conn.execute(update(s.media).where(s.media.c.media_id == mobile).values(dup_media_id=ledger))
    by_host = {url.split("/")[2].removeprefix("www."): m for url, m in media.items()}
    return topics_id, by_host


# ----------------------------------------------------------------------------------------------- the file


def test_bad_rows_are_reported_with_their_line_and_the_good_rows_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "medium_url,tag_set,tag,note\n"
        "https://herald.test/,media_type,newspaper,fine\n"  # line 2
        "herald.test,,newspaper,\n"  # 3: no tag set
        "not a url,media_type,blog,\n"  # 4
        "https://ledger.test/,Media Type,newspaper,\n"  # 5: not a tag set name
        "https://ledger.test/,partisanship,center,left,extra\n"  # 6: a comma in an unquoted tag
        '"https://ledger.test/",partisanship,"center, left",\n'  # 7: quoted, fine
        "https://herald.test/,media_type,newspaper,again\n"  # 8: repeats line 2
        "https://other.test/,media_type,\n",  # 9: empty tag
    )
    found = read_media_tags_csv(path)
    assert [(r.line, r.medium_url, r.tag_set, r.tag) for r in found.rows] == [
        (2, "https://herald.test/", "media_type", "newspaper"),
        (7, "https://ledger.test/", "partisanship", "center, left"),
    ]
    lines = [problem.split(":", 2)[1] for problem in found.problems]
    assert lines == ["3", "4", "5", "6", "8", "9"]
    assert all(problem.startswith(f"{path}:") for problem in found.problems)
    assert "tag_set is empty" in found.problems[0]
    assert "not a web address" in found.problems[1]
    assert "'Media Type'" in found.problems[2]
    assert "repeats line 2" in found.problems[4]
    assert "tag is empty" in found.problems[5]


@pytest.mark.parametrize(
    ("tail", "where", "fragment"),
    [
        # one 20 MB field: the reader stops at the line's first 8,192 characters (a 200 MiB field took 1.2 GB)
        ("https://herald.test/,media_type," + "x" * 20_000_000 + "\n", ":3:", "more than 8,192 bytes"),
        ("https://herald.test/,media_type,\xff\xfe\n", ":3:", "not UTF-8"),
        ('https://herald.test/,"media_type"x,a\n', ":3:", "cannot be read"),
    ],
    ids=["huge-field", "not-utf8", "broken-quoting"],
)
def test_a_file_that_cannot_be_read_whole_is_refused_naming_its_line(
    tmp_path: Path, tail: str, where: str, fragment: str
) -> None:
    path = tmp_path / "media_tags.csv"
    path.write_bytes(
        b"medium_url,tag_set,tag\nhttps://ledger.test/,media_type,newspaper\n" + tail.encode("latin-1")
    )
    with pytest.raises(StoreError, match=fragment) as refused:
        read_media_tags_csv(path)
    assert f"{path}{where}" in str(refused.value) and "nothing of the file is loaded" in str(refused.value)


def test_a_file_over_the_size_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("topicmap.store.media_tags.MAX_FILE_BYTES", 1000)
    path = write(tmp_path, "medium_url,tag_set,tag\n" + "https://herald.test/,media_type,newspaper\n" * 40)
    with pytest.raises(StoreError, match="more than the 1,000 a tags file may hold"):
        read_media_tags_csv(path)


def test_a_file_without_the_columns_has_no_rows(tmp_path: Path) -> None:
    found = read_media_tags_csv(write(tmp_path, "url,set,tag\nhttps://herald.test/,media_type,newspaper\n"))
    assert found.rows == [] and len(found.problems) == 1
    assert (
        ":1: expected the columns medium_url, tag_set, tag; missing medium_url, tag_set" in found.problems[0]
    )


# ----------------------------------------------------------------------------------------------- the store


def test_loading_finds_media_by_url_and_keeps_the_map_equal_to_the_file(
    store: TopicStore, tmp_path: Path
) -> None:
    topics_id, media = build_topic(store)
    rows = read_media_tags_csv(
        write(
            tmp_path,
            "medium_url,tag_set,tag\n"
            "herald.test,media_type,newspaper\n"  # no scheme: the normalized URL finds it
            "https://www.ledger.test/,partisanship,center-left\n"
            "https://ledger-mobile.test/,media_type,digital_native\n"  # a duplicate medium
            "https://unknown.test/,media_type,blog\n",
        )
    ).rows
    loaded = load_media_tags(store, rows)
    assert (loaded.added, loaded.removed, loaded.media_tagged) == (3, 0, 3)
    assert loaded.unknown_media == ["https://unknown.test/"]
    assert loaded.tags_by_set == {"media_type": 2, "partisanship": 1}
    with store.engine.connect() as conn:
        assert declared_media_tags(conn) == sorted(
            [
                (media["herald.test"], "media_type", "newspaper"),
                (media["ledger.test"], "partisanship", "center-left"),
                (media["ledger-mobile.test"], "media_type", "digital_native"),
            ]
        )
        # the mobile site's tag counts for the ledger, its final medium
        assert final_media_tags(conn) == sorted(
            [
                (media["herald.test"], "media_type", "newspaper"),
                (media["ledger.test"], "media_type", "digital_native"),
                (media["ledger.test"], "partisanship", "center-left"),
            ]
        )
    again = load_media_tags(store, rows)
    assert (again.added, again.removed) == (0, 0)
    # the file is the source of truth: a row taken out of it is taken out of the store
    fewer = load_media_tags(store, rows[:1])
    assert (fewer.added, fewer.removed) == (0, 2)
    with store.engine.connect() as conn:
        assert declared_media_tags(conn) == [(media["herald.test"], "media_type", "newspaper")]
        tag_sets = conn.execute(select(s.tag_sets.c.name).order_by(s.tag_sets.c.name)).scalars().all()
    assert tag_sets == ["media_type", "partisanship"]  # tag sets and tags keep their ids

    coverage = topic_tag_coverage(store, topics_id)
    assert (coverage.media, coverage.stories) == (2, 4)  # herald (2 stories), ledger (+ its mobile site's)
    assert coverage.by_tag == [{"tag_set": "media_type", "tag": "newspaper", "media": 1, "stories": 2}]
    assert coverage.untagged_media == {"media_type": 1}


TAGS_FILE = (
    "medium_url,tag_set,tag\n"
    "herald.test,media_type,newspaper\n"
    "https://herald.test/,collection,national\n"
    "https://www.ledger.test/,partisanship,center-left\n"
    "ledger.test,collection,national\n"
    "https://ledger-mobile.test/,media_type,digital_native\n"
    "other.test,media_type,blog\n"
)


def _map_rows(store: TopicStore) -> list[tuple[int, int, int]]:
    mt = s.media_tags_map
    with store.engine.connect() as conn:
        return [
            (int(i), int(m), int(t))
            for i, m, t in conn.execute(
                select(mt.c.media_tags_map_id, mt.c.media_id, mt.c.tags_id).order_by(mt.c.media_tags_map_id)
            )
        ]


def _staging_tables(store: TopicStore) -> int:
    """Staging tables left in the store: on PostgreSQL any session's, on SQLite the pooled connection's."""
    query = (
        "SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND relname = :name"
        if store.dialect == "postgresql"
        else "SELECT count(*) FROM sqlite_temp_master WHERE name = :name"
    )
    with store.engine.connect() as conn:
        return int(conn.execute(text(query), {"name": STAGING_TABLE}).scalar_one())


def test_a_reload_of_the_same_file_stores_the_same_rows(store: TopicStore, tmp_path: Path) -> None:
    _, media = build_topic(store)
    rows = read_media_tags_csv(write(tmp_path, TAGS_FILE)).rows
    first = load_media_tags(store, rows)
    assert (first.added, first.removed, first.media_tagged) == (6, 0, 4)
    stored = _map_rows(store)
    # the rows went in the order of the map's key (media_id, tags_id)
    assert [(m, t) for _, m, t in stored] == sorted((m, t) for _, m, t in stored)
    with store.engine.connect() as conn:
        declared = declared_media_tags(conn)
    assert (media["herald.test"], "collection", "national") in declared
    again = load_media_tags(store, read_media_tags_csv(write(tmp_path, TAGS_FILE, "copy.csv")).rows)
    assert (again.added, again.removed, again.media_tagged) == (0, 0, 4)
    assert _map_rows(store) == stored  # the same rows, ids and all
    assert _staging_tables(store) == 0


def test_a_load_failing_mid_file_leaves_the_map_and_no_staging_table_behind(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_topic(store)
    load_media_tags(store, read_media_tags_csv(write(tmp_path, TAGS_FILE)).rows[:2])
    before = _map_rows(store)
    rows = read_media_tags_csv(write(tmp_path, TAGS_FILE, "all.csv")).rows
    staged: list[list[int]] = []
    real_chunks = media_tags_module.chunks

    def failing_chunks(values: list, size: int = 500) -> object:
        for chunk in real_chunks(values, size):
            if size == media_tags_module.STAGE_BATCH and staged:
                raise OSError("disk full")  # as the database would, halfway through the staging table
            if size == media_tags_module.STAGE_BATCH:
                staged.append(chunk)
            yield chunk

    monkeypatch.setattr(media_tags_module, "STAGE_BATCH", 2)
    monkeypatch.setattr(media_tags_module, "chunks", failing_chunks)
    with pytest.raises(OSError, match="disk full"):
        load_media_tags(store, rows)
    assert len(staged) == 1  # it failed after the first batch was written
    assert _map_rows(store) == before
    assert _staging_tables(store) == 0
    monkeypatch.undo()
    loaded = load_media_tags(store, rows)  # and the next load runs whole
    assert (loaded.added, loaded.removed) == (4, 0)
    assert _staging_tables(store) == 0


def test_a_duplicate_media_cycle_is_an_error_naming_the_media(store: TopicStore, tmp_path: Path) -> None:
    _, media = build_topic(store)
    load_media_tags(
        store, read_media_tags_csv(write(tmp_path, "medium_url,tag_set,tag\nherald.test,a,b\n")).rows
    )
    with store.engine.begin() as conn:
        conn.execute(
            update(s.media)
            .where(s.media.c.media_id == media["ledger.test"])
            .values(dup_media_id=media["ledger-mobile.test"])
        )
        with pytest.raises(StoreError, match="duplicate-media cycle"):
            final_media_tags(conn)


# ----------------------------------------------------------------------------------------------- the asset


def _materialize(
    store: TopicStore, path: Path | None, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [media_tags],
        partition_key=TOPIC,
        instance=instance,
        resources={
            "store": TopicStoreResource(database_url=store.engine.url.render_as_string(hide_password=False)),
            "media_tags_file": MediaTagsResource(path=str(path) if path else ""),
        },
        raise_on_error=False,
    )


def test_the_asset_loads_the_file_reports_bad_lines_and_never_wipes_on_a_broken_header(
    tmp_path: Path,
) -> None:
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    build_topic(store)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    path = write(tmp_path, "medium_url,tag_set,tag\nherald.test,media_type,newspaper\nledger.test,,x\n")
    result = _materialize(store, path, instance)
    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("media_tags")[0].metadata.items()}
    assert (meta["rows_loaded"], meta["bad_rows"], meta["media_tagged"]) == (1, 1, 1)
    assert f"{path}:3: tag_set is empty" in meta["bad_row_lines"]
    assert [(r.data["tag"], r.data["media"], r.data["stories"]) for r in meta["topic_tags"].records] == [
        ("newspaper", "1", "2")
    ]
    first_version = result.asset_materializations_for_node("media_tags")[0].tags["dagster/data_version"]

    path.write_text("url,set,tag\nherald.test,media_type,newspaper\n", encoding="utf-8")
    broken = _materialize(store, path, instance)
    assert not broken.success
    failure = broken.get_step_failure_events()[0].step_failure_data.user_failure_data
    assert "no usable row, nothing loaded" in failure.description
    with store.engine.connect() as conn:
        assert len(declared_media_tags(conn)) == 1  # still there

    path.write_text("medium_url,tag_set,tag\nherald.test,media_type,digital_native\n", encoding="utf-8")
    changed = _materialize(store, path, instance)
    assert (
        changed.asset_materializations_for_node("media_tags")[0].tags["dagster/data_version"] != first_version
    )

    missing = _materialize(store, tmp_path / "absent.csv", instance)
    assert not missing.success
    store.dispose()


def test_the_sensor_reloads_tags_and_resnapshots_the_topics_with_a_snapshot(tmp_path: Path) -> None:
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    topics_id, _ = build_topic(store)
    store.upsert_topic(
        TopicConfig(
            name="unsnapped", query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31)
        )
    )
    with store.engine.begin() as conn:
        conn.execute(
            s.snapshots.insert().values(
                topics_id=topics_id,
                snapshot_key="0" * 64,
                snapshot_date=now_utc(),
                state="completed",
                iteration=0,
                provenance_json="{}",
                path="x",
            )
        )
    path = write(tmp_path, "medium_url,tag_set,tag\nherald.test,media_type,newspaper\n")
    resources = {
        "media_tags_file": MediaTagsResource(path=str(path)),
        "store": TopicStoreResource(database_url=store.engine.url.render_as_string(hide_password=False)),
    }
    with dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), resources=resources) as context:
        first = media_tags_changed(context)
        assert not first.run_requests and first.cursor
    with dg.build_sensor_context(cursor=first.cursor, resources=resources) as context:
        assert not media_tags_changed(context).run_requests  # unchanged
    path.write_text("medium_url,tag_set,tag\nherald.test,media_type,blog\n", encoding="utf-8")
    # a changed file's runs are looked up first among those the sensor launched: the tick has its instance
    with dg.build_sensor_context(
        instance=dg.DagsterInstance.ephemeral(), cursor=first.cursor, resources=resources
    ) as context:
        changed = media_tags_changed(context)
    assert [r.partition_key for r in changed.run_requests] == [TOPIC]
    assert changed.cursor != first.cursor
    store.dispose()
