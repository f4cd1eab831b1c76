"""A Common Crawl news loader done right: an outlet queue any number of workers claim from.

The loader this replaces (a published write-up) kept a SQLite ``queue(url, load_started, load_complete)`` and
a ``content(url, cont)`` table; several loader processes each took "the next outlet", asked Common Crawl's
index for its pages, downloaded and cleaned them (readability, which lost the headline). Here:

* the queue is ``cc_outlet_queue`` (one row per outlet and crawl), claimed atomically: on PostgreSQL with
  ``FOR UPDATE SKIP LOCKED`` (workers never wait on each other), on SQLite with one ``UPDATE ... RETURNING``
  statement (SQLite serializes writers, so two workers cannot claim the same row);
* pages become archive ``stories`` through the spider's extraction (title kept), with their medium, text,
  publish date and language, so topics seed from them like from any drop;
* progress is a cursor (index page, position on the page) moved in the same transaction as the stories of
  each batch: a worker killed by ``kill -9`` loses at most its uncommitted batch, and whoever claims the
  outlet next (itself restarted, or any worker once the lease has run out) carries on from the cursor.
  Stories are keyed by (medium, guid), so a batch written twice adds nothing.
* a worker writes only while it still holds its claim (every batch's UPDATE checks ``claimed_by``): a worker
  that was presumed dead and comes back cannot double-count an outlet another worker took over.

Run workers as processes: ``python -m topicmap.archive.cc_queue --index-url ... --data-url ...`` (the store
comes from ``TOPICMAP_DATABASE_URL``), or through the ``cc_outlet_stories`` asset.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import and_, func, or_, select, update

from topicmap.archive.commoncrawl import (
    Capture,
    CaptureError,
    CdxClient,
    CommonCrawlError,
    CommonCrawlSettings,
    FetchedPage,
    RecordFetcher,
    Rejections,
    StoryRejected,
    guarded_session,
    normalize_domain,
    story_from_page,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc

log = logging.getLogger(__name__)

QUEUED, RUNNING, COMPLETED, ERROR = "queued", "running", "completed", "error"
SOURCE_PREFIX = "commoncrawl:"
T = TypeVar("T")
R = TypeVar("R")


class ClaimLost(RuntimeError):
    """This worker no longer holds the outlet (another worker took it over after the lease ran out)."""


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def enqueue_outlets(store: TopicStore, outlets: Iterable[str], collections: Iterable[str]) -> int:
    """Queue every outlet for every collection (idempotent: a known pair is left as it is). Returns rows added."""
    collections = [c.strip() for c in collections if c.strip()]
    if not collections:
        raise ValueError("no Common Crawl collection configured (e.g. CC-MAIN-2026-05)")
    rows = []
    for outlet in outlets:
        if not outlet.strip():
            continue
        domain = normalize_domain(outlet)
        rows += [{"domain": domain, "collection": c, "state": QUEUED} for c in collections]
    with store.engine.begin() as conn:
        return store.insert_ignore(conn, s.cc_outlet_queue, rows, ["domain", "collection"])


def requeue_errors(store: TopicStore) -> int:
    """Put outlets that ended in error back in the queue (their cursor is kept: they resume)."""
    q = s.cc_outlet_queue
    with store.engine.begin() as conn:
        result = conn.execute(update(q).where(q.c.state == ERROR).values(state=QUEUED, error=None))
        return result.rowcount or 0


def queue_counts(store: TopicStore) -> dict[str, int]:
    q = s.cc_outlet_queue
    with store.engine.connect() as conn:
        rows = conn.execute(select(q.c.state, func.count()).group_by(q.c.state)).all()
    return {state: int(count) for state, count in rows}


def queue_rows(store: TopicStore) -> list[dict[str, Any]]:
    q = s.cc_outlet_queue
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(q).order_by(q.c.cc_outlet_queue_id)).mappings()]


@dataclass
class OutletJob:
    id: int
    domain: str
    collection: str
    pages_total: int | None
    next_page: int
    next_capture: int


def claim_outlet(
    store: TopicStore, worker_id: str, lease_seconds: float, resume_own: bool = False, breadth: bool = False
) -> OutletJob | None:
    """Claim the next outlet: with ``resume_own``, first one this worker id still holds (a restarted worker
    resumes its own), then a queued one, then a running one whose holder has not written for
    ``lease_seconds`` (presumed killed). In queue order; with ``breadth``, the outlets with the fewest index
    pages loaded first (every outlet's first page before any outlet's second)."""
    q = s.cc_outlet_queue
    now = now_utc()
    stale = now - timedelta(seconds=lease_seconds)
    abandoned = q.c.heartbeat_at < stale
    if resume_own:
        abandoned = or_(q.c.claimed_by == worker_id, abandoned)
    claimable = or_(q.c.state == QUEUED, and_(q.c.state == RUNNING, abandoned))
    # own rows first, then queue order
    order = [
        (q.c.claimed_by == worker_id).desc(),
        *([q.c.next_page] if breadth else []),
        q.c.cc_outlet_queue_id,
    ]
    candidate = select(q.c.cc_outlet_queue_id).where(claimable).order_by(*order).limit(1)
    if store.dialect == "postgresql":
        candidate = candidate.with_for_update(skip_locked=True)
    # One statement: SQLite takes its write lock before reading the subquery, PostgreSQL locks the row it
    # picked and skips rows other workers are claiming. Either way no two workers get the same outlet.
    stmt = (
        update(q)
        .where(q.c.cc_outlet_queue_id == candidate.scalar_subquery())
        .where(claimable)
        .values(
            state=RUNNING,
            claimed_by=worker_id,
            claimed_at=now,
            heartbeat_at=now,
            started_at=func.coalesce(q.c.started_at, now),
            attempts=q.c.attempts + 1,
            error=None,
        )
        .returning(
            q.c.cc_outlet_queue_id,
            q.c.domain,
            q.c.collection,
            q.c.pages_total,
            q.c.next_page,
            q.c.next_capture,
        )
    )
    with store.engine.begin() as conn:
        row = conn.execute(stmt).first()
    if row is None:
        return None
    return OutletJob(
        id=row.cc_outlet_queue_id,
        domain=row.domain,
        collection=row.collection,
        pages_total=row.pages_total,
        next_page=row.next_page,
        next_capture=row.next_capture,
    )


def prefetch(items: Sequence[T], fn: Callable[[T], R], pool: ThreadPoolExecutor, window: int) -> Iterator[R]:
    """``map(fn, items)`` in order, with up to ``window`` calls running ahead on ``pool``.

    Fetches overlap the caller's extraction; the window bounds how many fetched pages wait in memory."""
    pending: list[Future] = []
    position = 0
    while position < len(items) or pending:
        while position < len(items) and len(pending) < window:
            pending.append(pool.submit(fn, items[position]))
            position += 1
        yield pending.pop(0).result()


def _fetch_or_error(fetcher: RecordFetcher, capture: Capture) -> FetchedPage | CaptureError:
    try:
        return fetcher.fetch(capture)
    except CaptureError as exc:
        return exc


@dataclass
class OutletReport:
    domain: str
    collection: str
    state: str
    captures: int = 0
    stories_added: int = 0
    stories_existing: int = 0
    rejections: Rejections = field(default_factory=Rejections)
    error: str | None = None


@dataclass
class WorkerReport:
    worker_id: str
    outlets: list[OutletReport] = field(default_factory=list)

    @property
    def captures(self) -> int:
        return sum(o.captures for o in self.outlets)

    @property
    def stories_added(self) -> int:
        return sum(o.stories_added for o in self.outlets)

    def as_dict(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "outlets": [
                {
                    "domain": o.domain,
                    "collection": o.collection,
                    "state": o.state,
                    "captures": o.captures,
                    "stories_added": o.stories_added,
                    "stories_existing": o.stories_existing,
                    "rejected": o.rejections.counts,
                    "rejection_examples": o.rejections.examples[:10],
                    "error": o.error,
                }
                for o in self.outlets
            ],
        }


class OutletLoader:
    """One worker: claims outlets until none is claimable, loading each one's captures as stories.

    Depth (the default, the loader this replaces): a claimed outlet is drained, page after page of its index.
    ``breadth``: a claimed outlet gives one index page, then goes back to the queue with its cursor, and the next
    claim takes an outlet with the fewest pages loaded; so every outlet has its first page (Common Crawl's: up to
    15,000 captures) before any has its second, as that loader was run to cover 200 outlets at once."""

    def __init__(
        self,
        store: TopicStore,
        settings: CommonCrawlSettings,
        *,
        worker_id: str | None = None,
        batch_size: int = 50,
        fetch_threads: int = 4,
        lease_seconds: float = 900.0,
        max_attempts: int = 3,
        breadth: bool = False,
        client: CdxClient | None = None,
        fetcher: RecordFetcher | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.worker_id = worker_id or default_worker_id()
        self.batch_size = max(1, batch_size)
        self.fetch_threads = max(1, fetch_threads)
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.breadth = breadth
        session = guarded_session(settings, pool_size=self.fetch_threads + 2)
        self.client = client or CdxClient(settings, session)
        self.fetcher = fetcher or RecordFetcher(settings, session)
        self.progress = progress or (lambda message: log.info(message))

    def run(self, max_outlets: int | None = None) -> WorkerReport:
        report = WorkerReport(self.worker_id)
        with ThreadPoolExecutor(self.fetch_threads, thread_name_prefix="cc-fetch") as pool:
            while max_outlets is None or len(report.outlets) < max_outlets:
                job = claim_outlet(
                    self.store,
                    self.worker_id,
                    self.lease_seconds,
                    resume_own=not report.outlets,
                    breadth=self.breadth,
                )
                if job is None:
                    break
                report.outlets.append(self.load_outlet(job, pool))
        return report

    # ------------------------------------------------------------------ one outlet

    def load_outlet(self, job: OutletJob, pool: ThreadPoolExecutor) -> OutletReport:
        outlet = OutletReport(job.domain, job.collection, RUNNING)
        where = f"{job.domain} in {job.collection}"
        self.progress(
            f"{self.worker_id}: loading {where} from page {job.next_page}, capture {job.next_capture}"
        )
        try:
            pages = job.pages_total
            if pages is None:
                pages = self.client.num_pages(job.collection, job.domain)
                self._save_cursor_fields(job, pages_total=pages)
            for page in range(job.next_page, pages):
                captures = self.client.captures(job.collection, job.domain, page)
                start = job.next_capture if page == job.next_page else 0
                self._load_page(job, page, captures, start, pool, outlet)
                self.progress(
                    f"{self.worker_id}: {where}: page {page + 1}/{pages} done, "
                    f"{outlet.stories_added} new stories so far"
                )
                if self.breadth and page + 1 < pages:  # the other outlets' next page before this one's
                    self._save_cursor_fields(
                        job, state=QUEUED, claimed_by=None, attempts=0, heartbeat_at=now_utc()
                    )
                    outlet.state = QUEUED
                    return outlet
            self._finish(job, COMPLETED, None)
            outlet.state = COMPLETED
        except ClaimLost as exc:
            outlet.state, outlet.error = "lost", str(exc)
            log.warning("%s", exc)
        except CommonCrawlError as exc:
            outlet.error = str(exc)
            outlet.state = self._fail(job, str(exc))
            log.error("%s: %s", where, exc)
        return outlet

    def _load_page(
        self,
        job: OutletJob,
        page: int,
        captures: list[Capture],
        start: int,
        pool: ThreadPoolExecutor,
        outlet: OutletReport,
    ) -> None:
        todo = captures[start:]
        fetched = prefetch(todo, lambda c: _fetch_or_error(self.fetcher, c), pool, self.batch_size)
        position = start
        while position < len(captures) or (not captures and position == 0):
            batch = captures[position : position + self.batch_size]
            stories: list[NewStory] = []
            rejections = Rejections()
            for capture in batch:
                result = next(fetched)
                if isinstance(result, CaptureError):
                    rejections.add(result.reason, capture.where, str(result))
                    continue
                try:
                    stories.append(story_from_page(result, capture.url))
                except StoryRejected as exc:
                    rejections.add(exc.reason, capture.url, str(exc))
            last = position + len(batch) >= len(captures)
            cursor = (page + 1, 0) if last else (page, position + len(batch))
            added, existing = self._commit_batch(job, stories, len(batch), rejections, cursor)
            outlet.captures += len(batch)
            outlet.stories_added += added
            outlet.stories_existing += existing
            outlet.rejections.merge(rejections)
            for example in rejections.examples:
                log.warning(
                    "%s: capture rejected (%s): %s", job.domain, example["reason"], example["message"]
                )
            position += len(batch)
            if not captures:
                break

    def _holding(self, job: OutletJob):  # noqa: ANN202 - a SQLAlchemy where clause
        q = s.cc_outlet_queue
        return and_(q.c.cc_outlet_queue_id == job.id, q.c.claimed_by == self.worker_id, q.c.state == RUNNING)

    def _commit_batch(
        self,
        job: OutletJob,
        stories: list[NewStory],
        captures: int,
        rejections: Rejections,
        cursor: tuple[int, int],
    ) -> tuple[int, int]:
        """Stories, counters and cursor in one transaction; ClaimLost (and nothing written) if the claim is gone."""
        q = s.cc_outlet_queue
        with self.store.engine.begin() as conn:
            # Claim check first: on PostgreSQL it row-locks our queue row, so a takeover waits for us or we
            # see it and write nothing.
            held = conn.execute(
                select(q.c.rejections_json).where(self._holding(job)).with_for_update()
                if self.store.dialect == "postgresql"
                else select(q.c.rejections_json).where(self._holding(job))
            ).first()
            if held is None:
                raise ClaimLost(f"{self.worker_id} lost its claim on {job.domain} in {job.collection}")
            result = self.store.insert_stories(conn, stories, SOURCE_PREFIX + job.collection)
            reasons = json.loads(held.rejections_json or "{}")
            for reason, count in rejections.counts.items():
                reasons[reason] = reasons.get(reason, 0) + count
            conn.execute(
                update(q)
                .where(self._holding(job))
                .values(
                    next_page=cursor[0],
                    next_capture=cursor[1],
                    captures_found=q.c.captures_found + captures,
                    stories_stored=q.c.stories_stored + result.created,
                    stories_existing=q.c.stories_existing + result.existing,
                    captures_rejected=q.c.captures_rejected + rejections.total,
                    rejections_json=json.dumps(reasons, sort_keys=True),
                    heartbeat_at=now_utc(),
                )
            )
        return result.created, result.existing

    def _save_cursor_fields(self, job: OutletJob, **values: Any) -> None:
        with self.store.engine.begin() as conn:
            done = conn.execute(update(s.cc_outlet_queue).where(self._holding(job)).values(**values))
        if not done.rowcount:
            raise ClaimLost(f"{self.worker_id} lost its claim on {job.domain} in {job.collection}")

    def _finish(self, job: OutletJob, state: str, error: str | None) -> None:
        now = now_utc()
        self._save_cursor_fields(
            job,
            state=state,
            error=error,
            completed_at=now if state == COMPLETED else None,
            heartbeat_at=now,
        )

    def _fail(self, job: OutletJob, error: str) -> str:
        """An outlet whose index query failed for good: back to the queue until max_attempts, then error."""
        q = s.cc_outlet_queue
        with self.store.engine.connect() as conn:
            attempts = conn.execute(select(q.c.attempts).where(q.c.cc_outlet_queue_id == job.id)).scalar_one()
        state = ERROR if attempts >= self.max_attempts else QUEUED
        try:
            self._save_cursor_fields(job, state=state, error=error[:4000], claimed_by=None)
        except ClaimLost:
            return "lost"
        return state


def run_worker_process(
    settings: CommonCrawlSettings,
    database_url: str | None,
    schema: str | None,
    worker_id: str,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Entry point of a worker process (spawned by the asset): opens its own store, returns its report."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    store = TopicStore.open(database_url or None, schema=schema or None)
    try:
        return OutletLoader(store, settings, worker_id=worker_id, **options).run().as_dict()
    finally:
        store.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="A Common Crawl outlet-queue worker: loads queued outlets into the story archive. "
        "The store is TOPICMAP_DATABASE_URL (or the SQLite file under TOPICMAP_HOME)."
    )
    parser.add_argument("--index-url", required=True, help="CDX endpoint with {collection}")
    parser.add_argument("--data-url", required=True, help="prefix of WARC file names")
    parser.add_argument(
        "--allow-network", action="append", default=[], help="SSRF guard exception (CIDR/IP:PORT)"
    )
    parser.add_argument("--schema", default=None, help="PostgreSQL schema of the store")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--index-min-interval", type=float, default=1.0)
    parser.add_argument("--backoff-seconds", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--fetch-threads", type=int, default=4)
    parser.add_argument("--lease-seconds", type=float, default=900.0)
    parser.add_argument(
        "--breadth", action="store_true", help="one index page per outlet in turn, instead of draining each"
    )
    parser.add_argument("--enqueue", nargs="*", default=[], help="outlets to queue first")
    parser.add_argument("--collection", action="append", default=[], help="collections for --enqueue")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    settings = CommonCrawlSettings(
        index_url=args.index_url,
        data_url=args.data_url,
        allow_networks=tuple(args.allow_network),
        index_min_interval=args.index_min_interval,
        backoff_seconds=args.backoff_seconds,
    )
    store = TopicStore.open(schema=args.schema)
    if args.enqueue:
        enqueue_outlets(store, args.enqueue, args.collection)
    loader = OutletLoader(
        store,
        settings,
        worker_id=args.worker_id,
        batch_size=args.batch_size,
        fetch_threads=args.fetch_threads,
        lease_seconds=args.lease_seconds,
        breadth=args.breadth,
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )
    report = loader.run()
    print(json.dumps(report.as_dict()), flush=True)
    store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "COMPLETED",
    "ERROR",
    "QUEUED",
    "RUNNING",
    "OutletLoader",
    "claim_outlet",
    "enqueue_outlets",
    "queue_counts",
]
