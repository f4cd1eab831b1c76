"""Near-duplicate quality: synthetic edits of real articles, simhash vs datasketch MinHash LSH.

Run: .venv/bin/python benchmarks/eval_near_duplicates.py [--repeats 3] [--min-words 100]

Articles: the ``text`` of /work/shared/data/news_html/expected.jsonl with at least --min-words words
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
- ``simhash k=3``: topicmap.simhash.fingerprint, Hamming distance <= 3;
- ``simhash k=6 (default) or k=8 + Jaccard>=0.5``: the two stages of
  topicmap.simhash.verified_near_duplicate_pairs (candidates within k bits, word-bigram Jaccard check);
- ``MinHash LSH 0.8``: datasketch MinHashLSH(threshold=0.8, num_perm=128) on the same word-bigram shingles;
- ``PyPI simhash k=3``: the simhash package's Simhash (char 4-grams) at distance <= 3, for reference.
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

from topicmap.simhash import (  # noqa: E402
    DEFAULT_CANDIDATE_DISTANCE,
    DEFAULT_MIN_JACCARD,
    fingerprints,
    jaccard,
    near_duplicate_pairs_with_distances,
    shingle_set,
)

EXPECTED = Path("/work/shared/data/news_html/expected.jsonl")
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


def minhash_detector(all_texts: list[str]) -> Callable[[int, int], bool]:
    """datasketch MinHash LSH on word-bigram shingles: pair detected iff LSH returns it as a candidate."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    signatures = []
    for key, text in enumerate(all_texts):
        minhash = MinHash(num_perm=128)
        minhash.update_batch([h.to_bytes(8, "little") for h in shingle_set(text, 2)] or [b""])
        lsh.insert(key, minhash)
        signatures.append(minhash)
    candidates: dict[int, set[int]] = {}

    def detected(a: int, b: int) -> bool:
        if a not in candidates:
            candidates[a] = set(lsh.query(signatures[a]))
        return b in candidates[a]

    return detected


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
    positives: dict[str, list[tuple[int, int]]] = {}
    for name, copies in edits.items():
        positives[name] = []
        for article, text in copies:
            positives[name].append((article, len(all_texts)))
            all_texts.append(text)

    shingles = [shingle_set(t, 2) for t in all_texts]
    n = len(articles)
    negatives, excluded = [], 0
    for i in range(n):
        for j in range(i + 1, n):
            if jaccard(shingles[i], shingles[j]) >= 0.5:
                excluded += 1
            else:
                negatives.append((i, j))

    ours = fingerprints(all_texts)
    from simhash import Simhash

    pypi = np.array([Simhash(t).value for t in all_texts], dtype=np.uint64)
    # The two-stage method as a caller would run it: candidate pairs among all texts, Jaccard-verified.
    verified: dict[int, set[tuple[int, int]]] = {}
    candidate_share: dict[int, float] = {}
    negative_set = set(negatives)
    for candidate_distance in sorted({DEFAULT_CANDIDATE_DISTANCE, 8}):
        candidate_pairs, _ = near_duplicate_pairs_with_distances(ours, candidate_distance)
        candidates = {(int(i), int(j)) for i, j in candidate_pairs.tolist()}
        candidate_share[candidate_distance] = len(candidates & negative_set) / len(negatives)
        verified[candidate_distance] = {
            pair
            for pair in candidates
            if jaccard(shingles[pair[0]], shingles[pair[1]]) >= DEFAULT_MIN_JACCARD
        }
    lsh_detected = minhash_detector(all_texts)

    def distance(values: np.ndarray, a: int, b: int) -> int:
        return int(np.bitwise_count(values[a] ^ values[b]))

    def two_stage(candidate_distance: int) -> Callable[[int, int], bool]:
        return lambda a, b: (min(a, b), max(a, b)) in verified[candidate_distance]

    methods: dict[str, Callable[[int, int], bool]] = {
        "simhash k=3 (ours)": lambda a, b: distance(ours, a, b) <= 3
    }
    for candidate_distance in verified:
        label = (
            f"simhash k={candidate_distance} + Jaccard>={DEFAULT_MIN_JACCARD} (ours, 2 stages; "
            f"{candidate_share[candidate_distance]:.2%} of unrelated pairs are candidates)"
        )
        methods[label] = two_stage(candidate_distance)
    methods["MinHash LSH 0.8 (datasketch)"] = lsh_detected
    methods["PyPI simhash k=3"] = lambda a, b: distance(pypi, a, b) <= 3

    print(
        f"articles: {n} (>= {args.min_words} words), edited copies: {len(all_texts) - n}, "
        f"negative pairs: {len(negatives)} ({excluded} near-identical originals excluded)\n"
    )
    names = list(edits)
    header = "| method | " + " | ".join(names) + " | false positives |"
    print("Recall / precision per edit type (precision counts every false positive among all negatives)\n")
    print(header)
    print("|" + "---|" * (len(names) + 2))
    for method, detect in methods.items():
        false_positives = sum(detect(a, b) for a, b in negatives)
        cells = []
        for name in names:
            hits = sum(detect(a, b) for a, b in positives[name])
            recall = hits / len(positives[name])
            precision = hits / (hits + false_positives) if hits + false_positives else 0.0
            cells.append(f"{recall:.3f} / {precision:.3f}")
        print(f"| {method} | " + " | ".join(cells) + f" | {false_positives} / {len(negatives)} |")

    print("\nHamming distance of our fingerprints per edit type\n")
    print("| pairs | n | mean | median | p90 | max | share <= 3 | share <= 8 |")
    print("|---|---|---|---|---|---|---|---|")
    distance_rows = {name: [distance(ours, a, b) for a, b in positives[name]] for name in names}
    distance_rows["unrelated (negatives)"] = [distance(ours, a, b) for a, b in negatives]
    for name, values in distance_rows.items():
        arr = np.array(values)
        print(
            f"| {name} | {len(arr)} | {arr.mean():.2f} | {np.median(arr):.0f} | {np.percentile(arr, 90):.0f} | "
            f"{arr.max()} | {np.mean(arr <= 3):.3f} | {np.mean(arr <= 8):.3f} |"
        )
    negative_distances = np.array(distance_rows["unrelated (negatives)"])
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
            hit = sum(distance(ours, a, b) <= 3 for a, b in pairs)
            cells.append(f"{hit / len(pairs):.3f} (n={len(pairs)})" if pairs else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\ntotal time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
