"""Clusters at scale: 100,000, 300,000 and 1,000,000 stories of 500 words, ours against a plain scikit-learn
pipeline at 100,000, same run.

- ours: ``topicmap.clusters.oneshot.cluster_story_batches`` end to end (hashed TF-IDF, random indexing to 256
  dims, k from the SSE curve, KMeans, top terms and central titles), the stories read from the corpus file 8,192
  at a time, as the asset reads them from the store;
- anchor: ``TfidfVectorizer -> TruncatedSVD(256) -> MiniBatchKMeans`` with the k ours chose (it gets k for free;
  it holds every text and matrix at once, so it runs only up to ``--anchor-max`` stories);
- streaming: ``StreamingKMeans.update`` of one week of 10,000 stories (256 dims, k=15), and the whole weekly step
  (``mutation.advance``: embedding with the carried IDF, update, re-prediction of the last four weeks).

Each pipeline runs in a child process of its own, so its peak memory (ru_maxrss) and CPU time are its own; the
texts are written to a file a story at a time and read back by the children (never held whole by ours).
Adjusted Rand index against the planted subjects is reported; a last table says how time and peak memory grow.

    .venv/bin/python benchmarks/bench_clusters.py [--sizes 100000 300000 1000000] [--words 500]
        [--anchor-max 100000] [--no-streaming]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np

SUBJECTS = 20
#: stories drawn at a time by make_corpus
GENERATE_BATCH = 1000
#: slices of the tabulated Zipf distribution (each of the 30,000 shared words gets at least one)
ZIPF_BINS = 2**22


def make_corpus(path: Path, stories: int, words: int, seed: int = 0) -> None:
    """Stories on SUBJECTS subjects: each word from the subject's 300 words (35 %) or a Zipf-distributed shared
    vocabulary of 30,000 words (65 %), as news text mixes a story's words with common ones. Drawn GENERATE_BATCH
    stories at a time and written as drawn (a million stories of 500 words is 3.5 GB of text, never held)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(36000)]
    cumulative = np.cumsum(1.0 / np.arange(1, 30001) ** 1.05)
    cumulative /= cumulative[-1]
    # Zipf by inverse CDF, tabulated: the word at the middle of each of ZIPF_BINS equal slices of probability
    # (every word has at least one slice); a lookup instead of a binary search per word
    zipf = np.minimum(np.searchsorted(cumulative, (np.arange(ZIPF_BINS) + 0.5) / ZIPF_BINS), 29999)
    subjects = rng.integers(0, SUBJECTS, size=stories)
    with path.open("w") as out:
        for start in range(0, stories, GENERATE_BATCH):
            part = subjects[start : start + GENERATE_BATCH]
            shape = (len(part), words)
            from_subject = rng.random(shape) < 0.35
            own = 30000 + 300 * part[:, None] + rng.integers(0, 300, size=shape)
            chosen = np.where(from_subject, own, zipf[rng.integers(0, ZIPF_BINS, size=shape)])
            out.write(
                "".join(
                    f"{subject}\t{' '.join(map(vocabulary.__getitem__, row))}\n"
                    for subject, row in zip(part.tolist(), chosen.tolist(), strict=True)
                )
            )


def read_corpus(path: Path, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    subjects, texts = [], []
    with path.open() as lines:
        for line in lines:
            if limit is not None and len(texts) == limit:
                break
            subject, text = line.rstrip("\n").split("\t", 1)
            subjects.append(int(subject))
            texts.append(text)
    return texts, np.array(subjects)


def corpus_batches(path: Path, subjects: list[int], offsets: list[int], size: int = 8192) -> Iterator:
    """The corpus a batch of ``size`` stories at a time (titles: the first 60 characters), each story's subject
    and where its line starts appended to ``subjects`` and ``offsets`` as it is read."""
    from topicmap.clusters.oneshot import StoryBatch

    texts: list[str] = []
    position = 0
    with path.open("rb") as lines:
        for line in lines:
            offsets.append(position)
            position += len(line)
            subject, text = line.decode().rstrip("\n").split("\t", 1)
            subjects.append(int(subject))
            texts.append(text)
            if len(texts) == size:
                yield StoryBatch(texts, [t[:60] for t in texts])
                texts = []
    if texts:
        yield StoryBatch(texts, [t[:60] for t in texts])


def corpus_texts_of(path: Path, offsets: list[int], positions: np.ndarray) -> list[str]:
    """The texts of the stories at these positions, read where their lines start."""
    texts = []
    with path.open("rb") as corpus:
        for position in positions.tolist():
            corpus.seek(offsets[position])
            texts.append(corpus.readline().decode().rstrip("\n").split("\t", 1)[1])
    return texts


def run_ours(path: Path) -> dict:
    from sklearn.metrics import adjusted_rand_score

    from topicmap.clusters.oneshot import cluster_story_batches

    subjects: list[int] = []
    offsets: list[int] = []
    started = time.perf_counter()
    result = cluster_story_batches(
        corpus_batches(path, subjects, offsets), partial(corpus_texts_of, path, offsets), k_min=2, k_max=40
    )
    seconds = time.perf_counter() - started
    return {
        "stories": len(subjects),
        "seconds": seconds,
        "k": result.choice.k,
        "k_method": result.choice.method,
        "ari": adjusted_rand_score(subjects, result.labels),
    }


def run_anchor(path: Path, k: int) -> dict:
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import adjusted_rand_score

    texts, subjects = read_corpus(path)
    started = time.perf_counter()
    matrix = TfidfVectorizer().fit_transform(texts)
    reduced = TruncatedSVD(256, random_state=0).fit_transform(matrix)
    labels = MiniBatchKMeans(n_clusters=k, random_state=0, n_init=3).fit_predict(reduced)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "k": k, "ari": adjusted_rand_score(subjects, labels)}


def run_streaming(path: Path) -> dict:
    from topicmap.clusters import StreamingKMeans
    from topicmap.clusters.mutation import StreamConfig, StreamState, advance

    texts, _ = read_corpus(path, limit=40000)
    week = texts[:10000]
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(10000, 256))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    model = StreamingKMeans.half_life(vectors[:15], np.ones(15), 2.0)
    updates = []
    for _ in range(5):
        started = time.perf_counter()
        model.update(vectors)
        updates.append(time.perf_counter() - started)
    # the whole weekly step: a stream already running on earlier weeks, then one week of 10,000 stories
    config = StreamConfig(k_min=15, k_max=15)
    steps = []
    state = StreamState()
    for t in range(4):
        chunk = texts[10000 * (t + 1) : 10000 * (t + 2)] if t < 3 else week
        window = [s.window_batch() for s in steps[-3:]]
        started = time.perf_counter()
        step = advance(
            state,
            f"2026-01-{5 + 7 * t:02d}",
            range(len(chunk)),
            [c[:60] for c in chunk],
            chunk,
            window,
            config,
        )
        elapsed = time.perf_counter() - started
        steps.append(step)
        state = step.state
    return {"update_seconds_median": float(np.median(updates)), "weekly_step_seconds": elapsed}


def child(kind: str, path: Path, k: int) -> dict:
    """Run one pipeline in a fresh interpreter; its own peak memory is reported."""
    code = (
        "import json, resource, sys; sys.path.insert(0, '.'); "
        "from benchmarks.bench_clusters import run_ours, run_anchor, run_streaming; from pathlib import Path; "
        f"r = {'run_ours(Path(sys.argv[1]))' if kind == 'ours' else 'run_anchor(Path(sys.argv[1]), int(sys.argv[2]))' if kind == 'anchor' else 'run_streaming(Path(sys.argv[1]))'}; "
        "u = resource.getrusage(resource.RUSAGE_SELF); r['peak_mib'] = u.ru_maxrss / 1024; "
        "r['process_cpu_seconds'] = u.ru_utime + u.ru_stime; print(json.dumps(r))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code, str(path), str(k)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument(
        "--anchor-max", type=int, default=100_000, help="run the anchor only up to this many stories"
    )
    parser.add_argument("--no-streaming", action="store_true", help="skip the streaming measurement")
    args = parser.parse_args()
    rows, growth = [], []
    with tempfile.TemporaryDirectory() as folder:
        for stories in args.sizes:
            path = Path(folder) / "corpus.tsv"
            started = time.perf_counter()
            make_corpus(path, stories, args.words)
            print(
                f"corpus: {stories} stories x {args.words} words in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
            ours = child("ours", path, 0)
            print(f"ours:   {json.dumps(ours)}", flush=True)
            growth.append(ours)
            rows.append(
                f"| ours, {stories:,} stories (hash TF-IDF, random indexing 256, SSE-curve k, KMeans, labels) | "
                f"{ours['seconds']:.1f} | {ours['peak_mib']:.0f} | {ours['k']} ({ours['k_method']}) | "
                f"{ours['ari']:.3f} |"
            )
            if stories <= args.anchor_max:
                anchor = child("anchor", path, ours["k"])
                print(f"anchor: {json.dumps(anchor)}", flush=True)
                rows.append(
                    f"| anchor, {stories:,} stories (TfidfVectorizer, TruncatedSVD 256, MiniBatchKMeans, k given) | "
                    f"{anchor['seconds']:.1f} | {anchor['peak_mib']:.0f} | {anchor['k']} | {anchor['ari']:.3f} |"
                )
            if not args.no_streaming and stories == args.sizes[0]:
                streaming = child("streaming", path, 0)
                print(f"streaming: {json.dumps(streaming)}", flush=True)
                rows.append(
                    f"| StreamingKMeans.update, 10,000 x 256, k=15 (median of 5) | "
                    f"{streaming['update_seconds_median']:.3f} | {streaming['peak_mib']:.0f} | 15 | |"
                )
                rows.append(
                    "| weekly step (embed 10,000 stories, update, re-predict 4 weeks) | "
                    f"{streaming['weekly_step_seconds']:.2f} | | 15 | |"
                )
            path.unlink()
    print()
    print("| pipeline | seconds | peak MiB | k | ARI |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    print()
    # growth: seconds and memory above the interpreter's own, per story, against the smallest size
    print("| stories | seconds | peak MiB | seconds per 100k stories | x stories | x seconds | x peak MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    first = growth[0]
    for run in growth:
        print(
            f"| {run['stories']:,} | {run['seconds']:.1f} | {run['peak_mib']:.0f} | "
            f"{run['seconds'] * 100_000 / run['stories']:.1f} | {run['stories'] / first['stories']:.1f} | "
            f"{run['seconds'] / first['seconds']:.2f} | {run['peak_mib'] / first['peak_mib']:.2f} |"
        )


if __name__ == "__main__":
    main()
