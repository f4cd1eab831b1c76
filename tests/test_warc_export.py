"""A topic exported as story-indexer WARC: the metadata Media Cloud's story-indexer documents, every field, null
where unknown; files rotate at a set number of stories (5,000 by default); the files read back as the same stories."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from topicmap.archive import warc_export
from topicmap.archive.drops import parse_drop
from topicmap.archive.warc_export import STORIES_PER_FILE, count_archived_stories, export_topic_warc
from topicmap.archive.warc_stories import StoryRecord, read_story_archive
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

# the fields story-indexer's metadata documentation lists for each sub-object
RSS_ENTRY = {
    "link",
    "title",
    "domain",
    "pub_date",
    "fetch_date",
    "source_url",
    "source_feed_id",
    "source_source_id",
    "via",
}
HTTP_METADATA = {"response_code", "fetch_timestamp", "final_url", "encoding"}
CONTENT_METADATA = {
    "url",
    "canonical_domain",
    "publication_date",
    "language",
    "article_title",
    "text_content",
    "parsed_date",
}
PARSED_DATE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$")


def page(n: int) -> bytes:
    return (
        f"<html><head><title>Story {n}</title></head><body><article><p>Climate story number {n}, "
        f"with its own text.</p></article></body></html>"
    ).encode()


def build_topic(store: TopicStore) -> dict[str, int]:
    """Seven stories with pages (one without a date or language, one found through another's link) and one
    archive row without a page."""
    topics_id = store.upsert_topic(
        TopicConfig(name="export", query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    )
    stories = [
        NewStory(
            f"https://www.herald.test/2026/02/{n:02d}/story-{n}",
            f"Story {n}",
            f"Climate story number {n}, with its own text.",
            datetime(2026, 2, n, 9, 30, tzinfo=UTC),
            language="en",
            html=page(n),
            encoding="utf-8",
            http_status=200,
        )
        for n in range(1, 7)
    ]
    stories.append(
        NewStory("https://ledger.test/undated", "Undated", "Climate, no date.", None, html=page(7))
    )
    stories.append(NewStory("https://ledger.test/no-page", "No page", "Climate without a page.", None))
    ids = store.add_stories(stories, source="archive:drop.csv").stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [
                {
                    "topics_id": topics_id,
                    "stories_id": i,
                    "iteration": 0 if n < 6 else 1,
                    "added_at": now_utc(),
                }
                for n, i in enumerate(ids)
            ],
            ["topics_id", "stories_id"],
        )
        # story 7 (index 6) was found through a link on story 2 (index 1)
        store.insert_ignore(
            conn,
            s.topic_links,
            [{"topics_id": topics_id, "stories_id": ids[1], "url": stories[6].url, "ref_stories_id": ids[6]}],
            ["topics_id", "stories_id", "url"],
        )
    return {"topics_id": topics_id, "linker": ids[1], "linked": ids[6]}


def test_export_carries_seed_002_metadata_rotates_and_reads_back_the_same_stories(
    store: TopicStore, tmp_path: Path
) -> None:
    built = build_topic(store)
    export = export_topic_warc(store, "export", tmp_path, stories_per_file=3)
    assert (export.stories_written, export.stories_without_page) == (7, 1)
    assert [len(list(read_story_archive(path))) for path in export.files] == [3, 3, 1]
    assert [path.name.split("-")[2] for path in export.files] == ["0", "1", "2"]  # <topic>-<stamp>-<serial>-
    assert count_archived_stories(export.files) == 7

    records = [record for path in export.files for record in read_story_archive(path)]
    with store.engine.connect() as conn:
        stored = {
            row.stories_id: row
            for row in conn.execute(
                s.stories.select().where(
                    s.stories.c.stories_id.in_([r.metadata["topicmap"]["stories_id"] for r in records])
                )
            )
        }
    for record in records:
        story = stored[record.metadata["topicmap"]["stories_id"]]
        rss, http, content = (
            record.metadata[key] for key in ("rss_entry", "http_metadata", "content_metadata")
        )
        assert set(rss) == RSS_ENTRY and set(http) >= HTTP_METADATA and set(content) >= CONTENT_METADATA
        # the same story: URL, page, title, text, date, language
        assert record.url == story.url == content["url"] == http["final_url"] == rss["link"]
        number = 7 if story.title == "Undated" else int(story.title.split()[-1])
        assert record.html == page(number)
        assert content["article_title"] == rss["title"] == story.title
        assert content["text_content"] == story.text
        assert content["language"] == story.language
        assert rss["domain"] == content["canonical_domain"]
        assert rss["source_feed_id"] is None and rss["source_source_id"] is None  # no feeds: unknown
        assert "topic export, iteration" in rss["via"] and "archive:drop.csv" in rss["via"]
        assert PARSED_DATE.match(content["parsed_date"])
        assert re.match(r"^\d{4}-\d{2}-\d{2}$", rss["fetch_date"])
        assert http["response_code"] == 200 and isinstance(http["fetch_timestamp"], float)
        if story.publish_date is None:
            assert (
                rss["pub_date"] is None
                and content["publication_date"] is None
                and content["language"] is None
            )
        else:
            published = (
                story.publish_date.replace(tzinfo=UTC)
                if story.publish_date.tzinfo is None
                else story.publish_date
            )
            assert parsedate_to_datetime(rss["pub_date"]) == published  # RFC 2822, to the second
            assert content["publication_date"] == published.date().isoformat()
        linked = record.metadata["topicmap"]["stories_id"] == built["linked"]
        assert rss["source_url"] == (stored[built["linker"]].url if linked else None)

    # and loaded back as a drop, the same stories again
    loaded = [story for path in export.files for story in parse_drop(path).stories]
    assert sorted(
        (st.url, st.title, st.text, st.publish_date and st.publish_date.date()) for st in loaded
    ) == sorted(
        (row.url, row.title, row.text, row.publish_date and row.publish_date.date())
        for row in stored.values()
    )


def test_the_default_rotation_is_5000_stories_per_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # story-indexer's metadata documentation: "no more than 5000 stories" per file
    assert STORIES_PER_FILE == 5000
    html = b"<html><body><p>A generated story.</p></body></html>"

    def generated(_store: object, _topic: str, _topics_id: int):  # noqa: ANN202
        for n in range(STORIES_PER_FILE + 1):
            yield StoryRecord(
                url=f"https://gen.test/{n}",
                html=html,
                fetch_date=datetime(2026, 2, 1, tzinfo=UTC),
                metadata={"content_metadata": {"article_title": f"Generated {n}"}},
            )

    class OneTopic:
        def topic_row(self, name: str) -> dict:
            return {"topics_id": 1}

    monkeypatch.setattr(warc_export, "_topic_story_records", generated)
    export = export_topic_warc(OneTopic(), "gen", tmp_path)  # type: ignore[arg-type]
    urls = [[story.url for story in read_story_archive(path)] for path in export.files]
    assert [len(u) for u in urls] == [5000, 1] and urls[1] == ["https://gen.test/5000"]


def test_the_asset_exports_and_checks_the_read_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dagster as dg

    from assets.warc_export import story_warc_archive
    from resources.store import TopicStoreResource

    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    db = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    store = TopicStore.open(db)
    build_topic(store)
    store.dispose()
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["export"])
    result = dg.materialize(
        [story_warc_archive],
        partition_key="export",
        instance=instance,
        resources={"store": TopicStoreResource(database_url=db)},
    )
    meta = result.asset_materializations_for_node("story_warc_archive")[0].metadata
    assert meta["dagster/row_count"].value == 7 and meta["stories_without_page"].value == 1
    assert meta["stories_per_file"].value == 5000
    (path,) = meta["files"].value
    assert Path(path).is_relative_to(tmp_path / "home" / "exports" / "warc" / "export")
    assert count_archived_stories([Path(path)]) == 7
