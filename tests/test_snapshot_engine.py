"""The out-of-core snapshot (DuckDB, ``topicmap.snapshots.engine``) writes the very files of the in-memory one.

Generated topics (foci of both kinds, custom and empty timespans, undated stories and stories dated outside the
topic, pages' own UTC offsets, statistics, syndication groups counted both ways) are computed by both paths and
every file compared byte for byte; the store's topic (merged stories, duplicate media) streamed in batches of a
few rows gives the same files as the store read whole; the streams never hold more than their batch; the Parquet
stream writer cuts the same row groups as pyarrow's whole-table writer.
"""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_snapshot_assets import TOPIC, TOPICS_YAML, build_topic
from topicmap.snapshots import engine, store_stream, streams
from topicmap.snapshots import files as snapshot_files
from topicmap.snapshots.checks import check_problems
from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.engine import compute_snapshot_ooc
from topicmap.snapshots.engine_input import TopicSource, frame_batches
from topicmap.snapshots.files import SnapshotFilesWriter
from topicmap.snapshots.foci import Focus
from topicmap.snapshots.folder import compute_inputs
from topicmap.snapshots.inputs import SnapshotInputs, read_snapshot_inputs
from topicmap.snapshots.key import SnapshotOptions
from topicmap.snapshots.post_counts import PostShares, add_all_post_counts
from topicmap.snapshots.timespans import build_timespans
from topicmap.store.topic_store import TopicStore
from topicmap.topics.focus_kinds import MediaTagSelection, QuerySelection

#: eight weeks from late January to early March: every kind of timespan (a month and weeks clipped at either end,
#: an empty month and empty weeks, custom ones) while few of each, since each timespan costs both paths a fixed
#: round of work and their count is not what these tests are about
START, END = date(2026, 1, 21), date(2026, 3, 10)
FEBRUARY, MARCH = date(2026, 2, 1), date(2026, 3, 1)
WORDS = np.array(["climate", "carbon", "tax", "river", "city", "school", "the", "and", "vote", "market"])


def generated_topic(seed: int, n_stories: int = 400, n_media: int = 9) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    media_ids = np.arange(1, n_media + 1) * 7
    ids = rng.choice(np.arange(1, 5 * n_stories), size=n_stories, replace=False)
    # February is left without stories: its month and weeks are empty timespans
    days = rng.choice(
        np.r_[0 : (FEBRUARY - START).days, (MARCH - START).days : (END - START).days + 1], size=n_stories
    )
    dates = (
        pd.Timestamp(START, tz="UTC")
        + pd.to_timedelta(days, unit="D")
        + pd.to_timedelta(rng.integers(0, 86_400, n_stories), unit="s")
    )
    dates = dates.where(rng.random(n_stories) > 0.05)  # undated
    outside = rng.random(n_stories) < 0.04
    dates = dates.where(~outside, dates - pd.Timedelta(days=200))
    offsets = rng.integers(-720, 720, n_stories).astype(float)
    offsets[rng.random(n_stories) < 0.4] = np.nan
    stories = pd.DataFrame(
        {
            "stories_id": ids,
            "media_id": rng.choice(media_ids, n_stories),
            "publish_date": dates,
            "publish_utc_offset": offsets,
            "url": [f"https://x.test/{i}" for i in ids],
            "title": [f"Story {i}" if i % 11 else None for i in ids],
            "text": [" ".join(rng.choice(WORDS, 12)) for _ in ids],
            "language": rng.choice(np.array(["en", "de", None], dtype=object), n_stories),
            "date_method": rng.choice(np.array(["html", "url (month)", None], dtype=object), n_stories),
            # a day without a time of day, a time without a zone, unknown (stored before it was recorded)
            "time_known": rng.choice(np.array([True, False, None], dtype=object), n_stories),
            "zone_known": rng.choice(np.array([True, False, None], dtype=object), n_stories),
        }
    )
    n_links = 6 * n_stories
    links = pd.DataFrame(
        {
            "stories_id": np.r_[rng.choice(ids, n_links), [5 * n_stories + 1]],
            "ref_stories_id": np.r_[rng.choice(ids, n_links), ids[:1]],
        }
    )
    known = rng.random(n_stories) < 0.7
    stats = pd.DataFrame(
        {
            "stories_id": ids,
            "facebook_share_count": pd.arrays.IntegerArray(rng.integers(0, 50, n_stories), ~known),
            "bitly_clicks_3d": pd.arrays.IntegerArray(
                rng.integers(0, 9, n_stories), rng.random(n_stories) < 0.5
            ),
            "bitly_clicks_30d": pd.arrays.IntegerArray(
                rng.integers(0, 30, n_stories), rng.random(n_stories) < 0.5
            ),
        }
    )
    grouped = rng.choice(ids, size=n_stories // 4, replace=False)
    groups = pd.DataFrame({"stories_id": grouped, "group_id": np.arange(len(grouped)) // 3})
    tags = pd.DataFrame(
        {"media_id": media_ids, "tag_set": "lean", "tag": ["left", "right", "center"] * (n_media // 3)}
    )
    return {
        "stories": stories,
        "media": pd.DataFrame(
            {
                "media_id": media_ids,
                "name": [f"M{m}" for m in media_ids],
                "url": [f"https://m{m}.test/" for m in media_ids],
            }
        ),
        "links": links,
        "story_stats": stats,
        "near_dup_groups": groups,
        "media_tags": tags,
    }


def generated_posts(data: dict[str, pd.DataFrame], seed: int, n_posts: int = 300) -> PostShares:
    """Posts sharing the generated topic's stories, over its dates (some before it), a few authors and channels."""
    rng = np.random.default_rng(seed)
    ids = np.sort(data["stories"]["stories_id"].to_numpy())
    post_ids = np.arange(1, n_posts + 1)
    shares = pd.DataFrame(
        {
            "topic_posts_id": np.repeat(post_ids, 2),
            "stories_id": rng.choice(ids, 2 * n_posts),
            "author": rng.choice([f"a{i}" for i in range(12)], 2 * n_posts),
            "channel": rng.choice(["c1", "c2", "c3"], 2 * n_posts),
            "publish_date": np.repeat(
                pd.Timestamp(START, tz="UTC")
                + pd.to_timedelta(rng.integers(-20, (END - START).days + 6, n_posts), unit="D"),
                2,
            ),
        }
    ).drop_duplicates(["topic_posts_id", "stories_id"])
    shares["publish_date"] = shares["publish_date"].astype("datetime64[ns, UTC]")
    return PostShares(shares=shares.sort_values(["topic_posts_id", "stories_id"]).reset_index(drop=True))


def _hashes(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


FOCI = (
    Focus("Lean", "Left", MediaTagSelection({"lean": ["left"]})),
    Focus("Subjects", "Climate", QuerySelection("climate AND tax")),
)


@pytest.mark.parametrize(
    ("seed", "once", "with_posts"), [(1, False, False), (2, True, False), (3, False, True)]
)
def test_both_paths_write_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, once: bool, with_posts: bool
) -> None:
    """A generated topic of eight weeks (``START``, ``END``): every kind of timespan, few of each. The engine
    reads the texts of the query focus and the word samples in many small batches (its stories are loaded in
    random id order), and every result of its SQL in record batches of 53 rows (the story rows, the counted
    stories, the streams), as a big topic's are read."""
    monkeypatch.setattr(engine, "TEXT_BATCH_ROWS", 29)
    monkeypatch.setattr(engine, "BATCH_ROWS", 53)
    data = generated_topic(seed)
    posts = generated_posts(data, seed) if with_posts else None
    spans = build_timespans(
        START, END, custom=[("Early", "2026-01-22", "2026-01-28"), ("Gap", "2026-02-03", "2026-02-09")]
    )
    options = {"count_syndicated_once": once, "foci": FOCI, "word_sample": 50}
    notes = ("A note of the topic version.",)
    with SnapshotFilesWriter(tmp_path / "numpy", csv=True, posts=posts, notes=notes) as files:
        ours = compute_snapshot(**data, timespans=spans, files=files, **options)
        add_all_post_counts(ours, posts)
        files.finish(ours)
    source = TopicSource(
        **{name: frame_batches(data[name], name, batch_rows=64) for name in TopicSource.__dataclass_fields__}
    )
    with SnapshotFilesWriter(tmp_path / "duckdb", csv=True, posts=posts, notes=notes) as files:
        streamed = compute_snapshot_ooc(
            source,
            spans,
            folder=tmp_path / "engine",
            media_tags=data["media_tags"],
            files=files,
            posts=posts,
            **options,
        )
        files.finish(streamed)
    numpy_files, duckdb_files = _hashes(tmp_path / "numpy"), _hashes(tmp_path / "duckdb")
    # the stories tables, with every kind of date and the post columns, are among the files compared
    assert "overall/stories.parquet" in numpy_files and "overall/stories.csv" in numpy_files
    assert "datapackage.json" in numpy_files and "README.md" in numpy_files
    overall = pq.read_table(tmp_path / "duckdb" / "overall" / "stories.parquet")
    assert set(overall.column("day_basis").drop_null().to_pylist()) >= {"page day", "page offset", "unknown"}
    assert set(overall.column("in_timespan").to_pylist()) == {"published", "linked", "undated"}
    assert overall.schema.field("in_timespan").metadata  # described
    if with_posts:
        assert overall.column("post_count").drop_null().to_pylist()
        assert [s.counts.post_count for s in streamed.timespans] == [
            s.counts.post_count for s in ours.timespans
        ]
        assert any(s.counts.post_count for s in streamed.timespans)
    assert any(name.startswith("foci/") for name in numpy_files)
    assert any(snap.empty for snap in ours.timespans) and any(not snap.empty for snap in ours.timespans)
    assert any(snap.counts.syndicated_repeat_link_count for snap in ours.timespans)
    assert sorted(numpy_files) == sorted(duckdb_files)
    assert [name for name in numpy_files if numpy_files[name] != duckdb_files[name]] == []
    assert streamed.dropped_links == ours.dropped_links
    streamed_problems = check_problems(streamed, START, END)
    assert streamed_problems == check_problems(ours, START, END)
    assert not any(streamed_problems.values())


def test_streamed_checks_find_a_contradiction(tmp_path: Path) -> None:
    data = generated_topic(3, n_stories=120)
    spans = build_timespans(START, END)
    source = TopicSource(
        **{name: frame_batches(data[name], name) for name in TopicSource.__dataclass_fields__}
    )
    result = compute_snapshot_ooc(source, spans, folder=tmp_path / "engine")
    overall = result["overall"]
    assert overall.streamed is not None and overall.streamed.story_links == overall.counts.story_link_count
    overall.medium_links.loc[0, "link_count"] += 1
    problems = check_problems(result, START, END)
    assert any("medium link counts sum to" in p for found in problems.values() for p in found)


@pytest.mark.parametrize(
    ("extra_link", "problem"),
    [
        (
            "(SELECT -5, source FROM period_links LIMIT 1)",
            "story links name stories that are not topic stories",
        ),
        ("(SELECT source, source FROM period_links LIMIT 1)", "1 same-medium story links"),
    ],
)
def test_streamed_checks_read_the_rows_the_files_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra_link: str, problem: str
) -> None:
    """The checks' facts are taken from the streamed rows themselves: a link the links stream gets wrong (a story
    outside the topic, a story linking its own medium) is reported, and so is the count it no longer matches."""
    wrong = engine.STORY_LINKS_SELECT.replace(
        "FROM period_links", f"FROM (SELECT source, ref FROM period_links UNION ALL {extra_link})"
    )
    monkeypatch.setattr(engine, "STORY_LINKS_SELECT", wrong)
    data = generated_topic(3, n_stories=120)
    source = TopicSource(
        **{name: frame_batches(data[name], name) for name in TopicSource.__dataclass_fields__}
    )
    result = compute_snapshot_ooc(source, build_timespans(START, END), folder=tmp_path / "engine")
    found = [p for problems in check_problems(result, START, END).values() for p in problems]
    assert f"overall: {problem}" in found
    assert any(p.startswith("overall: counts") and "do not match the tables" in p for p in found)


def test_bad_input_is_named(tmp_path: Path) -> None:
    data = generated_topic(4, n_stories=50)
    data["stories"] = pd.concat([data["stories"], data["stories"].iloc[:1]], ignore_index=True)
    source = TopicSource(
        **{name: frame_batches(data[name], name) for name in TopicSource.__dataclass_fields__}
    )
    with pytest.raises(ValueError, match="stories.stories_id repeats"):
        compute_snapshot_ooc(source, build_timespans(START, END), folder=tmp_path / "engine")


def test_a_source_error_while_loading_is_raised_as_the_source_raised_it(tmp_path: Path) -> None:
    data = generated_topic(4, n_stories=50)
    fields = TopicSource.__dataclass_fields__
    good = {name: frame_batches(data[name], name, batch_rows=16) for name in fields}
    links = data["links"].drop(columns=["ref_stories_id"])
    with pytest.raises(ValueError, match="links: missing column 'ref_stories_id'"):
        compute_snapshot_ooc(
            TopicSource(**{**good, "links": frame_batches(links, "links")}),
            build_timespans(START, END),
            folder=tmp_path / "missing",
        )

    def failing_after_a_batch():  # noqa: ANN202 (a store whose connection drops mid-read)
        yield from list(good["stories"]())[:1]
        raise ConnectionError("store went away")

    with pytest.raises(ConnectionError, match="store went away"):
        compute_snapshot_ooc(
            TopicSource(**{**good, "stories": failing_after_a_batch}),
            build_timespans(START, END),
            folder=tmp_path / "dropped",
        )


def test_stream_writer_cuts_the_same_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "source_stories_id": np.sort(rng.integers(0, 10**9, 25_000)),
            "ref_stories_id": rng.integers(0, 10**9, 25_000),
        }
    )
    monkeypatch.setattr(streams, "ROW_GROUP_ROWS", 4096)
    whole = tmp_path / "whole.parquet"
    import pyarrow.parquet as pq

    pq.write_table(table, whole, row_group_size=4096, **streams.parquet_options(table.schema))
    streamed = tmp_path / "streamed.parquet"
    csv = tmp_path / "streamed.csv"
    digests = streams.write_stream(table.to_batches(max_chunksize=1000), table.schema, streamed, csv)
    assert whole.read_bytes() == streamed.read_bytes()
    # the digests kept while writing are those of the files' bytes (the manifest takes them)
    assert digests == {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (streamed, csv)}
    assert pq.ParquetFile(streamed).metadata.num_row_groups == 7
    snapshot_files._write_csv(table, tmp_path / "whole.csv")
    assert (tmp_path / "whole.csv").read_bytes() == csv.read_bytes()
    # a CSV alone is written in smaller groups: the same bytes
    monkeypatch.setattr(streams, "CSV_GROUP_ROWS", 3000)
    alone = tmp_path / "alone.csv"
    streams.write_stream(table.to_batches(max_chunksize=1000), table.schema, None, alone)
    assert alone.read_bytes() == csv.read_bytes()


def test_store_streams_in_bounded_batches(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML, encoding="utf-8")
    topics_id = build_topic(store, topics_file)
    inputs = read_snapshot_inputs(store, TOPIC)

    batches: list[int] = []
    stream = store_stream.stream_rows

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        for rows in stream(*args, **kwargs):
            batches.append(len(rows))
            yield rows

    monkeypatch.setattr(store_stream, "stream_rows", counted)
    with SnapshotFilesWriter(tmp_path / "whole") as files:
        whole = compute_snapshot(
            inputs.stories,
            inputs.media,
            inputs.links,
            inputs.timespans,
            story_stats=inputs.story_stats,
            near_dup_groups=inputs.near_dup_groups,
            texts=inputs.texts,
            files=files,
        )
        files.finish(whole)
    with SnapshotFilesWriter(tmp_path / "streamed") as files:
        streamed = compute_snapshot_ooc(
            store_stream.store_source(store, topics_id, batch_rows=3),
            inputs.timespans,
            folder=tmp_path / "engine",
            files=files,
        )
        files.finish(streamed)
    assert batches and max(batches) <= 3 and len(batches) > 5
    whole_files, streamed_files = _hashes(tmp_path / "whole"), _hashes(tmp_path / "streamed")
    assert sorted(whole_files) == sorted(streamed_files)
    assert [name for name in whole_files if whole_files[name] != streamed_files[name]] == []
    assert streamed.dropped_links == whole.dropped_links


def test_the_engine_refuses_url_sharing_and_compute_inputs_computes_it_in_memory(tmp_path: Path) -> None:
    data = generated_topic(4, n_stories=60)
    spans = build_timespans(START, END)
    source = TopicSource(
        **{name: frame_batches(data[name], name) for name in TopicSource.__dataclass_fields__}
    )
    with pytest.raises(ValueError, match="mode 'url_sharing'"):
        compute_snapshot_ooc(source, spans, folder=tmp_path / "engine", mode="url_sharing")
    posts = generated_posts(data, 4, n_posts=40)
    inputs = SnapshotInputs(
        topic_name="t",
        topics_id=1,
        config_json="{}",
        start_date=START,
        end_date=END,
        timespans=spans,
        iteration=1,
        mode="url_sharing",
        posts=posts,
        **{name: data[name] for name in ("stories", "media", "links", "story_stats", "near_dup_groups")},
    )
    result = compute_inputs(inputs, SnapshotOptions(), out_of_core=True)  # forced, yet computed in memory
    overall = next(snap for snap in result.timespans if snap.timespan.key == "overall")
    assert overall.streamed is None
    shared = set(posts.shares["stories_id"].tolist())
    published = set(overall.story_link_counts["stories_id"].tolist())
    assert shared <= published and len(published) > 0


def test_stream_rows_rejects_a_batch_of_nothing(store: TopicStore) -> None:
    from sqlalchemy import select

    from topicmap.store import schema as s

    with pytest.raises(ValueError, match="batch_rows must be at least 1"):
        next(store_stream.stream_rows(store, select(s.media.c.media_id), 0))


def test_a_big_topic_is_read_in_batches_and_keyed_the_same_twice(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topicmap.snapshots import store as snapshot_store
    from topicmap.snapshots.key import SnapshotOptions, snapshot_key

    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML, encoding="utf-8")
    build_topic(store, topics_file)
    whole = read_snapshot_inputs(store, TOPIC)
    streamed = store_stream.read_streamed_inputs(store, TOPIC, batch_rows=4)
    assert streamed.dedup_state == whole.dedup_state
    assert streamed.iteration == whole.iteration
    pd.testing.assert_frame_equal(streamed.media_tags, whole.media_tags)
    assert streamed.row_counts()["stories"] == len(whole.stories)
    options = SnapshotOptions()
    assert snapshot_key(streamed, options) == snapshot_key(
        store_stream.read_streamed_inputs(store, TOPIC, batch_rows=4), options
    )

    home = tmp_path / "home"
    built = snapshot_store.build_snapshot(store, TOPIC, home=home)
    monkeypatch.setattr(snapshot_store, "OUT_OF_CORE_ROWS", 0)
    built_streamed = snapshot_store.build_snapshot(store, TOPIC, home=home)
    assert built_streamed.inputs.source is not None and built_streamed.written
    assert built_streamed.snapshot_key != built.snapshot_key
    assert not any(built_streamed.problems.values())
    ours, theirs = _hashes(built.folder), _hashes(built_streamed.folder)
    assert sorted(ours) == sorted(theirs)
    differ = sorted(name for name in ours if ours[name] != theirs[name])
    assert differ == ["manifest.json", "provenance.json"]  # the key and its read, named in both
    again = snapshot_store.build_snapshot(store, TOPIC, home=home)
    assert again.snapshot_key == built_streamed.snapshot_key and not again.written


def test_a_streamed_topic_counts_its_posts_and_only_its_current_version(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import update

    from tests.test_snapshot_posts import _stored_topic_with_posts
    from topicmap.snapshots import store as snapshot_store
    from topicmap.store import schema as s

    _stored_topic_with_posts(store, tmp_path)
    # the overall timespan's pictures only: the big topic's test compares every picture of both paths
    options = SnapshotOptions(picture_periods=("overall",))
    topics_id = int(store.topic_row(TOPIC)["topics_id"])
    assert 12 in set(read_snapshot_inputs(store, TOPIC).stories["stories_id"].tolist())
    with store.engine.begin() as conn:  # story 12 left the topic when it changed: no snapshot counts it
        conn.execute(
            update(s.topic_stories)
            .where(s.topic_stories.c.topics_id == topics_id, s.topic_stories.c.stories_id == 12)
            .values(left_version=1)
        )
    streamed_inputs = store_stream.read_streamed_inputs(store, TOPIC, batch_rows=4)
    whole_inputs = read_snapshot_inputs(store, TOPIC)
    assert 12 not in set(whole_inputs.stories["stories_id"].tolist())
    assert streamed_inputs.row_counts()["stories"] == len(whole_inputs.stories)
    assert streamed_inputs.dedup_state == whole_inputs.dedup_state
    pd.testing.assert_frame_equal(streamed_inputs.posts.shares, whole_inputs.posts.shares)
    assert len(whole_inputs.posts.shares)

    home = tmp_path / "home"
    built = snapshot_store.build_snapshot(store, TOPIC, options, home=home)
    monkeypatch.setattr(snapshot_store, "OUT_OF_CORE_ROWS", 0)
    built_streamed = snapshot_store.build_snapshot(store, TOPIC, options, home=home)
    assert built_streamed.inputs.source is not None and not any(built_streamed.problems.values())
    ours, theirs = _hashes(built.folder), _hashes(built_streamed.folder)
    assert sorted(ours) == sorted(theirs)
    assert sorted(name for name in ours if ours[name] != theirs[name]) == ["manifest.json", "provenance.json"]
    overall = pq.read_table(built_streamed.folder / "overall" / "stories.parquet").to_pylist()
    assert 12 not in {row["stories_id"] for row in overall}
    assert any(row["post_count"] for row in overall)


def test_a_big_url_sharing_topic_is_read_and_computed_in_memory(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_snapshot_posts import _stored_topic_with_posts
    from topicmap.snapshots import store as snapshot_store

    _stored_topic_with_posts(store, tmp_path, "    mode: url_sharing\n")
    monkeypatch.setattr(snapshot_store, "OUT_OF_CORE_ROWS", 0)
    # the overall timespan's pictures only: which path computes the topic is what this test is about
    options = SnapshotOptions(picture_periods=("overall",))
    built = snapshot_store.build_snapshot(store, TOPIC, options, home=tmp_path / "home")
    assert built.inputs.source is None and built.written and not any(built.problems.values())
    assert all(snap.streamed is None for snap in built.result.timespans)
