"""A topic's stories written out as WARC in Media Cloud's story-indexer layout, and read back to check.

Each story becomes a ``response`` record (its stored page) and a ``metadata`` record with the
story-indexer JSON (``rss_entry``, ``http_metadata``, ``content_metadata``), so Media Cloud's own tools and
any WARC reader can load a topic. Stories without a stored page (archive rows that came without HTML) are
counted and skipped: story-indexer's writer refuses them too (``no-html``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from topicmap.archive.warc import StoryArchiveWriter, StoryRecord, read_story_archive
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, decompress_page, utc
from topicmap.web.urls import distinctive_domain, normalize_url

STORIES_PER_FILE = 5000


@dataclass
class WarcExport:
    files: list[Path]
    stories_written: int
    stories_without_page: int


def _topic_story_records(store: TopicStore, topics_id: int) -> Iterator[StoryRecord | None]:
    st, ts, dl, media = s.stories, s.topic_stories, s.downloads, s.media
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(
                st.c.stories_id,
                st.c.url,
                st.c.title,
                st.c.text,
                st.c.publish_date,
                st.c.language,
                media.c.name.label("medium"),
                dl.c.content_gz,
                dl.c.http_status,
                dl.c.encoding,
                dl.c.download_date,
            )
            .join(ts, ts.c.stories_id == st.c.stories_id)
            .join(media, media.c.media_id == st.c.media_id)
            .outerjoin(dl, dl.c.stories_id == st.c.stories_id)
            .where(ts.c.topics_id == topics_id)
            .order_by(st.c.stories_id)
        )
        for row in rows:
            if row.content_gz is None:
                yield None
                continue
            published = utc(row.publish_date)
            yield StoryRecord(
                url=row.url,
                html=decompress_page(row.content_gz),
                http_status=row.http_status or 200,
                encoding=row.encoding,
                fetch_date=utc(row.download_date),
                metadata={
                    "rss_entry": {"link": row.url, "title": row.title, "source": row.medium},
                    "http_metadata": {
                        "response_code": row.http_status or 200,
                        "final_url": row.url,
                        "encoding": row.encoding,
                    },
                    "content_metadata": {
                        "url": row.url,
                        "normalized_url": normalize_url(row.url),
                        "canonical_domain": distinctive_domain(row.url),
                        "article_title": row.title,
                        "text_content": row.text,
                        "publication_date": published.date().isoformat() if published else None,
                        "language": row.language,
                    },
                    "topicmap": {"stories_id": row.stories_id, "topics_id": topics_id},
                },
            )


def export_topic_warc(store: TopicStore, topic: str, folder: Path, now: datetime | None = None) -> WarcExport:
    """Write the topic's stories to ``folder`` (``<topic>-<UTC stamp>-<serial>-<host>.warc.gz`` files of at
    most STORIES_PER_FILE stories each; each file appears only when complete)."""
    topics_id = store.topic_row(topic)["topics_id"]
    files: list[Path] = []
    written = skipped = 0
    writer: StoryArchiveWriter | None = None
    try:
        for record in _topic_story_records(store, topics_id):
            if record is None:
                skipped += 1
                continue
            if writer is None:
                writer = StoryArchiveWriter(folder, prefix=topic, serial=len(files), now=now)
            writer.write_story(record)
            written += 1
            if writer.stories_written >= STORIES_PER_FILE:
                files.append(writer.finish())
                writer = None
        if writer is not None:
            files.append(writer.finish())
            writer = None
    finally:
        if writer is not None:
            writer.abort()
    return WarcExport(files, written, skipped)


def count_archived_stories(files: list[Path]) -> int:
    """Stories read back from the files (the export's own check)."""
    return sum(1 for path in files for _ in read_story_archive(path))
