"""Near-duplicate quality: synthetic edits of real articles, simhash vs datasketch MinHash LSH.

Run: .venv/bin/python benchmarks/eval_near_duplicates.py [--repeats 3] [--min-words 100]

Articles: the ``text`` of the news-page corpus's expected.jsonl (tests/shared_data.py) with at least --min-words words
(skipped cleanly when the file is absent). For each article we make edited copies:

- exact copy;
- words substituted at 1%, 3%, 5%, 10% (random positions, replacement drawn from the corpus vocabulary;
  --repeats independent copies each);
- one sentence from another article inserted at a random sentence boundary;
- a ~40-word syndication footer appended;
- paragraphs (or, for single-paragraph texts, sentences) shuffled.

Positives are (original, edited copy) pairs; negatives are all pairs of different originals, minus pairs
that really are near-duplicates of each other (word-bigram Jaccard >= 0.5; the corpus has such pairs).
Precision for an edit type = its detected positives / (those + false positives among all negatives), so
it is measured at the real base rate (many more unrelated pairs than copies), not on a balanced sample.

Methods, all in this run on the same pairs:
- ``simhash k=3``: topicmap.dedup.simhash.fingerprint, Hamming distance <= 3;
- ``simhash k=6 (default) or k=8 + Jaccard>=DEFAULT_MIN_JACCARD`` (0.7): the two stages of
  topicmap.dedup.simhash.verified_near_duplicate_pairs (candidates within k bits, word-bigram Jaccard check);
- ``MinHash LSH 0.8``: datasketch MinHashLSH(threshold=0.8, num_perm=128) on the same word-bigram shingles;
- ``PyPI simhash k=3``: the simhash package's Simhash (char 4-grams) at distance <= 3, for reference.

A positional simhash (the lead's words weighted more, as the GDELT story-deduplication chapter suggests) was
compared here too and removed from topicmap.dedup.simhash for lack of a net gain (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.dedup.shingles import jaccard, shingle_set
from topicmap.dedup.simhash import (
    DEFAULT_CANDIDATE_DISTANCE,
    DEFAULT_MIN_JACCARD,
    fingerprints,
    near_duplicate_pairs,
    verified_near_duplicate_pairs,
)

EXPECTED = NEWS_HTML / "expected.jsonl"
FOOTER = (
    "This story was originally published by our partners and is republished here under a content "
    "sharing agreement. Copyright 2024 the publisher. All rights reserved. This material may not be "
    "published, broadcast, rewritten or redistributed without permission. Sign up for our daily newsletter."
)
SUBSTITUTION_RATES = (0.01, 0.03, 0.05, 0.10)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def load_articles(min_words: int) -> list[str]:
    rows = [json.loads(line) for line in EXPECTED.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["text"] for r in rows if r.get("text") and len(r["text"].split()) >= min_words]


def substitute(text: str, rate: float, vocabulary: list[str], rng: random.Random) -> str:
    """Replace round(rate * words) words at random positions; whitespace (paragraphs) is kept."""
    parts = re.split(r"(\s+)", text)
    word_slots = [i for i, part in enumerate(parts) if part and not part.isspace()]
    for slot in rng.sample(word_slots, max(1, round(rate * len(word_slots)))):
        parts[slot] = rng.choice(vocabulary)
    return "".join(parts)


def add_sentence(text: str, other: str, rng: random.Random) -> str:
    sentences = _SENTENCE_END.split(text)
    donor = [s for s in _SENTENCE_END.split(other) if len(s.split()) >= 8] or [other[:200]]
    at = rng.randrange(len(sentences) + 1)
    return " ".join(sentences[:at] + [rng.choice(donor)] + sentences[at:])


def reorder(text: str, rng: random.Random) -> str:
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    if len(paragraphs) < 3:
        paragraphs = _SENTENCE_END.split(text)
    shuffled = paragraphs[:]
    while len(shuffled) > 1 and shuffled == paragraphs:
        rng.shuffle(shuffled)
    return "\n\n".join(shuffled)


def make_edits(articles: list[str], repeats: int, seed: int) -> dict[str, list[tuple[int, str]]]:
    """Edit type -> list of (article index, edited text)."""
    rng = random.Random(seed)
    vocabulary = sorted({w for text in articles for w in text.split()})
    edits: dict[str, list[tuple[int, str]]] = {"exact copy": [(i, t) for i, t in enumerate(articles)]}
    for rate in SUBSTITUTION_RATES:
        edits[f"{rate:.0%} words substituted"] = [
            (i, substitute(t, rate, vocabulary, rng)) for i, t in enumerate(articles) for _ in range(repeats)
        ]
    edits["sentence added"] = [
        (i, add_sentence(t, articles[(i + 1 + rng.randrange(len(articles) - 1)) % len(articles)], rng))
        for i, t in enumerate(articles)
    ]
    edits["footer appended"] = [(i, t.rstrip() + "\n\n" + FOOTER) for i, t in enumerate(articles)]
    edits["paragraphs reordered"] = [(i, reorder(t, rng)) for i, t in enumerate(articles)]
    return edits


Pair = tuple[int, int]  # (i, j) indices into one text list, i < j


def minhash_pairs(shingles: list[set[int]], threshold: float = 0.8, num_perm: int = 128) -> set[Pair]:
    """datasketch MinHash LSH on word-bigram shingles: a pair is detected iff LSH returns it as a candidate."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    signatures = []
    for key, shingle_hashes in enumerate(shingles):
        minhash = MinHash(num_perm=num_perm)
        minhash.update_batch([h.to_bytes(8, "little") for h in shingle_hashes] or [b""])
        lsh.insert(key, minhash)
        signatures.append(minhash)
    # LSH candidates are symmetric (a shared band bucket), so querying every key finds each pair.
    return {
        (min(key, other), max(key, other))
        for key, minhash in enumerate(signatures)
        for other in lsh.query(minhash)
        if other != key
    }


def _pair_set(pairs: np.ndarray) -> set[Pair]:
    return {(int(i), int(j)) for i, j in pairs.tolist()}


def detect_pairs(
    texts: list[str],
    fps: np.ndarray | None = None,
    *,
    candidate_distances: tuple[int, ...] = (DEFAULT_CANDIDATE_DISTANCE, 8),
    include_pypi: bool = True,
) -> tuple[dict[str, set[Pair]], dict[str, set[Pair]]]:
    """Every method's detected pairs among all ``texts``, and the two-stage methods' first-stage candidates.

    The two-stage rows call topicmap.dedup.simhash.verified_near_duplicate_pairs itself, as the
    ``near_duplicates`` asset does (topicmap.dedup.store.find_near_duplicates).
    Labels of two-stage methods end in ")" so ``with_candidate_share`` can add the candidate share.
    """
    ours = fingerprints(texts) if fps is None else fps
    detected: dict[str, set[Pair]] = {"simhash k=3 (ours)": _pair_set(near_duplicate_pairs(ours, 3))}
    candidates: dict[str, set[Pair]] = {}
    for candidate_distance in sorted(set(candidate_distances)):
        label = f"simhash k={candidate_distance} + Jaccard>={DEFAULT_MIN_JACCARD} (ours, 2 stages)"
        verified = verified_near_duplicate_pairs(texts, ours, candidate_distance=candidate_distance)
        detected[label] = set(zip(verified["i"].tolist(), verified["j"].tolist(), strict=True))
        candidates[label] = _pair_set(near_duplicate_pairs(ours, candidate_distance))
    detected["MinHash LSH 0.8 (datasketch)"] = minhash_pairs([shingle_set(t, 2) for t in texts])
    if include_pypi:
        from simhash import Simhash

        pypi = np.array([Simhash(t).value for t in texts], dtype=np.uint64)
        detected["PyPI simhash k=3"] = _pair_set(near_duplicate_pairs(pypi, 3))
    return detected, candidates


def restrict(detected: dict[str, set[Pair]], n: int) -> dict[str, set[Pair]]:
    """The pairs among the first n texts only (detection is pairwise, so this equals a run on those n)."""
    return {label: {pair for pair in pairs if pair[1] < n} for label, pairs in detected.items()}


def with_candidate_share(
    detected: dict[str, set[Pair]],
    candidates: dict[str, set[Pair]],
    is_negative: Callable[[Pair], bool],
    n_negatives: int,
) -> dict[str, set[Pair]]:
    """Two-stage labels extended with the share of unrelated pairs that reach the second stage."""
    labelled = {}
    for label, pairs in detected.items():
        if label in candidates:
            share = sum(map(is_negative, candidates[label])) / max(n_negatives, 1)
            label = f"{label[:-1]}; {share:.2%} of unrelated pairs are candidates)"
        labelled[label] = pairs
    return labelled


def recall_precision_lines(
    methods: dict[str, set[Pair]],
    positives: dict[str, list[Pair]],
    is_negative: Callable[[Pair], bool],
    n_negatives: int,
) -> list[str]:
    """Markdown table: recall / precision per positive class; precision counts every false positive.

    Precision for a class = its detected positives / (those + every detected negative pair), i.e. at the
    real base rate of unrelated pairs rather than on a balanced sample."""
    names = list(positives)
    lines = ["| method | " + " | ".join(names) + " | false positives |", "|" + "---|" * (len(names) + 2)]
    for method, detected in methods.items():
        false_positives = sum(map(is_negative, detected))
        cells = []
        for name in names:
            hits = sum(pair in detected for pair in positives[name])
            recall = hits / len(positives[name]) if positives[name] else 0.0
            precision = hits / (hits + false_positives) if hits + false_positives else 0.0
            cells.append(f"{recall:.3f} / {precision:.3f}")
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {false_positives} / {n_negatives} |")
    return lines


def hamming(values: np.ndarray, pairs: list[Pair]) -> np.ndarray:
    """Hamming distance of each pair's fingerprints."""
    index = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return np.bitwise_count(values[index[:, 0]] ^ values[index[:, 1]]).astype(np.int64)


def distance_lines(distances: dict[str, np.ndarray]) -> list[str]:
    """Markdown table of Hamming-distance statistics per pair class."""
    lines = [
        "| pairs | n | mean | median | p90 | max | share <= 3 | share <= 8 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, arr in distances.items():
        if not len(arr):
            lines.append(f"| {name} | 0 | - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {name} | {len(arr)} | {arr.mean():.2f} | {np.median(arr):.0f} | {np.percentile(arr, 90):.0f} | "
            f"{arr.max()} | {np.mean(arr <= 3):.3f} | {np.mean(arr <= 8):.3f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="copies per article and substitution rate")
    parser.add_argument("--min-words", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20240501)
    args = parser.parse_args()
    if not EXPECTED.exists():
        print(f"skipped: {EXPECTED} not found")
        return 0

    started = time.perf_counter()
    articles = load_articles(args.min_words)
    edits = make_edits(articles, args.repeats, args.seed)
    # One text list: originals first, then every edited copy; pairs are indices into it.
    all_texts = list(articles)
    positives: dict[str, list[Pair]] = {}
    for name, copies in edits.items():
        positives[name] = []
        for article, text in copies:
            positives[name].append((article, len(all_texts)))
            all_texts.append(text)

    shingles = [shingle_set(t, 2) for t in articles]
    n = len(articles)
    negatives, excluded = [], 0
    for i in range(n):
        for j in range(i + 1, n):
            if jaccard(shingles[i], shingles[j]) >= 0.5:
                excluded += 1
            else:
                negatives.append((i, j))
    negative_set = set(negatives)

    ours = fingerprints(all_texts)
    detected, candidates = detect_pairs(all_texts, ours)
    methods = with_candidate_share(detected, candidates, negative_set.__contains__, len(negatives))

    print(
        f"articles: {n} (>= {args.min_words} words), edited copies: {len(all_texts) - n}, "
        f"negative pairs: {len(negatives)} ({excluded} near-identical originals excluded)\n"
    )
    names = list(edits)
    print("Recall / precision per edit type (precision counts every false positive among all negatives)\n")
    print("\n".join(recall_precision_lines(methods, positives, negative_set.__contains__, len(negatives))))

    print("\nHamming distance of our fingerprints per edit type\n")
    distance_rows = {name: hamming(ours, positives[name]) for name in names}
    distance_rows["unrelated (negatives)"] = hamming(ours, negatives)
    print("\n".join(distance_lines(distance_rows)))
    negative_distances = distance_rows["unrelated (negatives)"]
    print(
        f"\nunrelated pairs: min distance {negative_distances.min()}, 1st percentile "
        f"{np.percentile(negative_distances, 1):.0f}"
    )

    print("\nRecall of simhash k=3 by article length\n")
    lengths = np.array([len(t.split()) for t in articles])
    buckets = [(args.min_words, 300), (300, 600), (600, 10**9)]
    print("| edit | " + " | ".join(f"{lo}-{hi - 1 if hi < 10**9 else ''} words" for lo, hi in buckets) + " |")
    print("|" + "---|" * (len(buckets) + 1))
    for name in names:
        cells = []
        for lo, hi in buckets:
            pairs = [(a, b) for a, b in positives[name] if lo <= lengths[a] < hi]
            hit = int((hamming(ours, pairs) <= 3).sum()) if pairs else 0
            cells.append(f"{hit / len(pairs):.3f} (n={len(pairs)})" if pairs else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\ntotal time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
