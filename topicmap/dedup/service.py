"""The near-duplicate lookup service: "which stored stories are copies of this URL or text, or contain it?".

``topicmap serve`` runs it (Starlette + uvicorn):

- ``GET /near-duplicates?url=URL``: a story the store knows by that URL (any of its URL variants) is looked
  up by its stored text; an unknown URL is fetched through the spider's fetcher (SSRF guard, size cap,
  timeouts, robots.txt, the site's politeness interval) and its article text extracted. An unreachable or
  refused URL answers 502 with the fetch state.
- ``POST /near-duplicates`` with ``{"text": "..."}`` (JSON) or a text/plain body.
- Both take ``max_distance`` (simhash bits, 0..6), ``min_similarity`` (word-bigram Jaccard, 0..1),
  ``min_containment`` (0..1) and ``limit``.
- ``GET /health``: how many fingerprints are loaded, the size of the containment index, and the URL lookups
  queued and running.

Lookups that fetch a page can wait minutes (a site's requests are its politeness interval apart, 10 s by
default), so they never hold the threads of the other lookups: they go to a queue of their own
(:class:`UrlLookupQueue`) of at most ``max_pending_urls`` (``--max-pending-urls``; one more answers 503 with
``Retry-After``), run by ``url_workers`` threads, one lookup per site at a time. A lookup whose client goes away
is dropped from the queue, or, when its fetch has begun, ends at once if the fetch waits for a slot, and
within a fraction of a second if a request is under way (connecting, waiting for headers, reading a slow body:
the request is cut and its connection closed), so its worker is free for the next lookup. Stored URLs,
refusals decided without the network (an address literal the SSRF guard refuses, a robots.txt rule already
read) and texts are answered without the queue, so they stay fast however many URL lookups wait. At shutdown
(:class:`LookupServer`) the pending URL lookups are answered 503 at once, and a request still open
``SHUTDOWN_GRACE_SECONDS`` later is cancelled.

Each match: stories_id, url, title, medium, hamming_distance, shingle_similarity (whole-document word-bigram
Jaccard) and containment (the share of the looked-up text's word bigrams the story holds); the stories holding
most of the text first, then the most similar. Candidates come two ways: simhash fingerprints within
``max_distance`` bits (whole-document copies, as the ``near_duplicates`` asset finds them) and stories sharing
the text's winnowed word 4-grams (:mod:`topicmap.dedup.containment`: a paragraph or a quote of a longer story,
whose fingerprint is far from the story's and whose Jaccard with it is a few percent). A candidate is a match
when its similarity reaches ``min_similarity`` or its containment reaches ``min_containment``. A text must have
``MIN_QUERY_WORDS`` to ``MAX_QUERY_WORDS`` words (422 otherwise, saying why).

The fingerprints of every stored story (archive and topics) are held in memory (:class:`FingerprintCatalog`,
a :class:`~topicmap.dedup.simhash.NearDuplicateIndex`), beside the containment keys of their texts (a
:class:`~topicmap.dedup.containment.ContainmentIndex`, ~8 bytes per 6.5 words of text: ~0.8 KB for a
655-word article), and refreshed every ``refresh_seconds``: stories added since the last refresh are
fingerprinted if they have no fingerprint yet (stored, so the assets reuse them), their texts read and keyed
(~2 ms of CPU for an 800-word article with its fingerprint, mostly tokenizing), and added to both indexes. Texts, titles and URLs stay in the
database and are read only for the candidates. A lookup tokenizes its text once (fingerprint, shingles and
containment keys); the candidates' shingle arrays are kept in a memory-bounded cache (:class:`ShingleCache`)
that is used only for the very text it was computed from.

Safety: the service binds to 127.0.0.1 unless told otherwise, and any other address requires a bearer token
(from the environment, never logged); request bodies and fetched pages are size-capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import json
import logging
import math
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import uvicorn
from sqlalchemy import func, select
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from topicmap import settings
from topicmap.dedup.containment import (
    DEFAULT_MIN_CONTAINMENT,
    MIN_QUERY_WORDS,
    ContainmentIndex,
    containment_keys_many,
    containment_keys_of_token_hashes,
)
from topicmap.dedup.service_limits import DEFAULT_MAX_PENDING_URLS, DEFAULT_URL_WORKERS
from topicmap.dedup.simhash import (
    DEFAULT_CANDIDATE_DISTANCE,
    DEFAULT_MIN_JACCARD,
    NearDuplicateIndex,
    containment_sorted,
    jaccard_sorted,
    shingle_array,
    text_features,
    tokenize,
)
from topicmap.dedup.store import SIMHASH_FEATURE_VERSION, ensure_fingerprints, simhashes_from_db
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.web.extract import extract_story
from topicmap.web.fetch import WebFetcher
from topicmap.web.throttle import DEFAULT_INTERVAL, throttle_domain
from topicmap.web.urls import is_http_url, url_variants

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # a POSTed text: far above any article, far below what would hurt the service
MAX_FETCH_BYTES = 5 * 1024 * 1024  # a fetched page (the spider's default is 10 MiB; one lookup needs less)
MAX_URL_CHARS = 2048
MAX_LIMIT = 100
DEFAULT_LIMIT = 20
# Candidates read from the database per lookup, nearest first: bounds the work of a text that is close to a
# huge cluster of copies.
MAX_CANDIDATES = 500
REFRESH_BATCH = 5000
# Texts tokenized at once when a refresh keys stories for the containment index (their token lists are the
# transient memory: ~60 bytes a word).
KEYING_BATCH_CHARS = 2_000_000
# The longest text a lookup compares, in words: a long-form article is ~10,000; the bound keeps one request's
# tokenizing and containment postings bounded whatever body size is accepted.
MAX_QUERY_WORDS = 20_000
# Shingle arrays of stored stories kept between lookups (a long article's is ~60 KB, a median one's ~4 KB).
DEFAULT_SHINGLE_CACHE_BYTES = 64 * 1024 * 1024
# Measured bytes of a cache entry beside its array's data (dict slot, key, digest, tuple, array header).
_CACHE_ENTRY_OVERHEAD = 330
# What a 503 for a full URL queue asks the client to wait: one default politeness interval, the soonest a
# site's next lookup can start.
RETRY_AFTER_SECONDS = math.ceil(DEFAULT_INTERVAL)
# How long a shutdown waits for open requests once the pending URL lookups are answered, before cancelling them.
SHUTDOWN_GRACE_SECONDS = 2
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class BadRequest(ValueError):
    """Input the service refuses (answered 4xx with this message)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class FetchFailed(RuntimeError):
    """The URL could not be fetched or read (answered 502 with the fetch state)."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__(state.get("reason") or "fetch failed")
        self.state = state


class ServiceBusy(RuntimeError):
    """A URL lookup the service cannot take now (answered 503 with ``Retry-After``)."""


@dataclass(frozen=True)
class Match:
    stories_id: int
    url: str
    title: str | None
    medium: str | None
    hamming_distance: int | None  # None only for a story whose fingerprint is not stored
    shingle_similarity: float
    containment: float

    def as_json(self) -> dict[str, Any]:
        return {
            "stories_id": self.stories_id,
            "url": self.url,
            "title": self.title,
            "medium": self.medium,
            "hamming_distance": self.hamming_distance,
            "shingle_similarity": round(self.shingle_similarity, 4),
            "containment": round(self.containment, 4),
        }


def check_query_words(words: int) -> None:
    """Refuse a text too short to say anything or too long to compare (422, saying which and why)."""
    if words < MIN_QUERY_WORDS:
        raise BadRequest(
            f"the text has {words} word(s); a lookup needs at least {MIN_QUERY_WORDS}: shorter texts are "
            f"in too many stories to tell anything, and a text is sure to be found inside a story only from "
            f"{MIN_QUERY_WORDS} words on",
            422,
        )
    if words > MAX_QUERY_WORDS:
        raise BadRequest(
            f"the text has {words:,} words; a lookup compares at most {MAX_QUERY_WORDS:,} (send a part of it)",
            422,
        )


class ShingleCache:
    """Stored stories' shingle arrays (``shingle_array``), least recently used first out past ``max_bytes``.

    An entry is used only for the very text it was computed from (a blake2b digest of the text read with the
    candidate, compared on every hit), so a story whose text changed in the store is shingled afresh: the
    cache saves the tokenizing and hashing of a lookup's candidates, never changes an answer.
    """

    def __init__(self, max_bytes: int = DEFAULT_SHINGLE_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict[int, tuple[bytes, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()  # lookups run in a thread pool

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def shingles(self, stories_id: int, text: str) -> np.ndarray:
        """The shingle array of this story's ``text`` (from the cache when it holds this very text)."""
        digest = self._digest(text)
        with self._lock:
            entry = self._entries.get(stories_id)
            if entry is not None and entry[0] == digest:
                self._entries.move_to_end(stories_id)
                self.hits += 1
                return entry[1]
            self.misses += 1
        computed = shingle_array(text)  # outside the lock: other lookups go on meanwhile
        size = computed.nbytes + _CACHE_ENTRY_OVERHEAD
        if size > self.max_bytes:
            return computed
        with self._lock:
            old = self._entries.pop(stories_id, None)
            if old is not None:
                self.bytes -= old[1].nbytes + _CACHE_ENTRY_OVERHEAD
            self._entries[stories_id] = (digest, computed)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped.nbytes + _CACHE_ENTRY_OVERHEAD
        return computed

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


class FingerprintCatalog:
    """Every stored story's simhash and containment keys in memory, for lookups; ``refresh`` loads the stories
    added since.

    ``shingle_cache_bytes`` bounds the memory of the stored stories' shingle arrays kept between lookups
    (:class:`ShingleCache`; 0 keeps none)."""

    def __init__(
        self,
        store: TopicStore,
        max_distance: int = DEFAULT_CANDIDATE_DISTANCE,
        shingle_cache_bytes: int = DEFAULT_SHINGLE_CACHE_BYTES,
    ) -> None:
        self.store = store
        self.shingle_cache = ShingleCache(shingle_cache_bytes)
        self.max_distance = max_distance
        self.index = NearDuplicateIndex(max_distance=max_distance)
        self.containment = ContainmentIndex()
        # One refresh at a time (the index's adds must not overlap); lookups never wait for it: an add
        # publishes the index's new arrays in one assignment.
        self._refresh_lock = threading.Lock()
        self.watermark = 0  # highest stories_id loaded (stories are only ever added)
        self.refreshed_at: float | None = None

    def __len__(self) -> int:
        return len(self.index)

    def refresh(self, progress: Callable[[int], None] | None = None) -> int:
        """Fingerprint (if needed) and load the stories added since the last refresh; returns how many."""
        loaded = 0
        with self._refresh_lock:
            while True:
                with self.store.engine.connect() as conn:
                    ids = list(
                        conn.execute(
                            select(s.stories.c.stories_id)
                            .where(s.stories.c.stories_id > self.watermark)
                            .order_by(s.stories.c.stories_id)
                            .limit(REFRESH_BATCH)
                        ).scalars()
                    )
                if not ids:
                    break
                ensure_fingerprints(self.store, ids)
                sh = s.story_simhashes
                with self.store.engine.connect() as conn:
                    rows = conn.execute(
                        select(sh.c.stories_id, sh.c.simhash).where(
                            sh.c.stories_id.in_(ids), sh.c.feature_version == SIMHASH_FEATURE_VERSION
                        )
                    ).all()
                new_ids = [int(row.stories_id) for row in rows]
                values = simhashes_from_db([row.simhash for row in rows])
                # Keys first: if reading or keying the texts fails, neither index holds the batch, and the
                # next refresh takes it again (the simhash index refuses ids it already holds).
                self._add_containment_keys(ids)
                self.index.add(new_ids, values)
                self.watermark = max(ids)
                loaded += len(new_ids)
                if progress is not None:
                    progress(loaded)
            self.refreshed_at = time.time()
        return loaded

    def _add_containment_keys(self, ids: list[int]) -> None:
        """Read, tokenize and key these stories' texts (``KEYING_BATCH_CHARS`` of text at a time, so that
        only one part's token lists are in memory), then add them all at once: a failure adds none of them,
        and the next refresh takes the same stories again."""
        st = s.stories
        with self.store.engine.connect() as conn:
            lengths = conn.execute(
                select(st.c.stories_id, func.coalesce(func.length(st.c.text), 0)).where(
                    st.c.stories_id.in_(ids)
                )
            ).all()
        keyed: list[int] = []
        docs, keys = [], []
        part: list[int] = []
        part_chars = 0
        for position, (stories_id, chars) in enumerate(lengths):
            part.append(int(stories_id))
            part_chars += int(chars)
            if part_chars < KEYING_BATCH_CHARS and position < len(lengths) - 1:
                continue
            with self.store.engine.connect() as conn:
                texts = dict(
                    conn.execute(select(st.c.stories_id, st.c.text).where(st.c.stories_id.in_(part))).all()
                )
            doc, part_keys = containment_keys_many([tokenize(texts.get(i) or "") for i in part])
            docs.append(doc + len(keyed))
            keys.append(part_keys)
            keyed += part
            part, part_chars = [], 0
        if keyed:
            self.containment.add_keys(keyed, np.concatenate(docs), np.concatenate(keys))

    def candidates(self, value: int, max_distance: int) -> list[tuple[int, int]]:
        return self.index.query(value, max_distance)  # type: ignore[return-value]

    def story_id_for_url(self, url: str) -> int | None:
        """The stored story known by this URL (any of its variants), or None."""
        variants = url_variants(url) or [url]
        with self.store.engine.connect() as conn:
            found = conn.execute(
                select(s.story_urls.c.stories_id).where(s.story_urls.c.url.in_(variants)).limit(1)
            ).scalar_one_or_none()
            if found is None:
                found = conn.execute(
                    select(s.stories.c.stories_id).where(s.stories.c.url.in_(variants)).limit(1)
                ).scalar_one_or_none()
        return int(found) if found is not None else None

    def story_text(self, stories_id: int) -> str:
        with self.store.engine.connect() as conn:
            text = conn.execute(
                select(s.stories.c.text).where(s.stories.c.stories_id == stories_id)
            ).scalar_one_or_none()
        return text or ""

    def candidate_details(self, ids: list[int]) -> dict[int, Any]:
        """Rows (stories_id, url, title, text, name of the medium) of these stories, by stories_id."""
        st, media = s.stories, s.media
        with self.store.engine.connect() as conn:
            return {
                row.stories_id: row
                for row in conn.execute(
                    select(st.c.stories_id, st.c.url, st.c.title, st.c.text, media.c.name)
                    .join(media, media.c.media_id == st.c.media_id)
                    .where(st.c.stories_id.in_(ids))
                )
            }

    def stored_fingerprints(self, ids: list[int]) -> dict[int, int]:
        """The stored simhash of each of these stories that has one."""
        sh = s.story_simhashes
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                select(sh.c.stories_id, sh.c.simhash).where(
                    sh.c.stories_id.in_(ids), sh.c.feature_version == SIMHASH_FEATURE_VERSION
                )
            ).all()
        values = simhashes_from_db([row.simhash for row in rows])
        return {int(row.stories_id): int(value) for row, value in zip(rows, values, strict=True)}

    def lookup(
        self,
        text: str,
        exclude: int | None = None,
        max_distance: int | None = None,
        min_similarity: float = DEFAULT_MIN_JACCARD,
        limit: int = DEFAULT_LIMIT,
        min_containment: float = DEFAULT_MIN_CONTAINMENT,
    ) -> tuple[int, list[Match]]:
        """(fingerprint of text, stored stories that contain it or are near-duplicates of it).

        Candidates: stories whose fingerprint is within ``max_distance`` bits, and stories sharing at least
        half the share ``min_containment`` asks of the text's containment keys (of at most
        ``MAX_KEYS_PER_QUERY`` of them; the key share follows the bigram containment, less the keys that an
        edit, or a seam with other text, takes away). Each is
        kept when its word-bigram Jaccard with the text reaches ``min_similarity`` or the share of the text's
        word bigrams it holds reaches ``min_containment``; most contained first, then most similar, nearest.
        Raises ``BadRequest`` for a text outside ``MIN_QUERY_WORDS``..``MAX_QUERY_WORDS`` words."""
        if not 0.0 <= min_containment <= 1.0:
            raise ValueError(f"min_containment must be between 0 and 1, got {min_containment}")
        k = self.max_distance if max_distance is None else max_distance
        tokens = tokenize(text)
        check_query_words(len(tokens))
        value, own, token_hashes = text_features(tokens)  # one tokenization and hashing for all three
        near = dict([(i, d) for i, d in self.candidates(value, k) if i != exclude][:MAX_CANDIDATES])
        sharing = self.containment.query(containment_keys_of_token_hashes(token_hashes))
        needed = max(1, math.ceil(min_containment * sharing.keys_used / 2))
        holding = [
            i
            for i in sharing.stories_ids[sharing.shared >= needed].tolist()
            if i != exclude and i not in near
        ][: MAX_CANDIDATES - len(near)]
        ids = [*near, *holding]
        if not ids:
            return value, []
        details = self.candidate_details(ids)
        kept = []
        for stories_id in ids:
            row = details.get(stories_id)
            if row is None:  # a fingerprint without a story (benchmark filler, or deleted): nothing to show
                continue
            theirs = self.shingle_cache.shingles(stories_id, row.text or "")
            similarity = jaccard_sorted(own, theirs)
            contained = containment_sorted(own, theirs)
            if similarity >= min_similarity or contained >= min_containment:
                kept.append((row, similarity, contained))
        # Distances of the stories found by containment alone: one more query, and only when there are some.
        distant = [row.stories_id for row, _, _ in kept if row.stories_id not in near]
        if distant:
            fingerprints = self.stored_fingerprints(distant)
            near.update({i: (value ^ fingerprints[i]).bit_count() for i in distant if i in fingerprints})
        matches = [
            Match(
                row.stories_id, row.url, row.title, row.name, near.get(row.stories_id), similarity, contained
            )
            for row, similarity, contained in kept
        ]
        matches.sort(
            key=lambda m: (
                -m.containment,
                -m.shingle_similarity,
                64 if m.hamming_distance is None else m.hamming_distance,
                m.stories_id,
            )
        )
        return value, matches[:limit]

    def stored_story_count(self) -> int:
        with self.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(s.stories)).scalar_one())


# ---------------------------------------------------------------------------------------------------
# URL lookups that fetch


@dataclass(eq=False)
class UrlLookup:
    """One accepted URL lookup: ``work(cancelled)`` runs in a worker thread; ``future`` (of the event loop)
    gets its result or error."""

    site: str  # the fetcher's throttle domain: lookups of one site run one at a time
    work: Callable[[threading.Event], Any]
    future: asyncio.Future
    cancelled: threading.Event = field(default_factory=threading.Event)


class UrlLookupQueue:
    """The URL lookups that fetch a page, run by ``workers`` threads of their own, so that they never hold the
    threads that answer texts and stored URLs.

    At most ``max_pending`` are accepted at once, queued or running (``submit`` raises :class:`ServiceBusy`
    beyond). Workers take the oldest queued lookup whose site has none running: the fetcher spaces a site's
    requests by its politeness interval anyway, so a second thread on the site would only wait, while lookups
    of other sites go on. ``cancel`` (the client went away) drops a queued lookup at once; a running one's
    fetch ends at once if it waits for a slot, within a fraction of a second if a request is under way (see
    :meth:`WebFetcher.fetch`). ``close`` answers every pending lookup :class:`ServiceBusy` and lets
    the workers end. ``submit``, ``cancel`` and ``close`` are called from the event loop's thread."""

    def __init__(
        self, workers: int = DEFAULT_URL_WORKERS, max_pending: int = DEFAULT_MAX_PENDING_URLS
    ) -> None:
        if workers < 1:
            raise ValueError(f"URL lookup workers must be at least 1, got {workers}")
        if max_pending < 1:
            raise ValueError(f"the URL lookup queue must hold at least 1, got {max_pending}")
        self.workers = workers
        self.max_pending = max_pending
        self._queued: list[UrlLookup] = []  # oldest first; at most max_pending, so scans are short
        self._running: set[UrlLookup] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._condition = threading.Condition()

    def counts(self) -> dict[str, int]:
        with self._condition:
            return {
                "queued": len(self._queued),
                "running": len(self._running),
                "max_pending": self.max_pending,
                "workers": self.workers,
            }

    def submit(self, site: str, work: Callable[[threading.Event], Any]) -> UrlLookup:
        """Accept a lookup (raises :class:`ServiceBusy` when ``max_pending`` are pending or the queue is closed)."""
        lookup = UrlLookup(site, work, asyncio.get_running_loop().create_future())
        with self._condition:
            if self._closed:
                raise ServiceBusy("the service is shutting down")
            if len(self._queued) + len(self._running) >= self.max_pending:
                raise ServiceBusy(
                    f"{self.max_pending} URL lookups are already pending (the service's --max-pending-urls); "
                    f"try again in {RETRY_AFTER_SECONDS} s"
                )
            self._queued.append(lookup)
            if len(self._threads) < min(self.workers, len(self._queued) + len(self._running)):
                # Threads start as lookups come: a service that is never asked for a URL runs none.
                thread = threading.Thread(target=self._work, name="url-lookup", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._condition.notify_all()
        return lookup

    def cancel(self, lookup: UrlLookup) -> None:
        """Nobody waits for this lookup any more: drop it if queued; if running, its fetch sends nothing more
        and cuts the request under way."""
        lookup.cancelled.set()
        lookup.future.cancel()
        with self._condition:
            if lookup in self._queued:
                self._queued.remove(lookup)

    def close(self) -> None:
        """Answer every pending lookup :class:`ServiceBusy` (the service is stopping); later submits are refused
        and the workers end once their lookup does (they are daemon threads: a fetch in the middle of a transfer
        does not hold up the process's exit)."""
        with self._condition:
            self._closed = True
            pending = [*self._queued, *self._running]
            self._queued.clear()
            self._condition.notify_all()
        for lookup in pending:
            lookup.cancelled.set()
            if not lookup.future.done():
                lookup.future.set_exception(ServiceBusy("the service is shutting down"))

    def _next(self) -> UrlLookup | None:
        """The oldest queued lookup whose site has none running (called holding the condition)."""
        busy = {lookup.site for lookup in self._running}
        for position, lookup in enumerate(self._queued):
            if lookup.site not in busy:
                del self._queued[position]
                self._running.add(lookup)
                return lookup
        return None

    def _work(self) -> None:
        while True:
            with self._condition:
                lookup = self._next()
                while lookup is None:
                    if self._closed:
                        return
                    self._condition.wait()
                    lookup = self._next()
            result = error = None
            try:
                result = lookup.work(lookup.cancelled)
            except Exception as failure:  # noqa: BLE001 - the request's handler answers it
                error = failure
            with self._condition:
                self._running.discard(lookup)
                self._condition.notify_all()  # the site is free again: another worker may run its next lookup
            with contextlib.suppress(RuntimeError):  # the event loop has closed: nobody waits for the answer
                lookup.future.get_loop().call_soon_threadsafe(_settle, lookup.future, result, error)


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled (the client went away) or answered by close()
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def _until_disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the request's body, if any, is read and ignored)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


# ---------------------------------------------------------------------------------------------------
# HTTP


def _number_param(request: Request, name: str, default: float, low: float, high: float, kind: type = int):  # noqa: ANN202
    """The query parameter ``name`` as ``kind`` (int or float) within [low, high], ``default`` when absent."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise BadRequest(f"{name} must be {what}, got {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BadRequest("content-length is not a number")
        if int(declared) > limit:
            raise BadRequest(f"request body is {declared} bytes; at most {limit} are accepted", 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadRequest(f"request body exceeds {limit} bytes", 413)
    return bytes(body)


def _fetch_state(outcome: Any) -> dict[str, Any]:
    state = "refused" if outcome.refused_reason else "fetch_error"
    return {
        "state": state,
        "reason": outcome.refused_reason or outcome.error,
        "http_status": outcome.status,
        "final_url": outcome.final_url,
    }


def create_app(
    catalog: FingerprintCatalog,
    fetcher: WebFetcher | None = None,
    token: str | None = None,
    refresh_seconds: float = 10.0,
    load_on_start: bool = True,
    url_workers: int = DEFAULT_URL_WORKERS,
    max_pending_urls: int = DEFAULT_MAX_PENDING_URLS,
) -> LookupService:
    """The service's ASGI app. ``token``: every request must carry ``Authorization: Bearer <token>``.
    ``url_workers`` and ``max_pending_urls``: see :class:`UrlLookupQueue`."""
    page_fetcher = fetcher if fetcher is not None else WebFetcher(max_body_bytes=MAX_FETCH_BYTES)
    url_lookups = UrlLookupQueue(url_workers, max_pending_urls)
    params = {
        "max_distance": (catalog.max_distance, 0, catalog.max_distance),
        "limit": (DEFAULT_LIMIT, 1, MAX_LIMIT),
    }

    def options(request: Request) -> dict[str, Any]:
        """The lookup's keyword arguments from the query parameters."""
        return {
            "max_distance": _number_param(request, "max_distance", *params["max_distance"]),
            "min_similarity": _number_param(
                request, "min_similarity", DEFAULT_MIN_JACCARD, 0.0, 1.0, kind=float
            ),
            "min_containment": _number_param(
                request, "min_containment", DEFAULT_MIN_CONTAINMENT, 0.0, 1.0, kind=float
            ),
            "limit": _number_param(request, "limit", *params["limit"]),
        }

    def answer(query: dict[str, Any], value: int, matches: list[Match]) -> JSONResponse:
        return JSONResponse(
            {
                "query": {**query, "fingerprint": f"{value:016x}"},
                "stored_fingerprints": len(catalog),
                "matches": [match.as_json() for match in matches],
            }
        )

    def lookup_stored_url(url: str, lookup_options: dict[str, Any]) -> JSONResponse | None:
        """The answer for a URL the store knows (looked up by the stored text), None for an unknown URL."""
        known = catalog.story_id_for_url(url)
        if known is None:
            return None
        text = catalog.story_text(known)
        value, matches = catalog.lookup(text, exclude=known, **lookup_options)
        return answer({"url": url, "source": "store", "stories_id": known}, value, matches)

    def fetch_and_look_up(
        url: str, lookup_options: dict[str, Any], cancelled: threading.Event
    ) -> JSONResponse:
        """In a URL lookup worker: fetch the page (its site's politeness waits included), extract, look up."""
        outcome = page_fetcher.fetch(url, cancel=cancelled)
        if not outcome.ok:
            raise FetchFailed(_fetch_state(outcome))
        story = extract_story(outcome.text or outcome.content or b"", outcome.final_url)
        if not story.text.strip():
            raise BadRequest(f"the page at {outcome.final_url} has no article text to compare", 422)
        value, matches = catalog.lookup(story.text, **lookup_options)
        source = {"url": url, "source": "fetched", "final_url": outcome.final_url, "title": story.title}
        return answer(source, value, matches)

    async def near_duplicates_get(request: Request) -> JSONResponse:
        url = (request.query_params.get("url") or "").strip()
        if not url:
            raise BadRequest("give the story's address as ?url=… (or POST a text)")
        if len(url) > MAX_URL_CHARS:
            raise BadRequest(f"url is longer than {MAX_URL_CHARS} characters")
        if not is_http_url(url):
            raise BadRequest(f"url must be an absolute http(s) URL, got {url[:200]!r}")
        lookup_options = options(request)
        stored = await run_in_threadpool(lookup_stored_url, url, lookup_options)
        if stored is not None:
            return stored
        refused = page_fetcher.refusal(
            url
        )  # no network: an SSRF refusal of an address never waits in the queue
        if refused is not None:
            raise FetchFailed(_fetch_state(refused))
        lookup = url_lookups.submit(
            throttle_domain(url), functools.partial(fetch_and_look_up, url, lookup_options)
        )
        client_gone = asyncio.ensure_future(_until_disconnected(request))
        try:
            await asyncio.wait((lookup.future, client_gone), return_when=asyncio.FIRST_COMPLETED)
        finally:  # answered, the client went away, or the server cancelled this request at shutdown
            client_gone.cancel()
            if not lookup.future.done():
                url_lookups.cancel(lookup)
        if lookup.future.cancelled():
            # Never sent: the connection is closed (499, "client closed request", is what the access log shows).
            return Response(status_code=499)
        return lookup.future.result()

    async def near_duplicates_post(request: Request) -> JSONResponse:
        lookup_options = options(request)
        body = await _read_body(request, MAX_BODY_BYTES)
        content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        try:
            decoded = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("the request body is not UTF-8") from None
        if content_type == "application/json":
            try:
                payload = json.loads(decoded)
            except ValueError as error:
                raise BadRequest(f"the request body is not valid JSON: {error}") from None
            if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
                raise BadRequest('post {"text": "..."}: a JSON object with a "text" string')
            text = payload["text"]
        elif content_type in ("text/plain", ""):
            text = decoded
        else:
            raise BadRequest(f"post application/json or text/plain, not {content_type!r}", 415)
        if not text.strip():
            raise BadRequest("the text is empty")
        value, matches = await run_in_threadpool(catalog.lookup, text, **lookup_options)
        return answer({"source": "text", "text_chars": len(text)}, value, matches)

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "stored_fingerprints": len(catalog),
                "watermark": catalog.watermark,
                "refreshed_at": catalog.refreshed_at,
                "containment_index": {
                    "stories": len(catalog.containment),
                    "keys": catalog.containment.postings,
                    "bytes": catalog.containment.nbytes,
                },
                "url_lookups": url_lookups.counts(),
            }
        )

    async def bad_request(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, BadRequest)
        return JSONResponse({"error": str(error)}, status_code=error.status)

    async def fetch_failed(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, FetchFailed)
        return JSONResponse(
            {"error": f"could not read the URL: {error}", "fetch": error.state}, status_code=502
        )

    async def busy(_request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": str(error)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )

    @asynccontextmanager
    async def lifespan(_app: Starlette):  # noqa: ANN202 - Starlette's lifespan protocol
        if load_on_start:
            started = time.monotonic()
            count = await run_in_threadpool(
                catalog.refresh, lambda n: log.info("near-duplicate service: %d fingerprints loaded", n)
            )
            log.info("near-duplicate service: %d fingerprints in %.1f s", count, time.monotonic() - started)

        async def keep_fresh() -> None:
            while True:
                await asyncio.sleep(refresh_seconds)
                try:
                    added = await run_in_threadpool(catalog.refresh)
                    if added:
                        log.info(
                            "near-duplicate service: %d new fingerprints (%d in all)", added, len(catalog)
                        )
                except Exception:  # noqa: BLE001 - a failed refresh is retried at the next tick
                    log.warning("near-duplicate service: refresh failed", exc_info=True)

        task = asyncio.create_task(keep_fresh()) if refresh_seconds > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
            url_lookups.close()

    app = Starlette(
        routes=[
            Route("/near-duplicates", near_duplicates_get, methods=["GET"]),
            Route("/near-duplicates", near_duplicates_post, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={BadRequest: bad_request, FetchFailed: fetch_failed, ServiceBusy: busy},
        lifespan=lifespan,
    )
    return LookupService(app, url_lookups, token)


class LookupService:
    """The service's ASGI app: the Starlette app with its URL lookup queue (``url_lookups``, which
    :class:`LookupServer` closes at shutdown). With a ``token``, every HTTP request must carry
    ``Authorization: Bearer <token>`` (compared in constant time); lifespan events pass through."""

    def __init__(self, app: Starlette, url_lookups: UrlLookupQueue, token: str | None = None) -> None:
        self.app = app
        self.url_lookups = url_lookups
        self._expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and self._expected is not None:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = JSONResponse(
                    {"error": "missing or wrong bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class LookupServer(uvicorn.Server):
    """uvicorn's server for a :class:`LookupService`, as ``topicmap serve`` runs it.

    At shutdown (SIGTERM, SIGINT) uvicorn stops accepting connections and waits for the open requests to be
    answered before it stops the app; URL lookups can wait minutes for their sites' politeness slots, so they
    are answered first (503, the service is shutting down), and a request still open
    ``SHUTDOWN_GRACE_SECONDS`` later is cancelled."""

    def __init__(self, service: LookupService, host: str, port: int, log_level: str = "info") -> None:
        config = uvicorn.Config(
            service,
            host=host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.url_lookups.close()
        await super().shutdown(sockets)


def service_token(host: str, environ: dict[str, str]) -> str | None:
    """The bearer token the service requires: none on loopback, the environment's otherwise (or refuse)."""
    token = settings.SERVICE_TOKEN.value(environ).strip() or None
    if host not in LOOPBACK_HOSTS and token is None:
        raise SystemExit(
            f"refusing to serve on {host}: set {settings.SERVICE_TOKEN.name} to a secret bearer token first "
            "(off loopback, every request must carry 'Authorization: Bearer <token>')"
        )
    return token


__all__ = [
    "DEFAULT_MAX_PENDING_URLS",
    "DEFAULT_MIN_CONTAINMENT",
    "DEFAULT_URL_WORKERS",
    "FingerprintCatalog",
    "LookupServer",
    "LookupService",
    "MAX_BODY_BYTES",
    "MAX_FETCH_BYTES",
    "MAX_QUERY_WORDS",
    "MIN_QUERY_WORDS",
    "Match",
    "RETRY_AFTER_SECONDS",
    "ServiceBusy",
    "ShingleCache",
    "UrlLookupQueue",
    "create_app",
    "service_token",
]
