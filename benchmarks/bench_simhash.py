"""Simhash speed: fingerprinting throughput and all-pairs near-duplicate search at 1,000,000 fingerprints.

Run: .venv/bin/python benchmarks/bench_simhash.py [--n 1000000] [--texts 2000] [--queries 2000]

1. Fingerprinting ~500-word texts: topicmap.dedup.simhash.fingerprints (batch) and fingerprint (one at a time)
   against the PyPI ``simhash`` package's ``Simhash(text)``, in the same run. Texts are distinct 500-word
   windows over the real articles of the news-page corpus (tests/shared_data.py: expected.jsonl; synthetic Zipf
   text if that file is absent).
2. All pairs within Hamming distance 3 among --n random 64-bit fingerprints with planted near-duplicates
   (1-3 bits flipped) and exact copies:
   - ours: topicmap.dedup.simhash.near_duplicate_pairs (block-permutation tables);
     checked: every planted pair found, and for --queries random items the pairs agree exactly with brute
     force against all n (no pair missed, none extra);
   - PyPI ``simhash.SimhashIndex`` (k=3): built on all n, then --queries lookups timed; all-pairs time is
     estimated as time per lookup x n (it is too slow to run in full);
   - the mask expansion of the GDELT story-deduplication chapter ("expand and conquer"): every 32-bit
     fingerprint is emitted XORed
     with all 529 masks of <= 2 bits and grouped by value. It runs on a 100,000 sample and is extrapolated
     linearly to n (optimistic for it: the sort is n log n). Its query form for 64 bits at k=3 (43,745 probes
     per lookup, the chapter's Cassandra look-up) is timed per lookup and multiplied by n.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.dedup.simhash import fingerprint, fingerprints, near_duplicate_pairs  # noqa: E402
from topicmap.dedup.tokens import TOKEN_HASH_CACHE  # noqa: E402

EXPECTED = NEWS_HTML / "expected.jsonl"


def make_texts(count: int, words: int = 500, seed: int = 7) -> tuple[list[str], str]:
    """Distinct ``words``-word texts: windows over the real articles, else Zipf-distributed synthetic words."""
    rng = np.random.default_rng(seed)
    if EXPECTED.exists():
        rows = [
            json.loads(line) for line in EXPECTED.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        corpus = " ".join(r["text"] for r in rows if r.get("text")).split()
        starts = rng.integers(0, len(corpus) - words, count)
        return [" ".join(corpus[s : s + words]) for s in starts], "windows over real articles"
    vocabulary = [f"w{i}" for i in range(30_000)]
    ranks = np.minimum(rng.zipf(1.1, (count, words)), len(vocabulary)) - 1
    return [" ".join(vocabulary[r] for r in row) for row in ranks], "synthetic Zipf text"


def bench_fingerprinting(n_texts: int, rounds: int = 3) -> list[tuple[str, str, str]]:
    """Stories/s of each method; the methods alternate for ``rounds`` rounds and the best round counts,
    so a burst of load from other processes on this shared machine hits every method alike."""
    from simhash import Simhash

    texts, source = make_texts(n_texts)
    singles = texts[: max(1, n_texts // 4)]
    pypi_sample = texts[: max(1, n_texts // 8)]

    def rate(run: Callable[[], object], count: int) -> float:
        started = time.perf_counter()
        run()
        return count / (time.perf_counter() - started)

    TOKEN_HASH_CACHE.clear()
    best = {"cold": rate(lambda: fingerprints(texts), n_texts)}  # first call: every token hashed anew
    for _ in range(rounds):
        measured = {
            "batch": rate(lambda: fingerprints(texts), n_texts),
            "single": rate(lambda: [fingerprint(t) for t in singles], len(singles)),
            "pypi": rate(lambda: [Simhash(t) for t in pypi_sample], len(pypi_sample)),
        }
        for key, value in measured.items():
            best[key] = max(best.get(key, 0.0), value)
    print(f"texts: {n_texts} x 500 words ({source}); best of {rounds} alternating rounds\n")
    print("| fingerprinting | stories/s | vs PyPI simhash |")
    print("|---|---|---|")
    rows = [
        ("topicmap fingerprints(), batch, empty token-hash cache", best["cold"]),
        ("topicmap fingerprints(), batch", best["batch"]),
        ("topicmap fingerprint(), one text per call", best["single"]),
        ("PyPI simhash Simhash(text)", best["pypi"]),
    ]
    out = []
    for name, value in rows:
        print(f"| {name} | {value:,.0f} | {value / best['pypi']:.1f}x |")
        out.append((name, f"{value:,.0f}", f"{value / best['pypi']:.1f}x"))
    return out


def planted_fingerprints(n: int, seed: int = 11) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """n random fingerprints; 1% of them replaced by 1-3-bit variants of others, 0.1% by exact copies."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    n_near, n_exact = n // 100, n // 1000
    chosen = rng.permutation(n)[: 2 * (n_near + n_exact)]
    sources, targets = chosen[: n_near + n_exact], chosen[n_near + n_exact :]
    for t, s in zip(targets[:n_near], sources[:n_near], strict=True):
        bits = rng.choice(64, size=int(rng.integers(1, 4)), replace=False)
        mask = 0
        for b in bits:
            mask |= 1 << int(b)
        values[t] = values[s] ^ np.uint64(mask)
    values[targets[n_near:]] = values[sources[n_near:]]
    planted = {(int(min(s, t)), int(max(s, t))) for s, t in zip(sources, targets, strict=True)}
    return values, planted


def brute_force_check(values: np.ndarray, pairs: np.ndarray, queries: np.ndarray, k: int) -> tuple[int, int]:
    """(missed, extra) pairs touching the query items, ours vs comparing each query with all n."""
    truth: set[tuple[int, int]] = set()
    for start in range(0, len(queries), 64):
        chunk = queries[start : start + 64]
        distance = np.bitwise_count(values[chunk][:, None] ^ values[None, :])
        rows, cols = np.nonzero(distance <= k)
        for q, j in zip(chunk[rows].tolist(), cols.tolist(), strict=True):
            if q != j:
                truth.add((min(q, j), max(q, j)))
    query_set = set(queries.tolist())
    ours = {(i, j) for i, j in pairs.tolist() if i in query_set or j in query_set}
    return len(truth - ours), len(ours - truth)


def chapter_mask_expansion_pairs(values32: np.ndarray) -> int:
    """The chapter's method: emit (fp ^ mask, id) for every mask with <= 2 bits, group by value, pair within."""
    masks = (
        [0]
        + [1 << i for i in range(32)]
        + [(1 << i) | (1 << j) for i, j in itertools.combinations(range(32), 2)]
    )
    mask_array = np.array(masks, dtype=np.uint32)
    expanded = (values32[:, None] ^ mask_array[None, :]).ravel()
    ids = np.repeat(np.arange(len(values32), dtype=np.int64), len(mask_array))
    order = np.argsort(expanded)
    expanded, ids = expanded[order], ids[order]
    # Pairs inside each group, vectorized: compare each row with the row `offset` places later.
    boundaries = np.flatnonzero(expanded[1:] != expanded[:-1]) + 1
    ends = np.concatenate((boundaries, [len(expanded)]))
    group_end = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
    active = np.flatnonzero(np.arange(len(expanded)) + 1 < group_end)
    codes, offset = [], 1
    while len(active):
        a, b = ids[active], ids[active + offset]
        codes.append(np.minimum(a, b) * len(values32) + np.maximum(a, b))
        offset += 1
        active = active[active + offset < group_end[active]]
    return len(np.unique(np.concatenate(codes))) if codes else 0


def chapter_mask_query_seconds(values: np.ndarray, queries: np.ndarray) -> float:
    """Seconds per lookup of the chapter's query form at 64 bits, k=3: probe all 43,745 XOR variants."""
    masks = [0]
    for r in (1, 2, 3):
        for bits in itertools.combinations(range(64), r):
            m = 0
            for b in bits:
                m |= 1 << b
            masks.append(m)
    mask_array = np.array(masks, dtype=np.uint64)
    stored = np.sort(values)
    started = time.perf_counter()
    for q in values[queries].tolist():
        probes = np.uint64(q) ^ mask_array
        at = np.searchsorted(stored, probes)
        at[at == len(stored)] = 0
        _hits = int(np.count_nonzero(stored[at] == probes))
    return (time.perf_counter() - started) / len(queries)


def bench_pairs(n: int, n_queries: int, k: int = 3) -> list[tuple[str, str, str]]:
    from simhash import Simhash, SimhashIndex

    values, planted = planted_fingerprints(n)
    rng = np.random.default_rng(5)
    queries = rng.choice(n, size=n_queries, replace=False)
    started, started_cpu = time.perf_counter(), time.process_time()
    pairs = near_duplicate_pairs(values, k)
    ours_seconds, ours_cpu = time.perf_counter() - started, time.process_time() - started_cpu
    found = {(int(i), int(j)) for i, j in pairs.tolist()}
    planted_missed = len(planted - found)
    missed, extra = brute_force_check(values, pairs, queries, k)
    rows = [
        (
            f"topicmap near_duplicate_pairs (64 bit, k={k})",
            f"{ours_seconds:.2f} s (measured; {ours_cpu:.2f} s CPU)",
            f"{len(pairs):,} pairs; planted {len(planted):,}, missed {planted_missed}; "
            f"{n_queries} items vs brute force: {missed} missed, {extra} extra",
        )
    ]

    started = time.perf_counter()
    index = SimhashIndex([(str(i), Simhash(int(v))) for i, v in enumerate(values.tolist())], k=k)
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    index_hits = 0
    for q in queries.tolist():
        index_hits += len(index.get_near_dups(Simhash(int(values[q])))) - 1
    per_query = (time.perf_counter() - started) / n_queries
    del index
    rows.append(
        (
            f"PyPI simhash SimhashIndex (64 bit, k={k})",
            f"{build_seconds + per_query * n:.0f} s (build {build_seconds:.0f} s measured + "
            f"{per_query * 1e3:.2f} ms/lookup x n)",
            f"{index_hits} neighbours for the {n_queries} sampled items",
        )
    )

    sample_n = min(n, 100_000)
    values32 = (values[:sample_n] >> np.uint64(32)).astype(np.uint32)
    started = time.perf_counter()
    chapter_pairs = chapter_mask_expansion_pairs(values32)
    chapter_seconds = time.perf_counter() - started
    rows.append(
        (
            "chapter's mask expansion, batch (32 bit, k=2, 529 masks)",
            f"{chapter_seconds * n / sample_n:.0f} s ({chapter_seconds:.1f} s measured on {sample_n:,}, x{n // sample_n})",
            f"{chapter_pairs:,} pairs in the {sample_n:,} sample",
        )
    )
    probe_queries = queries[: max(1, n_queries // 10)]
    per_probe_query = chapter_mask_query_seconds(values, probe_queries)
    rows.append(
        (
            "chapter's mask expansion, lookups (64 bit, k=3, 43,745 probes)",
            f"{per_probe_query * n:.0f} s ({per_probe_query * 1e3:.1f} ms/lookup x n)",
            f"{len(probe_queries)} lookups timed",
        )
    )
    print(
        f"\nfingerprints: {n:,} random 64-bit, planted: {len(planted):,} pairs (1% within 1-3 bits, 0.1% exact)\n"
    )
    print("| all pairs within k | time for all n | check |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--skip-pairs", action="store_true")
    args = parser.parse_args()
    bench_fingerprinting(args.texts)
    if not args.skip_pairs:
        bench_pairs(args.n, args.queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
