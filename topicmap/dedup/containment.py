"""Which stored stories contain a given text (a paragraph, a quote of a few sentences)?

Whole-document similarity (simhash candidates, word-bigram Jaccard) cannot answer this: a paragraph of a long
story has a distant fingerprint and a Jaccard of a few percent with it. This index finds the stories that share
word sequences with a short text; the lookup service then measures, exactly from the stored text, how much of
the text each story contains.

Keys: every run of ``SHINGLE_WORDS`` consecutive words (tokens as in ``tokens.tokenize``) is hashed, and of
every ``WINDOW`` consecutive such hashes the smallest is kept ("winnowing", Schleimer, Wilkerson and Aiken,
SIGMOD 2003). A window's smallest hash depends only on the words of that window, so a text that appears word
for word inside a story has all its windows in the story and every key the text selects is a key of the story:
any verbatim run of ``MIN_QUERY_WORDS`` (= WINDOW + SHINGLE_WORDS - 1) words is found, and a copy with a few
words changed is found through its unchanged runs. Keeping about 2 / (WINDOW + 1) of the 4-gram hashes instead
of all of them is what keeps the index small (measured on 129 real articles: 0.15 keys a word, against 1.0 for
every 4-gram). Four words rather than two: a word pair such as "of the" is in nearly every story, a run of four
rarely outside the stories that share a passage.

Memory: a key's low 32 bits and its story's slot (32 bits) are one 8-byte entry, about 1.2 bytes per word of
stored text (1 KB for an 800-word article) plus 8 bytes per story; a 32-bit key shared by chance costs only a
candidate that the exact containment then rejects. Stories are added in immutable sorted segments that are
merged when one grows to half the size of the one before it, so there are O(log n) segments and each entry
is copied O(log n) times; a query sees one consistent tuple of them (published in one assignment, like the
simhash index), and a merge briefly holds the two segments and the merged one (measured: 100,000 stories of
125 keys, 100 MB of entries, added 5,000 at a time: 2.1 s, the process peaking 206 MB above where it began).

What it does not find: a passage reworded so that no run of about 15 words is left intact. Of the 589
(paragraph, story) pairs among 101 real articles where the story holds half the paragraph's word pairs or more,
586 share keys; the 3 others (0.55-0.67 of the word pairs) retell the same facts in other word orders.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from topicmap.dedup.tokens import token_hashes

SHINGLE_WORDS = 4
WINDOW = 12
# The shortest text whose verbatim copy inside a story is guaranteed to share a key with it.
MIN_QUERY_WORDS = WINDOW + SHINGLE_WORDS - 1
# A story holding half the looked-up text's word bigrams contains it. Measured on 299 paragraphs of 101 real
# articles: the most any unrelated article held was 0.29 at the 90th percentile; articles quoting the same
# statement held 0.55-0.78, copies 1.0.
DEFAULT_MIN_CONTAINMENT = 0.5
# Keys of a text a query reads at most: its smallest, a uniform sample (key values are hash bits), from which
# the share of the text a story holds is estimated as well as from all of them; bounds a long text's query.
MAX_KEYS_PER_QUERY = 256
# Postings read by one query, rarest keys first: bounds the work of a text made of boilerplate that thousands
# of stories share (the keys past the bound are left out of the count, see ``ContainmentIndex.query``).
MAX_POSTINGS_PER_QUERY = 200_000

_LOW_32 = np.uint64(0xFFFFFFFF)
_SLOT_BITS = np.uint64(32)
_NO_HASH = np.iinfo(np.uint64).max
# Odd multipliers of a 4-gram's token hashes (an order-sensitive combination, then the splitmix64 finalizer).
_GRAM_FACTORS = tuple(np.uint64(f) for f in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9))


def _gram_hashes(hashes: np.ndarray, n_grams: int) -> np.ndarray:
    """64-bit hashes of the ``n_grams`` runs of ``SHINGLE_WORDS`` consecutive token hashes. Why not
    ``tokens.mix_pair`` three times: one weighted sum and one finalizer are half the numpy calls, and a
    lookup keys its text on every request."""
    grams = hashes[:n_grams] * _GRAM_FACTORS[0]
    for step, factor in enumerate(_GRAM_FACTORS[1:], start=1):
        grams += hashes[step : step + n_grams] * factor
    grams += hashes[SHINGLE_WORDS - 1 : SHINGLE_WORDS - 1 + n_grams]
    grams ^= grams >> np.uint64(30)
    grams *= np.uint64(0xBF58476D1CE4E5B9)
    grams ^= grams >> np.uint64(27)
    grams *= np.uint64(0x94D049BB133111EB)
    grams ^= grams >> np.uint64(31)
    return grams


def _sliding_minimum(values: np.ndarray, width: int) -> np.ndarray:
    """The minimum of every ``width`` consecutive values, by doubling: log2(width) + 1 passes, not width - 1."""
    span, smallest = 1, values
    while 2 * span <= width:
        smallest = np.minimum(smallest[:-span], smallest[span:])  # minimum of 2 * span values from each i
        span *= 2
    n_windows = len(values) - width + 1
    return np.minimum(smallest[:n_windows], smallest[width - span : width - span + n_windows])


def containment_keys_many(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The winnowed keys of several token lists at once: (document index, key) rows, sorted, distinct per
    document. A document shorter than one window keeps the smallest hash of its 4-grams; one shorter than
    ``SHINGLE_WORDS`` words has no key.

    Why batched: numpy's per-call overhead would dominate a document at a time (the service keys every
    stored story when it starts)."""
    lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.int64, count=len(token_lists))
    if lengths.sum() < SHINGLE_WORDS:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
    return _keys_of_token_hashes(token_hashes(list(itertools.chain.from_iterable(token_lists))), lengths)


def containment_keys(tokens: Sequence[str]) -> np.ndarray:
    """The distinct winnowed keys of one token list (``containment_keys_many`` of one document), sorted."""
    return containment_keys_many([tokens])[1]


def containment_keys_of_token_hashes(token_hashes: np.ndarray) -> np.ndarray:
    """``containment_keys`` of a text whose token hashes are known (``simhash.text_features``): a lookup
    hashes its text's tokens once for the fingerprint, the shingles and these keys."""
    lengths = np.array([len(token_hashes)], dtype=np.int64)
    return _keys_of_token_hashes(np.asarray(token_hashes, dtype=np.uint64), lengths)[1]


def _keys_of_token_hashes(hashes: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document index, key) rows of documents whose token hashes are ``hashes``, ``lengths`` tokens each."""
    total = int(lengths.sum())
    if total < SHINGLE_WORDS:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
    n_grams = total - SHINGLE_WORDS + 1
    grams = _gram_hashes(hashes, n_grams)
    docs, values = [], []
    if n_grams >= WINDOW and len(lengths) == 1:  # one document (a lookup's text): every window is its own
        smallest = _sliding_minimum(grams, WINDOW)
        docs.append(np.zeros(len(smallest), dtype=np.int64))
        values.append(smallest)
    elif n_grams >= WINDOW:
        doc_of_token = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        # A 4-gram starting in one document and ending in the next is no 4-gram of either.
        gram_doc = doc_of_token[:n_grams]
        gram_valid = gram_doc == doc_of_token[SHINGLE_WORDS - 1 :]
        n_windows = n_grams - WINDOW + 1
        smallest = _sliding_minimum(grams, WINDOW)
        # A window is one document's when its first and last 4-grams are (the words between are too).
        whole = (
            gram_valid[:n_windows]
            & gram_valid[WINDOW - 1 :]
            & (gram_doc[:n_windows] == gram_doc[WINDOW - 1 :])
        )
        docs.append(gram_doc[:n_windows][whole])
        values.append(smallest[whole])
    grams_per_doc = np.maximum(lengths - SHINGLE_WORDS + 1, 0)
    short = np.flatnonzero((grams_per_doc > 0) & (grams_per_doc < WINDOW))
    if len(short):
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[short]
        # reduceat over [start, start + grams) runs: each short document's 4-grams are contiguous and valid.
        bounds = np.stack((starts, starts + grams_per_doc[short]), axis=1).ravel()
        padded = np.append(grams, _NO_HASH)  # reduceat needs every bound inside the array
        docs.append(short)
        values.append(np.minimum.reduceat(padded, bounds)[::2])
    # Low 32 bits: a window's minimum has small high bits, the low ones stay uniform.
    rows = np.sort(
        (np.concatenate(docs) << np.int64(32)) | (np.concatenate(values) & _LOW_32).astype(np.int64)
    )
    rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]  # distinct (np.unique hashes: slower here)
    return rows >> np.int64(32), (rows & np.int64(0xFFFFFFFF)).astype(np.uint32)


@dataclass(frozen=True)
class _Segment:
    """Entries ``key << 32 | slot``, sorted (so by key, then slot), where a slot indexes ``stories``, the
    segment's story ids. One packed array rather than keys and slots side by side: a merge is then one sort of
    the two segments' entries (numpy's fast unstable sort is enough, since the slots order equal keys), with
    no 8-byte sort order per key beside the copies."""

    entries: np.ndarray
    stories: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.entries.nbytes + self.stories.nbytes

    @staticmethod
    def build(stories: np.ndarray, doc: np.ndarray, keys: np.ndarray) -> _Segment:
        entries = (keys.astype(np.uint64) << _SLOT_BITS) | doc.astype(np.uint64)
        entries.sort()
        return _Segment(entries, stories)

    @staticmethod
    def merge(older: _Segment, newer: _Segment) -> _Segment:
        """One segment of both; the newer stories' slots follow the older ones'."""
        entries = np.concatenate((older.entries, newer.entries + np.uint64(len(older.stories))))
        entries.sort()
        return _Segment(entries, np.concatenate((older.stories, newer.stories)))


@dataclass(frozen=True)
class ContainmentMatches:
    """Stories sharing keys with a query text: ``stories_ids`` with ``shared`` keys each (most first), out of
    ``keys_used`` of the ``keys`` read (at most ``MAX_KEYS_PER_QUERY``; fewer used when
    ``MAX_POSTINGS_PER_QUERY`` left common keys out)."""

    stories_ids: np.ndarray
    shared: np.ndarray
    keys: int
    keys_used: int


class ContainmentIndex:
    """Stored stories' winnowed 4-gram keys, answering "which stories share keys with this text?".

    ``add`` may run while queries run in other threads (adds themselves must not overlap): it builds new
    segments beside the old ones and publishes them in one assignment."""

    def __init__(self) -> None:
        self._segments: tuple[_Segment, ...] = ()
        self._story_count = 0

    def __len__(self) -> int:
        """Stories added (with or without keys)."""
        return self._story_count

    @property
    def postings(self) -> int:
        return sum(len(segment.entries) for segment in self._segments)

    @property
    def nbytes(self) -> int:
        return sum(segment.nbytes for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def add(self, stories_ids: Iterable[int], token_lists: Sequence[Sequence[str]]) -> None:
        """Index these stories (one token list each, as ``tokens.tokenize`` gives). Ids must be new: a story
        added twice would count each shared key twice (not checked here, which would cost a pass over every
        stored id per add; the catalog adds each story once, above its watermark)."""
        ids = list(stories_ids)
        if len(ids) != len(token_lists):
            raise ValueError(f"got {len(ids)} story ids but {len(token_lists)} token lists")
        self.add_keys(ids, *containment_keys_many(token_lists))

    def add_keys(self, stories_ids: Iterable[int], doc: np.ndarray, keys: np.ndarray) -> None:
        """Index stories whose keys ``containment_keys_many`` gave: ``doc`` indexes ``stories_ids``."""
        ids = np.fromiter(stories_ids, dtype=np.int64)
        doc, keys = np.asarray(doc, dtype=np.int64), np.asarray(keys, dtype=np.uint32)
        if len(doc) != len(keys):
            raise ValueError(f"got {len(doc)} document indexes but {len(keys)} keys")
        if len(doc) and (doc.min() < 0 or doc.max() >= len(ids)):
            raise ValueError(f"document indexes must be in 0..{len(ids) - 1}")
        if not len(ids):
            return
        segments = [*self._segments, _Segment.build(ids, doc, keys)]
        # Merge while the newest segment is at least half the size of the one before it: sizes then at least
        # double from newest to oldest, so there are O(log n) segments and each key is copied O(log n) times.
        while len(segments) >= 2 and 2 * len(segments[-1].entries) >= len(segments[-2].entries):
            newer = segments.pop()
            segments[-1] = _Segment.merge(segments[-1], newer)
        self._segments = tuple(segments)
        self._story_count += len(ids)

    def query(
        self, keys: np.ndarray, max_postings: int = MAX_POSTINGS_PER_QUERY, max_keys: int = MAX_KEYS_PER_QUERY
    ) -> ContainmentMatches:
        """Stories sharing at least one of ``keys`` (distinct and sorted, as ``containment_keys`` gives) and
        how many.

        Of a text with more than ``max_keys`` keys, its ``max_keys`` smallest are read (a uniform sample). Keys
        are read rarest first until ``max_postings`` postings are read (always at least one key, cut to
        ``max_postings`` postings if it alone has more): a text that thousands of stories share is counted
        by its rarer keys."""
        keys = np.asarray(keys, dtype=np.uint32)[:max_keys]
        first_entry = keys.astype(np.uint64) << _SLOT_BITS  # a key's entries run from here to its last slot
        last_entry = first_entry | _LOW_32
        segments = self._segments  # one state throughout, whatever an add publishes meanwhile
        none = np.zeros(0, dtype=np.int64)
        if not len(keys) or not segments:
            return ContainmentMatches(none, none, len(keys), 0)
        bounds = [
            (
                np.searchsorted(s.entries, first_entry, side="left"),
                np.searchsorted(s.entries, last_entry, side="right"),
            )
            for s in segments
        ]
        frequency = sum(hi - lo for lo, hi in bounds)
        order = np.argsort(frequency, kind="stable")
        within = np.cumsum(frequency[order]) <= max_postings
        # The rarest keys whose postings fit the bound; if even the rarest has more, it alone, cut to the bound.
        used, budget = (order[within], None) if within.any() else (order[:1], max_postings)
        found = []
        for segment, (lo, hi) in zip(segments, bounds, strict=True):
            starts, sizes = lo[used], hi[used] - lo[used]
            if budget is not None:
                sizes = np.minimum(sizes, budget)
                budget -= int(sizes.sum())
            count = int(sizes.sum())
            if count:
                positions = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(count)
                found.append(segment.stories[segment.entries[positions] & _LOW_32])
        if not found:
            return ContainmentMatches(none, none, len(keys), len(used))
        ordered = np.sort(np.concatenate(found))
        first = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        stories, shared = ordered[first], np.diff(np.append(first, len(ordered)))
        order = np.lexsort((stories, -shared))  # most shared keys first, then oldest story
        return ContainmentMatches(stories[order], shared[order].astype(np.int64), len(keys), len(used))


__all__ = [
    "ContainmentIndex",
    "ContainmentMatches",
    "DEFAULT_MIN_CONTAINMENT",
    "MAX_KEYS_PER_QUERY",
    "MAX_POSTINGS_PER_QUERY",
    "MIN_QUERY_WORDS",
    "SHINGLE_WORDS",
    "WINDOW",
    "containment_keys",
    "containment_keys_many",
    "containment_keys_of_token_hashes",
]
