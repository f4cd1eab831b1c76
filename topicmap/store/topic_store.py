"""The topic store: SQLAlchemy Core over SQLite (embedded default) or PostgreSQL (production).

One class, ``TopicStore``, owns the engine, the schema upgrade and the writes every stage shares (stories,
topics, seeds; media through ``TopicStore.media``, from ``topicmap.store.media``). Stage-specific reads and
writes live next to their stage (``topicmap.spider.store``, ``topicmap.dedup.store`` ...) and use the helpers
here (``insert_ignore``, ``upsert``), so there is one way to write idempotently.
"""

from __future__ import annotations

import gzip
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import zstandard
from sqlalchemy import (
    Connection,
    Engine,
    Table,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from topicmap.store import schema as s
from topicmap.store.media import MediaResolver

# re-exported (``X as X``): code that opens the store imports everything it needs from this module
from topicmap.store.names import DEFAULT_HOME as DEFAULT_HOME
from topicmap.store.names import StoreError as StoreError
from topicmap.store.names import default_database_url as default_database_url
from topicmap.store.names import normalize_database_url as normalize_database_url
from topicmap.store.names import topicmap_home as topicmap_home
from topicmap.store.sqlite_wal import FALLBACK_AUTOCHECKPOINT_PAGES, WalCheckpointer
from topicmap.store.upgrade import apply_version, lock_for_upgrade, stored_version
from topicmap.web.urls import normalize_url_lossy

if TYPE_CHECKING:  # the store sits below the stages: a topic is only a parameter type here
    from topicmap.topics.declarations import TopicConfig
    from topicmap.web.extract import ExtractedStory

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: PostgreSQL's "deadlock detected" and "could not serialize access": the transaction may simply run again
_RETRYABLE_PGCODES = frozenset({"40P01", "40001"})

#: stories.source of the stories the spider generated (everything else came from an archive drop)
SPIDER_SOURCE = "spider"
CHUNK = 500


def chunks(values: Sequence[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    """``values`` in consecutive lists of at most ``size``: statements and IN lists stay bounded."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


#: zstd level for stored pages: 0.54 ms of CPU per news page for 0.215 of its size, where gzip -6 took 3.18 ms
#: for 0.217 (benchmarks/bench_page_compression.py). The spider compresses every page it keeps beside its
#: extraction, and on a two-core machine that CPU is not free.
PAGE_ZSTD_LEVEL = 3
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"
_zstd = threading.local()  # a zstd context serves one thread at a time: one per thread, made once


def compress_page(html: bytes) -> bytes:
    """A raw page as kept in ``downloads.content_gz``: a zstd frame that records its size (Media Cloud's
    column name is kept; ``decompress_page`` also reads the gzip that stores wrote before)."""
    compressor = getattr(_zstd, "compressor", None)
    if compressor is None:
        compressor = _zstd.compressor = zstandard.ZstdCompressor(level=PAGE_ZSTD_LEVEL)
    return compressor.compress(html)


def decompress_page(blob: bytes) -> bytes:
    """The raw page of a ``downloads.content_gz`` value, zstd or gzip (told apart by their magic numbers)."""
    if blob[:4] == _ZSTD_MAGIC:
        decompressor = getattr(_zstd, "decompressor", None)
        if decompressor is None:
            decompressor = _zstd.decompressor = zstandard.ZstdDecompressor()
        return decompressor.decompress(blob)
    if blob[:2] == _GZIP_MAGIC:
        return gzip.decompress(blob)
    raise ValueError(f"downloads.content_gz holds neither zstd nor gzip (starts with {bytes(blob[:4])!r})")


def utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything in the store is UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def utc_offset_minutes(value: datetime | None) -> int | None:
    """The UTC offset a page wrote its publish date in (minutes), which a timestamptz column drops; None
    for naive or absent dates."""
    if value is None or value.tzinfo is None:
        return None
    offset = value.utcoffset()
    return int(offset.total_seconds() // 60) if offset is not None else None


def now_utc() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class NewStory:
    """A story to add to the archive (or found by the spider)."""

    url: str
    title: str | None
    text: str | None
    publish_date: datetime | None
    medium_name: str | None = None
    #: the name the page gives its site (og:site_name): names a medium known only by its host, never looked up
    site_name: str | None = None
    description: str | None = None
    language: str | None = None
    guid: str | None = None
    collect_date: datetime | None = None
    date_guess_method: str | None = None
    #: did the page give a time of day / a zone with its date (None: unknown)
    publish_time_known: bool | None = None
    publish_zone_known: bool | None = None
    #: how the title and the language were found (``ExtractedStory.title_method`` / ``language_method``)
    title_method: str | None = None
    language_method: str | None = None
    #: the raw page, kept (zstd, ``compress_page``) for link mining and WARC export
    html: bytes | None = None
    #: ``compress_page(html)`` when the caller already has it, in place of ``html`` (the spider compresses
    #: beside its extraction, and a write batch then holds compressed pages only: up to 200 of them)
    html_gz: bytes | None = None
    encoding: str | None = None
    http_status: int | None = None

    @classmethod
    def from_extracted(cls, url: str, extracted: ExtractedStory, **fields: Any) -> NewStory:
        """The story a page's extraction describes, with how its title, date and language were found: the one
        way the spider, the Common Crawl loader and the drops turn an extracted page into a story, so every
        source records the same facts. ``fields``: the page's own (html, encoding, collect_date, ...), which
        win over the extraction's (a drop's cleaned title, say)."""
        found = {
            "title": extracted.title,
            "text": extracted.text,
            "publish_date": extracted.publish_date,
            "description": extracted.description,
            "language": extracted.language,
            "date_guess_method": extracted.date_method,
            "publish_time_known": extracted.date_time_known,
            "publish_zone_known": extracted.date_zone_known,
            "title_method": extracted.title_method,
            "language_method": extracted.language_method,
            "site_name": extracted.site_name,
        }
        return cls(url=url, **{**found, **fields})


@dataclass
class AddStoriesResult:
    stories_ids: list[int]
    created: int
    existing: int


class TopicStore:
    """The relational topic store. Create with ``TopicStore.open()``; it upgrades the schema in place."""

    def __init__(self, engine: Engine, checkpointer: WalCheckpointer | None = None) -> None:
        self.engine = engine
        self._checkpointer = checkpointer  # SQLite: WAL checkpoints off the committing thread
        self.dialect = engine.dialect.name
        # INSERT ... ON CONFLICT statements by (table, keys, update): built once, so SQLAlchemy's
        # compiled-statement cache is hit without recomputing the statement's cache key on every call.
        self._statements: dict[tuple, Any] = {}
        # Whether `stories` has the schema-6 reading columns (a store opened without upgrading may not).
        self._has_reading_columns: bool | None = None
        self._has_date_certainty: bool | None = None
        self.media = MediaResolver(self.insert_ignore)

    # ------------------------------------------------------------------ opening and upgrading

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        schema: str | None = None,
        upgrade: bool = True,
        home: Path | None = None,
    ) -> TopicStore:
        """Open (and by default upgrade) the store at ``url`` (default: TOPICMAP_DATABASE_URL or SQLite).

        ``schema`` puts every table in one PostgreSQL schema (created if missing): tests give each run its
        own, so repeated and concurrent runs never collide.
        """
        url = normalize_database_url(url) if url else default_database_url(home)
        kwargs: dict[str, Any] = {"future": True}
        if url.startswith("postgresql"):
            kwargs["pool_pre_ping"] = True
            if schema:
                kwargs["connect_args"] = {"options": f"-csearch_path={schema}"}
        engine = create_engine(url, **kwargs)
        checkpointer = None
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
            checkpointer = WalCheckpointer.for_engine(engine)
        elif schema:
            with engine.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        store = cls(engine, checkpointer)
        if upgrade:
            store.upgrade()
        return store

    def in_transaction(self, work: Callable[[Connection], _T], attempts: int = 4) -> _T:
        """``work`` in one transaction, run again from the start when the database aborted it for a deadlock
        or a serialization failure: workers writing one topic at once (links pointed at stories, a finish step
        beside another worker's batch) can deadlock on PostgreSQL, which then cancels one of the transactions,
        and a retry is the documented answer. ``work`` must only write through ``conn``."""
        for attempt in range(1, attempts + 1):
            try:
                with self.engine.begin() as conn:
                    return work(conn)
            except Exception as exc:
                self.media.forget()
                code = getattr(getattr(exc, "orig", None), "pgcode", None)
                if not isinstance(exc, DBAPIError) or code not in _RETRYABLE_PGCODES or attempt == attempts:
                    raise
                log.info("transaction aborted (%s), attempt %d of %d", code, attempt, attempts)
                time.sleep(random.uniform(0.01, 0.05) * attempt)  # apart, so the two do not meet again
        raise AssertionError("unreachable")

    def version(self) -> int:
        with self.engine.connect() as conn:
            return stored_version(conn)

    def upgrade(self, target: int = s.SCHEMA_VERSION) -> int:
        """Bring the schema to ``target``, one version at a time, each in its own transaction."""
        if target > s.SCHEMA_VERSION:
            raise StoreError(f"schema version {target} is newer than this code knows ({s.SCHEMA_VERSION})")
        with self.engine.begin() as conn:
            lock_for_upgrade(conn)
            current = stored_version(conn)
            if current > s.SCHEMA_VERSION:
                raise StoreError(
                    f"the store is at schema version {current}, newer than this code ({s.SCHEMA_VERSION}): "
                    "upgrade topicmap"
                )
            for version in range(current + 1, target + 1):
                apply_version(conn, version, upgraded_at=now_utc())
                log.info("topic store upgraded to schema version %d", version)
        self._has_reading_columns = None
        self._has_date_certainty = None
        return max(current, target)

    # ------------------------------------------------------------------ idempotent writes

    def _on_conflict(self, table: Table, keys: Sequence[str], update: Sequence[str] = ()) -> Any:
        """INSERT into ``table`` that skips rows clashing on ``keys`` (or overwrites their ``update``
        columns)."""
        cache_key = (table.fullname, tuple(keys), tuple(update))
        stmt = self._statements.get(cache_key)
        if stmt is None:
            stmt = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)
            if update:
                stmt = stmt.on_conflict_do_update(
                    index_elements=list(keys), set_={c: getattr(stmt.excluded, c) for c in update}
                )
            else:
                stmt = stmt.on_conflict_do_nothing(index_elements=list(keys))
            self._statements[cache_key] = stmt
        return stmt

    def insert_ignore(self, conn: Connection, table: Table, rows: Sequence[dict], keys: Sequence[str]) -> int:
        """Insert rows, skipping those whose unique ``keys`` already exist. Returns rows inserted."""
        if not rows:
            return 0
        stmt = self._on_conflict(table, keys)
        inserted = 0
        for chunk in chunks(rows):
            result = conn.execute(stmt, chunk)
            inserted += max(result.rowcount or 0, 0)
        return inserted

    def insert_ignore_returning_tuples(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        keys: Sequence[str],
        returning: Sequence[str],
    ) -> list[tuple]:
        """``insert_ignore`` that hands back the ``returning`` columns of the rows it inserted (not of those
        skipped), for many small rows given as tuples in ``columns`` order: one multi-row
        ``INSERT ... VALUES (...), (...) ON CONFLICT DO NOTHING RETURNING`` per chunk, written here. SQLAlchemy's
        executemany builds and processes a parameter dict per row (~5 us a row in Python); the spider claims
        ~50 sentences a page with this, where those dicts cost more than SQLite's own inserts."""
        if not rows:
            return []
        dialect = conn.dialect
        processors = [
            (index, processor)
            for index, name in enumerate(columns)
            if (processor := table.c[name].type.bind_processor(dialect)) is not None
        ]
        quote = dialect.identifier_preparer.quote
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        row_sql = "(" + ", ".join([mark] * len(columns)) + ")"
        head = (
            f"INSERT INTO {dialect.identifier_preparer.format_table(table)} "
            f"({', '.join(map(quote, columns))}) VALUES "
        )
        tail = (
            f" ON CONFLICT ({', '.join(map(quote, keys))}) DO NOTHING "
            f"RETURNING {', '.join(map(quote, returning))}"
        )
        inserted: list[tuple] = []
        for chunk in chunks(rows):
            params: list[Any] = []
            if processors:
                for row in chunk:
                    values = list(row)
                    for index, processor in processors:
                        values[index] = processor(values[index])
                    params += values
            else:
                for row in chunk:
                    params += row
            sql = head + ", ".join([row_sql] * len(chunk)) + tail
            inserted += map(tuple, conn.exec_driver_sql(sql, tuple(params)))
        return inserted

    def upsert(
        self,
        conn: Connection,
        table: Table,
        rows: Sequence[dict],
        keys: Sequence[str],
        update_columns: Sequence[str],
    ) -> None:
        """Insert rows or, on a unique-key clash, overwrite ``update_columns`` with the new values."""
        if not rows:
            return
        stmt = self._on_conflict(table, keys, update=update_columns)
        for chunk in chunks(rows):
            conn.execute(stmt, chunk)

    # ------------------------------------------------------------------ stories

    def add_stories(self, stories: Iterable[NewStory], source: str) -> AddStoriesResult:
        """Add stories idempotently: a story is known by (medium, guid); its URL forms go to story_urls."""
        ids: list[int] = []
        created = existing = 0
        batch: list[NewStory] = []
        for story in stories:
            batch.append(story)
            if len(batch) >= CHUNK:
                r = self._add_story_batch(batch, source)
                ids += r.stories_ids
                created += r.created
                existing += r.existing
                batch = []
        if batch:
            r = self._add_story_batch(batch, source)
            ids += r.stories_ids
            created += r.created
            existing += r.existing
        return AddStoriesResult(ids, created, existing)

    def _add_story_batch(self, batch: list[NewStory], source: str) -> AddStoriesResult:
        with self.engine.begin() as conn:
            return self.insert_stories(conn, batch, source)

    def _reading_columns(self, conn: Connection) -> bool:
        """Does `stories` have the schema-6 columns (title_method, language_method, publish_utc_offset)?"""
        if self._has_reading_columns is None:
            names = {column["name"] for column in inspect(conn).get_columns("stories")}
            self._has_reading_columns = {"title_method", "language_method", "publish_utc_offset"} <= names
        return self._has_reading_columns

    def _date_certainty_columns(self, conn: Connection) -> bool:
        """Does `stories` have the schema-15 columns (publish_time_known, publish_zone_known)?"""
        if self._has_date_certainty is None:
            names = {column["name"] for column in inspect(conn).get_columns("stories")}
            self._has_date_certainty = {"publish_time_known", "publish_zone_known"} <= names
        return self._has_date_certainty

    def insert_stories(self, conn: Connection, batch: Sequence[NewStory], source: str) -> AddStoriesResult:
        """``add_stories`` inside the caller's transaction (the spider writes a batch of URLs at once)."""
        st = s.stories
        now = now_utc()
        rows = []
        for story in batch:
            media_id = self.media.medium_for_url(conn, story.url, story.medium_name, story.site_name)
            rows.append(
                {
                    "media_id": media_id,
                    "url": s.checked_url(story.url),
                    "guid": s.checked_url(story.guid or story.url, "guid"),
                    "title": (story.title or "").replace("\x00", "") or None,
                    "description": story.description,
                    "text": (story.text or "").replace("\x00", ""),
                    "publish_date": utc(story.publish_date),
                    "collect_date": utc(story.collect_date) or now,
                    "language": story.language,
                    "source": source[:256],
                    "date_guess_method": (story.date_guess_method or "")[:64] or None,
                }
            )
            if self._reading_columns(conn):
                rows[-1].update(
                    title_method=(story.title_method or "")[:64] or None,
                    language_method=(story.language_method or "")[:32] or None,
                    publish_utc_offset=utc_offset_minutes(story.publish_date),
                )
            if self._date_certainty_columns(conn):
                known = story.publish_date is not None
                rows[-1].update(
                    publish_time_known=story.publish_time_known if known else None,
                    publish_zone_known=story.publish_zone_known if known else None,
                )
        created = self.insert_ignore(conn, st, rows, ["media_id", "guid"])
        # one indexed lookup per CHUNK guids instead of one per story
        ids_by_key: dict[tuple[int, str], int] = {}
        keys = sorted({(row["media_id"], row["guid"]) for row in rows})
        for chunk in chunks(keys):
            wanted = tuple_(st.c.media_id, st.c.guid).in_(chunk)
            for found in conn.execute(select(st.c.stories_id, st.c.media_id, st.c.guid).where(wanted)):
                ids_by_key[(found.media_id, found.guid)] = int(found.stories_id)
        ids = []
        url_rows = []
        download_rows = []
        for story, row in zip(batch, rows, strict=True):
            stories_id = ids_by_key[(row["media_id"], row["guid"])]
            ids.append(stories_id)
            for url in {row["url"], row["guid"], normalize_url_lossy(row["url"]) or row["url"]}:
                if s.url_fits(url):  # a lookup alias: one that does not fit is not kept, never cut
                    url_rows.append({"stories_id": stories_id, "url": url})
            page_gz = story.html_gz
            if page_gz is None and story.html:
                page_gz = compress_page(story.html)
            if page_gz:
                download_rows.append(
                    {
                        "stories_id": stories_id,
                        "url": row["url"],
                        "http_status": story.http_status,
                        "encoding": story.encoding,
                        "content_gz": page_gz,
                        "download_date": row["collect_date"],
                    }
                )
        self.insert_ignore(conn, s.story_urls, url_rows, ["stories_id", "url"])
        self.insert_ignore(conn, s.downloads, download_rows, ["stories_id"])
        return AddStoriesResult(ids, created, len(batch) - created)

    def story_html(self, conn: Connection, stories_id: int) -> bytes | None:
        content = conn.execute(
            select(s.downloads.c.content_gz).where(s.downloads.c.stories_id == stories_id)
        ).scalar_one_or_none()
        return decompress_page(content) if content is not None else None

    def story_count(self, archive_only: bool = False) -> int:
        """All stories, or only the archive's (not those the spider found)."""
        query = select(func.count()).select_from(s.stories)
        if archive_only:
            query = query.where(s.stories.c.source != SPIDER_SOURCE)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def iter_stories_published_between(
        self, start: date, end: date, chunk: int = 2000, after_id: int = 0, through_id: int | None = None
    ) -> Iterator[dict]:
        """Archive stories whose publish date falls in [start, end] (whole days, UTC), in stories_id order; only
        those with ``after_id < stories_id <= through_id`` when given (a topic re-seeded for new stories).

        Stories the spider found are not part of the archive: seeding a topic again must not pick up what
        spidering (this or another topic's) added, or seeds would depend on the order topics ran in."""
        st = s.stories
        lo = datetime(start.year, start.month, start.day, tzinfo=UTC)
        hi = datetime(end.year, end.month, end.day, tzinfo=UTC)
        hi = hi + timedelta(days=1)
        last = after_id
        while True:
            with self.engine.connect() as conn:
                rows = (
                    conn.execute(
                        select(
                            st.c.stories_id,
                            st.c.url,
                            st.c.title,
                            st.c.text,
                            st.c.description,
                            st.c.publish_date,
                        )
                        .where(
                            st.c.publish_date >= lo,
                            st.c.publish_date < hi,
                            st.c.stories_id > last,
                            st.c.source != SPIDER_SOURCE,
                            *([] if through_id is None else [st.c.stories_id <= through_id]),
                        )
                        .order_by(st.c.stories_id)
                        .limit(chunk)
                    )
                    .mappings()
                    .all()
                )
            if not rows:
                return
            for row in rows:
                out = dict(row)
                out["publish_date"] = utc(out["publish_date"])
                yield out
            last = rows[-1]["stories_id"]

    # ------------------------------------------------------------------ topics

    def upsert_topic(self, topic: TopicConfig) -> int:
        """Register or update a topic from its declaration; returns topics_id."""
        row = {
            "name": topic.name,
            "solr_seed_query": topic.query,
            "start_date": topic.start_date,
            # an open-ended topic's dates reach the day it was last seeded or spidered (snapshots read them here)
            "end_date": topic.last_day(),
            "max_iterations": topic.max_iterations,
            "max_stories": topic.max_stories,
            "config_json": topic.to_json(),
            "removed_from_config": False,
            "updated_at": now_utc(),
        }
        with self.engine.begin() as conn:
            self.upsert(conn, s.topics, [row], ["name"], [k for k in row if k != "name"])
            return int(
                conn.execute(select(s.topics.c.topics_id).where(s.topics.c.name == topic.name)).scalar_one()
            )

    def topic_row(self, name: str) -> dict:
        with self.engine.connect() as conn:
            row = conn.execute(select(s.topics).where(s.topics.c.name == name)).mappings().first()
        if row is None:
            raise StoreError(f"unknown topic {name!r}: materialize its seeds first")
        return dict(row)

    def set_topic_state(self, topics_id: int, state: str, message: str | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(s.topics).where(s.topics.c.topics_id == topics_id).values(state=state, message=message)
            )

    def follow_topics_file(self, declared: Iterable[str], removed: Iterable[str]) -> list[str]:
        """Keep ``topics.removed_from_config`` to the topics file: False for the ``declared`` topics, True for the
        ``removed`` ones (no longer declared, their data kept), which the snapshot automation then leaves alone.
        Returns the names whose flag changed. A name without a topic row (never seeded) is skipped, and the same
        call again changes nothing: the flags are read first, so a tick with nothing to change writes nothing."""
        wanted = dict.fromkeys(declared, False)
        gone = set(removed)
        if both := gone & wanted.keys():
            raise ValueError(
                f"topics both declared and removed from the topics file: {', '.join(sorted(both))}"
            )
        wanted |= dict.fromkeys(gone, True)
        t = s.topics
        with self.engine.connect() as conn:
            stored = {
                row.name: bool(row.removed_from_config)
                for part in chunks(sorted(wanted))
                for row in conn.execute(select(t.c.name, t.c.removed_from_config).where(t.c.name.in_(part)))
            }
        changed = sorted(name for name, flag in stored.items() if flag != wanted[name])
        if not changed:
            return []

        def write(conn: Connection) -> None:
            for flag in (True, False):
                for part in chunks([name for name in changed if wanted[name] is flag]):
                    conn.execute(update(t).where(t.c.name.in_(part)).values(removed_from_config=flag))

        self.in_transaction(write)
        return changed

    # ------------------------------------------------------------------ seeds

    def add_seed_urls(self, topics_id: int, rows: Sequence[dict]) -> int:
        """Insert seed URLs (keys: url, source, optional stories_id/publish_date/title/assume_match, and for a URL
        shared in posts topic_seed_queries_id/topic_post_urls_id); returns the number of new rows.

        ``assume_match`` (default false): the URL's story joins the topic without being judged by the query
        (a seed list's flag in topics.yaml). A URL already stored keeps its row (source, story, whether the
        spider imported it) but takes the flag the rows give it now, true when any of them says so: a seed
        list whose flag was changed in the file changes its stored seeds, and the same rows given again change
        nothing."""
        clean = [
            {
                "topics_id": topics_id,
                "url": s.checked_url(r["url"], "seed url"),
                "source": r["source"][:512],
                "stories_id": r.get("stories_id"),
                "publish_date": utc(r.get("publish_date")),
                "title": r.get("title"),
                "assume_match": bool(r.get("assume_match", False)),
                "topic_seed_queries_id": r.get("topic_seed_queries_id"),
                "topic_post_urls_id": r.get("topic_post_urls_id"),
            }
            for r in rows
        ]
        assumed: dict[str, bool] = {}
        for row in clean:
            assumed[row["url"]] = assumed.get(row["url"], False) or row["assume_match"]
        seeds = s.topic_seed_urls
        with self.engine.begin() as conn:
            inserted = self.insert_ignore(conn, seeds, clean, ["topics_id", "url"])
            for flag in (True, False):
                # only rows whose flag differs are written: a repeated call updates nothing
                urls = [url for url, assume in assumed.items() if assume is flag]
                for chunk in chunks(urls):
                    conn.execute(
                        update(seeds)
                        .where(
                            seeds.c.topics_id == topics_id,
                            seeds.c.url.in_(chunk),
                            seeds.c.assume_match.is_not(flag),
                        )
                        .values(assume_match=flag)
                    )
            return inserted

    def seed_rows(self, topics_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(s.topic_seed_urls)
                .where(s.topic_seed_urls.c.topics_id == topics_id)
                .order_by(s.topic_seed_urls.c.topic_seed_urls_id)
            ).mappings()
            return [dict(r) for r in rows]

    def table_count(self, table: Table, **where: Any) -> int:
        query = select(func.count()).select_from(table)
        for column, value in where.items():
            query = query.where(table.c[column] == value)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def dispose(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        self.engine.dispose()


#: the most page cache one SQLite connection of the store keeps (KiB)
SQLITE_CACHE_KIB = 32 * 1024


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside the one writer; the busy timeout makes concurrent processes wait, not fail.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # checkpoints run in WalCheckpointer's thread; SQLite's own, on commit, only if that one falls behind
    cursor.execute(f"PRAGMA wal_autocheckpoint={FALLBACK_AUTOCHECKPOINT_PAGES}")
    # SQLite's default page cache (2 MiB) thrashes once a table's indexes outgrow it: a million-row load then
    # costs more per row than a small one. The cache grows only as pages are read, up to this many KiB.
    cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    cursor.close()
