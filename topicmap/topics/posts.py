"""Posts as seeds: a topic's post dumps read, kept, and the URLs they share made seed URLs.

For each source a topic declares (``topicmap.topics.post_sources``), at each seeding of the topic:

1. its row in ``topic_seed_queries`` (platform, path) is found or made;
2. every file (the file, or each file of the folder with the platform's endings, by name) is read
   (``topicmap.topics.post_formats``); a bad row is reported with its line and skipped, a file that cannot be
   read on is reported and the posts before the point where it stopped are kept;
3. a post published outside the topic's dates (UTC days, both ends included, as Media Cloud fetched posts day by
   day) is skipped and counted, and so is one whose content does not match the topic's query (Media Cloud's
   rule; ``match_query: false`` keeps them);
4. the others are stored in ``topic_posts`` (author, channel, publish date, the record as read), once per source
   and post id, and the URLs they share in ``topic_post_urls``;
5. each shared URL is a seed (``topic_seed_urls``, source ``<platform>:<file or folder name>``, with the post
   source's ``topic_seed_queries_id`` and the first ``topic_post_urls_id``), judged by the query when the spider
   fetches it unless the source says ``assume_match: true``.

Reading a file again adds nothing: posts, their URLs and seeds are keyed (source + post id, post + URL, topic +
URL). A folder's new files are read at the topic's next seeding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from sqlalchemy import select, update

from topicmap.archive.drop_rows import ArchiveFileError, RowError
from topicmap.archive.warc import DEFAULT_READ_LIMITS, ReadLimits
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, chunks, now_utc, utc
from topicmap.topics.declarations import TopicConfig
from topicmap.topics.post_formats import POST_FORMATS, Post
from topicmap.topics.post_sources import PostSource

#: posts written per transaction
POST_BATCH = 1000
#: row errors kept per source for the report (all are counted)
MAX_REPORTED_POST_ERRORS = 1000


@dataclass
class PostSourceReport:
    """What reading one post source did."""

    source: str
    platform: str
    path: str
    topic_seed_queries_id: int
    files: int = 0
    posts_read: int = 0
    posts_kept: int = 0
    posts_new: int = 0
    out_of_dates: int = 0
    not_matching: int = 0
    bad_rows: int = 0
    #: files that could not be read (or read on): missing, not a file, over a read limit, broken CSV
    file_errors: int = 0
    #: distinct URLs shared by the posts kept
    urls_found: int = 0
    #: URLs found that cannot be seeds (not http, longer than the store's URLs)
    urls_refused: int = 0
    errors: list[RowError] = field(default_factory=list)

    def report(self, error: RowError) -> None:
        if len(self.errors) < MAX_REPORTED_POST_ERRORS:
            self.errors.append(error)

    def counts(self) -> dict[str, int | str]:
        return {
            "source": self.source,
            "files": self.files,
            "posts_read": self.posts_read,
            "posts_kept": self.posts_kept,
            "posts_new": self.posts_new,
            "out_of_dates": self.out_of_dates,
            "not_matching_query": self.not_matching,
            "bad_rows": self.bad_rows,
            "file_errors": self.file_errors,
            "urls_found": self.urls_found,
            "urls_refused": self.urls_refused,
        }


@dataclass
class PostsImport:
    """The seed rows the topic's posts give (one per URL, first post source first) and a report per source."""

    reports: list[PostSourceReport] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)


def source_name(source: PostSource) -> str:
    """How seeds name the post source they come from: ``reddit:dump.jsonl``."""
    return f"{source.platform}:{source.path.name}"


def source_files(source: PostSource) -> list[Path]:
    """The files of a source: its file, or the files of its folder with the platform's endings, by name (hidden
    files, as a download in progress names itself, are left out). Raises ArchiveFileError when there is none to
    read."""
    path = source.path
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ArchiveFileError(f"{path}: post source not found")
    endings = POST_FORMATS[source.platform].endings
    return sorted(
        child
        for child in path.iterdir()
        if child.is_file() and not child.name.startswith(".") and child.name.lower().endswith(endings)
    )


def _seed_query_id(store: TopicStore, topics_id: int, source: PostSource) -> int:
    tsq = s.topic_seed_queries
    row = {
        "topics_id": topics_id,
        "source": POST_FORMATS[source.platform].source,
        "platform": source.platform,
        "query": str(source.path),
    }
    with store.engine.begin() as conn:
        store.insert_ignore(conn, tsq, [row], ["topics_id", "platform", "query"])
        return int(
            conn.execute(
                select(tsq.c.topic_seed_queries_id).where(
                    tsq.c.topics_id == topics_id,
                    tsq.c.platform == source.platform,
                    tsq.c.query == row["query"],
                )
            ).scalar_one()
        )


class _Batch:
    """Posts waiting to be written, and the seed rows written so far (one per URL)."""

    def __init__(
        self, store: TopicStore, topics_id: int, source: PostSource, report: PostSourceReport
    ) -> None:
        self.store, self.topics_id, self.source, self.report = store, topics_id, source, report
        self.posts: list[Post] = []
        self.seeds: dict[str, dict] = {}

    def add(self, post: Post) -> None:
        self.posts.append(post)
        if len(self.posts) >= POST_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.posts:
            self.report.posts_new += self.store.in_transaction(self._write)
            self.posts = []

    def _write(self, conn) -> int:  # noqa: ANN001 - a Connection (in_transaction's callback)
        tp, tpu = s.topic_posts, s.topic_post_urls
        tsq_id = self.report.topic_seed_queries_id
        rows = [
            {
                "topics_id": self.topics_id,
                "topic_seed_queries_id": tsq_id,
                "post_id": post.post_id,
                "content": post.content,
                "publish_date": post.publish_date,
                "author": post.author,
                "channel": post.channel,
                "url": post.url,
                "data": post.data_json,
            }
            for post in self.posts
        ]
        new = self.store.insert_ignore(conn, tp, rows, ["topic_seed_queries_id", "post_id"])
        ids: dict[str, int] = {}
        for chunk in chunks(sorted({post.post_id for post in self.posts})):
            ids.update(
                conn.execute(
                    select(tp.c.post_id, tp.c.topic_posts_id).where(
                        tp.c.topic_seed_queries_id == tsq_id, tp.c.post_id.in_(chunk)
                    )
                ).all()
            )
        links = {(ids[post.post_id], url) for post in self.posts for url in post.shared_urls}
        self.store.insert_ignore(
            conn,
            tpu,
            [{"topic_posts_id": post, "url": url} for post, url in sorted(links)],
            ["topic_posts_id", "url"],
        )
        for chunk in chunks(sorted({post for post, _ in links})):
            found = conn.execute(
                select(tpu.c.url, tpu.c.topic_post_urls_id)
                .where(tpu.c.topic_posts_id.in_(chunk))
                .order_by(tpu.c.topic_post_urls_id)
            )
            for url, topic_post_urls_id in found:
                if url not in self.seeds:
                    self.seeds[url] = {
                        "url": url,
                        "source": source_name(self.source),
                        "assume_match": self.source.assume_match,
                        "topic_seed_queries_id": tsq_id,
                        "topic_post_urls_id": topic_post_urls_id,
                    }
        return new


def topic_day_bounds(topic: TopicConfig, today: date | None = None) -> tuple[datetime, datetime]:
    """[first instant, end) of the topic's dates as of ``today``, in UTC."""
    start = datetime.combine(topic.start_date, time(), UTC)
    return start, datetime.combine(topic.last_day(today), time(), UTC) + timedelta(days=1)


def _read_source(
    store: TopicStore,
    topics_id: int,
    topic: TopicConfig,
    source: PostSource,
    today: date | None,
    limits: ReadLimits,
) -> tuple[PostSourceReport, list[dict]]:
    report = PostSourceReport(
        source=source_name(source),
        platform=source.platform,
        path=str(source.path),
        topic_seed_queries_id=_seed_query_id(store, topics_id, source),
    )
    lo, hi = topic_day_bounds(topic, today)
    query = topic.parsed_query
    batch = _Batch(store, topics_id, source, report)
    urls: set[str] = set()
    try:
        files = source_files(source)
    except ArchiveFileError as exc:
        report.file_errors += 1
        report.report(RowError(str(source.path), 0, str(exc)))
        files = []
    for path in files:
        report.files += 1
        try:
            for item in POST_FORMATS[source.platform].read(path, limits):
                if isinstance(item, RowError):
                    report.bad_rows += item.rows
                    report.report(item)
                    continue
                report.posts_read += 1
                report.urls_refused += item.refused_urls
                if not lo <= item.publish_date < hi:
                    report.out_of_dates += 1
                    continue
                if source.match_query and not query.matches_story(None, item.content):
                    report.not_matching += 1
                    continue
                report.posts_kept += 1
                urls.update(item.shared_urls)
                batch.add(item)
        except (ArchiveFileError, OSError) as exc:  # the rows before the point of failure are kept
            report.file_errors += 1
            report.report(RowError(str(path), 0, str(exc)))
    batch.flush()
    report.urls_found = len(urls)
    with store.engine.begin() as conn:
        conn.execute(
            update(s.topic_seed_queries)
            .where(s.topic_seed_queries.c.topic_seed_queries_id == report.topic_seed_queries_id)
            .values(imported_date=now_utc())
        )
    return report, list(batch.seeds.values())


def import_posts(
    store: TopicStore,
    topics_id: int,
    topic: TopicConfig,
    today: date | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    progress: Callable[[str], None] | None = None,
) -> PostsImport:
    """Read the topic's post sources into the store; the seed rows their shared URLs give (module doc)."""
    result = PostsImport()
    by_url: dict[str, dict] = {}
    for source in topic.posts:
        report, rows = _read_source(store, topics_id, topic, source, today, limits)
        result.reports.append(report)
        for row in rows:
            earlier = by_url.get(row["url"])
            if earlier is None:
                by_url[row["url"]] = row
                result.rows.append(row)
            elif row["assume_match"]:
                earlier["assume_match"] = True
        if progress:
            progress(
                f"{topic.name}: posts of {report.source}: {report.posts_read} read, {report.posts_kept} kept "
                f"({report.posts_new} new), {report.out_of_dates} out of the topic's dates, {report.not_matching} "
                f"not matching the query, {report.bad_rows} bad rows; {report.urls_found} URLs shared"
            )
    return result


def post_rows(store: TopicStore, topics_id: int) -> Iterator[dict]:
    """The topic's stored posts with the URLs each shares (``urls``), by id."""
    tp, tpu = s.topic_posts, s.topic_post_urls
    with store.engine.connect() as conn:
        posts = [
            dict(row)
            for row in conn.execute(
                select(tp).where(tp.c.topics_id == topics_id).order_by(tp.c.topic_posts_id)
            ).mappings()
        ]
        shared: dict[int, list[str]] = {}
        for chunk in chunks([post["topic_posts_id"] for post in posts]):
            for post_id, url in conn.execute(
                select(tpu.c.topic_posts_id, tpu.c.url)
                .where(tpu.c.topic_posts_id.in_(chunk))
                .order_by(tpu.c.topic_post_urls_id)
            ):
                shared.setdefault(post_id, []).append(url)
    for post in posts:
        post["publish_date"] = utc(post["publish_date"])
        yield {**post, "urls": shared.get(post["topic_posts_id"], [])}
