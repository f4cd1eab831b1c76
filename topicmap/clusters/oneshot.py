"""One-shot clustering of all of a topic's stories, read in bounded batches: memory grows with the stories only
by their 256-d float32 vectors, never by their words.

``cluster_story_batches`` takes the stories as an iterable of ``StoryBatch`` (a few thousand at a time, from
the store or from a file) and reads each batch once:

1. its words (``model.tokenize``) and hashed term counts; the document frequencies are summed, and the counts
   (int32 column, float32 count) are appended to temporary files: held in memory, the counts of a million stories
   of 500 words would take 2.6 GB, their token lists many times that;
2. once every story is read, the counts are read back ``EMBED_CHUNK`` stories at a time and embedded with the
   IDF of all the stories (``model.embed``) into one float32 array (stories x 256: 1 GB for a million);
3. k from the SSE curve on a sample (``model.choose_k``, unchanged); KMeans (three k-means++ starts) on all the
   stories up to ``FIT_SAMPLE``, else on a seeded uniform sample of that many, followed by Lloyd steps over all
   the vectors ``ASSIGN_CHUNK`` at a time until no story changes cluster (at most ``REFINE_STEPS``);
4. the clusters' words from the counts of their label sample (``model.label_sample``) and those stories' texts,
   read again through ``texts_of`` (a few hundred per cluster); the central titles from every story's distance
   to its centre.

``cluster_stories`` is the same over a list of texts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from scipy import sparse

from topicmap.clusters.model import (
    DIMS,
    EMBED_CHUNK,
    HASH_FEATURES,
    ClusterResult,
    KChoice,
    check_texts,
    choose_k,
    document_frequency,
    embed,
    kmeans_fit,
    label_sample,
    sizes_of,
    smoothed_idf,
    term_counts,
    titles_nearest,
    tokenize,
    top_terms,
)

#: stories tokenized and counted at a time when ``cluster_stories`` is given a list
BATCH_STORIES = 8192
#: KMeans' k-means++ starts run on at most this many stories (a seeded uniform sample of a larger topic)
FIT_SAMPLE = 100_000
#: Lloyd steps over all the stories after a sampled fit (they stop once no story changes cluster)
REFINE_STEPS = 20
#: stories compared with the centres at a time (float64: 16,384 x 256 x 8 bytes = 32 MiB)
ASSIGN_CHUNK = 16384


@dataclass
class StoryBatch:
    """A few stories: their texts (title and body), and optionally their titles and languages."""

    texts: Sequence[str]
    titles: Sequence[str] | None = None
    languages: Sequence[str | None] | None = None


class _CountSpill:
    """The hashed term counts of every story read so far, in two temporary files (columns as int32, counts as
    float32) and a row index in memory (8 bytes a story)."""

    def __init__(self, folder: Path) -> None:
        self.columns: BinaryIO = (folder / "columns.bin").open("w+b")
        self.values: BinaryIO = (folder / "values.bin").open("w+b")
        self.ends = [np.zeros(1, dtype=np.int64)]
        self.nonzeros = 0
        self.indptr = np.zeros(1, dtype=np.int64)

    def append(self, counts: sparse.csr_matrix) -> None:
        self.columns.write(counts.indices.astype(np.int32, copy=False).tobytes())
        self.values.write(counts.data.astype(np.float32, copy=False).tobytes())
        self.ends.append(counts.indptr[1:].astype(np.int64) + self.nonzeros)
        self.nonzeros += counts.nnz

    def finish(self) -> int:
        """Stop appending; the number of stories."""
        self.columns.flush()
        self.values.flush()
        self.indptr = np.concatenate(self.ends)
        self.ends = []
        return len(self.indptr) - 1

    @staticmethod
    def _read(file: BinaryIO, dtype: type, start: int, count: int) -> np.ndarray:
        array = np.empty(count, dtype=dtype)
        file.seek(start * array.itemsize)
        if file.readinto(memoryview(array).cast("B")) != array.nbytes:
            raise OSError(f"the temporary counts file {file.name} is shorter than written")
        return array

    def rows(self, start: int, stop: int) -> sparse.csr_matrix:
        """The counts of stories [start, stop)."""
        first, last = int(self.indptr[start]), int(self.indptr[stop])
        return sparse.csr_matrix(
            (
                self._read(self.values, np.float32, first, last - first),
                self._read(self.columns, np.int32, first, last - first),
                self.indptr[start : stop + 1] - first,
            ),
            shape=(stop - start, HASH_FEATURES),
        )

    def chunks(self, size: int) -> Iterator[tuple[int, sparse.csr_matrix]]:
        stories = len(self.indptr) - 1
        for start in range(0, stories, size):
            yield start, self.rows(start, min(start + size, stories))

    def take(self, positions: np.ndarray) -> sparse.csr_matrix:
        """The counts of these stories (sorted positions), each read on its own: a few thousand stories of
        a million need not read the whole file."""
        parts = [self.rows(int(i), int(i) + 1) for i in positions]
        return sparse.vstack(parts, format="csr") if parts else sparse.csr_matrix((0, HASH_FEATURES))

    def close(self) -> None:
        self.columns.close()
        self.values.close()


def _short_title(title: str) -> str:
    return " ".join(str(title).split())[:140]


def _nearest(vectors: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Each story's nearest centre (float64 arithmetic), a chunk at a time."""
    labels = np.empty(len(vectors), dtype=np.int64)
    squared_centers = np.einsum("ij,ij->i", centers, centers)
    for start in range(0, len(vectors), ASSIGN_CHUNK):
        x = vectors[start : start + ASSIGN_CHUNK].astype(np.float64)
        # |x|^2 is the same for every centre: the nearest centre minimises |c|^2 - 2 x.c
        labels[start : start + len(x)] = (squared_centers[None, :] - 2.0 * (x @ centers.T)).argmin(axis=1)
    return labels


def _means(vectors: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """The mean of each cluster's members (a cluster left empty keeps its centre), a chunk at a time."""
    k = len(centers)
    sums = np.zeros_like(centers)
    for start in range(0, len(vectors), ASSIGN_CHUNK):
        x = vectors[start : start + ASSIGN_CHUNK].astype(np.float64)
        own = labels[start : start + len(x)]
        membership = sparse.csr_matrix((np.ones(len(x)), (own, np.arange(len(x)))), shape=(k, len(x)))
        sums += membership @ x
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1.0)[:, None], centers)


def fit_clusters(vectors: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """Labels and centres of KMeans with k clusters over all the vectors (float32 or float64), and the Lloyd
    steps run over all of them after a sampled fit (0 when every story took part in the fit)."""
    n = len(vectors)
    if n <= FIT_SAMPLE:
        model = kmeans_fit(np.array(vectors, dtype=np.float64), k, seed, copy=False)
        return model.labels_.astype(np.int64), model.cluster_centers_, 0
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, FIT_SAMPLE, replace=False))
    centers = kmeans_fit(vectors[sample].astype(np.float64), k, seed, copy=False).cluster_centers_
    labels = _nearest(vectors, centers)
    steps = 0
    while steps < REFINE_STEPS:
        centers = _means(vectors, labels, centers)
        moved = _nearest(vectors, centers)
        steps += 1
        changed = int((moved != labels).sum())
        labels = moved
        if changed == 0:
            break
    return labels, centers, steps


def _own_distances(vectors: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> np.ndarray:
    distances = np.empty(len(vectors))
    for start in range(0, len(vectors), ASSIGN_CHUNK):
        x = vectors[start : start + ASSIGN_CHUNK].astype(np.float64)
        distances[start : start + len(x)] = ((x - centers[labels[start : start + len(x)]]) ** 2).sum(axis=1)
    return distances


def cluster_story_batches(
    batches: Iterable[StoryBatch],
    texts_of: Callable[[np.ndarray], Sequence[str]],
    n_clusters: int | None = None,
    *,
    k_min: int = 2,
    k_max: int = 30,
    seed: int = 0,
    dims: int = DIMS,
) -> ClusterResult:
    """KMeans over hashed TF-IDF projected by random indexing; k from the SSE curve unless ``n_clusters``.

    ``batches`` is read once; ``texts_of(positions)`` gives the texts of the stories at these positions (in the
    order read, sorted), a few hundred per cluster, whose words name the clusters."""
    if n_clusters is not None and (not isinstance(n_clusters, int) or n_clusters < 1):
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    titles: list[str] = []
    languages: list[str | None] = []
    frequency = np.zeros(HASH_FEATURES, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="topicmap-clusters-") as folder:
        spill = _CountSpill(Path(folder))
        try:
            for batch in batches:
                texts = check_texts(batch.texts, "texts", len(titles))
                counts = term_counts(tokenize(texts))
                frequency += document_frequency(counts)
                spill.append(counts)
                if batch.titles is not None and len(batch.titles) != len(texts):
                    raise ValueError(f"a batch has {len(texts)} texts and {len(batch.titles)} titles")
                titles.extend(_short_title(t) for t in (texts if batch.titles is None else batch.titles))
                languages.extend([None] * len(texts) if batch.languages is None else batch.languages)
            n = spill.finish()
            if n_clusters is not None and n_clusters > n:
                raise ValueError(f"n_clusters ({n_clusters}) is larger than the number of texts ({n})")
            idf = smoothed_idf(frequency, n)
            vectors = np.empty((n, dims), dtype=np.float32)
            for start, counts in spill.chunks(EMBED_CHUNK):
                vectors[start : start + counts.shape[0]] = embed(counts, idf, dims, seed)
            if n_clusters is None:
                choice = choose_k(vectors, k_min, k_max, seed)
            else:
                choice = KChoice(n_clusters, "given", f"k={n_clusters} was given", [], [], 0)
            labels, centers, _ = fit_clusters(vectors, choice.k, seed)
            clusters = list(range(choice.k))
            named = label_sample(labels, clusters)
            named = np.arange(n) if named is None else named
            words = tokenize(check_texts(texts_of(named), "texts_of"))
            if len(words) != len(named):
                raise ValueError(f"texts_of gave {len(words)} texts for {len(named)} stories")
            terms = top_terms(
                spill.take(named), words, labels[named], clusters, [languages[i] for i in named]
            )
        finally:
            spill.close()
    return ClusterResult(
        labels=labels,
        choice=choice,
        sizes=sizes_of(labels, choice.k),
        top_terms=terms,
        titles=titles_nearest(_own_distances(vectors, labels, centers), labels, titles, clusters),
        centroids=centers,
        vectors=vectors,
    )


def cluster_stories(
    texts: Sequence[str],
    n_clusters: int | None = None,
    *,
    titles: Sequence[str] | None = None,
    languages: Sequence[str | None] | None = None,
    k_min: int = 2,
    k_max: int = 30,
    seed: int = 0,
    dims: int = DIMS,
) -> ClusterResult:
    """``cluster_story_batches`` over a list of texts (titles default to the texts)."""
    texts = check_texts(texts)
    for name, values in (("titles", titles), ("languages", languages)):
        if values is not None and len(values) != len(texts):
            raise ValueError(f"{len(texts)} texts and {len(values)} {name}")
    if n_clusters is not None and isinstance(n_clusters, int) and n_clusters > len(texts):
        raise ValueError(f"n_clusters ({n_clusters}) is larger than the number of texts ({len(texts)})")

    def batches() -> Iterator[StoryBatch]:
        for start in range(0, len(texts), BATCH_STORIES):
            part = slice(start, start + BATCH_STORIES)
            yield StoryBatch(
                texts[part],
                None if titles is None else list(titles[part]),
                None if languages is None else list(languages[part]),
            )

    return cluster_story_batches(
        batches(),
        lambda positions: [texts[i] for i in positions],
        n_clusters,
        k_min=k_min,
        k_max=k_max,
        seed=seed,
        dims=dims,
    )
