"""The spider: one iteration of growing a topic (Media Cloud's fetch_link, relevance test and mining loop),
resumable and idempotent.

One call of ``Spider.run_iteration`` is one Dagster materialization:

1. seeds not yet imported become topic stories (archive matches, iteration 0) or pending fetch URLs (URL lists);
2. the pending URLs of the lowest pending iteration ``k`` are processed, each through: ignore list → reuse of an
   earlier failure for the same URL → match to an existing story by URL variants → fetch → potential match of
   the query on the raw page → story generated → full relevance → added to the topic with iteration ``k``;
3. the links of every topic story not yet mined become ``topic_links`` rows and, while ``k + 1 <=
   max_iterations``, pending fetch URLs of iteration ``k + 1``.

What became of each URL is written a batch at a time (up to ``WRITE_BATCH`` URLs, or what a few seconds
gathered, in one transaction: new stories, relevance, topic stories, their links, URL states), and every
insert is keyed, so a killed run is simply run again: the URLs of the unwritten batch are still pending and
are processed again, nothing is duplicated.

Many processes can work on one iteration at once (``topicmap.spider.claims``): every pending URL is claimed
before it is fetched, a few dozen at a time, so each is fetched once; step 2 can be split into shards
(``process_pending(shard=...)``) that run anywhere, between ``begin_iteration`` (step 1) and
``finish_iteration`` (step 3 and the iteration's bookkeeping). ``run_iteration`` does the three in one process. Media Cloud passed ``max_iterations`` itself as the
iteration bound to every ``spider_new_links`` call, so its bound was never applied; here a
link found by a story at iteration ``max_iterations`` is recorded but never queued.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Connection, and_, bindparam, func, select, tuple_, update

from topicmap.spider.claims import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PER_DOMAIN,
    ClaimHeartbeat,
    ClaimQueue,
    Shard,
    claim_keys,
    fill_claim_keys,
    new_holder,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import (
    SPIDER_SOURCE,
    NewStory,
    TopicStore,
    chunks,
    compress_page,
    now_utc,
    utc,
)
from topicmap.topics.declarations import TopicConfig
from topicmap.topics.query import TopicQuery
from topicmap.web.fetch import FetchOutcome
from topicmap.web.links import (
    extract_content_links,
    extract_story_and_links,
    is_ignored_url,
    is_self_link,
    skip_self_link,
)
from topicmap.web.urls import distinctive_domain, normalize_url_lossy, url_variants

# Fetch states, as Media Cloud's fetch_link names them; "python error" is Media Cloud's name for a bug.
PENDING = "pending"
REQUEST_FAILED = "request failed"
CONTENT_MATCH_FAILED = "content match failed"
STORY_MATCH = "story match"
STORY_ADDED = "story added"
IGNORED = "ignored"
SKIPPED = "skipped"
ERROR = "python error"
FETCH_STATES = (
    PENDING,
    REQUEST_FAILED,
    CONTENT_MATCH_FAILED,
    STORY_MATCH,
    STORY_ADDED,
    IGNORED,
    SKIPPED,
    ERROR,
)
OPEN_STATES = (PENDING,)

MAX_ERROR_RATE = 0.02
#: URLs whose outcome is written in one transaction, or fewer once the oldest has waited WRITE_BATCH_SECONDS
#: (a throttled iteration still commits steadily). A crash loses at most one batch: those URLs stay pending.
#: 200 rather than 50: each batch pays fixed statements and a commit on the extracting thread; on the news
#: benchmark 200 gave 0.79 of the extractor against 0.78, higher in 5 of 6 paired rounds.
#: Only an unthrottled spider fills a batch before WRITE_BATCH_SECONDS, so the claims' lease is never at risk.
WRITE_BATCH = 200
WRITE_BATCH_SECONDS = 5.0
#: stored stories whose links are mined in one transaction
MINE_BATCH = 100
#: URLs claimed at a time by a source that fetches one URL after another (a WARC replay, a test's dict web)
SEQUENTIAL_CLAIM = 50
#: how often a spider that has nothing left to claim looks whether other workers' URLs are done or expired
OTHERS_POLL_SECONDS = 0.5
SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+")


class SpiderError(RuntimeError):
    """The topic cannot go on (too many stories, too many errors); the message says why."""


class PageSource(Protocol):
    """Where pages come from: the live web, the demo web on loopback, or a WARC replay.

    ``urls`` is the spider's claim feed: a source that fetches concurrently passes it to
    ``WebFetcher.fetch_many`` (a :class:`~topicmap.web.fetch.UrlFeed`); a sequential source iterates it, and
    each URL is claimed shortly before it is asked for. A source with a ``polite`` attribute that is true (sites
    have a politeness interval) makes the spider's claims keep off the sites other workers are fetching."""

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]: ...


@dataclass
class IterationReport:
    topic: str
    iteration: int
    states: Counter = field(default_factory=Counter)
    urls_processed: int = 0
    stories_added: int = 0
    links_added: int = 0
    frontier_left: int = 0
    elapsed: float = 0.0
    throttle_wait: float = 0.0
    fetched: int = 0
    topic_stories: int = 0
    error_rate: float = 0.0
    top_errors: list[tuple[str, int]] = field(default_factory=list)

    @property
    def fetch_rate(self) -> float:
        return self.fetched / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def done(self) -> bool:
        return self.frontier_left == 0

    def add(self, part: IterationReport) -> None:
        """Count a shard's processing (URLs, states, stories, links, fetches, throttle waits) into this one."""
        self.states.update(part.states)
        self.urls_processed += part.urls_processed
        self.stories_added += part.stories_added
        self.links_added += part.links_added
        self.fetched += part.fetched
        self.throttle_wait += part.throttle_wait

    def to_json(self) -> dict[str, Any]:
        """A plain dict (for passing between processes, e.g. Dagster ops on Celery workers)."""
        data = asdict(self)
        data["states"] = dict(self.states)
        data["top_errors"] = [list(pair) for pair in self.top_errors]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IterationReport:
        report = cls(**{**data, "states": Counter(data.get("states", {}))})
        report.top_errors = [tuple(pair) for pair in data.get("top_errors", [])]
        return report


@dataclass(frozen=True)
class IterationPlan:
    """What ``begin_iteration`` decided: the iteration to report and the one whose pending URLs to process
    (None: nothing pending, only mining and bookkeeping). ``started_at`` is wall-clock seconds, so the
    iteration's elapsed time can be measured across processes."""

    topic: str
    iteration: int
    pending_iteration: int | None
    started_at: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IterationPlan:
        return cls(**data)


def week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def sentences(text: str) -> list[str]:
    """Sentences of a story text: split on end punctuation and lines; unique within the story, in order."""
    seen: dict[str, None] = {}
    for block in (text or "").splitlines():
        for sentence in SENTENCE_SPLIT.split(block):
            sentence = sentence.strip()
            if len(sentence) >= 8:
                seen.setdefault(sentence, None)
    return list(seen)


@dataclass
class _Resolution:
    """What became of one pending URL, held until its batch is written."""

    row: dict
    state: str
    code: int | None = None
    message: str | None = None
    stories_id: int | None = None  # an existing story the URL resolved to
    new_story: NewStory | None = None  # or the story generated from the fetched page...
    links: list[str] | None = None  # ... and that page's links
    redirect_url: str | None = None
    fetched_url: str | None = None  # the URL fetched, when it redirected: kept as one of the story's URLs


@dataclass
class _Tally:
    """What a written batch adds to the iteration's report."""

    urls: int = 0
    states: Counter = field(default_factory=Counter)
    stories_added: int = 0
    links_added: int = 0

    def merge(self, other: _Tally) -> None:
        self.urls += other.urls
        self.states.update(other.states)
        self.stories_added += other.stories_added
        self.links_added += other.links_added


@dataclass
class _StoryLinks:
    """A topic story's links, ready to be mined (``links`` None: nothing to mine, e.g. out of the dates)."""

    stories_id: int
    url: str
    iteration: int
    publish_date: datetime | None
    links: list[str] | None
    error: str = ""


@dataclass
class _Progress:
    """Logs the iteration's progress each time another ``every`` URLs are written."""

    total: int
    every: int
    iteration: int
    next_at: int = field(init=False)

    def __post_init__(self) -> None:
        self.next_at = self.every

    def show(self, report: IterationReport, topic: str, log: Callable[[str], None]) -> None:
        if report.urls_processed < self.next_at:
            return
        self.next_at = (report.urls_processed // self.every + 1) * self.every
        log(
            f"{topic}: iteration {self.iteration}: {report.urls_processed}/{self.total} URLs, "
            f"{report.stories_added} stories added, {report.links_added} links, "
            f"{report.throttle_wait:.1f}s waiting on throttles"
        )


#: a sentence claim row of story_sentence_hashes; the first three are its key
_CLAIM_COLUMNS = ("media_id", "week_start_date", "sentence_md5", "stories_id")
_FETCH_URLS = s.topic_fetch_urls
#: one URL's state, written for a whole batch with executemany
_STATE_UPDATE = (
    update(_FETCH_URLS)
    .where(_FETCH_URLS.c.topic_fetch_urls_id == bindparam("b_id"))
    .values(
        state=bindparam("b_state"),
        code=bindparam("b_code"),
        message=bindparam("b_message"),
        stories_id=bindparam("b_stories_id"),
        redirect_url=bindparam("b_redirect_url"),
        fetch_date=bindparam("b_fetch_date"),
    )
)


class _ClaimFeed:
    """The URLs a spider fetches, claimed from the store as the page source has room for them.

    A ``UrlFeed`` for ``WebFetcher.fetch_many`` (``take``), and an iterable for sequential sources. Claimed
    rows that need no fetch are resolved at once; the others are handed out and remembered until their
    outcome comes back (``returned``). When nothing is left to claim but other workers still hold URLs of this
    part, the feed waits for them (taking over those whose claims expire), so the part ends only when every
    one of its URLs is written."""

    def __init__(
        self, spider: Spider, claims: ClaimQueue, report: IterationReport, limit: int | None
    ) -> None:
        self.spider = spider
        self.claims = claims
        self.report = report
        self.limit = limit  # URLs this part may claim (max_fetches_per_iteration), None for all
        self.claimed = 0
        self.out: dict[str, dict] = {}  # url -> its row, handed out and not yet returned
        self.per_site: Counter = Counter()
        self._dry: tuple[float, frozenset[str]] | None = (
            None  # when a claim last found nothing, and what was saturated
        )

    def returned(self, url: str) -> dict | None:
        row = self.out.pop(url, None)
        if row is not None:
            self.per_site[row["domain"]] -= 1
            if self.per_site[row["domain"]] <= 0:
                del self.per_site[row["domain"]]
        return row

    def __iter__(self) -> Iterator[str]:
        while (urls := self.take(SEQUENTIAL_CLAIM, idle=True)) is not None:
            yield from urls

    def take(self, room: int, idle: bool) -> list[str] | None:
        while True:
            left = None if self.limit is None else self.limit - self.claimed
            if left is not None and left <= 0:
                return None
            saturated = frozenset(d for d, n in self.per_site.items() if n >= self.claims.per_domain)
            recently_dry = self._dry is not None and time.monotonic() - self._dry[0] < OTHERS_POLL_SECONDS
            if not idle and recently_dry and self._dry[1] == saturated:
                return []  # nothing was claimable a moment ago, with the same sites saturated
            want = room if left is None else min(room, left)
            rows = self.claims.claim(want, saturated)
            if rows:
                self._dry = None
                self.claimed += len(rows)
                urls = []
                for row in self.spider._resolve_claimed(rows, self.report):
                    self.out[row["url"]] = row
                    self.per_site[row["domain"]] += 1
                    urls.append(row["url"])
                if urls:
                    return urls
                continue  # all of them were resolved without a fetch: claim more
            self._dry = (time.monotonic(), saturated)
            if not idle:
                return []
            # nothing to fetch here and nothing of ours in flight: are other workers still at it?
            self.spider._write_batch(self.report)
            others = self.claims.others()
            if not others.count:
                return None
            wait = OTHERS_POLL_SECONDS
            if others.next_expiry is not None:
                wait = min(wait, max(0.0, others.next_expiry - time.time()) + 0.01)
            self.spider.log_waiting(others.count, others.next_expiry)
            time.sleep(wait)


class Spider:
    """Grows one topic, one iteration per call, against a topic store and a page source."""

    def __init__(
        self,
        store: TopicStore,
        topic: TopicConfig,
        source: PageSource,
        log: Callable[[str], None] = print,
        progress_every: int = 200,
        max_error_rate: float = MAX_ERROR_RATE,
        claim_lease: float = DEFAULT_LEASE_SECONDS,
        claim_per_domain: int = DEFAULT_PER_DOMAIN,
    ) -> None:
        self.store = store
        self.topic = topic
        self.query: TopicQuery = topic.parsed_query
        self.source = source
        self.log = log
        self.progress_every = progress_every
        self.max_error_rate = max_error_rate
        self.topics_id = int(store.topic_row(topic.name)["topics_id"])
        self._iteration = 0  # the iteration being processed
        self._batch: list[_Resolution] = []
        self._batch_started = 0.0
        self._progress = _Progress(total=0, every=progress_every, iteration=0)
        self._compressor: ThreadPoolExecutor | None = None  # set while pages are being fetched
        self.claim_lease = claim_lease
        self.claim_per_domain = claim_per_domain
        self._waiting_logged = float("-inf")
        # what was known when the iteration being processed first started (see _known_outcomes)
        self._known_at: tuple[datetime, int] = (datetime.max.replace(tzinfo=UTC), 2**31 - 1)

    # ------------------------------------------------------------------ state

    def lowest_pending_iteration(self) -> int | None:
        f = s.topic_fetch_urls
        with self.store.engine.connect() as conn:
            return conn.execute(
                select(func.min(f.c.iteration)).where(
                    f.c.topics_id == self.topics_id,
                    f.c.state.in_(OPEN_STATES),
                    f.c.iteration <= self.topic.max_iterations,
                )
            ).scalar_one_or_none()

    def iterations_done(self) -> int:
        m = s.topic_spider_metrics
        with self.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(m.c.topics_id == self.topics_id)).scalar_one())

    def frontier_size(self) -> int:
        f = s.topic_fetch_urls
        with self.store.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).where(
                        f.c.topics_id == self.topics_id,
                        f.c.state.in_(OPEN_STATES),
                        f.c.iteration <= self.topic.max_iterations,
                    )
                ).scalar_one()
            )

    def topic_story_count(self) -> int:
        return self.store.table_count(s.topic_stories, topics_id=self.topics_id)

    # ------------------------------------------------------------------ one iteration

    def run_iteration(self, holder: str | None = None) -> IterationReport:
        """One whole iteration in this process: begin, process every pending URL (claimed as ``holder``, see
        ``process_pending``), finish."""
        plan = self.begin_iteration()
        parts = []
        if plan.pending_iteration is not None:
            parts.append(self.process_pending(plan.pending_iteration, holder=holder))
        return self.finish_iteration(plan, parts)

    def begin_iteration(self) -> IterationPlan:
        """Step 1: import new seeds, decide which iteration is processed, check the topic's size."""
        started_at = time.time()
        self.import_seeds()
        fill_claim_keys(self.store, self.topics_id)
        pending_iteration = self.lowest_pending_iteration()
        if pending_iteration is None and self.iterations_done() > 0:
            iteration = self._last_iteration()
        else:
            iteration = pending_iteration if pending_iteration is not None else 0
        self._check_max_stories()
        return IterationPlan(self.topic.name, iteration, pending_iteration, started_at)

    def process_pending(
        self, iteration: int, shard: Shard = Shard(), holder: str | None = None
    ) -> IterationReport:
        """Step 2: claim, fetch and judge the pending URLs of ``iteration`` (those of ``shard``), writing what
        became of them a batch at a time. Returns only this part's counts. Returns when no URL of the part is
        left open: the ones other workers claimed are waited for (and taken over if their claims expire).

        ``holder`` names the claims: a task that is run again after its worker died passes the same holder and
        takes its predecessor's claims back at once; by default each call is a new holder."""
        report = IterationReport(topic=self.topic.name, iteration=iteration)
        self._iteration = iteration
        self._known_at = self._iteration_start(iteration)
        claims = ClaimQueue(
            self.store,
            self.topics_id,
            iteration,
            holder or new_holder(),
            shard=shard,
            lease=self.claim_lease,
            per_domain=self.claim_per_domain,
            # keeping off busy sites helps a pool of claims; a shard cannot hand its URLs of a busy site to
            # the worker fetching it, and waiting for it measured slower (1.31x against 1.52-1.79x; deploy/celery.md)
            exclusive_sites=shard.count == 1 and bool(getattr(self.source, "polite", False)),
        )
        claims.take_back()
        claims.join()
        total = self._open_count(claims)
        where = f" ({shard})" if shard.count > 1 else ""
        holders = len(claims.live_holders())
        others = f", {holders - 1} other holder(s) working on it (site affinity)" if holders > 1 else ""
        self.log(f"{self.topic.name}: iteration {iteration}{where}: {total} pending URLs{others}")
        self._progress = _Progress(total=total, every=self.progress_every, iteration=iteration)
        limit = self.topic.fetch.max_fetches_per_iteration
        if limit and shard.count > 1:
            limit = limit // shard.count + (1 if shard.index < limit % shard.count else 0)
        feed = _ClaimFeed(self, claims, report, limit or None)
        try:
            with (
                ClaimHeartbeat(claims),
                ThreadPoolExecutor(1, thread_name_prefix="topicmap-page-compress") as self._compressor,
            ):
                for outcome in self.source.fetch_many(feed):
                    row = feed.returned(outcome.url)
                    if row is None:
                        continue
                    report.fetched += 1
                    report.throttle_wait += float(getattr(outcome, "throttle_wait_seconds", 0.0) or 0.0)
                    try:
                        resolution = self._judge_outcome(row, outcome)
                    except Exception as exc:  # noqa: BLE001
                        resolution = _Resolution(row, ERROR, code=outcome.status, message=_error_text(exc))
                    self._queue(resolution, report)
        finally:
            try:
                self._write_batch(report)
            finally:
                # what was claimed and not written (an error, or the fetch limit) goes back to the pool now
                claims.release()
                claims.leave()
        return report

    def finish_iteration(self, plan: IterationPlan, parts: Iterable[IterationReport]) -> IterationReport:
        """Step 3: mine the links of the topic stories not yet mined, point links at known stories, record the
        iteration's metrics (``parts``: what each ``process_pending`` call returned) and check its health."""
        report = IterationReport(topic=self.topic.name, iteration=plan.iteration)
        for part in parts:
            report.add(part)
        report.links_added += self.mine_topic_stories()
        if plan.pending_iteration is not None or report.links_added:
            # links written in this run (or in a killed one before it) may point at URLs resolved since
            self._link_known_refs()
        report.frontier_left = self.frontier_size()
        report.topic_stories = self.topic_story_count()
        report.elapsed = max(0.0, time.time() - plan.started_at)
        self._record_metrics(report)
        self._check_error_rate(report)
        self.log(
            f"{self.topic.name}: iteration {plan.iteration} done: {report.urls_processed} URLs processed "
            f"({dict(report.states)}), {report.stories_added} stories added, {report.links_added} new links, "
            f"{report.frontier_left} pending, {report.topic_stories} topic stories"
        )
        return report

    def _iteration_start(self, iteration: int) -> tuple[datetime, int]:
        """When ``iteration`` first started and the newest story id then (recorded by whichever worker came
        first; every later worker and re-run reads the same)."""
        table = s.topic_spider_iterations
        with self.store.engine.begin() as conn:
            newest = conn.execute(select(func.coalesce(func.max(s.stories.c.stories_id), 0))).scalar_one()
            self.store.insert_ignore(
                conn,
                table,
                [
                    {
                        "topics_id": self.topics_id,
                        "iteration": iteration,
                        "started_at": now_utc(),
                        "max_stories_id": int(newest),
                    }
                ],
                ["topics_id", "iteration"],
            )
            row = conn.execute(
                select(table.c.started_at, table.c.max_stories_id).where(
                    table.c.topics_id == self.topics_id, table.c.iteration == iteration
                )
            ).one()
        return utc(row.started_at), int(row.max_stories_id)

    def _open_count(self, claims: ClaimQueue) -> int:
        with self.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(claims._mine())).scalar_one())

    def log_waiting(self, count: int, next_expiry: float | None) -> None:
        """Say (at most every 10 s) that this worker waits for URLs other workers hold."""
        now = time.monotonic()
        if now - self._waiting_logged < 10.0:
            return
        self._waiting_logged = now
        expiry = (
            ""
            if next_expiry is None
            else f"; the first claim expires in {max(0.0, next_expiry - time.time()):.0f} s"
        )
        self.log(
            f"{self.topic.name}: iteration {self._iteration}: waiting for {count} URLs other workers hold{expiry}"
        )

    def _last_iteration(self) -> int:
        m = s.topic_spider_metrics
        with self.store.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.max(m.c.iteration)).where(m.c.topics_id == self.topics_id)
                ).scalar_one()
            )

    def _check_max_stories(self) -> None:
        count = self.topic_story_count()
        if count > self.topic.max_stories:
            raise SpiderError(
                f"topic {self.topic.name!r} has {count} stories, more than max_stories={self.topic.max_stories}: "
                "narrow the query or raise max_stories"
            )

    # ------------------------------------------------------------------ seeds

    def import_seeds(self) -> int:
        """Seeds not yet processed: archive matches join the topic at iteration 0, URLs become pending fetches."""
        seeds = s.topic_seed_urls
        with self.store.engine.begin() as conn:
            rows = (
                conn.execute(
                    select(seeds).where(seeds.c.topics_id == self.topics_id, seeds.c.processed.is_(False))
                )
                .mappings()
                .all()
            )
            if not rows:
                return 0
            fetch_rows = []
            self._join_topic(conn, {r["stories_id"]: None for r in rows if r["stories_id"] is not None}, 0)
            for row in rows:
                if row["stories_id"] is not None:
                    fetch_rows.append(
                        self._fetch_row(row["url"], 0, state=STORY_MATCH, stories_id=row["stories_id"])
                    )
                else:
                    fetch_rows.append(self._fetch_row(row["url"], 0, assume_match=row["assume_match"]))
            self.store.insert_ignore(conn, s.topic_fetch_urls, fetch_rows, ["topics_id", "url"])
            conn.execute(
                update(seeds)
                .where(seeds.c.topic_seed_urls_id.in_([r["topic_seed_urls_id"] for r in rows]))
                .values(processed=True)
            )
        self.log(f"{self.topic.name}: imported {len(rows)} seeds")
        return len(rows)

    def _fetch_row(
        self,
        url: str,
        iteration: int,
        state: str = PENDING,
        stories_id: int | None = None,
        assume_match: bool = False,
        topic_links_id: int | None = None,
    ) -> dict:
        url = s.checked_url(url)
        return {
            "topics_id": self.topics_id,
            "url": url,
            "iteration": iteration,
            "state": state,
            "stories_id": stories_id,
            "assume_match": assume_match,
            "topic_links_id": topic_links_id,
            **claim_keys(url),
        }

    # ------------------------------------------------------------------ processing pending URLs

    def _resolve_claimed(self, rows: list[dict], report: IterationReport) -> list[dict]:
        """The steps before a fetch for newly claimed rows: those resolved without a fetch (ignored, an
        earlier failure of the same URL, a known story) are queued for writing; the rows to fetch are returned."""
        known = self._known_outcomes(rows)
        to_fetch = []
        for row in rows:
            try:
                resolved = self._resolve_without_fetch(row, known)
            except Exception as exc:  # noqa: BLE001 - one bad URL must not stop the iteration
                resolved = _Resolution(row, ERROR, message=_error_text(exc))
            if resolved is None:
                to_fetch.append(row)
            else:
                self._queue(resolved, report)
        return to_fetch

    def _known_outcomes(self, rows: list[dict]) -> dict[str, dict]:
        """For every URL variant of the pending rows: an earlier failure in this topic, or a known story, as
        known when the iteration first started (``_iteration_start``), so that the outcome of a URL does not
        depend on which URLs of the iteration happened to be processed before it, or by which worker.

        Two indexed queries per 500 variants for the whole batch, instead of two per URL."""
        variants = sorted(
            {v for row in rows for v in (url_variants(row["url"]) or [row["url"]]) if s.url_fits(v)}
        )
        f, su, st, media = s.topic_fetch_urls, s.story_urls, s.stories, s.media
        started_at, max_stories_id = self._known_at
        known: dict[str, dict] = {}
        with self.store.engine.connect() as conn:
            for chunk in chunks(variants):
                for r in conn.execute(
                    select(f.c.url, f.c.topic_fetch_urls_id, f.c.state, f.c.code, f.c.message).where(
                        f.c.topics_id == self.topics_id,
                        f.c.url.in_(chunk),
                        f.c.state.in_((REQUEST_FAILED, CONTENT_MATCH_FAILED)),
                        f.c.fetch_date < started_at,
                    )
                ):
                    known.setdefault(r.url, {})["failure"] = (
                        r.topic_fetch_urls_id,
                        r.state,
                        r.code,
                        r.message,
                    )
                for r in conn.execute(
                    select(su.c.url, su.c.stories_id, media.c.dup_media_id)
                    .join(st, st.c.stories_id == su.c.stories_id)
                    .join(media, media.c.media_id == st.c.media_id)
                    .where(
                        su.c.url.in_(chunk),
                        media.c.foreign_rss_links.is_(False),
                        su.c.stories_id <= max_stories_id,
                    )
                ):
                    rank = (
                        r.dup_media_id is not None,
                        r.stories_id,
                    )  # non-duplicate media first, then oldest
                    entry = known.setdefault(r.url, {})
                    if "story" not in entry or rank < entry["story"]:
                        entry["story"] = rank
        return known

    def _resolve_without_fetch(self, row: dict, known: dict[str, dict]) -> _Resolution | None:
        """The steps before a fetch, or None when the URL must be fetched."""
        url = row["url"]
        if is_ignored_url(url) or is_ignored_url(normalize_url_lossy(url) or ""):
            return _Resolution(row, IGNORED, code=403, message="matches the ignore pattern")
        variants = [v for v in (url_variants(url) or [url]) if s.url_fits(v)]
        failures = [
            known[v]["failure"]
            for v in variants
            if "failure" in known.get(v, {}) and known[v]["failure"][0] != row["topic_fetch_urls_id"]
        ]
        if failures:
            _, state, code, message = failures[0]
            return _Resolution(
                row, state, code=code, message=f"same as earlier fetch: {message or ''}".strip()
            )
        if row["state"] == PENDING:
            stories = [known[v]["story"] for v in variants if "story" in known.get(v, {})]
            if stories:
                return _Resolution(row, STORY_MATCH, code=200, stories_id=min(stories)[1])
        return None

    def find_story_by_urls(self, urls: Iterable[str]) -> int | None:
        """A story known by one of ``urls``; prefers media that are not duplicates, then the oldest story.

        Every story's url, guid and their lossy forms are recorded in story_urls when it is added, so one
        indexed lookup there covers Media Cloud's three (stories.url, stories.guid, story_urls.url). Only
        stories known when the iteration started count (see ``_known_outcomes``): a redirect to a story
        another URL of the same iteration added is "story added" whichever worker got there first."""
        candidates = sorted({u for u in urls if u and s.url_fits(u)})
        if not candidates:
            return None
        st, su, media = s.stories, s.story_urls, s.media
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(su.c.stories_id)
                .join(st, st.c.stories_id == su.c.stories_id)
                .join(media, media.c.media_id == st.c.media_id)
                .where(
                    su.c.url.in_(candidates),
                    media.c.foreign_rss_links.is_(False),
                    su.c.stories_id <= self._known_at[1],
                )
                .order_by(media.c.dup_media_id.is_(None).desc(), su.c.stories_id)
                .limit(1)
            ).first()
        return int(row.stories_id) if row else None

    def _judge_outcome(self, row: dict, outcome: FetchOutcome) -> _Resolution:
        """What a fetched page means for its URL: a failure, a known story, or a new story with its links.

        Nothing is written here: the resolution waits for its batch (``_write_batch``)."""
        refused = getattr(outcome, "refused_reason", None)
        if refused:
            # Policy refusals (SSRF guard, robots.txt, not a page) are "skipped"; a page too large to read failed.
            state = REQUEST_FAILED if refused.startswith("too-large") else SKIPPED
            return _Resolution(row, state, code=outcome.status, message=f"refused: {refused}")
        if (
            outcome.error
            or outcome.status is None
            or not (200 <= outcome.status < 300)
            or outcome.content is None
        ):
            message = outcome.error or f"HTTP {outcome.status}"
            return _Resolution(row, REQUEST_FAILED, code=outcome.status, message=message)
        final_url = outcome.final_url or outcome.url
        if not s.url_fits(final_url):
            # redirected to a URL the store cannot hold whole: the story keeps the URL that was asked for
            final_url = outcome.url
        redirect_url = final_url if final_url != outcome.url else None
        if redirect_url:
            if is_ignored_url(redirect_url):
                return _Resolution(row, IGNORED, code=403, message=f"redirect to ignored {redirect_url}")
            stories_id = self.find_story_by_urls(url_variants(outcome.url, redirect_url=redirect_url))
            if stories_id is not None:
                return _Resolution(
                    row, STORY_MATCH, code=200, stories_id=stories_id, redirect_url=redirect_url
                )
        # The whole page the extractor reads, and the URLs, which are part of the story (Media Cloud read the
        # first MiB only: a story further down a large page was lost). False only if no story can match.
        raw_page = outcome.text or outcome.content
        if not row["assume_match"] and not self.query.may_match(raw_page, urls=(final_url, outcome.url)):
            return _Resolution(
                row, CONTENT_MATCH_FAILED, code=outcome.status, message="the page does not match the query"
            )
        # zstandard releases the GIL: the page is compressed for storage on another core while this thread extracts
        page_gz = self._compressor.submit(compress_page, outcome.content)
        # one parse gives the story and its links; the links are mined when the batch is written. The text the
        # source decoded (with the charset the server declared) is extracted: no second decoding.
        extracted, links = extract_story_and_links(outcome.text or outcome.content, final_url)
        story = NewStory.from_extracted(
            final_url,
            extracted,
            guid=final_url,
            # the compressed page only: the raw one (up to max_body_bytes) is not held while the batch fills
            html_gz=page_gz.result() if outcome.content else None,
            encoding=getattr(outcome, "charset", None),
            http_status=outcome.status,
        )
        return _Resolution(
            row,
            STORY_ADDED,
            code=outcome.status,
            new_story=story,
            links=links,
            redirect_url=redirect_url,
            fetched_url=outcome.url if redirect_url else None,
        )

    # ------------------------------------------------------------------ writing resolutions, a batch at a time

    def _queue(self, resolution: _Resolution, report: IterationReport) -> None:
        """Hold a resolution for the next write; write when the batch is full or has waited long enough."""
        if not self._batch:
            self._batch_started = time.monotonic()
        self._batch.append(resolution)
        if len(self._batch) >= WRITE_BATCH or time.monotonic() - self._batch_started >= WRITE_BATCH_SECONDS:
            self._write_batch(report)

    def _write_batch(self, report: IterationReport) -> None:
        """Write the held resolutions in one transaction (a crash before the commit leaves those URLs
        pending: they are simply processed again). If the batch fails, each URL is written on its own, so
        the one that cannot be written is recorded as an error and the others are kept."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            tally = self._commit(batch)
        except Exception:  # noqa: BLE001 - find the URL at fault: write them one by one
            tally = _Tally()
            for resolution in batch:
                tally.merge(self._commit_alone(resolution))
        report.urls_processed += tally.urls
        report.states.update(tally.states)
        report.stories_added += tally.stories_added
        report.links_added += tally.links_added
        self._progress.show(report, self.topic.name, self.log)

    def _commit(self, batch: list[_Resolution]) -> _Tally:
        return self.store.in_transaction(lambda conn: self._write_resolutions(conn, batch))

    def _commit_alone(self, resolution: _Resolution) -> _Tally:
        """One URL in its own transaction; if even that fails, the URL ends in error with the reason (and if
        the error cannot be written either, the store itself is failing: that raises)."""
        try:
            return self._commit([resolution])
        except Exception as exc:  # noqa: BLE001
            return self._commit(
                [_Resolution(resolution.row, ERROR, code=resolution.code, message=_error_text(exc))]
            )

    def _write_resolutions(self, conn: Connection, batch: list[_Resolution]) -> _Tally:
        """New stories, relevance, topic stories, link re-pointing, link mining and URL states of a batch."""
        tally = _Tally(urls=len(batch))
        story_of = {i: r.stories_id for i, r in enumerate(batch) if r.stories_id is not None}
        new = [i for i, r in enumerate(batch) if r.new_story is not None]
        if new:
            added = self.store.insert_stories(conn, [batch[i].new_story for i in new], SPIDER_SOURCE)
            story_of.update(zip(new, added.stories_ids, strict=True))
            self.store.insert_ignore(
                conn,
                s.story_urls,
                [
                    {"stories_id": story_of[i], "url": batch[i].fetched_url}
                    for i in new
                    if batch[i].fetched_url and s.url_fits(batch[i].fetched_url)
                ],
                ["stories_id", "url"],
            )
        in_topic = self._in_topic(conn, set(story_of.values()))
        relevant = self._relevance(conn, batch, story_of, in_topic)
        first: dict[int, int] = {}  # relevant story -> index of the first resolution that found it
        for i in sorted(story_of):
            if relevant[i]:
                first.setdefault(story_of[i], i)
        tally.stories_added = self._join_topic(
            conn, {sid: batch[i].redirect_url for sid, i in first.items()}, self._iteration
        )
        # the stories that just joined, with the links of their fetched page, are mined now
        to_mine = [
            _StoryLinks(
                sid, batch[i].new_story.url, self._iteration, batch[i].new_story.publish_date, batch[i].links
            )
            for sid, i in first.items()
            if sid not in in_topic and batch[i].links is not None
        ]
        tally.links_added = self._mine_batch(conn, to_mine)
        self._point_links(conn, batch, story_of)
        states = []
        for i, r in enumerate(batch):
            stories_id = story_of.get(i)
            state, message = r.state, r.message
            if stories_id is not None and not relevant[i]:
                state = CONTENT_MATCH_FAILED
                message = "the story does not match the query (title, url, description, new sentences)"
            states.append(
                {
                    "b_id": r.row["topic_fetch_urls_id"],
                    "b_state": state,
                    "b_code": r.code,
                    "b_message": (message or None) and message[:4000],
                    "b_stories_id": stories_id,
                    "b_redirect_url": r.redirect_url,
                    "b_fetch_date": now_utc(),
                }
            )
            tally.states[state] += 1
        conn.execute(_STATE_UPDATE, states)
        return tally

    def _in_topic(self, conn: Connection, stories_ids: set[int]) -> set[int]:
        ts = s.topic_stories
        found: set[int] = set()
        ordered = sorted(stories_ids)
        for chunk in chunks(ordered):
            found.update(
                conn.execute(
                    select(ts.c.stories_id).where(
                        ts.c.topics_id == self.topics_id, ts.c.stories_id.in_(chunk)
                    )
                ).scalars()
            )
        return found

    def _relevance(
        self, conn: Connection, batch: list[_Resolution], story_of: dict[int, int], in_topic: set[int]
    ) -> dict[int, bool]:
        """Full relevance of each resolution's story, as Media Cloud's spider judges it. A story already in the
        topic, or fetched for a seed URL whose source says ``assume_match`` (topics.yaml), is relevant without a
        test. Any other is matched by the query on its title, description, URL and redirect URL
        (``_fields_match``), then on its sentences that are new within its medium and calendar week; sentences
        are claimed in batch order, as one by one would. The raw-page prefilter (``TopicQuery.may_match`` in
        ``_judge_outcome``) is an upper bound of this test: it never rejects a page whose story this keeps."""
        to_judge = [
            i for i in sorted(story_of) if story_of[i] not in in_topic and not batch[i].row["assume_match"]
        ]
        relevant = dict.fromkeys(story_of, True)
        if not to_judge:
            return relevant
        st = s.stories
        stories = {
            r.stories_id: r
            for r in conn.execute(
                select(
                    st.c.stories_id,
                    st.c.title,
                    st.c.description,
                    st.c.url,
                    st.c.text,
                    st.c.media_id,
                    st.c.publish_date,
                    st.c.collect_date,
                ).where(st.c.stories_id.in_(sorted({story_of[i] for i in to_judge})))
            )
        }
        by_sentences: list[int] = []
        for i in to_judge:
            story = stories.get(story_of[i])
            if story is None:
                relevant[i] = False
            elif not self._fields_match(story, batch[i].redirect_url):
                by_sentences.append(i)
        if by_sentences:
            own = self._own_sentences(conn, [stories[story_of[i]] for i in by_sentences])
            for i in by_sentences:
                sentences_of_story = own.get(story_of[i], [])
                relevant[i] = bool(sentences_of_story) and self.query.matches(" ".join(sentences_of_story))
        return relevant

    def _fields_match(self, story, redirect_url: str | None) -> bool:  # noqa: ANN001 - a SQLAlchemy row
        """The query on the title, description, URL and redirect URL each alone (Media Cloud's per-field test:
        there a ``text:`` clause looks at that field), then on them as the fields of one story (``title:`` on
        the title, AND across fields)."""
        for field_text in (story.title, story.description, story.url, redirect_url):
            if field_text and self.query.matches(field_text):
                return True
        return self.query.matches_story(story.title, None, story.url, story.description)

    def _own_sentences(self, conn: Connection, stories: list) -> dict[int, list[str]]:
        """Each story's sentences not already claimed by another story of its medium in its calendar week."""
        claims: list[tuple] = []  # rows in _CLAIM_COLUMNS order
        sentence_of: dict[tuple[int, str], str] = {}  # (stories_id, md5) -> the sentence
        md5 = hashlib.md5
        for story in stories:
            when = utc(story.publish_date or story.collect_date) or datetime.now(UTC)
            week = week_start(when.date())
            stories_id, media_id = story.stories_id, story.media_id
            for sentence in sentences(story.text or ""):
                # the sentence's key: lower-cased, whitespace collapsed (inline: ~50 calls a page)
                digest = md5(" ".join(sentence.lower().split()).encode("utf-8")).hexdigest()
                if (stories_id, digest) not in sentence_of:
                    sentence_of[stories_id, digest] = sentence
                    claims.append((media_id, week, digest, stories_id))
        if not claims:
            return {}
        ssh = s.story_sentence_hashes
        # the sentences claimed now are this batch's; only those already claimed need a look at their owner
        # (another story, or this one on a re-run after a crash)
        owners = set(
            self.store.insert_ignore_returning_tuples(
                conn, ssh, _CLAIM_COLUMNS, claims, _CLAIM_COLUMNS[:3], ["stories_id", "sentence_md5"]
            )
        )
        taken = sorted(
            {claim[:3] for claim in claims if (claim[3], claim[2]) not in owners},
        )
        for chunk in chunks(taken):
            owners.update(
                map(
                    tuple,
                    conn.execute(
                        select(ssh.c.stories_id, ssh.c.sentence_md5).where(
                            tuple_(ssh.c.media_id, ssh.c.week_start_date, ssh.c.sentence_md5).in_(chunk)
                        )
                    ),
                )
            )
        own: dict[int, list[str]] = {}
        for key, sentence in sentence_of.items():  # in story order: the query reads them joined
            if key in owners:
                own.setdefault(key[0], []).append(sentence)
        return own

    def _join_topic(self, conn: Connection, stories: dict[int, str | None], iteration: int) -> int:
        """Stories (id -> the redirect URL they were found by) join the topic at ``iteration``; those already in
        it move to ``iteration`` if it is lower (found again closer to the seeds). Returns the stories added."""
        if not stories:
            return 0
        ts = s.topic_stories
        added = self.store.insert_ignore(
            conn,
            ts,
            [
                {
                    "topics_id": self.topics_id,
                    "stories_id": stories_id,
                    "iteration": iteration,
                    "redirect_url": redirect_url,
                    "added_at": now_utc(),
                }
                for stories_id, redirect_url in stories.items()
            ],
            ["topics_id", "stories_id"],
        )
        conn.execute(
            update(ts)
            .where(
                ts.c.topics_id == self.topics_id,
                ts.c.stories_id == bindparam("b_stories_id"),
                ts.c.iteration > iteration,
            )
            .values(iteration=iteration),
            [{"b_stories_id": stories_id} for stories_id in stories],
        )
        return added

    def _point_links(self, conn: Connection, batch: list[_Resolution], story_of: dict[int, int]) -> None:
        """Topic links to a URL that resolved to a story now point at it."""
        pointed = [
            {
                "b_url": batch[i].row["url"],
                "b_stories_id": stories_id,
                "b_redirect_url": batch[i].redirect_url,
            }
            for i, stories_id in story_of.items()
        ]
        if pointed:
            tl = s.topic_links
            conn.execute(
                update(tl)
                .where(
                    tl.c.topics_id == self.topics_id,
                    tl.c.url == bindparam("b_url"),
                    tl.c.ref_stories_id.is_(None),
                )
                .values(ref_stories_id=bindparam("b_stories_id"), redirect_url=bindparam("b_redirect_url")),
                pointed,
            )

    # ------------------------------------------------------------------ link mining

    def mine_topic_stories(self) -> int:
        """Extract the links of every topic story not yet mined (archive seeds, stories matched by URL);
        queue them for the next iteration. Stories the spider generated were mined when they were written."""
        ts, st = s.topic_stories, s.stories
        with self.store.engine.connect() as conn:
            todo = conn.execute(
                select(ts.c.stories_id, ts.c.iteration, st.c.url, st.c.publish_date)
                .join(st, st.c.stories_id == ts.c.stories_id)
                .where(ts.c.topics_id == self.topics_id, ts.c.link_mined.is_(False))
                .order_by(ts.c.stories_id)
            ).all()
        links_added = 0
        for chunk in chunks(todo, MINE_BATCH):
            batch = [self._stored_links(story) for story in chunk]
            links_added += self.store.in_transaction(lambda conn, batch=batch: self._mine_batch(conn, batch))
        return links_added

    def _stored_links(self, story) -> _StoryLinks:  # noqa: ANN001 - a SQLAlchemy row
        """The links of a stored story, from its page (or its text when no page was kept)."""
        mined = _StoryLinks(story.stories_id, story.url, story.iteration, story.publish_date, links=None)
        if not self._within_date_window(story.publish_date):
            return mined
        try:
            with self.store.engine.connect() as conn:
                html = self.store.story_html(conn, story.stories_id)
                if html is None:
                    text = conn.execute(
                        select(s.stories.c.text).where(s.stories.c.stories_id == story.stories_id)
                    ).scalar_one_or_none()
            page = html or f"<html><body><p>{text or ''}</p></body></html>"
            mined.links = extract_content_links(page, base_url=story.url)
        except Exception as exc:  # noqa: BLE001 - recorded per story, counted in the error rate
            mined.error = _error_text(exc)
        return mined

    def _within_date_window(self, publish_date: datetime | None) -> bool:
        """Media Cloud only mines stories with no date or dated within the topic dates ± 7 days (an open-ended
        topic's dates have no end)."""
        if publish_date is None:
            return True
        day = utc(publish_date).date()
        margin = timedelta(days=7)
        end = self.topic.end_date
        return self.topic.start_date - margin <= day and (end is None or day <= end + margin)

    def _mine_batch(self, conn: Connection, stories: list[_StoryLinks]) -> int:
        """Record the stories' links as topic links, queue them for the next iteration (within
        max_iterations), count followed self links per site, and mark the stories mined. Returns links added.

        The stories are marked mined FIRST, by a conditional update: when two workers mine the same story at
        once (both found it), only the one whose update flips the flag records its links, so the self-link
        counts of its site are not counted twice."""
        if not stories:
            return 0
        ts = s.topic_stories
        won: set[int] = set()
        for chunk in chunks(sorted({story.stories_id for story in stories})):
            won.update(
                conn.execute(
                    update(ts)
                    .where(
                        ts.c.topics_id == self.topics_id,
                        ts.c.stories_id.in_(chunk),
                        ts.c.link_mined.is_(False),
                    )
                    .values(link_mined=True)
                    .returning(ts.c.stories_id)
                ).scalars()
            )
        stories = [story for story in stories if story.stories_id in won]
        if not stories:
            return 0
        td = s.topic_domains
        domains = sorted({distinctive_domain(story.url) or "" for story in stories})
        self_links = dict(
            conn.execute(
                select(td.c.domain, td.c.self_links).where(
                    td.c.topics_id == self.topics_id, td.c.domain.in_(domains)
                )
            ).all()
        )
        followed: Counter = Counter()
        link_rows, fetch_rows = [], []
        for story in stories:
            if not story.links or not self._within_date_window(story.publish_date):
                continue
            domain = distinctive_domain(story.url) or ""
            next_iteration = story.iteration + 1
            too_long = [link for link in story.links if not s.url_fits(link)]
            if too_long:  # never cut (a cut URL is another URL): left out, and said so
                self.log(
                    f"{self.topic.name}: story {story.stories_id}: {len(too_long)} link(s) longer than the "
                    f"store's {s.MAX_URL_LENGTH} characters left out, e.g. {too_long[0][:80]}..."
                )
            for link in story.links:
                if not s.url_fits(link):
                    continue
                if is_self_link(story.url, link):
                    if skip_self_link(story.url, link, self_links.get(domain, 0) + followed[domain]):
                        continue
                    followed[domain] += 1
                link_rows.append(
                    {
                        "topics_id": self.topics_id,
                        "stories_id": story.stories_id,
                        "url": link,
                    }
                )
                if next_iteration <= self.topic.max_iterations:
                    fetch_rows.append(self._fetch_row(link, next_iteration))
        added = self.store.insert_ignore(conn, s.topic_links, link_rows, ["topics_id", "stories_id", "url"])
        self.store.insert_ignore(conn, s.topic_fetch_urls, fetch_rows, ["topics_id", "url"])
        if followed:
            self.store.insert_ignore(
                conn,
                td,
                [{"topics_id": self.topics_id, "domain": d, "self_links": 0} for d in sorted(followed)],
                ["topics_id", "domain"],
            )
            conn.execute(
                update(td)
                .where(td.c.topics_id == self.topics_id, td.c.domain == bindparam("b_domain"))
                .values(self_links=td.c.self_links + bindparam("b_followed")),
                [{"b_domain": d, "b_followed": n} for d, n in sorted(followed.items())],
            )
        conn.execute(
            update(ts)
            .where(ts.c.topics_id == self.topics_id, ts.c.stories_id == bindparam("b_stories_id"))
            .values(link_mine_error=bindparam("b_error")),
            [{"b_stories_id": story.stories_id, "b_error": story.error} for story in stories],
        )
        return added

    def _link_known_refs(self) -> None:
        """Links to URLs that were already resolved to a story point at that story."""
        tl, f = s.topic_links, s.topic_fetch_urls
        resolved = (
            select(f.c.stories_id)
            .where(and_(f.c.topics_id == tl.c.topics_id, f.c.url == tl.c.url, f.c.stories_id.is_not(None)))
            .limit(1)
            .scalar_subquery()
        )
        self.store.in_transaction(
            lambda conn: conn.execute(
                update(tl)
                .where(tl.c.topics_id == self.topics_id, tl.c.ref_stories_id.is_(None))
                .values(ref_stories_id=resolved)
            )
        )

    # ------------------------------------------------------------------ metrics and health

    def _record_metrics(self, report: IterationReport) -> None:
        f = s.topic_fetch_urls
        with self.store.engine.begin() as conn:
            by_state = dict(
                conn.execute(
                    select(f.c.state, func.count())
                    .where(f.c.topics_id == self.topics_id, f.c.iteration == report.iteration)
                    .group_by(f.c.state)
                ).all()
            )
            row = {
                "topics_id": self.topics_id,
                "iteration": report.iteration,
                "links_processed": sum(v for k, v in by_state.items() if k not in OPEN_STATES),
                "stories_added": report.stories_added,
                "links_added": report.links_added,
                "frontier_left": report.frontier_left,
                "elapsed_time": report.elapsed,
                "throttle_wait_time": report.throttle_wait,
                "states_json": json.dumps(dict(sorted(by_state.items()))),
                "processed_date": now_utc(),
            }
            self.store.upsert(
                conn,
                s.topic_spider_metrics,
                [row],
                ["topics_id", "iteration"],
                [k for k in row if k not in ("topics_id", "iteration")],
            )

    def error_summary(self) -> tuple[float, list[tuple[str, int]]]:
        """(errors / processed, top error messages) over fetches and link mining, as Media Cloud's check."""
        f, ts = s.topic_fetch_urls, s.topic_stories
        with self.store.engine.connect() as conn:
            processed = conn.execute(
                select(func.count()).where(f.c.topics_id == self.topics_id, f.c.state.not_in(OPEN_STATES))
            ).scalar_one()
            errors = conn.execute(
                select(f.c.message, func.count())
                .where(f.c.topics_id == self.topics_id, f.c.state == ERROR)
                .group_by(f.c.message)
            ).all()
            mine_errors = conn.execute(
                select(ts.c.link_mine_error, func.count())
                .where(
                    ts.c.topics_id == self.topics_id,
                    ts.c.link_mine_error.is_not(None),
                    ts.c.link_mine_error != "",
                )
                .group_by(ts.c.link_mine_error)
            ).all()
            mined = conn.execute(select(func.count()).where(ts.c.topics_id == self.topics_id)).scalar_one()
        messages: Counter = Counter()
        for message, count in [*errors, *mine_errors]:
            first_line = (
                (message or "").strip().splitlines()[0] if (message or "").strip() else "unknown error"
            )
            messages[first_line[:200]] += count
        total_errors = sum(messages.values())
        rate = total_errors / max(processed + mined, 1)
        return rate, messages.most_common(5)

    def _check_error_rate(self, report: IterationReport) -> None:
        rate, top = self.error_summary()
        report.error_rate, report.top_errors = rate, top
        if rate > self.max_error_rate:
            listing = "; ".join(f"{count}× {message}" for message, count in top)
            raise SpiderError(
                f"topic {self.topic.name!r}: error rate {rate:.1%} is above {self.max_error_rate:.0%}: {listing}"
            )


def _error_text(exc: BaseException) -> str:
    """The exception on the first line (what error summaries group by), then the traceback's tail."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " ")[:500]
    return f"{head}\n{traceback.format_exc()[-1500:]}"
