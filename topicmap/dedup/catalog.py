"""What a near-duplicate lookup searches: the in-memory catalog of every stored story's fingerprint and containment
keys (``FingerprintCatalog``), refreshed from the store, the shingle cache of its candidates, and the lookup itself.

The lookup service (``topicmap.dedup.service``) and the ``topicmap near-dups`` command both answer with it.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select

from topicmap.dedup.containment import (
    DEFAULT_MIN_CONTAINMENT,
    MIN_QUERY_WORDS,
    ContainmentIndex,
    containment_keys_many,
    containment_keys_of_token_hashes,
)
from topicmap.dedup.shingles import containment_sorted, jaccard_sorted, shingle_array
from topicmap.dedup.simhash import (
    DEFAULT_CANDIDATE_DISTANCE,
    DEFAULT_MIN_JACCARD,
    FEATURE_VERSION,
    NearDuplicateIndex,
    text_features,
)
from topicmap.dedup.store import ensure_fingerprints, simhashes_from_db
from topicmap.dedup.tokens import tokenize
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.web.urls import url_variants

# Candidates read from the database per lookup, nearest first: bounds the work of a text that is close to a
# huge cluster of copies.
MAX_CANDIDATES = 500
#: matches in one answer: by default, and at most
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
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


class BadRequest(ValueError):
    """Input the service refuses (answered 4xx with this message)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


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
                            sh.c.stories_id.in_(ids), sh.c.feature_version == FEATURE_VERSION
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
                    sh.c.stories_id.in_(ids), sh.c.feature_version == FEATURE_VERSION
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
