"""The spider's iteration loop: one iteration of growing a topic (Media Cloud's fetch_link, relevance test and
mining loop), resumable and idempotent.

One call of ``Spider.run_iteration`` is one Dagster materialization:

1. seeds not yet imported become topic stories (archive matches, iteration 0) or pending fetch URLs (URL lists);
2. the pending URLs of the lowest pending iteration ``k`` are processed, each through: ignore list → reuse of an
   earlier failure for the same URL → match to an existing story by URL variants → fetch → potential match of
   the query on the raw page → story generated → full relevance → added to the topic with iteration ``k``
   (``topicmap.spider.judging``);
3. the links of every topic story not yet mined become ``topic_links`` rows and, while ``k + 1 <=
   max_iterations``, pending fetch URLs of iteration ``k + 1`` (``topicmap.spider.mining``).

What became of each URL is written a batch at a time (up to ``WRITE_BATCH`` URLs, or what a few seconds
gathered, in one transaction: new stories, relevance, topic stories, their links, URL states), and every
insert is keyed, so a killed run is simply run again: the URLs of the unwritten batch are still pending and
are processed again, nothing is duplicated. Every statement is ``topicmap.spider.store``'s.

Many processes can work on one iteration at once (``topicmap.spider.claims``): every pending URL is claimed
before it is fetched, a few dozen at a time, so each is fetched once; step 2 can be split into shards
(``process_pending(shard=...)``) that run anywhere, between ``begin_iteration`` (step 1) and
``finish_iteration`` (step 3 and the iteration's bookkeeping). ``run_iteration`` does the three in one process.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection

from topicmap.spider.claims import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PER_DOMAIN,
    ClaimHeartbeat,
    ClaimQueue,
    Shard,
    fill_claim_keys,
    new_holder,
)
from topicmap.spider.judging import Judge, Resolution
from topicmap.spider.mining import LinkMiner, StoryLinks
from topicmap.spider.store import CONTENT_MATCH_FAILED, ERROR, STORY_MATCH, SpiderStore, error_text
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig
from topicmap.web.fetch import FetchOutcome

MAX_ERROR_RATE = 0.02
#: URLs whose outcome is written in one transaction, or fewer once the oldest has waited WRITE_BATCH_SECONDS
#: (a throttled iteration still commits steadily). A crash loses at most one batch: those URLs stay pending.
#: 200 rather than 50: each batch pays fixed statements and a commit on the extracting thread; on the news
#: benchmark 200 gave 0.79 of the extractor against 0.78, higher in 5 of 6 paired rounds.
#: Only an unthrottled spider fills a batch before WRITE_BATCH_SECONDS, so the claims' lease is never at risk.
WRITE_BATCH = 200
WRITE_BATCH_SECONDS = 5.0
#: URLs claimed at a time by a source that fetches one URL after another (a WARC replay, a test's dict web)
SEQUENTIAL_CLAIM = 50
#: how often a spider that has nothing left to claim looks whether other workers' URLs are done or expired
OTHERS_POLL_SECONDS = 0.5


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
                for row in self.spider.resolve_claimed(rows, self.report):
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
            self.spider.write_batch(self.report)
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
        self.source = source
        self.log = log
        self.progress_every = progress_every
        self.max_error_rate = max_error_rate
        self.topics_id = int(store.topic_row(topic.name)["topics_id"])
        self.spider_store = SpiderStore(store, self.topics_id)
        self.judge = Judge(self.spider_store, topic.parsed_query)
        self.miner = LinkMiner(self.spider_store, topic, log)
        self._iteration = 0  # the iteration being processed
        self._batch: list[Resolution] = []
        self._batch_started = 0.0
        self._progress = _Progress(total=0, every=progress_every, iteration=0)
        self.claim_lease = claim_lease
        self.claim_per_domain = claim_per_domain
        self._waiting_logged = float("-inf")

    # ------------------------------------------------------------------ state

    def lowest_pending_iteration(self) -> int | None:
        return self.spider_store.lowest_pending_iteration(self.topic.max_iterations)

    def iterations_done(self) -> int:
        return self.spider_store.iterations_done()

    def frontier_size(self) -> int:
        return self.spider_store.frontier_size(self.topic.max_iterations)

    def topic_story_count(self) -> int:
        return self.spider_store.topic_story_count()

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
            iteration = self.spider_store.last_iteration()
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
        self.judge.known_at = self.spider_store.iteration_start(iteration)
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
        total = claims.open_count()
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
                # pages are compressed for storage on a second core while this thread extracts
                ThreadPoolExecutor(1, thread_name_prefix="topicmap-page-compress") as compressor,
            ):
                for outcome in self.source.fetch_many(feed):
                    row = feed.returned(outcome.url)
                    if row is None:
                        continue
                    report.fetched += 1
                    report.throttle_wait += float(getattr(outcome, "throttle_wait_seconds", 0.0) or 0.0)
                    try:
                        resolution = self.judge.judge_fetched(row, outcome, compressor)
                    except Exception as exc:  # noqa: BLE001
                        resolution = Resolution(row, ERROR, code=outcome.status, message=error_text(exc))
                    self._queue(resolution, report)
        finally:
            try:
                self.write_batch(report)
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
        report.links_added += self.miner.mine_topic_stories()
        if plan.pending_iteration is not None or report.links_added:
            # links written in this run (or in a killed one before it) may point at URLs resolved since
            self.spider_store.link_known_refs()
        report.frontier_left = self.frontier_size()
        report.topic_stories = self.topic_story_count()
        report.elapsed = max(0.0, time.time() - plan.started_at)
        self.spider_store.record_metrics(
            report.iteration,
            stories_added=report.stories_added,
            links_added=report.links_added,
            frontier_left=report.frontier_left,
            elapsed=report.elapsed,
            throttle_wait=report.throttle_wait,
        )
        self._check_error_rate(report)
        self.log(
            f"{self.topic.name}: iteration {plan.iteration} done: {report.urls_processed} URLs processed "
            f"({dict(report.states)}), {report.stories_added} stories added, {report.links_added} new links, "
            f"{report.frontier_left} pending, {report.topic_stories} topic stories"
        )
        return report

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
        store = self.spider_store
        with store.begin() as conn:
            rows = store.unprocessed_seeds(conn)
            if not rows:
                return 0
            fetch_rows = []
            joining = {r["stories_id"]: None for r in rows if r["stories_id"] is not None}
            store.join_topic(conn, joining, 0)
            # the sentence rule holds for every story of the topic: a spidered copy of a seed story in its medium
            # and week does not match by those sentences
            self.judge.claim_sentences_of(conn, joining)
            for row in rows:
                if row["stories_id"] is not None:
                    fetch_rows.append(
                        store.fetch_row(row["url"], 0, state=STORY_MATCH, stories_id=row["stories_id"])
                    )
                else:
                    fetch_rows.append(store.fetch_row(row["url"], 0, assume_match=row["assume_match"]))
            store.add_fetch_urls(conn, fetch_rows)
            store.mark_seeds_processed(conn, [r["topic_seed_urls_id"] for r in rows])
        self.log(f"{self.topic.name}: imported {len(rows)} seeds")
        return len(rows)

    # ------------------------------------------------------------------ resolving claimed URLs

    def resolve_claimed(self, rows: list[dict], report: IterationReport) -> list[dict]:
        """The steps before a fetch for newly claimed rows: those resolved without a fetch (ignored, an
        earlier failure of the same URL, a known story) are queued for writing; the rows to fetch are returned."""
        known = self.judge.known_outcomes(rows)
        to_fetch = []
        for row in rows:
            try:
                resolved = self.judge.resolve_without_fetch(row, known)
            except Exception as exc:  # noqa: BLE001 - one bad URL must not stop the iteration
                resolved = Resolution(row, ERROR, message=error_text(exc))
            if resolved is None:
                to_fetch.append(row)
            else:
                self._queue(resolved, report)
        return to_fetch

    # ------------------------------------------------------------------ writing resolutions, a batch at a time

    def _queue(self, resolution: Resolution, report: IterationReport) -> None:
        """Hold a resolution for the next write; write when the batch is full or has waited long enough."""
        if not self._batch:
            self._batch_started = time.monotonic()
        self._batch.append(resolution)
        if len(self._batch) >= WRITE_BATCH or time.monotonic() - self._batch_started >= WRITE_BATCH_SECONDS:
            self.write_batch(report)

    def write_batch(self, report: IterationReport) -> None:
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

    def _commit(self, batch: list[Resolution]) -> _Tally:
        return self.spider_store.in_transaction(lambda conn: self._write_resolutions(conn, batch))

    def _commit_alone(self, resolution: Resolution) -> _Tally:
        """One URL in its own transaction; if even that fails, the URL ends in error with the reason (and if
        the error cannot be written either, the store itself is failing: that raises)."""
        try:
            return self._commit([resolution])
        except Exception as exc:  # noqa: BLE001
            return self._commit(
                [Resolution(resolution.row, ERROR, code=resolution.code, message=error_text(exc))]
            )

    def _write_resolutions(self, conn: Connection, batch: list[Resolution]) -> _Tally:
        """New stories, relevance, topic stories, link re-pointing, link mining and URL states of a batch."""
        store = self.spider_store
        tally = _Tally(urls=len(batch))
        story_of = {i: r.stories_id for i, r in enumerate(batch) if r.stories_id is not None}
        new = [i for i, r in enumerate(batch) if r.new_story is not None]
        if new:
            added = store.add_stories(conn, [batch[i].new_story for i in new])
            story_of.update(zip(new, added, strict=True))
            store.add_story_urls(
                conn,
                [
                    (story_of[i], batch[i].fetched_url)
                    for i in new
                    if batch[i].fetched_url and s.url_fits(batch[i].fetched_url)
                ],
            )
        in_topic = store.in_topic(conn, set(story_of.values()))
        relevant = self.judge.relevance(conn, batch, story_of, in_topic)
        first: dict[int, int] = {}  # relevant story -> index of the first resolution that found it
        for i in sorted(story_of):
            if relevant[i]:
                first.setdefault(story_of[i], i)
        tally.stories_added = store.join_topic(
            conn, {sid: batch[i].redirect_url for sid, i in first.items()}, self._iteration
        )
        # the stories that just joined, with the links of their fetched page, are mined now
        to_mine = [
            StoryLinks(
                sid, batch[i].new_story.url, self._iteration, batch[i].new_story.publish_date, batch[i].links
            )
            for sid, i in first.items()
            if sid not in in_topic and batch[i].links is not None
        ]
        tally.links_added = self.miner.mine_batch(conn, to_mine)
        # topic links to a URL that resolved to a story now point at it
        store.point_links(
            conn,
            [
                {
                    "b_url": batch[i].row["url"],
                    "b_stories_id": stories_id,
                    "b_redirect_url": batch[i].redirect_url,
                }
                for i, stories_id in story_of.items()
            ],
        )
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
        store.set_url_states(conn, states)
        return tally

    # ------------------------------------------------------------------ health

    def error_summary(self) -> tuple[float, list[tuple[str, int]]]:
        """(errors / processed, top error messages) over fetches and link mining, as Media Cloud's check."""
        processed, errors, mined = self.spider_store.error_counts()
        messages: Counter = Counter()
        for message, count in errors:
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
