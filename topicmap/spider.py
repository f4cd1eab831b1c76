"""The spider: one iteration of growing a topic (fact sheet §2, §5, §10), resumable and idempotent.

One call of ``Spider.run_iteration`` is one Dagster materialization:

1. seeds not yet imported become topic stories (archive matches, iteration 0) or pending fetch URLs (URL lists);
2. the pending URLs of the lowest pending iteration ``k`` are processed, each through: ignore list → reuse of an
   earlier failure for the same URL → match to an existing story by URL variants → fetch → potential match of
   the query on the raw page → story generated → full relevance → added to the topic with iteration ``k``;
3. the links of every topic story not yet mined become ``topic_links`` rows and, while ``k + 1 <=
   max_iterations``, pending fetch URLs of iteration ``k + 1``.

Every state change is committed per URL, and every insert is keyed, so a killed run is simply run again: the
URLs still pending are processed, nothing is duplicated. Media Cloud passed ``max_iterations`` itself as the
iteration bound to every ``spider_new_links`` call, so its bound was never applied (fact sheet §10); here a
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
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection, and_, bindparam, func, select, update

from topicmap import schema as s
from topicmap.fetch import FetchOutcome
from topicmap.links import (
    extract_links,
    extract_story_and_links,
    is_ignored_url,
    is_self_link,
    skip_self_link,
)
from topicmap.query import TopicQuery
from topicmap.store import SPIDER_SOURCE, NewStory, TopicStore, now_utc, utc
from topicmap.topics import TopicConfig
from topicmap.urls import distinctive_domain, normalize_url_lossy, url_variants

# Fetch states, as Media Cloud names them (fact sheet §5); "python error" is Media Cloud's name for a bug.
PENDING = "pending"
REQUEUED = "requeued"
REQUEST_FAILED = "request failed"
CONTENT_MATCH_FAILED = "content match failed"
STORY_MATCH = "story match"
STORY_ADDED = "story added"
IGNORED = "ignored"
SKIPPED = "skipped"
ERROR = "python error"
FETCH_STATES = (
    PENDING,
    REQUEUED,
    REQUEST_FAILED,
    CONTENT_MATCH_FAILED,
    STORY_MATCH,
    STORY_ADDED,
    IGNORED,
    SKIPPED,
    ERROR,
)
OPEN_STATES = (PENDING, REQUEUED)

MAX_ERROR_RATE = 0.02
STATE_BATCH = 100
CONTENT_MATCH_BYTES = 1 << 20
SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+")


class SpiderError(RuntimeError):
    """The topic cannot go on (too many stories, too many errors); the message says why."""


class PageSource(Protocol):
    """Where pages come from: the live web, the demo web on loopback, or a WARC replay."""

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


def _sentence_md5(sentence: str) -> str:
    return hashlib.md5(" ".join(sentence.lower().split()).encode("utf-8")).hexdigest()


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
    ) -> None:
        self.store = store
        self.topic = topic
        self.query: TopicQuery = topic.parsed_query
        self.source = source
        self.log = log
        self.progress_every = progress_every
        self.max_error_rate = max_error_rate
        self.topics_id = int(store.topic_row(topic.name)["topics_id"])
        # links of the pages fetched in this run, by story, so link mining does not parse them again
        self._page_links: dict[int, list[str]] = {}
        self._unwritten_states: list[dict] = []

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

    def run_iteration(self) -> IterationReport:
        started = time.monotonic()
        self.import_seeds()
        pending_iteration = self.lowest_pending_iteration()
        if pending_iteration is None and self.iterations_done() > 0:
            iteration = self._last_iteration()
        else:
            iteration = pending_iteration if pending_iteration is not None else 0
        report = IterationReport(topic=self.topic.name, iteration=iteration)
        self._check_max_stories()
        if pending_iteration is not None:
            try:
                self._process_pending(pending_iteration, report)
            finally:
                self._flush_states()
        report.links_added = self.mine_topic_stories()
        report.frontier_left = self.frontier_size()
        report.topic_stories = self.topic_story_count()
        report.elapsed = time.monotonic() - started
        self._record_metrics(report)
        self._check_error_rate(report)
        self.log(
            f"{self.topic.name}: iteration {iteration} done: {report.urls_processed} URLs processed "
            f"({dict(report.states)}), {report.stories_added} stories added, {report.links_added} new links, "
            f"{report.frontier_left} pending, {report.topic_stories} topic stories"
        )
        return report

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
            for row in rows:
                if row["stories_id"] is not None:
                    self._add_topic_story(conn, row["stories_id"], 0)
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
        return {
            "topics_id": self.topics_id,
            "url": url[: s.MAX_URL_LENGTH],
            "iteration": iteration,
            "state": state,
            "stories_id": stories_id,
            "assume_match": assume_match,
            "topic_links_id": topic_links_id,
        }

    def _add_topic_story(
        self, conn: Connection, stories_id: int, iteration: int, redirect_url: str | None = None
    ) -> bool:
        """Add a story to the topic, or lower its iteration if it was found again closer to the seeds."""
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
            ],
            ["topics_id", "stories_id"],
        )
        if not added:
            conn.execute(
                update(ts)
                .where(
                    ts.c.topics_id == self.topics_id,
                    ts.c.stories_id == stories_id,
                    ts.c.iteration > iteration,
                )
                .values(iteration=iteration)
            )
        return bool(added)

    # ------------------------------------------------------------------ processing pending URLs

    def _pending_rows(self, iteration: int) -> list[dict]:
        f = s.topic_fetch_urls
        limit = self.topic.fetch.max_fetches_per_iteration
        query = (
            select(f.c.topic_fetch_urls_id, f.c.url, f.c.state, f.c.assume_match)
            .where(f.c.topics_id == self.topics_id, f.c.iteration == iteration, f.c.state.in_(OPEN_STATES))
            .order_by(f.c.topic_fetch_urls_id)
        )
        if limit:
            query = query.limit(limit)
        with self.store.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def _process_pending(self, iteration: int, report: IterationReport) -> None:
        rows = self._pending_rows(iteration)
        self.log(f"{self.topic.name}: iteration {iteration}: {len(rows)} pending URLs")
        known = self._known_outcomes(rows)
        to_fetch: dict[str, dict] = {}
        for row in rows:
            try:
                resolved = self._resolve_without_fetch(row, known)
            except Exception as exc:  # noqa: BLE001 - one bad URL must not stop the iteration
                self._finish(row, ERROR, message=_error_text(exc), report=report)
                continue
            if resolved is None:
                to_fetch[row["url"]] = row
            else:
                state, code, message, stories_id = resolved
                if stories_id is not None:
                    self._accept_story(row, stories_id, iteration, report, state=state)
                else:
                    self._finish(row, state, code=code, message=message, report=report)
        if not to_fetch:
            return
        for outcome in self.source.fetch_many(list(to_fetch)):
            row = to_fetch.get(outcome.url)
            if row is None:
                continue
            report.fetched += 1
            report.throttle_wait += float(getattr(outcome, "throttle_wait_seconds", 0.0) or 0.0)
            try:
                self._handle_outcome(row, outcome, iteration, report)
            except Exception as exc:  # noqa: BLE001
                self._finish(row, ERROR, code=outcome.status, message=_error_text(exc), report=report)
            if report.urls_processed % self.progress_every == 0:
                self.log(
                    f"{self.topic.name}: iteration {iteration}: {report.urls_processed}/{len(rows)} URLs, "
                    f"{report.stories_added} stories added, {report.throttle_wait:.1f}s waiting on throttles"
                )

    def _known_outcomes(self, rows: list[dict]) -> dict[str, dict]:
        """For every URL variant of the pending rows: an earlier failure in this topic, or a known story.

        Two indexed queries per 500 variants for the whole batch, instead of two per URL."""
        variants = sorted(
            {v[: s.MAX_URL_LENGTH] for row in rows for v in (url_variants(row["url"]) or [row["url"]])}
        )
        f, su, st, media = s.topic_fetch_urls, s.story_urls, s.stories, s.media
        known: dict[str, dict] = {}
        with self.store.engine.connect() as conn:
            for start in range(0, len(variants), 500):
                chunk = variants[start : start + 500]
                for r in conn.execute(
                    select(f.c.url, f.c.topic_fetch_urls_id, f.c.state, f.c.code, f.c.message).where(
                        f.c.topics_id == self.topics_id,
                        f.c.url.in_(chunk),
                        f.c.state.in_((REQUEST_FAILED, CONTENT_MATCH_FAILED)),
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
                    .where(su.c.url.in_(chunk), media.c.foreign_rss_links.is_(False))
                ):
                    rank = (
                        r.dup_media_id is not None,
                        r.stories_id,
                    )  # non-duplicate media first, then oldest
                    entry = known.setdefault(r.url, {})
                    if "story" not in entry or rank < entry["story"]:
                        entry["story"] = rank
        return known

    def _resolve_without_fetch(
        self, row: dict, known: dict[str, dict]
    ) -> tuple[str, int | None, str | None, int | None] | None:
        """The steps before a fetch: (state, code, message, stories_id), or None when the URL must be fetched."""
        url = row["url"]
        if is_ignored_url(url) or is_ignored_url(normalize_url_lossy(url) or ""):
            return IGNORED, 403, "matches the ignore pattern", None
        variants = [v[: s.MAX_URL_LENGTH] for v in (url_variants(url) or [url])]
        failures = [
            known[v]["failure"]
            for v in variants
            if "failure" in known.get(v, {}) and known[v]["failure"][0] != row["topic_fetch_urls_id"]
        ]
        if failures:
            _, state, code, message = failures[0]
            return state, code, f"same as earlier fetch: {message or ''}".strip(), None
        if row["state"] == PENDING:
            stories = [known[v]["story"] for v in variants if "story" in known.get(v, {})]
            if stories:
                return STORY_MATCH, 200, None, min(stories)[1]
        return None

    def find_story_by_urls(self, urls: Iterable[str]) -> int | None:
        """A story known by one of ``urls``; prefers media that are not duplicates, then the oldest story.

        Every story's url, guid and their lossy forms are recorded in story_urls when it is added, so one
        indexed lookup there covers Media Cloud's three (stories.url, stories.guid, story_urls.url)."""
        candidates = sorted({u[: s.MAX_URL_LENGTH] for u in urls if u})
        if not candidates:
            return None
        st, su, media = s.stories, s.story_urls, s.media
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(su.c.stories_id)
                .join(st, st.c.stories_id == su.c.stories_id)
                .join(media, media.c.media_id == st.c.media_id)
                .where(su.c.url.in_(candidates), media.c.foreign_rss_links.is_(False))
                .order_by(media.c.dup_media_id.is_(None).desc(), su.c.stories_id)
                .limit(1)
            ).first()
        return int(row.stories_id) if row else None

    def _handle_outcome(
        self, row: dict, outcome: FetchOutcome, iteration: int, report: IterationReport
    ) -> None:
        refused = getattr(outcome, "refused_reason", None)
        if refused:
            # Policy refusals (SSRF guard, robots.txt, not a page) are "skipped"; a page too large to read failed.
            state = REQUEST_FAILED if refused.startswith("too-large") else SKIPPED
            self._finish(row, state, code=outcome.status, message=f"refused: {refused}", report=report)
            return
        if (
            outcome.error
            or outcome.status is None
            or not (200 <= outcome.status < 300)
            or outcome.content is None
        ):
            message = outcome.error or f"HTTP {outcome.status}"
            self._finish(row, REQUEST_FAILED, code=outcome.status, message=message, report=report)
            return
        final_url = outcome.final_url or outcome.url
        redirect_url = final_url if final_url != outcome.url else None
        if redirect_url:
            if is_ignored_url(redirect_url):
                self._finish(
                    row, IGNORED, code=403, message=f"redirect to ignored {redirect_url}", report=report
                )
                return
            stories_id = self.find_story_by_urls(url_variants(outcome.url, redirect_url=redirect_url))
            if stories_id is not None:
                self._accept_story(
                    row, stories_id, iteration, report, state=STORY_MATCH, redirect_url=redirect_url
                )
                return
        html_text = outcome.text or ""
        if not row["assume_match"] and not self.query.matches(html_text[:CONTENT_MATCH_BYTES]):
            self._finish(
                row,
                CONTENT_MATCH_FAILED,
                code=outcome.status,
                message="the page does not match the query",
                report=report,
            )
            return
        # one parse gives the story and its links; the links wait for this iteration's link mining
        extracted, links = extract_story_and_links(outcome.content, final_url)
        added = self.store.add_stories(
            [
                NewStory(
                    url=final_url,
                    title=extracted.title,
                    text=extracted.text,
                    publish_date=extracted.publish_date,
                    description=extracted.description,
                    language=extracted.language,
                    guid=final_url,
                    html=outcome.content,
                    encoding=getattr(outcome, "charset", None),
                    http_status=outcome.status,
                )
            ],
            source=SPIDER_SOURCE,
        )
        stories_id = added.stories_ids[0]
        self._page_links[stories_id] = links
        if outcome.url != final_url:
            with self.store.engine.begin() as conn:
                self.store.insert_ignore(
                    conn,
                    s.story_urls,
                    [{"stories_id": stories_id, "url": outcome.url[: s.MAX_URL_LENGTH]}],
                    ["stories_id", "url"],
                )
        self._accept_story(
            row,
            stories_id,
            iteration,
            report,
            state=STORY_ADDED,
            redirect_url=redirect_url,
            code=outcome.status,
        )

    def _accept_story(
        self,
        row: dict,
        stories_id: int,
        iteration: int,
        report: IterationReport,
        state: str,
        redirect_url: str | None = None,
        code: int | None = 200,
    ) -> None:
        """A URL resolved to a story: link it, and add the story to the topic if it is relevant."""
        with self.store.engine.begin() as conn:
            in_topic = conn.execute(
                select(s.topic_stories.c.topic_stories_id).where(
                    s.topic_stories.c.topics_id == self.topics_id, s.topic_stories.c.stories_id == stories_id
                )
            ).first()
            relevant = (
                bool(in_topic)
                or row["assume_match"]
                or self.story_is_relevant(conn, stories_id, redirect_url)
            )
            added = False
            if relevant:
                added = self._add_topic_story(conn, stories_id, iteration, redirect_url)
            tl = s.topic_links
            conn.execute(
                update(tl)
                .where(
                    tl.c.topics_id == self.topics_id, tl.c.url == row["url"], tl.c.ref_stories_id.is_(None)
                )
                .values(ref_stories_id=stories_id, redirect_url=redirect_url)
            )
            final_state = state if relevant else CONTENT_MATCH_FAILED
            message = (
                None
                if relevant
                else "the story does not match the query (title, url, description, new sentences)"
            )
            self._write_state(conn, row, final_state, code, message, stories_id, redirect_url)
        report.urls_processed += 1
        report.states[final_state] += 1
        if added:
            report.stories_added += 1

    def story_is_relevant(self, conn: Connection, stories_id: int, redirect_url: str | None = None) -> bool:
        """Full relevance (fact sheet §2): title, description, url, redirect url, then the story's sentences
        that are new within its medium and calendar week."""
        st = s.stories
        story = conn.execute(
            select(
                st.c.title,
                st.c.description,
                st.c.url,
                st.c.text,
                st.c.media_id,
                st.c.publish_date,
                st.c.collect_date,
            ).where(st.c.stories_id == stories_id)
        ).first()
        if story is None:
            return False
        for field_text in (story.title, story.description, story.url, redirect_url):
            if field_text and self.query.matches(field_text):
                return True
        if self.query.matches_story(story.title, None, story.url, story.description):
            return True
        own = self._own_sentences(
            conn, stories_id, story.media_id, utc(story.publish_date or story.collect_date), story.text or ""
        )
        return bool(own) and self.query.matches(" ".join(own))

    def _own_sentences(
        self, conn: Connection, stories_id: int, media_id: int, when: datetime | None, text: str
    ) -> list[str]:
        week = week_start((when or datetime.now(UTC)).date())
        by_hash = {_sentence_md5(sentence): sentence for sentence in sentences(text)}
        if not by_hash:
            return []
        rows = [
            {"media_id": media_id, "week_start_date": week, "sentence_md5": digest, "stories_id": stories_id}
            for digest in by_hash
        ]
        self.store.insert_ignore(
            conn, s.story_sentence_hashes, rows, ["media_id", "week_start_date", "sentence_md5"]
        )
        ssh = s.story_sentence_hashes
        owned = conn.execute(
            select(ssh.c.sentence_md5).where(
                ssh.c.media_id == media_id,
                ssh.c.week_start_date == week,
                ssh.c.stories_id == stories_id,
            )
        ).scalars()
        return [by_hash[d] for d in owned if d in by_hash]

    def _finish(
        self,
        row: dict,
        state: str,
        report: IterationReport,
        code: int | None = None,
        message: str | None = None,
    ) -> None:
        """A URL that ends without a story. Its state is written with the next batch of such states (one
        transaction per STATE_BATCH): a crash before the flush leaves those URLs pending, and they are
        simply processed again."""
        self._unwritten_states.append(
            {
                "b_id": row["topic_fetch_urls_id"],
                "b_state": state,
                "b_code": code,
                "b_message": (message or None) and message[:4000],
                "b_fetch_date": now_utc(),
            }
        )
        if len(self._unwritten_states) >= STATE_BATCH:
            self._flush_states()
        report.urls_processed += 1
        report.states[state] += 1

    def _flush_states(self) -> None:
        if not self._unwritten_states:
            return
        f = s.topic_fetch_urls
        statement = (
            update(f)
            .where(f.c.topic_fetch_urls_id == bindparam("b_id"))
            .values(
                state=bindparam("b_state"),
                code=bindparam("b_code"),
                message=bindparam("b_message"),
                stories_id=None,
                redirect_url=None,
                fetch_date=bindparam("b_fetch_date"),
            )
        )
        with self.store.engine.begin() as conn:
            conn.execute(statement, self._unwritten_states)
        self._unwritten_states = []

    def _write_state(
        self,
        conn: Connection,
        row: dict,
        state: str,
        code: int | None,
        message: str | None,
        stories_id: int | None,
        redirect_url: str | None,
    ) -> None:
        f = s.topic_fetch_urls
        conn.execute(
            update(f)
            .where(f.c.topic_fetch_urls_id == row["topic_fetch_urls_id"])
            .values(
                state=state,
                code=code,
                message=(message or None) and message[:4000],
                stories_id=stories_id,
                redirect_url=redirect_url and redirect_url[: s.MAX_URL_LENGTH],
                fetch_date=now_utc(),
            )
        )

    # ------------------------------------------------------------------ link mining

    def mine_topic_stories(self) -> int:
        """Extract the links of every topic story not yet mined; queue them for the next iteration."""
        ts, st = s.topic_stories, s.stories
        with self.store.engine.connect() as conn:
            todo = conn.execute(
                select(ts.c.stories_id, ts.c.iteration, st.c.url, st.c.text, st.c.publish_date)
                .join(st, st.c.stories_id == ts.c.stories_id)
                .where(ts.c.topics_id == self.topics_id, ts.c.link_mined.is_(False))
                .order_by(ts.c.stories_id)
            ).all()
        links_added = 0
        for story in todo:
            try:
                links_added += self._mine_story(story)
                error = ""
            except Exception as exc:  # noqa: BLE001 - recorded per story, counted in the error rate
                error = _error_text(exc)
            with self.store.engine.begin() as conn:
                conn.execute(
                    update(ts)
                    .where(ts.c.topics_id == self.topics_id, ts.c.stories_id == story.stories_id)
                    .values(link_mined=True, link_mine_error=error)
                )
        if todo:
            self._link_known_refs()
        return links_added

    def _within_date_window(self, publish_date: datetime | None) -> bool:
        """Media Cloud only mines stories with no date or dated within the topic dates ± 7 days."""
        if publish_date is None:
            return True
        day = utc(publish_date).date()
        return self.topic.start_date - timedelta(days=7) <= day <= self.topic.end_date + timedelta(days=7)

    def _mine_story(self, story) -> int:  # noqa: ANN001 - a SQLAlchemy row
        if not self._within_date_window(story.publish_date):
            return 0
        links = self._page_links.pop(story.stories_id, None)
        if links is None:  # a story from the archive (or a re-run): its links come from the stored page
            with self.store.engine.connect() as conn:
                html = self.store.story_html(conn, story.stories_id)
            page = html or f"<html><body><p>{story.text or ''}</p></body></html>"
            links = extract_links(page, base_url=story.url)
        next_iteration = story.iteration + 1
        link_rows, fetch_rows = [], []
        with self.store.engine.begin() as conn:
            for link in links:
                if is_self_link(story.url, link):
                    domain = distinctive_domain(story.url) or ""
                    if skip_self_link(story.url, link, self._self_links(conn, domain)):
                        continue
                    self._count_self_link(conn, domain)
                link_rows.append(
                    {
                        "topics_id": self.topics_id,
                        "stories_id": story.stories_id,
                        "url": link[: s.MAX_URL_LENGTH],
                    }
                )
                if next_iteration <= self.topic.max_iterations:
                    fetch_rows.append(self._fetch_row(link, next_iteration))
            added = self.store.insert_ignore(
                conn, s.topic_links, link_rows, ["topics_id", "stories_id", "url"]
            )
            self.store.insert_ignore(conn, s.topic_fetch_urls, fetch_rows, ["topics_id", "url"])
        return added

    def _self_links(self, conn: Connection, domain: str) -> int:
        td = s.topic_domains
        count = conn.execute(
            select(td.c.self_links).where(td.c.topics_id == self.topics_id, td.c.domain == domain)
        ).scalar_one_or_none()
        return int(count or 0)

    def _count_self_link(self, conn: Connection, domain: str) -> None:
        td = s.topic_domains
        self.store.insert_ignore(
            conn,
            td,
            [{"topics_id": self.topics_id, "domain": domain, "self_links": 0}],
            ["topics_id", "domain"],
        )
        conn.execute(
            update(td)
            .where(td.c.topics_id == self.topics_id, td.c.domain == domain)
            .values(self_links=td.c.self_links + 1)
        )

    def _link_known_refs(self) -> None:
        """Links to URLs that were already resolved to a story point at that story."""
        tl, f = s.topic_links, s.topic_fetch_urls
        resolved = (
            select(f.c.stories_id)
            .where(and_(f.c.topics_id == tl.c.topics_id, f.c.url == tl.c.url, f.c.stories_id.is_not(None)))
            .limit(1)
            .scalar_subquery()
        )
        with self.store.engine.begin() as conn:
            conn.execute(
                update(tl)
                .where(tl.c.topics_id == self.topics_id, tl.c.ref_stories_id.is_(None))
                .values(ref_stories_id=resolved)
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
