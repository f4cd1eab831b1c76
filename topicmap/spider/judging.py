"""Judging a URL, as Media Cloud's fetch_link and story relevance test do: what became of it, and whether its
story belongs to the topic.

Before a fetch: the ignore list, an earlier failure of the same URL in the topic, a story already known by one
of its URL variants (:meth:`Judge.known_outcomes`, :meth:`Judge.resolve_without_fetch`). After a fetch
(:meth:`Judge.judge_fetched`): a refusal or an HTTP failure, a redirect to a known story, the query's
prefilter on the raw page (``TopicQuery.may_match``), then the story and its links extracted in one parse.
When a batch is written (:meth:`Judge.relevance`): the full relevance test on the stored story, by its fields,
then by its sentences that are new within its medium and calendar week.

What is known of a URL is what was known when its iteration first started (``known_at``), so the outcome of a
URL does not depend on which URLs of the iteration happened to be processed before it, or by which worker.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import Connection, Row

from topicmap.spider.store import (
    CONTENT_MATCH_FAILED,
    IGNORED,
    PENDING,
    REQUEST_FAILED,
    SKIPPED,
    STORY_ADDED,
    STORY_MATCH,
    SpiderStore,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, chunks, compress_page, utc
from topicmap.topics.query import TopicQuery
from topicmap.web.fetch import FetchOutcome
from topicmap.web.links import extract_story_and_links, is_ignored_url
from topicmap.web.urls import normalize_url_lossy, url_variants

SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+")


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
class Resolution:
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


class Judge:
    """Judges the URLs of one topic against its query and what its store knew when the iteration started."""

    def __init__(self, store: SpiderStore, query: TopicQuery) -> None:
        self.store = store
        self.query = query
        # when the iteration being processed first started, and the newest story id then
        # (SpiderStore.iteration_start; set by the spider before it judges that iteration's URLs)
        self.known_at: tuple[datetime, int] = (datetime.max.replace(tzinfo=UTC), 2**31 - 1)

    # ------------------------------------------------------------------ before a fetch

    def known_outcomes(self, rows: list[dict]) -> dict[str, dict]:
        """For every URL variant of the pending rows: an earlier failure in this topic, or a known story, as
        known when the iteration first started. Two indexed queries per 500 variants for the whole batch,
        instead of two per URL."""
        variants = sorted(
            {v for row in rows for v in (url_variants(row["url"]) or [row["url"]]) if s.url_fits(v)}
        )
        started_at, max_stories_id = self.known_at
        return self.store.known_outcomes(variants, started_at, max_stories_id)

    def resolve_without_fetch(self, row: dict, known: dict[str, dict]) -> Resolution | None:
        """The steps before a fetch, or None when the URL must be fetched."""
        url = row["url"]
        if is_ignored_url(url) or is_ignored_url(normalize_url_lossy(url) or ""):
            return Resolution(row, IGNORED, code=403, message="matches the ignore pattern")
        variants = [v for v in (url_variants(url) or [url]) if s.url_fits(v)]
        failures = [
            known[v]["failure"]
            for v in variants
            if "failure" in known.get(v, {}) and known[v]["failure"][0] != row["topic_fetch_urls_id"]
        ]
        if failures:
            _, state, code, message = failures[0]
            return Resolution(
                row, state, code=code, message=f"same as earlier fetch: {message or ''}".strip()
            )
        if row["state"] == PENDING:
            stories = [known[v]["story"] for v in variants if "story" in known.get(v, {})]
            if stories:
                return Resolution(row, STORY_MATCH, code=200, stories_id=min(stories)[1])
        return None

    def find_story_by_urls(self, urls: Iterable[str]) -> int | None:
        """A story known by one of ``urls``; prefers media that are not duplicates, then the oldest story.

        Every story's url, guid and their lossy forms are recorded in story_urls when it is added, so one
        indexed lookup there covers Media Cloud's three (stories.url, stories.guid, story_urls.url). Only
        stories known when the iteration started count: a redirect to a story another URL of the same
        iteration added is "story added" whichever worker got there first."""
        candidates = sorted({u for u in urls if u and s.url_fits(u)})
        if not candidates:
            return None
        return self.store.find_story_by_urls(candidates, self.known_at[1])

    # ------------------------------------------------------------------ after a fetch

    def judge_fetched(self, row: dict, outcome: FetchOutcome, compressor: Executor) -> Resolution:
        """What a fetched page means for its URL: a failure, a known story, or a new story with its links
        (its page compressed on ``compressor``).

        Nothing is written here: the resolution waits for its batch."""
        refused = getattr(outcome, "refused_reason", None)
        if refused:
            # Policy refusals (SSRF guard, robots.txt, not a page) are "skipped"; a page too large to read failed.
            state = REQUEST_FAILED if refused.startswith("too-large") else SKIPPED
            return Resolution(row, state, code=outcome.status, message=f"refused: {refused}")
        if (
            outcome.error
            or outcome.status is None
            or not (200 <= outcome.status < 300)
            or outcome.content is None
        ):
            message = outcome.error or f"HTTP {outcome.status}"
            return Resolution(row, REQUEST_FAILED, code=outcome.status, message=message)
        final_url = outcome.final_url or outcome.url
        if not s.url_fits(final_url):
            # redirected to a URL the store cannot hold whole: the story keeps the URL that was asked for
            final_url = outcome.url
        redirect_url = final_url if final_url != outcome.url else None
        if redirect_url:
            if is_ignored_url(redirect_url):
                return Resolution(row, IGNORED, code=403, message=f"redirect to ignored {redirect_url}")
            stories_id = self.find_story_by_urls(url_variants(outcome.url, redirect_url=redirect_url))
            if stories_id is not None:
                return Resolution(
                    row, STORY_MATCH, code=200, stories_id=stories_id, redirect_url=redirect_url
                )
        # The whole page the extractor reads, and the URLs, which are part of the story (Media Cloud read the
        # first MiB only: a story further down a large page was lost). False only if no story can match.
        raw_page = outcome.text or outcome.content
        if not row["assume_match"] and not self.query.may_match(raw_page, urls=(final_url, outcome.url)):
            return Resolution(
                row, CONTENT_MATCH_FAILED, code=outcome.status, message="the page does not match the query"
            )
        # zstandard releases the GIL: the page is compressed for storage on another core while this thread extracts
        page_gz = compressor.submit(compress_page, outcome.content)
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
        return Resolution(
            row,
            STORY_ADDED,
            code=outcome.status,
            new_story=story,
            links=links,
            redirect_url=redirect_url,
            fetched_url=outcome.url if redirect_url else None,
        )

    # ------------------------------------------------------------------ relevance, when a batch is written

    def relevance(
        self, conn: Connection, batch: list[Resolution], story_of: dict[int, int], in_topic: set[int]
    ) -> dict[int, bool]:
        """Full relevance of each resolution's story (``story_of``: index in ``batch`` -> stories_id), as Media
        Cloud's spider judges it. A story already in the topic, or fetched for a seed URL whose source says
        ``assume_match`` (topics.yaml), is relevant without a test. Any other is matched by the query on its
        title, description, URL and redirect URL (``fields_match``), then on its sentences that are new within
        its medium and calendar week; sentences are claimed in batch order, as one by one would. The raw-page
        prefilter (``TopicQuery.may_match`` in ``judge_fetched``) is an upper bound of this test: it never
        rejects a page whose story this keeps. Every story met here that is not in the topic yet claims its
        sentences, relevant or not, as every story of Media Cloud's store has its sentences recorded."""
        met = [i for i in sorted(story_of) if story_of[i] not in in_topic]
        relevant = dict.fromkeys(story_of, True)
        if not met:
            return relevant
        stories = self.store.stories_to_judge(conn, {story_of[i] for i in met})
        # every story met claims its sentences, whether a field, the seed's assume_match or its sentences make it
        # relevant (Media Cloud stores every story's sentences): a later copy in its medium and week adds nothing
        own = self.own_sentences(conn, [stories[story_of[i]] for i in met if story_of[i] in stories])
        for i in met:
            story = stories.get(story_of[i])
            if story is None:
                relevant[i] = False
            elif not batch[i].row["assume_match"] and not self.fields_match(story, batch[i].redirect_url):
                sentences_of_story = own.get(story_of[i], [])
                relevant[i] = bool(sentences_of_story) and self.query.matches(" ".join(sentences_of_story))
        return relevant

    def fields_match(self, story: Row, redirect_url: str | None) -> bool:
        """The query on the title, description, URL and redirect URL each alone (Media Cloud's per-field test:
        there a ``text:`` clause looks at that field), then on them as the fields of one story (``title:`` on
        the title, AND across fields)."""
        for field_text in (story.title, story.description, story.url, redirect_url):
            if field_text and self.query.matches(field_text):
                return True
        return self.query.matches_story(story.title, None, story.url, story.description)

    def claim_sentences_of(self, conn: Connection, stories_ids: Iterable[int]) -> None:
        """Stories joining the topic by another path (archive seeds) claim their sentences, in id order, a chunk
        of stories read at a time."""
        for chunk in chunks(sorted(set(stories_ids))):
            stories = self.store.stories_to_judge(conn, chunk)
            self.own_sentences(conn, [stories[sid] for sid in sorted(stories)])

    def own_sentences(self, conn: Connection, stories: list[Row]) -> dict[int, list[str]]:
        """Each story's sentences not already claimed by another story of its medium in its calendar week (the
        sentences not claimed yet are claimed for it, in the order of ``stories``)."""
        claims: list[tuple] = []  # rows in SENTENCE_CLAIM_COLUMNS order
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
        owners = self.store.claim_sentences(conn, claims)
        own: dict[int, list[str]] = {}
        for key, sentence in sentence_of.items():  # in story order: the query reads them joined
            if key in owners:
                own.setdefault(key[0], []).append(sentence)
        return own
