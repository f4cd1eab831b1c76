"""64-bit simhash fingerprints and exact near-duplicate search (Manku, Jain and Das Sarma, WWW 2007).

Fingerprint features (chosen by measurement, see benchmarks/eval_near_duplicates.py and RESULTS.md):

- text is casefolded and split into Unicode ``\\w+`` tokens;
- features are word 1-shingles and word 2-shingles, each hashed with a stable 64-bit hash
  (blake2b for tokens, a splitmix64 mix of the two token hashes for bigrams), never Python's salted
  ``hash()``, so a fingerprint is the same in every process and on every machine;
- a feature that occurs ``c`` times weighs ``c - 0.9`` (bigrams 0.3 times that). The point of the
  ``- 0.9``: a word seen once (which is what a substituted, inserted or typo'd word almost always is)
  weighs only 0.1, while words the article repeats — its vocabulary, which a few edits hardly change —
  dominate the vote. Measured on 100 real articles with 3% of words substituted, share within 3 bits:
  set features (weight 1) 0.15, plain counts 0.83, counts**1.4 0.91 but then 0.5% of unrelated pairs
  also fall within 3 bits, ``c - 0.9`` about 0.92 with no unrelated pair within 3 bits. IDF weighting
  would up-weight exactly the rare words an edit touches. Weights are scaled and rounded to integers,
  so the bit sums are exact and a fingerprint does not depend on which batch computed it.
- no positional weighting. A "the lead matters more" variant (each occurrence weighted
  ``1 - w * position / length``) was measured on real articles (benchmarks/RESULTS.md, "Positional
  simhash") and removed: in the two stages the asset and the lookup service run, w=1 found every
  footer-appended copy (0.94 without) but only 0.71 of reordered copies (1.00 without) and fewer substituted
  ones; w=0.5 traded +0.03 on footers for -0.005 on each substitution rate. No net gain, so one feature set.

Pair search splits the 64 bits into B blocks. Two fingerprints within distance k differ in at most k
blocks, so they agree exactly on at least B - k of them: for every choice of B - k blocks (a "table")
we sort by those bits and only compare fingerprints inside runs of equal keys. A pair is reported only
by the first table whose blocks it agrees on, so it comes out exactly once without a global dedup.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from topicmap.dedup.shingles import jaccard, shingle_set, sorted_distinct
from topicmap.dedup.tokens import TOKEN_HASH_CACHE, TOKEN_RE, mix_pair, token_hash, token_hashes, tokenize

FINGERPRINT_BITS = 64
# Bump whenever tokens, features, weights or hashes change: stored fingerprints of another version
# are not comparable and must be recomputed (story_simhashes.feature_version).
FEATURE_VERSION = 1
# Weight of a feature seen c times is (c - 0.9), computed as (100c - 90) to stay in integers.
_WEIGHT_SCALE = 100
_HAPAX_DISCOUNT = 90  # 0.9 * _WEIGHT_SCALE
_BIGRAM_FACTOR = 0.3  # bigrams weigh 3/10 of a unigram with the same count
_WEIGHT_QUANTUM = 1000  # scaled weights are rounded to integers at this resolution, then summed exactly
# A chunk of texts is fingerprinted at once; bounded by characters so memory stays small.
_CHUNK_CHARS = 2_000_000

_U64 = np.uint64
_MASK64 = (1 << 64) - 1


def _doc_features(
    token_ids: np.ndarray,
    doc_of_token: np.ndarray,
    pair_base: int,
    factor: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (doc, feature key) rows with their integer-valued weights.

    Returns (doc, key, weight) where key identifies the feature inside the chunk; rows are grouped by doc.
    Weights are (c - 0.9) * factor, scaled and rounded to integers so that every
    later sum is exact in float64 and no summation order (batch size, BLAS blocking) can change a bit.
    """
    keys = doc_of_token * np.int64(pair_base) + token_ids
    unique_keys, counts = np.unique(keys, return_counts=True)
    docs = unique_keys // pair_base
    return docs, unique_keys % pair_base, _feature_weights(counts, factor)


def _feature_weights(counts: np.ndarray, factor: float) -> np.ndarray:
    """(c - 0.9) * factor for features seen c times, scaled and rounded to integer-valued floats."""
    return np.round((counts * _WEIGHT_SCALE - _HAPAX_DISCOUNT) * (factor * _WEIGHT_QUANTUM))


def _aggregate_bits(docs: np.ndarray, hashes: np.ndarray, weights: np.ndarray, n_docs: int) -> np.ndarray:
    """Simhash vote: bit b of doc d is set iff sum(w * (+1 if bit else -1)) > 0 over its features.

    Instead of materialising an (n_features x 64) bit matrix, each of the 8 byte lanes is histogrammed
    per document (256 bins) and multiplied by a 256x8 bit table (exact: the weights are integers).
    """
    byte_bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(
        np.float64
    )
    total = np.bincount(docs, weights=weights, minlength=n_docs)
    votes = np.zeros((n_docs, FINGERPRINT_BITS), dtype=bool)
    for lane in range(8):
        byte_values = ((hashes >> _U64(8 * lane)) & _U64(0xFF)).astype(np.int64)
        hist = np.bincount(docs * 256 + byte_values, weights=weights, minlength=n_docs * 256)
        set_weight = hist.reshape(n_docs, 256) @ byte_bits  # (n_docs, 8): weight voting "1" per bit
        votes[:, 8 * lane : 8 * lane + 8] = 2.0 * set_weight > total[:, None]
    return np.packbits(votes, axis=1, bitorder="little").view("<u8").reshape(n_docs).astype(np.uint64)


def _fingerprint_chunk(texts: Sequence[str]) -> np.ndarray:
    token_lists = [TOKEN_RE.findall(text.casefold()) for text in texts]
    n_docs = len(token_lists)
    lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.int64, count=n_docs)
    if lengths.sum() == 0:
        return np.zeros(n_docs, dtype=np.uint64)
    all_tokens = list(itertools.chain.from_iterable(token_lists))
    # Token -> chunk-local id with C-level loops only (dict.fromkeys keeps first-occurrence order).
    vocabulary: dict[str, int] = dict.fromkeys(all_tokens, 0)
    for token_id, token in enumerate(vocabulary):
        vocabulary[token] = token_id
    token_ids = np.fromiter(map(vocabulary.__getitem__, all_tokens), dtype=np.int64, count=len(all_tokens))
    cached = list(map(TOKEN_HASH_CACHE.get, vocabulary))  # C-level loop; misses are hashed below
    if None in cached:
        cached = [token_hash(tok) if h is None else h for tok, h in zip(vocabulary, cached, strict=True)]
    vocab_hashes = np.array(cached, dtype=np.uint64)
    doc_of_token = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(len(token_ids), dtype=np.int64) - np.repeat(starts, lengths)

    n_vocab = len(vocabulary)
    uni_docs, uni_ids, uni_weights = _doc_features(token_ids, doc_of_token, n_vocab, 1.0)
    uni_hashes = vocab_hashes[uni_ids]

    # Bigrams: consecutive tokens of the same document; pair ids first, so doc * n_pairs fits in int64.
    has_next = position[:-1] + 1 < np.repeat(lengths, lengths)[:-1]
    left = np.flatnonzero(has_next)
    if len(left):
        pair_codes = token_ids[left] * np.int64(n_vocab) + token_ids[left + 1]
        unique_pairs, pair_ids = np.unique(pair_codes, return_inverse=True)
        bi_docs, bi_ids, bi_weights = _doc_features(
            pair_ids.astype(np.int64),
            doc_of_token[left],
            len(unique_pairs),
            _BIGRAM_FACTOR,
        )
        bi_codes = unique_pairs[bi_ids]
        bi_hashes = mix_pair(vocab_hashes[bi_codes // n_vocab], vocab_hashes[bi_codes % n_vocab])
        docs = np.concatenate((uni_docs, bi_docs))
        hashes = np.concatenate((uni_hashes, bi_hashes))
        weights = np.concatenate((uni_weights, bi_weights))
    else:
        docs, hashes, weights = uni_docs, uni_hashes, uni_weights
    return _aggregate_bits(docs, hashes, weights, n_docs)


def fingerprints(texts: Iterable[str]) -> np.ndarray:
    """Simhash fingerprints of many texts at once, as a uint64 array (same values as ``fingerprint``)."""
    text_list = list(texts)
    for index, text in enumerate(text_list):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] must be str, got {type(text).__name__}")
    result = np.zeros(len(text_list), dtype=np.uint64)
    start = 0
    while start < len(text_list):
        end, chars = start, 0
        while end < len(text_list) and (end == start or chars + len(text_list[end]) <= _CHUNK_CHARS):
            chars += len(text_list[end])
            end += 1
        result[start:end] = _fingerprint_chunk(text_list[start:end])
        start = end
    return result


def fingerprint(text: str) -> int:
    """Unsigned 64-bit simhash of ``text``; the empty text (no word tokens) gives 0."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return int(fingerprints([text])[0])


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two unsigned 64-bit fingerprints."""
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int fingerprint, got {type(value).__name__}")
        if not 0 <= int(value) <= _MASK64:
            raise ValueError(f"{name}={value} is not an unsigned 64-bit fingerprint")
    return (int(a) ^ int(b)).bit_count()


def _as_fingerprint_array(values: Iterable[int] | np.ndarray, name: str = "fingerprints") -> np.ndarray:
    if not isinstance(values, np.ndarray):
        items = list(values)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            # Python ints: check the range here, numpy would turn 2**63..2**64-1 mixed with small ints into floats.
            if not all(0 <= v <= _MASK64 for v in items):
                raise ValueError(f"{name} must be unsigned 64-bit integers (0 <= value < 2**64)")
            return np.array(items, dtype=np.uint64)
        values = items
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if array.dtype == np.uint64:
        return array
    if array.dtype == object:
        if not all(isinstance(v, int | np.integer) and 0 <= int(v) <= _MASK64 for v in array.tolist()):
            raise ValueError(f"{name} must be unsigned 64-bit integers")
        return np.array([int(v) for v in array.tolist()], dtype=np.uint64)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {array.dtype}")
    if array.min() < 0:
        raise ValueError(f"{name} must be unsigned 64-bit integers, found a negative value")
    return array.astype(np.uint64)


def _check_distance(max_distance: int) -> int:
    if isinstance(max_distance, bool) or not isinstance(max_distance, int | np.integer):
        raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
    if not 0 <= max_distance <= FINGERPRINT_BITS:
        raise ValueError(f"max_distance must be between 0 and 64, got {max_distance}")
    return int(max_distance)


# ---------------------------------------------------------------------------------------------------
# Block tables


@dataclass(frozen=True)
class _BlockTables:
    """B blocks of the 64 bits and the tables (choices of B - k blocks) to sort by."""

    block_masks: tuple[int, ...]
    table_blocks: tuple[tuple[int, ...], ...]
    first_table: np.ndarray  # agreement bitmask over blocks -> index of the first table it satisfies

    @classmethod
    def build(cls, n_blocks: int, max_distance: int) -> _BlockTables:
        if not max_distance < n_blocks <= FINGERPRINT_BITS:
            raise ValueError(
                f"need max_distance < n_blocks <= 64, got {n_blocks} blocks for k={max_distance}"
            )
        widths = [
            FINGERPRINT_BITS // n_blocks + (1 if i < FINGERPRINT_BITS % n_blocks else 0)
            for i in range(n_blocks)
        ]
        masks, shift = [], 0
        for width in widths:
            masks.append(((1 << width) - 1) << shift)
            shift += width
        tables = tuple(itertools.combinations(range(n_blocks), n_blocks - max_distance))
        first = np.full(1 << n_blocks, -1, dtype=np.int64)
        agreement = np.arange(1 << n_blocks, dtype=np.int64)
        for index in reversed(range(len(tables))):
            table_mask = sum(1 << b for b in tables[index])
            first[(agreement & table_mask) == table_mask] = index
        return cls(tuple(masks), tables, first)

    def keys(self, values: np.ndarray, table: int) -> np.ndarray:
        """Sort keys: the table's block bits packed into the low bits (uint16/uint32 when they fit)."""
        packed = np.zeros(len(values), dtype=np.uint64)
        out_shift = 0
        for block in self.table_blocks[table]:
            mask = self.block_masks[block]
            low = (mask & -mask).bit_length() - 1
            width = mask.bit_count()
            packed |= ((values >> _U64(low)) & _U64((1 << width) - 1)) << _U64(out_shift)
            out_shift += width
        if out_shift <= 16:
            return packed.astype(np.uint16)  # numpy sorts 16-bit keys by radix sort
        if out_shift <= 32:
            return packed.astype(np.uint32)
        return packed

    def reported_here(self, xor: np.ndarray, table: int) -> np.ndarray:
        """True where this table is the first one whose blocks the pair agrees on."""
        agreement = np.zeros(len(xor), dtype=np.int64)
        for block, mask in enumerate(self.block_masks):
            agreement |= ((xor & _U64(mask)) == 0).astype(np.int64) << block
        return self.first_table[agreement] == table


def _choose_blocks(n: int, max_distance: int) -> int | None:
    """Block count minimising an estimated cost; None means comparing all pairs is cheaper.

    Costs are rough per-element nanoseconds measured with numpy on this class of machine: sorting a
    table (radix for <= 16-bit keys), and checking one candidate pair.
    """
    brute = n * (n - 1) / 2 * 2.0
    best, best_cost = None, brute
    for n_blocks in range(max_distance + 1, min(max_distance + 12, FINGERPRINT_BITS) + 1):
        n_tables = math.comb(n_blocks, max_distance)
        if n_tables > 5000:
            break
        key_bits = FINGERPRINT_BITS * (n_blocks - max_distance) / n_blocks
        sort_cost = (25.0 if key_bits <= 16 else 120.0) * n
        candidates = n * (n - 1) / 2 / 2.0**key_bits
        cost = n_tables * (sort_cost + 40.0 * n + 15.0 * candidates)
        if cost < best_cost:
            best, best_cost = n_blocks, cost
    return best


def _runs_pairs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a sorted key array: (group end per position, positions that start >= 1 candidate pair)."""
    n = len(sorted_keys)
    boundaries = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [n]))
    group_end = np.repeat(ends, ends - starts)
    active = np.flatnonzero(np.arange(n) + 1 < group_end)
    return group_end, active


def _pairs_among_distinct(
    values: np.ndarray, max_distance: int, n_blocks: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) of distinct fingerprints within max_distance, and their distances.

    n_blocks None picks the block count by estimated cost (possibly comparing all pairs); 0 forces
    comparing all pairs.
    """
    n = len(values)
    empty = (np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))
    if n < 2 or max_distance == 0:
        return empty
    if n_blocks is None:
        n_blocks = _choose_blocks(n, max_distance)
    if not n_blocks:
        return _brute_force_pairs(values, max_distance)
    tables = _BlockTables.build(n_blocks, max_distance)
    found_left, found_right, found_dist = [], [], []
    for table in range(len(tables.table_blocks)):
        keys = tables.keys(values, table)
        order = np.argsort(keys, kind="stable")
        sorted_values = values[order]
        group_end, active = _runs_pairs(keys[order])
        offset = 1
        while len(active):
            partner = active + offset
            xor = sorted_values[active] ^ sorted_values[partner]
            distance = np.bitwise_count(xor)
            close = np.flatnonzero(distance <= max_distance)
            if len(close):
                keep = close[tables.reported_here(xor[close], table)]
                found_left.append(order[active[keep]])
                found_right.append(order[partner[keep]])
                found_dist.append(distance[keep].astype(np.int64))
            offset += 1
            active = active[active + offset < group_end[active]]
    if not found_left:
        return empty
    left = np.concatenate(found_left)
    right = np.concatenate(found_right)
    pairs = np.stack((np.minimum(left, right), np.maximum(left, right)), axis=1).astype(np.int64)
    return pairs, np.concatenate(found_dist)


def _brute_force_pairs(values: np.ndarray, max_distance: int) -> tuple[np.ndarray, np.ndarray]:
    """All pairs within max_distance by comparing everything (used when that is cheaper)."""
    block = max(1, 4_000_000 // len(values))  # bound the (block x n) comparison matrix
    lefts, rights, dists = [], [], []
    for start in range(0, len(values), block):
        chunk = values[start : start + block]
        distance = np.bitwise_count(chunk[:, None] ^ values[None, start:])
        rows, cols = np.nonzero(distance <= max_distance)
        i, j = rows + start, cols + start
        upper = i < j
        lefts.append(i[upper])
        rights.append(j[upper])
        dists.append(distance[rows[upper], cols[upper]].astype(np.int64))
    pairs = np.stack((np.concatenate(lefts), np.concatenate(rights)), axis=1).astype(np.int64)
    return pairs, np.concatenate(dists)


def _all_pairs_within_groups(members: np.ndarray, group_of_member: np.ndarray) -> np.ndarray:
    """All pairs among members sharing a group label (members sorted by group)."""
    group_end, active = _runs_pairs(group_of_member)
    lefts, rights = [], []
    offset = 1
    while len(active):
        lefts.append(members[active])
        rights.append(members[active + offset])
        offset += 1
        active = active[active + offset < group_end[active]]
    if not lefts:
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack((np.concatenate(lefts), np.concatenate(rights)), axis=1)


def near_duplicate_pairs_with_distances(
    fingerprints: Iterable[int] | np.ndarray, max_distance: int = 3, *, n_blocks: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Like ``near_duplicate_pairs`` but also returns each pair's Hamming distance."""
    max_distance = _check_distance(max_distance)
    if n_blocks is not None and n_blocks != 0 and not max_distance < n_blocks <= FINGERPRINT_BITS:
        raise ValueError(f"n_blocks must be 0 (compare all) or in {max_distance + 1}..64, got {n_blocks}")
    values = _as_fingerprint_array(fingerprints)
    unique_values, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    unique_pairs, unique_dist = _pairs_among_distinct(unique_values, max_distance, n_blocks)

    members = np.argsort(inverse, kind="stable")  # original indices grouped by distinct value
    first_member = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pair_parts, dist_parts = [], []
    if len(unique_pairs):
        count_left, count_right = counts[unique_pairs[:, 0]], counts[unique_pairs[:, 1]]
        per_pair = count_left * count_right  # copies of both values: every copy pairs with every copy
        pair_index = np.repeat(np.arange(len(unique_pairs)), per_pair)
        within = np.arange(per_pair.sum()) - np.repeat(np.cumsum(per_pair) - per_pair, per_pair)
        left = members[first_member[unique_pairs[pair_index, 0]] + within // count_right[pair_index]]
        right = members[first_member[unique_pairs[pair_index, 1]] + within % count_right[pair_index]]
        pair_parts.append(np.stack((left, right), axis=1))
        dist_parts.append(unique_dist[pair_index])
    if (counts > 1).any():
        exact = _all_pairs_within_groups(members, inverse[members])
        pair_parts.append(exact)
        dist_parts.append(np.zeros(len(exact), dtype=np.int64))
    if not pair_parts:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.concatenate(pair_parts).astype(np.int64)
    distances = np.concatenate(dist_parts)
    pairs = np.stack((pairs.min(axis=1), pairs.max(axis=1)), axis=1)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order], distances[order]


def near_duplicate_pairs(
    fingerprints: Iterable[int] | np.ndarray, max_distance: int = 3, *, n_blocks: int | None = None
) -> np.ndarray:
    """Every index pair (i < j) whose fingerprints are within ``max_distance`` bits, exactly once.

    Returns an int64 array of shape (n_pairs, 2), sorted by (i, j). Identical fingerprints are grouped
    first, so large groups of exact copies cost only their own (unavoidable) output size. ``n_blocks``
    overrides the automatic table layout (0 = compare all pairs); results never depend on it.
    """
    return near_duplicate_pairs_with_distances(fingerprints, max_distance, n_blocks=n_blocks)[0]


def pair_distances(fingerprints: Iterable[int] | np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Hamming distance of each (i, j) row of ``pairs``."""
    values = _as_fingerprint_array(fingerprints)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return np.bitwise_count(values[pairs[:, 0]] ^ values[pairs[:, 1]]).astype(np.int64)


def near_duplicate_groups(pairs: np.ndarray, n: int) -> np.ndarray:
    """Connected-component label for each of n items (labels 0.. in order of each group's first item)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(f"pairs reference an index outside 0..{n - 1}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    graph = coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    # Relabel so label order follows each component's smallest member (stable across scipy versions).
    first_seen = np.full(labels.max() + 1, n, dtype=np.int64)
    np.minimum.at(first_seen, labels, np.arange(n))
    rank = np.empty_like(first_seen)
    rank[np.argsort(first_seen, kind="stable")] = np.arange(len(first_seen))
    return rank[labels].astype(np.int64)


# ---------------------------------------------------------------------------------------------------
# Stored index


@dataclass(frozen=True)
class _IndexArrays:
    """One consistent state of an index's arrays: a query reads one of these, ``add`` publishes a new one."""

    values: np.ndarray
    sorted_keys: tuple[np.ndarray, ...]
    sorted_positions: tuple[np.ndarray, ...]


class NearDuplicateIndex:
    """Stored fingerprints answering "which known items are within k bits of this one?".

    Keeps, per block table, the keys sorted (and the item positions in that order); a query does one
    binary search per table and compares only items sharing the table's key. ``add`` merges new items
    into the sorted arrays without recomputing or re-sorting the stored ones.

    Queries may run in other threads while one ``add`` runs (adds themselves must not overlap): ``add``
    builds new arrays beside the old ones and publishes them in one assignment, so a query sees the items
    of before or of after the add, never half of it, and never waits for it (an add to 1,000,000 items
    takes ~35 ms of copying).
    """

    def __init__(
        self,
        ids: Iterable[Hashable] = (),
        fps: Iterable[int] | np.ndarray = (),
        max_distance: int = 3,
        n_blocks: int | None = None,
    ) -> None:
        self.max_distance = _check_distance(max_distance)
        if self.max_distance > 16:
            raise ValueError(f"an index supports max_distance up to 16, got {max_distance}")
        self.n_blocks = n_blocks if n_blocks is not None else self.max_distance + 1
        self._tables = _BlockTables.build(self.n_blocks, self.max_distance)
        self._ids: list[Hashable] = []
        self._id_set: set[Hashable] = set()
        empty = np.zeros(0, dtype=np.uint64)
        n_tables = len(self._tables.table_blocks)
        self._arrays = _IndexArrays(
            empty,
            tuple(self._tables.keys(empty, t) for t in range(n_tables)),
            tuple(np.zeros(0, dtype=np.int64) for _ in range(n_tables)),
        )
        self.add(ids, fps)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[Hashable]:
        return list(self._ids)

    @property
    def fingerprints(self) -> np.ndarray:
        return self._arrays.values.copy()

    def add(self, ids: Iterable[Hashable], fps: Iterable[int] | np.ndarray) -> None:
        """Store more items; ids must be new and as many as the fingerprints."""
        new_ids = list(ids)
        new_values = _as_fingerprint_array(fps)
        if len(new_ids) != len(new_values):
            raise ValueError(f"got {len(new_ids)} ids but {len(new_values)} fingerprints")
        if not new_ids:
            return
        if len(set(new_ids)) != len(new_ids):
            raise ValueError("ids passed to add() repeat")
        known = [i for i in new_ids if i in self._id_set]
        if known:
            raise ValueError(f"ids already in the index: {known[:5]}")
        old = self._arrays
        base = len(old.values)
        new_positions = np.arange(base, base + len(new_ids), dtype=np.int64)
        sorted_keys, sorted_positions = [], []
        for table in range(len(self._tables.table_blocks)):
            new_keys = self._tables.keys(new_values, table)
            order = np.argsort(new_keys, kind="stable")
            new_keys, positions = new_keys[order], new_positions[order]
            insert_at = np.searchsorted(old.sorted_keys[table], new_keys, side="right")
            sorted_keys.append(np.insert(old.sorted_keys[table], insert_at, new_keys))
            sorted_positions.append(np.insert(old.sorted_positions[table], insert_at, positions))
        # ids first: a query of the new arrays maps positions to ids, one of the old arrays only old positions
        self._ids.extend(new_ids)
        self._id_set.update(new_ids)
        self._arrays = _IndexArrays(
            np.concatenate((old.values, new_values)), tuple(sorted_keys), tuple(sorted_positions)
        )

    def query_many(
        self, fps: Iterable[int] | np.ndarray, max_distance: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All (query index, stored position, distance) matches, sorted by query, distance, position."""
        k = self.max_distance if max_distance is None else _check_distance(max_distance)
        if k > self.max_distance:
            raise ValueError(f"this index was built for max_distance <= {self.max_distance}, asked {k}")
        queries = _as_fingerprint_array(fps, "fps")
        arrays = self._arrays  # one state throughout, whatever an add publishes meanwhile
        found_q, found_p, found_d = [], [], []
        for table in range(len(self._tables.table_blocks)):
            keys = self._tables.keys(queries, table)
            sorted_keys = arrays.sorted_keys[table]
            lo = np.searchsorted(sorted_keys, keys, side="left")
            hi = np.searchsorted(sorted_keys, keys, side="right")
            sizes = hi - lo
            query_index = np.repeat(np.arange(len(queries)), sizes)
            slot = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
            positions = arrays.sorted_positions[table][slot]
            xor = queries[query_index] ^ arrays.values[positions]
            distance = np.bitwise_count(xor).astype(np.int64)
            close = np.flatnonzero(distance <= k)
            keep = close[self._tables.reported_here(xor[close], table)]
            found_q.append(query_index[keep])
            found_p.append(positions[keep])
            found_d.append(distance[keep])
        q, p, d = (np.concatenate(parts) for parts in (found_q, found_p, found_d))
        order = np.lexsort((p, d, q))
        return q[order], p[order], d[order]

    def query(self, fingerprint: int, max_distance: int | None = None) -> list[tuple[Hashable, int]]:
        """Stored (id, distance) within max_distance of ``fingerprint``, nearest first."""
        _, positions, distances = self.query_many(np.array([fingerprint], dtype=np.uint64), max_distance)
        return [(self._ids[p], int(d)) for p, d in zip(positions.tolist(), distances.tolist(), strict=True)]


# ---------------------------------------------------------------------------------------------------
# One text's features for the lookup, and the two-stage search verified by shingles


def fingerprint_and_shingles(text: str) -> tuple[int, np.ndarray]:
    """(``fingerprint(text)``, ``shingle_array(text, 2)``) from one tokenization (``text_features``)."""
    features = text_features(tokenize(text))
    return features.fingerprint, features.shingles


class TextFeatures(NamedTuple):
    fingerprint: int
    shingles: np.ndarray  # ``shingle_array`` of the text: sorted distinct word-bigram hashes
    token_hashes: np.ndarray  # each token's stable hash, in text order (uint64)


def text_features(tokens: list[str]) -> TextFeatures:
    """``fingerprint(text)``, ``shingle_array(text, 2)`` and the token hashes, from one set of features.

    The lookup service's path for its query text: the fingerprint's bigram features are the word 2-shingles,
    so the shingle array is the distinct hashes of those features. The same features and integer weights as
    ``_fingerprint_chunk`` gives one document (its per-document grouping is a bincount and one unique here),
    so the same bits: every vote is an exact sum of integers, in whatever order it is taken. Takes the tokens
    (``tokenize``) and gives each token's hash so that a caller needing more (the containment keys) neither
    tokenizes nor hashes the text again.
    """
    if not tokens:
        empty = np.zeros(0, dtype=np.uint64)
        return TextFeatures(0, empty, empty)
    vocabulary = dict(zip(dict.fromkeys(tokens), itertools.count()))  # first-occurrence ids, C loops
    token_ids = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    vocab_hashes = token_hashes(list(vocabulary))
    n_vocab = len(vocabulary)
    hashes, weights = [vocab_hashes], [_feature_weights(np.bincount(token_ids, minlength=n_vocab), 1.0)]
    if len(tokens) < 2:
        shingles = vocab_hashes  # one token: its own hash, as in ``shingle_set``
    else:
        pairs, pair_counts = np.unique(token_ids[:-1] * np.int64(n_vocab) + token_ids[1:], return_counts=True)
        bigram_hashes = mix_pair(vocab_hashes[pairs // n_vocab], vocab_hashes[pairs % n_vocab])
        hashes.append(bigram_hashes)
        weights.append(_feature_weights(pair_counts, _BIGRAM_FACTOR))
        shingles = sorted_distinct(bigram_hashes)
    all_hashes, all_weights = np.concatenate(hashes), np.concatenate(weights)
    value = _aggregate_bits(np.zeros(len(all_hashes), dtype=np.int64), all_hashes, all_weights, 1)
    return TextFeatures(int(value[0]), shingles, vocab_hashes[token_ids])


DEFAULT_CANDIDATE_DISTANCE = 6  # k=8 finds a few more heavy edits but makes ~9x more candidates (RESULTS.md)
# syndicated copies: >= 0.81 on the demo web; templated unrelated stories reach 0.64
DEFAULT_MIN_JACCARD = 0.7


def verified_near_duplicate_pairs(
    texts: Sequence[str],
    fps: Iterable[int] | np.ndarray | None = None,
    candidate_distance: int = DEFAULT_CANDIDATE_DISTANCE,
    min_jaccard: float = DEFAULT_MIN_JACCARD,
    shingle_size: int = 2,
) -> pd.DataFrame:
    """Two-stage near-duplicates: simhash candidates at a wider distance, kept if shingle Jaccard agrees.

    Why: a 64-bit simhash at k=3 finds only ~92% of copies with 3% of words substituted (~85% of those
    under 600 words): the 64 votes of a short text are too close to call. Measured (RESULTS.md
    "Near-duplicate quality"): candidates at k=6 hold every 1-3% edit and 0.16% of unrelated pairs, and a
    word-bigram Jaccard >= 0.7 on those candidates rejects all unrelated ones (0.5 did on real articles, but
    let templated unrelated stories through on the demo web; copies edited up to ~8% stay above 0.7). Returns columns
    i, j (i < j), distance, jaccard; pairs sorted by (i, j).
    """
    if not 0.0 <= min_jaccard <= 1.0:
        raise ValueError(f"min_jaccard must be between 0 and 1, got {min_jaccard}")
    texts = list(texts)
    values = fingerprints(texts) if fps is None else _as_fingerprint_array(fps)
    if len(values) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(values)} fingerprints")
    pairs, distances = near_duplicate_pairs_with_distances(values, candidate_distance)
    shingles: dict[int, set[int]] = {}

    def shingles_of(index: int) -> set[int]:
        if index not in shingles:
            shingles[index] = shingle_set(texts[index], shingle_size)
        return shingles[index]

    similarity = np.array(
        [jaccard(shingles_of(i), shingles_of(j)) for i, j in pairs.tolist()], dtype=np.float64
    )
    keep = similarity >= min_jaccard
    return pd.DataFrame(
        {
            "i": pairs[keep, 0],
            "j": pairs[keep, 1],
            "distance": distances[keep],
            "jaccard": similarity[keep],
        }
    )
