"""A topic's stories (those of its current version) written out as WARC in Media Cloud's story-indexer layout,
and read back to check.

Each story becomes a ``response`` record (its stored page) and a ``metadata`` record with the
story-indexer JSON (``rss_entry``, ``http_metadata``, ``content_metadata``), so Media Cloud's own tools and
any WARC reader can load a topic. Stories without a stored page (archive rows that came without HTML) are
counted and skipped: story-indexer's writer refuses them too (``no-html``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from topicmap.archive.warc_stories import StoryArchiveWriter, StoryRecord, read_story_archive
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, decompress_page, utc
from topicmap.store.version_stories import in_current_version, version_story_ids
from topicmap.web.urls import distinctive_domain, normalize_url

#: story-indexer's metadata documentation: "Media Cloud WARC files should contain no more than 5000 stories"
STORIES_PER_FILE = 5000
#: content_metadata.parsed_date as story-indexer's parser writes it: UTC, microseconds, a space
PARSED_DATE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


@dataclass
class WarcExport:
    files: list[Path]
    stories_written: int
    stories_without_page: int


def story_indexer_metadata(
    *,
    url: str,
    link: str | None,
    title: str | None,
    text: str | None,
    published: datetime | None,
    fetched: datetime | None,
    parsed: datetime | None,
    language: str | None,
    http_status: int,
    encoding: str | None,
    source_url: str | None,
    via: str | None,
) -> dict[str, Any]:
    """The three story-indexer sub-objects with every field its metadata documentation lists, null where
    unknown.

    topicmap has no RSS feeds, so ``source_feed_id`` and ``source_source_id`` (Media Cloud ids of a feed
    and its source) are always null rather than local ids that would read as Media Cloud's. ``source_url``
    is the page the story's URL was found on (a linking topic story, for spidered stories); ``via`` says
    how the story entered the topic, for people, as story-indexer's queuers do.
    """
    domain = distinctive_domain(url)
    return {
        "rss_entry": {
            "link": link or url,
            "title": title,
            "domain": domain,
            "pub_date": format_datetime(published, usegmt=True) if published else None,  # RFC 2822
            "fetch_date": fetched.date().isoformat() if fetched else None,
            "source_url": source_url,
            "source_feed_id": None,
            "source_source_id": None,
            "via": via,
        },
        "http_metadata": {
            "response_code": http_status,
            "fetch_timestamp": fetched.timestamp() if fetched else None,
            "final_url": url,
            "encoding": encoding,
        },
        "content_metadata": {
            "url": url,
            "normalized_url": normalize_url(url),
            "canonical_domain": domain,
            "publication_date": published.date().isoformat() if published else None,
            "language": language,
            "article_title": title,
            "text_content": text,
            "parsed_date": parsed.astimezone(UTC).strftime(PARSED_DATE_FORMAT) if parsed else None,
        },
    }


def _topic_story_records(store: TopicStore, topic: str, topics_id: int) -> Iterator[StoryRecord | None]:
    st, ts, dl, media, tl = s.stories, s.topic_stories, s.downloads, s.media, s.topic_links
    # the first topic story that links to each story: where its URL was found (rss_entry.source_url)
    linking = (
        select(tl.c.ref_stories_id, func.min(tl.c.stories_id).label("linking_stories_id"))
        .where(
            tl.c.topics_id == topics_id,
            tl.c.ref_stories_id.is_not(None),
            tl.c.ref_stories_id != tl.c.stories_id,
            tl.c.stories_id.in_(version_story_ids(topics_id)),
        )
        .group_by(tl.c.ref_stories_id)
        .subquery()
    )
    linker = st.alias("linker")
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(
                st.c.stories_id,
                st.c.url,
                st.c.guid,
                st.c.title,
                st.c.text,
                st.c.publish_date,
                st.c.collect_date,
                st.c.language,
                st.c.source,
                st.c.media_id,
                ts.c.iteration,
                media.c.name.label("medium"),
                dl.c.content_gz,
                dl.c.http_status,
                dl.c.encoding,
                dl.c.download_date,
                linker.c.url.label("source_url"),
            )
            .join(ts, ts.c.stories_id == st.c.stories_id)
            .join(media, media.c.media_id == st.c.media_id)
            .outerjoin(dl, dl.c.stories_id == st.c.stories_id)
            .outerjoin(linking, linking.c.ref_stories_id == st.c.stories_id)
            .outerjoin(linker, linker.c.stories_id == linking.c.linking_stories_id)
            .where(in_current_version(topics_id))
            .order_by(st.c.stories_id)
        )
        for row in rows:
            if row.content_gz is None:
                yield None
                continue
            fetched = utc(row.download_date) or utc(row.collect_date)
            metadata = story_indexer_metadata(
                url=row.url,
                link=row.guid,
                title=row.title,
                text=row.text,
                published=utc(row.publish_date),
                fetched=fetched,
                parsed=utc(row.collect_date),
                language=row.language,
                http_status=row.http_status or 200,
                encoding=row.encoding,
                source_url=row.source_url,
                via=f"topicmap topic {topic}, iteration {row.iteration}, from {row.source}",
            )
            metadata["topicmap"] = {
                "stories_id": row.stories_id,
                "topics_id": topics_id,
                "media_id": row.media_id,
                "medium": row.medium,
                "iteration": row.iteration,
                "source": row.source,
            }
            yield StoryRecord(
                url=row.url,
                html=decompress_page(row.content_gz),
                http_status=row.http_status or 200,
                encoding=row.encoding,
                fetch_date=fetched,
                metadata=metadata,
            )


def export_topic_warc(
    store: TopicStore,
    topic: str,
    folder: Path,
    now: datetime | None = None,
    *,
    stories_per_file: int = STORIES_PER_FILE,
) -> WarcExport:
    """Write the topic's stories to ``folder`` (``<topic>-<UTC stamp>-<serial>-<host>.warc.gz`` files of at
    most `stories_per_file` stories each; each file appears only when complete)."""
    if stories_per_file < 1:
        raise ValueError(f"stories_per_file must be at least 1, not {stories_per_file}")
    topics_id = store.topic_row(topic)["topics_id"]
    files: list[Path] = []
    written = skipped = 0
    writer: StoryArchiveWriter | None = None
    try:
        for record in _topic_story_records(store, topic, topics_id):
            if record is None:
                skipped += 1
                continue
            if writer is None:
                writer = StoryArchiveWriter(folder, prefix=topic, serial=len(files), now=now)
            writer.write_story(record)
            written += 1
            if writer.stories_written >= stories_per_file:
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
