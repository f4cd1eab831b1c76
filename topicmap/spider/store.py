"""The spider's reads and writes of the topic store: every SQL statement of one topic's spidering, by name.

``SpiderStore`` is one topic's view of the tables the spider works on: ``topic_seed_urls`` (seeds to import),
``topic_fetch_urls`` (every URL met, with what became of it), ``stories``/``story_urls`` (stories found),
``story_sentence_hashes`` (who owns a sentence within its medium and week), ``topic_stories``, ``topic_links``,
``topic_domains`` (self links followed per site), ``topic_spider_iterations`` and ``topic_spider_metrics``.
The claims on ``topic_fetch_urls`` are ``topicmap.spider.claims``'s: one statement each, built with the claim.

Methods that take a ``conn`` write inside the caller's transaction (a batch of URLs is written in one); the
others open their own. Every insert is keyed (``TopicStore.insert_ignore`` / ``upsert``), so a killed run is
simply run again.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, and_, bindparam, func, select, tuple_, update

from topicmap.spider.claims import claim_keys
from topicmap.store import schema as s
from topicmap.store.topic_store import SPIDER_SOURCE, NewStory, TopicStore, chunks, now_utc, utc
from topicmap.store.version_stories import in_current_version

# The states of a topic_fetch_urls row, as Media Cloud's fetch_link names them; "python error" is Media Cloud's
# name for a bug.
PENDING = "pending"
REQUEST_FAILED = "request failed"
CONTENT_MATCH_FAILED = "content match failed"
STORY_MATCH = "story match"
STORY_ADDED = "story added"
IGNORED = "ignored"
SKIPPED = "skipped"
ERROR = "python error"
OPEN_STATES = (PENDING,)

#: a sentence claim row of story_sentence_hashes; the first three are its key
SENTENCE_CLAIM_COLUMNS = ("media_id", "week_start_date", "sentence_md5", "stories_id")
_T = TypeVar("_T")
#: rows in an asset's preview table
PREVIEW_ROWS = 15

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


@dataclass(frozen=True)
class SpiderProgress:
    """How far a topic's spidering is, as the spider sensor reads it (``topicmap.spider.plan``)."""

    pending_iteration: int | None  # lowest iteration with pending URLs (within max_iterations)
    processed_in_pending_iteration: int  # its URLs no longer pending
    iterations_done: int  # iterations with recorded metrics
    unmined_stories: int  # topic stories whose links are not mined yet
    seeds: int  # the topic's seeds
    unprocessed_seeds: int  # those not imported yet


def error_text(exc: BaseException) -> str:
    """The message an ``ERROR`` row (or a link-mining error) is written with: the exception on the first line
    (what error summaries group by), then the traceback's tail."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " ")[:500]
    return f"{head}\n{traceback.format_exc()[-1500:]}"


class SpiderStore:
    """One topic's spider tables in a topic store."""

    def __init__(self, store: TopicStore, topics_id: int) -> None:
        self.store = store
        self.topics_id = topics_id

    def begin(self) -> AbstractContextManager[Connection]:
        """A transaction for the ``conn`` methods, committed when the block ends."""
        return self.store.engine.begin()

    def in_transaction(self, work: Callable[[Connection], _T]) -> _T:
        """``work(conn)`` in a transaction, run again after a deadlock (``TopicStore.in_transaction``)."""
        return self.store.in_transaction(work)

    # ------------------------------------------------------------------ the iteration's place

    def lowest_pending_iteration(self, max_iterations: int) -> int | None:
        """The lowest iteration (within ``max_iterations``) that has pending URLs."""
        with self.store.engine.connect() as conn:
            return self._lowest_pending_iteration(conn, max_iterations)

    def _lowest_pending_iteration(self, conn: Connection, max_iterations: int) -> int | None:
        f = s.topic_fetch_urls
        return conn.execute(
            select(func.min(f.c.iteration)).where(
                f.c.topics_id == self.topics_id,
                f.c.state.in_(OPEN_STATES),
                f.c.iteration <= max_iterations,
            )
        ).scalar_one_or_none()

    def iterations_done(self) -> int:
        """Iterations whose metrics are recorded."""
        with self.store.engine.connect() as conn:
            return self._iterations_done(conn)

    def _iterations_done(self, conn: Connection) -> int:
        m = s.topic_spider_metrics
        return int(conn.execute(select(func.count()).where(m.c.topics_id == self.topics_id)).scalar_one())

    def last_iteration(self) -> int:
        """The highest iteration whose metrics are recorded."""
        m = s.topic_spider_metrics
        with self.store.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.max(m.c.iteration)).where(m.c.topics_id == self.topics_id)
                ).scalar_one()
            )

    def frontier_size(self, max_iterations: int) -> int:
        """Pending URLs within ``max_iterations``."""
        f = s.topic_fetch_urls
        with self.store.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).where(
                        f.c.topics_id == self.topics_id,
                        f.c.state.in_(OPEN_STATES),
                        f.c.iteration <= max_iterations,
                    )
                ).scalar_one()
            )

    def topic_story_count(self) -> int:
        return self.store.table_count(s.topic_stories, topics_id=self.topics_id)

    def progress(self, max_iterations: int) -> SpiderProgress:
        """How far the topic's spidering is, read in one connection."""
        f, ts, seeds = s.topic_fetch_urls, s.topic_stories, s.topic_seed_urls
        with self.store.engine.connect() as conn:
            pending_iteration = self._lowest_pending_iteration(conn, max_iterations)
            processed = 0
            if pending_iteration is not None:
                processed = conn.execute(
                    select(func.count()).where(
                        f.c.topics_id == self.topics_id,
                        f.c.iteration == pending_iteration,
                        f.c.state.not_in(OPEN_STATES),
                    )
                ).scalar_one()
            iterations_done = self._iterations_done(conn)
            unmined = conn.execute(
                select(func.count()).where(in_current_version(self.topics_id), ts.c.link_mined.is_(False))
            ).scalar_one()
            seed_counts = dict(
                conn.execute(
                    select(seeds.c.processed, func.count())
                    .where(seeds.c.topics_id == self.topics_id)
                    .group_by(seeds.c.processed)
                ).all()
            )
        return SpiderProgress(
            pending_iteration=pending_iteration,
            processed_in_pending_iteration=int(processed),
            iterations_done=iterations_done,
            unmined_stories=int(unmined),
            seeds=int(sum(seed_counts.values())),
            unprocessed_seeds=int(seed_counts.get(False, 0)),
        )

    def iteration_start(self, iteration: int) -> tuple[datetime, int]:
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

    # ------------------------------------------------------------------ seeds and URLs to fetch

    def unprocessed_seeds(self, conn: Connection) -> list[dict]:
        """The topic's seed rows not yet imported."""
        seeds = s.topic_seed_urls
        return [
            dict(row)
            for row in conn.execute(
                select(seeds).where(seeds.c.topics_id == self.topics_id, seeds.c.processed.is_(False))
            ).mappings()
        ]

    def mark_seeds_processed(self, conn: Connection, seed_ids: Sequence[int]) -> None:
        seeds = s.topic_seed_urls
        conn.execute(update(seeds).where(seeds.c.topic_seed_urls_id.in_(seed_ids)).values(processed=True))

    def fetch_row(
        self,
        url: str,
        iteration: int,
        state: str = PENDING,
        stories_id: int | None = None,
        assume_match: bool = False,
        topic_links_id: int | None = None,
    ) -> dict:
        """A new ``topic_fetch_urls`` row, with its claim keys."""
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

    def add_fetch_urls(self, conn: Connection, rows: Sequence[dict]) -> int:
        """New URLs to fetch (a URL the topic already has is left as it is). Returns the rows added."""
        return self.store.insert_ignore(conn, s.topic_fetch_urls, rows, ["topics_id", "url"])

    def set_url_states(self, conn: Connection, states: Sequence[dict]) -> None:
        """What became of a batch of URLs: rows of ``b_id``, ``b_state``, ``b_code``, ``b_message``,
        ``b_stories_id``, ``b_redirect_url``, ``b_fetch_date``."""
        conn.execute(_STATE_UPDATE, states)

    # ------------------------------------------------------------------ what is known of a URL

    def known_outcomes(
        self, variants: Sequence[str], started_at: datetime, max_stories_id: int
    ) -> dict[str, dict]:
        """For each URL of ``variants``: an earlier failure in this topic (``"failure"``: id, state, code,
        message), fetched before ``started_at``, and the best known story (``"story"``: (in a duplicate medium,
        stories_id), the least is the best) up to ``max_stories_id``.

        Two indexed queries per 500 variants."""
        f, su, media = s.topic_fetch_urls, s.story_urls, s.media
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
                    self._stories_known_by(
                        chunk, max_stories_id, su.c.url, su.c.stories_id, media.c.dup_media_id
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

    def find_story_by_urls(self, candidates: Sequence[str], max_stories_id: int) -> int | None:
        """A story (up to ``max_stories_id``) known by one of the ``candidates``; prefers media that are not
        duplicates, then the oldest story."""
        su, media = s.story_urls, s.media
        with self.store.engine.connect() as conn:
            row = conn.execute(
                self._stories_known_by(candidates, max_stories_id, su.c.stories_id)
                .order_by(media.c.dup_media_id.is_(None).desc(), su.c.stories_id)
                .limit(1)
            ).first()
        return int(row.stories_id) if row else None

    def _stories_known_by(self, urls: Sequence[str], max_stories_id: int, *columns: Any) -> Select:
        """``columns`` of the stories (up to ``max_stories_id``) that one of ``urls`` is a URL of, in media
        that do not take foreign RSS links."""
        st, su, media = s.stories, s.story_urls, s.media
        return (
            select(*columns)
            .join(st, st.c.stories_id == su.c.stories_id)
            .join(media, media.c.media_id == st.c.media_id)
            .where(
                su.c.url.in_(urls),
                media.c.foreign_rss_links.is_(False),
                su.c.stories_id <= max_stories_id,
            )
        )

    # ------------------------------------------------------------------ stories and relevance

    def add_stories(self, conn: Connection, stories: Sequence[NewStory]) -> list[int]:
        """Stories the spider generated; returns their ids, in order (an existing story keeps its id)."""
        return self.store.insert_stories(conn, stories, SPIDER_SOURCE).stories_ids

    def add_story_urls(self, conn: Connection, urls: Sequence[tuple[int, str]]) -> None:
        """More URLs (stories_id, url) a story is known by."""
        self.store.insert_ignore(
            conn, s.story_urls, [{"stories_id": sid, "url": url} for sid, url in urls], ["stories_id", "url"]
        )

    def in_topic(self, conn: Connection, stories_ids: Iterable[int]) -> set[int]:
        """Those of ``stories_ids`` that are stories of the topic's current version (one that left it when the
        topic changed is judged again when met)."""
        ts = s.topic_stories
        found: set[int] = set()
        for chunk in chunks(sorted(stories_ids)):
            found.update(
                conn.execute(
                    select(ts.c.stories_id).where(
                        in_current_version(self.topics_id), ts.c.stories_id.in_(chunk)
                    )
                ).scalars()
            )
        return found

    def stories_to_judge(self, conn: Connection, stories_ids: Iterable[int]) -> dict[int, Row]:
        """The fields relevance reads (title, description, url, text, media_id, publish and collect dates), by
        story id."""
        st = s.stories
        return {
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
                ).where(st.c.stories_id.in_(sorted(stories_ids)))
            )
        }

    def claim_sentences(self, conn: Connection, claims: Sequence[tuple]) -> set[tuple[int, str]]:
        """Claim sentences for stories (rows in ``SENTENCE_CLAIM_COLUMNS`` order), the first claim of a
        sentence within its medium and week winning. Returns the owner of each claimed sentence, as
        (stories_id, sentence_md5)."""
        ssh = s.story_sentence_hashes
        # the sentences claimed now are this batch's; only those already claimed need a look at their owner
        # (another story, or this one on a re-run after a crash)
        owners = set(
            self.store.insert_ignore_returning_tuples(
                conn,
                ssh,
                SENTENCE_CLAIM_COLUMNS,
                claims,
                SENTENCE_CLAIM_COLUMNS[:3],
                ["stories_id", "sentence_md5"],
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
        return owners

    # ------------------------------------------------------------------ a new topic version (spider.rejudge)

    def fetched_stories_of(self, conn: Connection, urls: Iterable[str]) -> set[int]:
        """The stories the topic fetched for ``urls``."""
        fu = s.topic_fetch_urls
        found: set[int] = set()
        for chunk in chunks(sorted(set(urls))):
            found.update(
                conn.execute(
                    select(fu.c.stories_id).where(
                        fu.c.topics_id == self.topics_id, fu.c.url.in_(chunk), fu.c.stories_id.is_not(None)
                    )
                ).scalars()
            )
        return found

    def topic_members(self, conn: Connection) -> list[Row]:
        """Every topic story (in its current version or not): stories_id, redirect_url, left_version."""
        ts = s.topic_stories
        return list(
            conn.execute(
                select(ts.c.stories_id, ts.c.redirect_url, ts.c.left_version)
                .where(ts.c.topics_id == self.topics_id)
                .order_by(ts.c.stories_id)
            ).all()
        )

    def set_left_version(self, conn: Connection, stories_ids: Sequence[int], version: int | None) -> None:
        """Topic stories outside ``version`` (None: back in the current one; only rows marked are written)."""
        ts = s.topic_stories
        marked = ts.c.left_version.is_not(None) if version is None else ts.c.left_version.is_(None)
        for chunk in chunks(sorted(stories_ids)):
            conn.execute(
                update(ts)
                .where(ts.c.topics_id == self.topics_id, ts.c.stories_id.in_(chunk), marked)
                .values(left_version=version)
            )

    def join_topic(self, conn: Connection, stories: dict[int, str | None], iteration: int) -> int:
        """Stories (id -> the redirect URL they were found by) join the topic at ``iteration``; those already in
        it move to ``iteration`` if it is lower (found again closer to the seeds), and one that had left the topic
        when its settings changed is back in its current version. Returns the stories added."""
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
        self.set_left_version(conn, list(stories), None)
        return added

    # ------------------------------------------------------------------ links

    def point_links(self, conn: Connection, pointed: Sequence[dict]) -> None:
        """Topic links to a URL (``b_url``) that resolved to a story now point at it (``b_stories_id``, found
        by ``b_redirect_url``)."""
        if not pointed:
            return
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

    def link_known_refs(self) -> None:
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

    def unmined_stories(self) -> list[Row]:
        """Stories of the topic's current version whose links are not mined yet (stories_id, iteration, url,
        publish_date), by id: one that left the version is mined if it comes back."""
        ts, st = s.topic_stories, s.stories
        with self.store.engine.connect() as conn:
            return conn.execute(
                select(ts.c.stories_id, ts.c.iteration, st.c.url, st.c.publish_date)
                .join(st, st.c.stories_id == ts.c.stories_id)
                .where(in_current_version(self.topics_id), ts.c.link_mined.is_(False))
                .order_by(ts.c.stories_id)
            ).all()

    def story_page(self, stories_id: int) -> tuple[bytes | None, str | None]:
        """A stored story's page, or (when no page was kept) its text: (html, None) or (None, text)."""
        with self.store.engine.connect() as conn:
            html = self.store.story_html(conn, stories_id)
            if html is not None:
                return html, None
            text = conn.execute(
                select(s.stories.c.text).where(s.stories.c.stories_id == stories_id)
            ).scalar_one_or_none()
        return None, text

    def mark_mined(self, conn: Connection, stories_ids: Iterable[int]) -> set[int]:
        """Mark topic stories mined, by a conditional update; returns those this call flipped (a story another
        worker marked first is not among them)."""
        ts = s.topic_stories
        won: set[int] = set()
        for chunk in chunks(sorted(set(stories_ids))):
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
        return won

    def self_links_followed(self, conn: Connection, domains: Sequence[str]) -> dict[str, int]:
        """Self links followed so far on each of the sites ``domains`` (those with none are left out)."""
        td = s.topic_domains
        return dict(
            conn.execute(
                select(td.c.domain, td.c.self_links).where(
                    td.c.topics_id == self.topics_id, td.c.domain.in_(domains)
                )
            ).all()
        )

    def count_self_links(self, conn: Connection, followed: Counter) -> None:
        """Add the self links just followed (site -> count) to each site's count."""
        if not followed:
            return
        td = s.topic_domains
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

    def add_topic_links(self, conn: Connection, links: Sequence[tuple[int, str]]) -> int:
        """Links (stories_id, url) found in topic stories; returns the links added."""
        return self.store.insert_ignore(
            conn,
            s.topic_links,
            [{"topics_id": self.topics_id, "stories_id": sid, "url": url} for sid, url in links],
            ["topics_id", "stories_id", "url"],
        )

    def set_link_mine_errors(self, conn: Connection, errors: Sequence[tuple[int, str]]) -> None:
        """Each mined story's link-mining error (stories_id, error; "" for none)."""
        ts = s.topic_stories
        conn.execute(
            update(ts)
            .where(ts.c.topics_id == self.topics_id, ts.c.stories_id == bindparam("b_stories_id"))
            .values(link_mine_error=bindparam("b_error")),
            [{"b_stories_id": sid, "b_error": error} for sid, error in errors],
        )

    # ------------------------------------------------------------------ respidering

    def respider_state(self, conn: Connection) -> tuple[str | None, str | None]:
        """(mined_window, respider_done) of the topic: what ``topicmap.spider.respider`` recorded last."""
        tp = s.topics
        row = conn.execute(
            select(tp.c.mined_window, tp.c.respider_done).where(tp.c.topics_id == self.topics_id)
        ).one()
        return row.mined_window, row.respider_done

    def set_respider_state(self, conn: Connection, mined_window: str, respider_done: str | None) -> None:
        tp = s.topics
        conn.execute(
            update(tp)
            .where(tp.c.topics_id == self.topics_id)
            .values(mined_window=mined_window, respider_done=respider_done)
        )

    def unmark_mined(self, conn: Connection, days: tuple[date | None, date | None] | None) -> int:
        """Topic stories to be mined again: every one (``days`` None), or those published within ``days``
        (inclusive UTC days; None: no bound on that side). Returns the stories whose flag was reset."""
        ts, st = s.topic_stories, s.stories
        query = update(ts).where(ts.c.topics_id == self.topics_id, ts.c.link_mined.is_(True))
        if days is not None:
            first, last = days
            dated = select(st.c.stories_id).where(st.c.publish_date.is_not(None))
            if first is not None:
                dated = dated.where(st.c.publish_date >= datetime.combine(first, time.min, UTC))
            if last is not None:
                dated = dated.where(
                    st.c.publish_date < datetime.combine(last + timedelta(days=1), time.min, UTC)
                )
            query = query.where(ts.c.stories_id.in_(dated))
        return conn.execute(query.values(link_mined=False)).rowcount or 0

    # ------------------------------------------------------------------ metrics and health

    def record_metrics(
        self,
        iteration: int,
        stories_added: int,
        links_added: int,
        frontier_left: int,
        elapsed: float,
        throttle_wait: float,
    ) -> None:
        """The iteration's row of ``topic_spider_metrics`` (its URLs by state are counted here)."""
        f = s.topic_fetch_urls
        with self.store.engine.begin() as conn:
            by_state = dict(
                conn.execute(
                    select(f.c.state, func.count())
                    .where(f.c.topics_id == self.topics_id, f.c.iteration == iteration)
                    .group_by(f.c.state)
                ).all()
            )
            row = {
                "topics_id": self.topics_id,
                "iteration": iteration,
                "links_processed": sum(v for k, v in by_state.items() if k not in OPEN_STATES),
                "stories_added": stories_added,
                "links_added": links_added,
                "frontier_left": frontier_left,
                "elapsed_time": elapsed,
                "throttle_wait_time": throttle_wait,
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

    def error_counts(self) -> tuple[int, list[tuple[str | None, int]], int]:
        """(URLs processed, (message, count) of every error of fetching and of link mining, topic stories)."""
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
        return int(processed), [tuple(row) for row in [*errors, *mine_errors]], int(mined)

    # ------------------------------------------------------------------ what the assets show

    def url_states(self) -> dict[str, int]:
        """The topic's URLs by state."""
        f = s.topic_fetch_urls
        with self.store.engine.connect() as conn:
            return dict(
                conn.execute(
                    select(f.c.state, func.count()).where(f.c.topics_id == self.topics_id).group_by(f.c.state)
                ).all()
            )

    def stories_per_iteration(self) -> dict[int, int]:
        """The topic's stories by the iteration that found them."""
        ts = s.topic_stories
        with self.store.engine.connect() as conn:
            return dict(
                conn.execute(
                    select(ts.c.iteration, func.count())
                    .where(ts.c.topics_id == self.topics_id)
                    .group_by(ts.c.iteration)
                ).all()
            )

    def link_counts(self) -> tuple[int, int]:
        """(topic links, those pointed at a story)."""
        tl = s.topic_links
        with self.store.engine.connect() as conn:
            links = conn.execute(select(func.count()).where(tl.c.topics_id == self.topics_id)).scalar_one()
            resolved = conn.execute(
                select(func.count()).where(tl.c.topics_id == self.topics_id, tl.c.ref_stories_id.is_not(None))
            ).scalar_one()
        return int(links), int(resolved)

    def fetched_urls_preview(self, iteration: int) -> list[dict[str, Any]]:
        """The URLs of ``iteration`` fetched last (url, iteration, state, code, message)."""
        f = s.topic_fetch_urls
        return self._preview(
            select(f.c.url, f.c.iteration, f.c.state, f.c.code, f.c.message)
            .where(f.c.topics_id == self.topics_id, f.c.iteration == iteration)
            .order_by(f.c.fetch_date.desc())
        )

    def topic_stories_preview(self) -> list[dict[str, Any]]:
        """The stories that joined the topic last (stories_id, iteration, url, title, publish_date)."""
        ts, st = s.topic_stories, s.stories
        return self._preview(
            select(ts.c.stories_id, ts.c.iteration, st.c.url, st.c.title, st.c.publish_date)
            .join(st, st.c.stories_id == ts.c.stories_id)
            .where(ts.c.topics_id == self.topics_id)
            .order_by(ts.c.topic_stories_id.desc())
        )

    def _preview(self, query: Select) -> list[dict[str, Any]]:
        with self.store.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query.limit(PREVIEW_ROWS)).mappings()]
