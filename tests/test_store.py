"""The topic store: schema upgrade in place, idempotent writes, media lookup; on SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import random
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, update

from topicmap.store import schema as s
from topicmap.store.sqlite_wal import WalCheckpointer
from topicmap.store.topic_store import NewStory, StoreError, TopicStore, decompress_page
from topicmap.topics.declarations import TopicConfig


def _story(url: str, title: str = "A title", day: int = 5, medium: str | None = None) -> NewStory:
    return NewStory(
        url=url,
        title=title,
        text=f"Body of {title}.",
        publish_date=datetime(2026, 2, day, 12, tzinfo=UTC),
        medium_name=medium,
    )


def test_fresh_store_is_at_the_newest_schema_version(store: TopicStore) -> None:
    assert store.version() == s.SCHEMA_VERSION
    with store.engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
    for name in (
        "media",
        "stories",
        "story_urls",
        "topics",
        "topic_seed_urls",
        "topic_fetch_urls",
        "topic_links",
    ):
        assert name in tables


def test_store_created_by_version_1_upgrades_in_place_keeping_its_data(store: TopicStore) -> None:
    # Rebuild the store as version 1 shipped it: only v1 tables, without the columns added later.
    s.metadata.drop_all(store.engine)
    store.upgrade(target=1)
    assert store.version() == 1
    with store.engine.connect() as conn:
        inspector = inspect(conn)
        assert "topic_fetch_urls" not in inspector.get_table_names()
        assert "normalized_title_hash" not in {c["name"] for c in inspector.get_columns("stories")}
    store.upgrade(target=2)
    with store.engine.connect() as conn:
        assert "topic_links_url" not in {i["name"] for i in inspect(conn).get_indexes("topic_links")}
    added = store.add_stories([_story("https://www.example.com/2026/02/05/a")], source="test")

    assert store.upgrade() == s.SCHEMA_VERSION
    assert store.version() == s.SCHEMA_VERSION
    with store.engine.connect() as conn:
        inspector = inspect(conn)
        assert "topic_fetch_urls" in inspector.get_table_names()
        assert "normalized_title_hash" in {c["name"] for c in inspector.get_columns("stories")}
        assert "topic_links_url" in {i["name"] for i in inspector.get_indexes("topic_links")}
        kept = conn.execute(
            select(s.stories.c.url).where(s.stories.c.stories_id == added.stories_ids[0])
        ).scalar_one()
    assert kept == "https://www.example.com/2026/02/05/a"
    # Upgrading again is a no-op.
    assert store.upgrade() == s.SCHEMA_VERSION


def test_adding_the_same_stories_twice_creates_nothing_new(store: TopicStore) -> None:
    batch = [_story(f"https://news.example.com/2026/02/0{i}/story-{i}", f"Story {i}") for i in range(1, 6)]
    first = store.add_stories(batch, source="test")
    second = store.add_stories(batch, source="test")
    assert first.created == 5 and second.created == 0 and second.existing == 5
    assert first.stories_ids == second.stories_ids
    assert store.table_count(s.stories) == 5
    # Each story is findable by its raw URL and its lossy form (https→http, "news." dropped): 2 rows each.
    assert store.table_count(s.story_urls) == 10
    with store.engine.connect() as conn:
        urls = set(conn.execute(select(s.story_urls.c.url)).scalars())
    assert "http://example.com/2026/02/01/story-1/" in urls or "http://example.com/2026/02/01/story-1" in urls


def test_raw_pages_are_kept_compressed_and_pages_kept_as_gzip_before_still_read(store: TopicStore) -> None:
    page = ("<html><body><p>Ünïcode news, said the minister. " * 400 + "</p></body></html>").encode()
    new, old = store.add_stories(
        [
            NewStory(url="https://news.example.com/new", title="New", text="t", publish_date=None, html=page),
            NewStory(url="https://news.example.com/old", title="Old", text="t", publish_date=None, html=page),
        ],
        source="test",
    ).stories_ids
    with store.engine.begin() as conn:
        kept = conn.execute(
            select(s.downloads.c.content_gz).where(s.downloads.c.stories_id == new)
        ).scalar_one()
        assert len(kept) < len(page) / 10  # compressed, not stored as is
        # a row written by a store before zstd: gzip, as Media Cloud kept it
        conn.execute(
            update(s.downloads).where(s.downloads.c.stories_id == old).values(content_gz=gzip.compress(page))
        )
        assert store.story_html(conn, new) == page
        assert store.story_html(conn, old) == page
    with pytest.raises(ValueError, match="content_gz holds neither zstd nor gzip"):
        decompress_page(b"<html>not compressed</html>")


def _checkpoint_threads() -> int:
    return sum(thread.name == "topicmap-sqlite-checkpoint" for thread in threading.enumerate())


def test_sqlite_log_is_copied_into_the_database_beside_the_commits_not_in_them(tmp_path: Path) -> None:
    """A commit bigger than SQLite's default checkpoint threshold (1,000 pages) used to copy the log into the
    database file before returning (60-80 ms a spider batch). The store's checkpoint thread does it instead, soon
    after, while the store stays open; disposing of the store stops the thread."""
    path = tmp_path / "store.sqlite3"
    threads_before = _checkpoint_threads()
    store = TopicStore.open(f"sqlite:///{path}")
    try:
        assert _checkpoint_threads() == threads_before + 1
        with store.engine.connect() as conn:
            # the commit's own checkpoint only past 10x SQLite's default, should the thread fall behind
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == 10_000
        words = random.Random(15).choices(
            ["minister", "said", "on", "Tuesday", "the", "vote", "ämter"], k=6000
        )
        text = " ".join(words)  # about 40 KB a story, 160 stories: about 6 MB, past 1,000 pages of 4 KiB
        store.add_stories([_story(f"https://big.example.com/{i}", f"Story {i}") for i in range(160)], "test")
        with store.engine.begin() as conn:
            conn.execute(update(s.stories).values(text=text))
        started = time.monotonic()
        while path.stat().st_size < 160 * len(text):  # the text is in the log until a checkpoint copies it
            assert _checkpoint_threads() == threads_before + 1, "the checkpoint thread died"
            assert time.monotonic() - started < 300, "hang guard: no checkpoint in 5 minutes"
            time.sleep(0.05)
    finally:
        store.dispose()
    assert _checkpoint_threads() == threads_before


def test_a_checkpoint_thread_stopped_right_after_it_was_woken_still_stops(tmp_path: Path) -> None:
    """stop() may come just as the thread wakes for a commit (seen in CI: a store's dispose() hung for good).
    The stop is made to land at the worst moment, inside the thread's clearing of the commit signal."""
    checkpointer = WalCheckpointer(str(tmp_path / "store.sqlite3"))
    woken = checkpointer._committed  # the signal the thread is waiting on now

    class StopArrivesAtTheClear(threading.Event):
        def clear(self) -> None:
            checkpointer._stopping.set()  # what stop() does, just before the thread clears the signal
            self.set()
            super().clear()

    checkpointer._committed = StopArrivesAtTheClear()
    woken.set()  # a commit
    checkpointer._thread.join(timeout=120)  # hang guard only: a stopped thread ends at once
    assert not checkpointer._thread.is_alive(), "the checkpoint thread missed its stop"
    checkpointer.stop()


def test_www_and_bare_host_share_one_medium(store: TopicStore) -> None:
    added = store.add_stories(
        [_story("https://www.herald.test/a", "A"), _story("http://herald.test/b", "B")], source="test"
    )
    with store.engine.connect() as conn:
        media_ids = (
            conn.execute(select(s.stories.c.media_id).where(s.stories.c.stories_id.in_(added.stories_ids)))
            .scalars()
            .all()
        )
    assert len(set(media_ids)) == 1
    assert store.table_count(s.media) == 1


def test_duplicate_media_chain_is_followed_and_a_cycle_is_named(store: TopicStore) -> None:
    store.add_stories([_story("https://old.test/a", "A"), _story("https://mid.test/b", "B")], source="test")
    store.add_stories([_story("https://new.test/c", "C")], source="test")
    with store.engine.begin() as conn:
        ids = dict(conn.execute(select(s.media.c.name, s.media.c.media_id)).all())
        conn.execute(
            update(s.media).where(s.media.c.media_id == ids["old.test"]).values(dup_media_id=ids["mid.test"])
        )
        conn.execute(
            update(s.media).where(s.media.c.media_id == ids["mid.test"]).values(dup_media_id=ids["new.test"])
        )
        assert store.media.final_medium(conn, ids["old.test"]) == ids["new.test"]
        conn.execute(
            update(s.media).where(s.media.c.media_id == ids["new.test"]).values(dup_media_id=ids["old.test"])
        )
        with pytest.raises(StoreError, match=r"duplicate-media cycle: media \d+ -> \d+ -> \d+ -> \d+"):
            store.media.final_medium(conn, ids["old.test"])


def test_topic_upsert_and_seed_urls_are_idempotent(store: TopicStore) -> None:
    topic = TopicConfig(name="t1", query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    topics_id = store.upsert_topic(topic)
    assert store.upsert_topic(topic) == topics_id
    rows = [{"url": f"https://example.com/{i}", "source": "csv:test.csv"} for i in range(3)]
    assert store.add_seed_urls(topics_id, rows) == 3
    assert store.add_seed_urls(topics_id, rows) == 0
    assert store.table_count(s.topic_seed_urls, topics_id=topics_id) == 3
    changed = TopicConfig(
        name="t1", query="climate OR carbon", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31)
    )
    assert store.upsert_topic(changed) == topics_id
    assert store.topic_row("t1")["solr_seed_query"] == "climate OR carbon"
    with pytest.raises(StoreError, match="unknown topic 'nope'"):
        store.topic_row("nope")


def test_the_removed_flag_follows_the_topics_file_and_skips_topics_never_seeded(store: TopicStore) -> None:
    for name in ("kept", "back"):
        store.upsert_topic(
            TopicConfig(name=name, query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
        )

    def removed() -> dict[str, bool]:
        return {name: store.topic_row(name)["removed_from_config"] for name in ("kept", "back")}

    # "never" has no row (never seeded): nothing is written for it, nor is it created
    assert store.follow_topics_file(declared=["back"], removed=["kept", "never"]) == ["kept"]
    assert removed() == {"kept": True, "back": False}
    assert store.follow_topics_file(declared=["back"], removed=["kept", "never"]) == []  # the same: no change
    with pytest.raises(StoreError, match="unknown topic 'never'"):
        store.topic_row("never")
    # declared again (unchanged, so not seeded again): the flag is cleared by the same call
    assert store.follow_topics_file(declared=["kept"], removed=["back"]) == ["back", "kept"]
    assert removed() == {"kept": False, "back": True}
    with pytest.raises(ValueError, match="both declared and removed from the topics file: kept"):
        store.follow_topics_file(declared=["kept"], removed=["kept"])


def test_stories_published_between_is_inclusive_of_whole_days(store: TopicStore) -> None:
    store.add_stories(
        [
            NewStory("https://a.test/1", "one", "x", datetime(2026, 1, 31, 23, 59, tzinfo=UTC)),
            NewStory("https://a.test/2", "two", "x", datetime(2026, 2, 1, 0, 0, tzinfo=UTC)),
            NewStory("https://a.test/3", "three", "x", datetime(2026, 2, 28, 23, 59, tzinfo=UTC)),
            NewStory("https://a.test/4", "four", "x", datetime(2026, 3, 1, 0, 0, tzinfo=UTC)),
            NewStory("https://a.test/5", "five", "x", None),
        ],
        source="test",
    )
    found = [
        r["title"] for r in store.iter_stories_published_between(date(2026, 2, 1), date(2026, 2, 28), chunk=1)
    ]
    assert found == ["two", "three"]
    assert all(
        r["publish_date"].tzinfo is not None
        for r in store.iter_stories_published_between(date(2026, 1, 1), date(2026, 3, 31))
    )


def test_opening_a_store_newer_than_the_code_is_refused(store: TopicStore) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            s.schema_version.insert().values(version=s.SCHEMA_VERSION + 1, upgraded_at=datetime.now(UTC))
        )
    with pytest.raises(StoreError, match="newer than this code"):
        store.upgrade()


def test_a_transaction_the_database_cancels_for_a_deadlock_runs_again(pg_schema: tuple[str, str]) -> None:
    # two workers writing one topic can deadlock on PostgreSQL, which cancels one of them: that one runs again
    url, schema = pg_schema
    store = TopicStore.open(url, schema=schema)
    topics = [
        store.upsert_topic(
            TopicConfig(name=name, query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 2, 1))
        )
        for name in ("first", "second")
    ]
    both_hold_one = threading.Barrier(2, timeout=60)
    attempts: list[str] = []

    def lock_in_order(name: str, order: list[int]):  # noqa: ANN202
        def work(conn) -> None:  # noqa: ANN001
            attempts.append(name)
            for position, topics_id in enumerate(order):
                conn.execute(
                    update(s.topics).where(s.topics.c.topics_id == topics_id).values(solr_seed_query=name)
                )
                if position == 0 and attempts.count(name) == 1:
                    both_hold_one.wait()  # the first time, each holds the row the other wants next

        return lambda: store.in_transaction(work)

    threads = [
        threading.Thread(target=lock_in_order("a", topics)),
        threading.Thread(target=lock_in_order("b", topics[::-1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(attempts) in (["a", "a", "b"], ["a", "b", "b"])  # one of them was cancelled and ran again
    with store.engine.connect() as conn:
        values = set(conn.execute(select(s.topics.c.solr_seed_query)).scalars())
    assert len(values) == 1 and values <= {
        "a",
        "b",
    }  # both transactions committed, whole, one after the other
    store.dispose()


def test_a_medium_known_by_its_host_takes_the_first_name_it_meets(store: TopicStore) -> None:
    """A medium created under its host name (a bare-host row, a page without og:site_name) takes the name a
    later story gives (a drop's medium, else the page's og:site_name) and keeps it; a site name is never used
    to find a medium, and a medium with a name keeps it."""
    store.add_stories([_story("http://herald.test/a", "A", medium="herald.test")], source="test")
    store.add_stories([_story("https://www.herald.test/b", "B", medium="The Herald")], source="test")
    store.add_stories([_story("https://www.herald.test/c", "C", medium="Herald Mobile")], source="test")
    blog = NewStory(
        url="https://one.blog.test/x", title="X", text="x", publish_date=None, site_name="Blogger"
    )
    other = NewStory(
        url="https://two.blog.test/y", title="Y", text="y", publish_date=None, site_name="Blogger"
    )
    store.add_stories([blog, other], source="test")
    bare = NewStory(
        url="https://plain.test/z", title="Z", text="z", publish_date=None, site_name="plain.test"
    )
    store.add_stories([bare], source="test")
    with store.engine.connect() as conn:
        names = sorted(conn.execute(select(s.media.c.name)).scalars())
    # one.blog.test and two.blog.test are two media: the second cannot take the name the first has
    assert names == ["Blogger", "The Herald", "plain.test", "two.blog.test"]
    fresh = TopicStore(store.engine)  # another process: the same names, nothing renamed twice
    fresh.add_stories([_story("https://www.herald.test/d", "D", medium="Herald Weekly")], source="test")
    with store.engine.connect() as conn:
        assert sorted(conn.execute(select(s.media.c.name)).scalars()) == names
