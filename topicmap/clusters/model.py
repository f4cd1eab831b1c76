"""Clusters of stories and how they mutate over time (pure: no store, no dagster).

The method of the "story mutation" chapter (seed 001, second half), done with scikit-learn:

1. hashed term frequencies (``HashingVectorizer``), weighted by inverse document frequency;
2. *random indexing*: every hashed term gets a sparse random signature of +1/-1 over ``dims`` dimensions and a
   document is the TF-IDF-weighted sum of its terms' signatures (``SparseRandomProjection``; Johnson-Lindenstrauss
   keeps distances). The chapter hashes straight into 256 buckets and suffers the collisions it describes; we
   hash into 2**17 buckets first and only then project, which is what random indexing is for;
3. KMeans on the L2-normalised vectors. The chapter settles for Euclidean KMeans on raw vectors and notes that
   cosine suits text better; on unit vectors Euclidean distance is a monotone function of cosine, so we get
   cosine clustering from plain KMeans;
4. streaming KMeans over time batches, with Spark's forgetful update (weights decayed by
   ``0.5 ** (1 / half_life)`` per batch) and its "dying cluster" rule (the weakest cluster is re-seeded by
   splitting the strongest);
5. a mutation graph linking each cluster of a batch to the cosine-similar clusters of the next batch, with the
   chapter's evidence alongside: how many of the batch's stories the next batch's model puts in that cluster.

Top terms label clusters only: they come from a small vocabulary TF-IDF (``TfidfVectorizer``) fitted on the same
texts, averaged over each cluster's members, because hashed and projected features cannot be mapped back to words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.preprocessing import normalize
from sklearn.random_projection import SparseRandomProjection

#: hashed vocabulary size before random indexing: distinct words rarely collide, and drawing the signatures
#: (once per process and seed) stays near a second
HASH_FEATURES = 2**17
#: non-zero entries per word signature in random indexing (the usual handful of +1/-1)
SIGNATURE_NONZEROS = 8
TOP_TERMS = 5
#: Spark's StreamingKMeans threshold: a cluster weighing less than this fraction of the largest is dying
DYING_FRACTION = 1e-8

MUTATION_COLUMNS = ["from_batch", "from_cluster", "to_batch", "to_cluster", "similarity", "shared_stories"]


@dataclass
class ClusterResult:
    """One clustering: a label per text, the top terms and size of each cluster, the projected vectors."""

    labels: np.ndarray
    top_terms: dict[int, list[str]]
    sizes: dict[int, int]
    centroids: np.ndarray = field(repr=False)


@dataclass
class BatchClusters:
    """The streaming model after one batch: labels of the batch's texts under the updated centroids."""

    key: str
    labels: np.ndarray
    centroids: np.ndarray = field(repr=False)
    weights: np.ndarray
    sizes: dict[int, int]
    top_terms: dict[int, list[str]]
    vectors: np.ndarray = field(repr=False)


@dataclass
class StreamResult:
    batches: list[BatchClusters]
    n_clusters: int
    half_life_batches: float
    decay: float


# --------------------------------------------------------------------------------------------- vectors


def _check_texts(texts: Sequence[str], what: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{what} must be a sequence of strings, not one string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] must be a string, got {type(text).__name__}")
    return texts


def _hasher() -> HashingVectorizer:
    # raw counts: IDF and normalisation come after, so they can be computed over what has been seen so far
    return HashingVectorizer(
        n_features=HASH_FEATURES, alternate_sign=False, norm=None, stop_words="english", dtype=np.float64
    )


@lru_cache(maxsize=8)
def _projection(dims: int, seed: int) -> SparseRandomProjection:
    """The random-indexing signatures: fixed by (dims, seed), shared by every batch so spaces stay comparable."""
    if dims < 2:
        raise ValueError(f"dims must be at least 2, got {dims}")
    density = min(1.0, SIGNATURE_NONZEROS / dims)
    projection = SparseRandomProjection(
        n_components=dims, density=density, dense_output=True, random_state=seed
    )
    projection.fit(sparse.csr_matrix((1, HASH_FEATURES)))
    return projection


def _embed(counts: sparse.csr_matrix, idf: np.ndarray, dims: int, seed: int) -> np.ndarray:
    tfidf = normalize(counts @ sparse.diags(idf))
    return normalize(np.asarray(_projection(dims, seed).transform(tfidf)))


def _top_terms(texts: list[str], labels: np.ndarray, clusters: Sequence[int]) -> dict[int, list[str]]:
    """Words with the highest mean TF-IDF among each cluster's members (labels only, see module doc)."""
    result: dict[int, list[str]] = {int(c): [] for c in clusters}
    try:
        vectorizer = TfidfVectorizer(stop_words="english", max_features=20000, sublinear_tf=True)
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # no word at all in these texts
        return result
    vocabulary = vectorizer.get_feature_names_out()
    for cluster in result:
        members = np.flatnonzero(labels == cluster)
        if len(members) == 0:
            continue
        means = np.asarray(matrix[members].mean(axis=0)).ravel()
        # ties broken by the word itself, so the labels are the same on every run
        order = sorted(np.flatnonzero(means), key=lambda j: (-means[j], vocabulary[j]))
        result[cluster] = [str(vocabulary[j]) for j in order[:TOP_TERMS]]
    return result


def _sizes(labels: np.ndarray, n_clusters: int) -> dict[int, int]:
    counts = np.bincount(labels, minlength=n_clusters) if len(labels) else np.zeros(n_clusters, dtype=int)
    return {c: int(counts[c]) for c in range(n_clusters)}


# --------------------------------------------------------------------------------------------- batch


def cluster_stories(texts: Sequence[str], n_clusters: int, seed: int = 0, dims: int = 256) -> ClusterResult:
    """KMeans over hashed TF-IDF projected by random indexing; deterministic for a seed."""
    texts = _check_texts(texts)
    if not isinstance(n_clusters, int) or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    if n_clusters > len(texts):
        raise ValueError(f"n_clusters ({n_clusters}) is larger than the number of texts ({len(texts)})")
    counts = _hasher().transform(texts)
    idf = TfidfTransformer().fit(counts).idf_
    vectors = _embed(counts, idf, dims, seed)
    model = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(vectors)
    labels = model.labels_.astype(np.int64)
    return ClusterResult(
        labels=labels,
        top_terms=_top_terms(texts, labels, range(n_clusters)),
        sizes=_sizes(labels, n_clusters),
        centroids=model.cluster_centers_,
    )


# --------------------------------------------------------------------------------------------- streaming


def _assign(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    distances = (vectors**2).sum(1)[:, None] - 2 * vectors @ centroids.T + (centroids**2).sum(1)[None, :]
    return distances.argmin(axis=1).astype(np.int64)


def _revive_dying(centroids: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> None:
    """Spark's rule: a cluster far lighter than the largest is dropped and the largest split in two.

    Spark perturbs by 1e-14 of the centre, below what float distances can separate; a small random direction
    splits the largest story along a random hyperplane, which the next batches then pull apart."""
    for _ in range(len(weights)):
        smallest, largest = int(weights.argmin()), int(weights.argmax())
        if weights[largest] <= 0 or weights[smallest] >= DYING_FRACTION * weights[largest]:
            return
        half = (weights[largest] + weights[smallest]) / 2
        weights[largest] = weights[smallest] = half
        noise = rng.standard_normal(centroids.shape[1]) * 1e-3 * max(np.linalg.norm(centroids[largest]), 1e-6)
        centre = centroids[largest].copy()
        centroids[largest], centroids[smallest] = centre + noise, centre - noise


def stream_clusters(
    batches: Sequence[tuple[str, Sequence[str]]],
    n_clusters: int,
    half_life_batches: float = 2.0,
    seed: int = 0,
    dims: int = 256,
) -> StreamResult:
    """Streaming KMeans over time batches, oldest first.

    Per batch: documents are embedded with IDF over every text seen so far (no look-ahead), assigned to the
    nearest centre, and each centre moves to ``(c·n·a + mean·m) / (n·a + m)`` with ``a = 0.5 ** (1/half_life)``
    (Spark's forgetful update), so a story drifts with its articles. The first batch seeds the centres with
    KMeans; clusters it cannot fill are revived by splitting. Labels are given by the centres after the batch.
    """
    if not isinstance(n_clusters, int) or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    if not half_life_batches > 0:
        raise ValueError(f"half_life_batches must be positive, got {half_life_batches!r}")
    batch_list = [(str(key), _check_texts(texts, f"batch {key!r}")) for key, texts in batches]
    if len({key for key, _ in batch_list}) != len(batch_list):
        raise ValueError("batch keys must be unique")
    decay = 0.5 ** (1.0 / half_life_batches)
    rng = np.random.default_rng(seed)
    hasher = _hasher()
    document_frequency = np.zeros(HASH_FEATURES)
    documents_seen = 0
    centroids: np.ndarray | None = None
    weights = np.zeros(n_clusters)
    results: list[BatchClusters] = []
    for key, texts in batch_list:
        counts = hasher.transform(texts) if texts else sparse.csr_matrix((0, HASH_FEATURES))
        document_frequency += np.asarray((counts > 0).sum(axis=0)).ravel()
        documents_seen += len(texts)
        # sklearn's smoothed IDF, over the stream so far
        idf = np.log((1 + documents_seen) / (1 + document_frequency)) + 1
        vectors = _embed(counts, idf, dims, seed) if texts else np.zeros((0, dims))
        weights *= decay
        if centroids is None and len(texts):
            distinct = len(np.unique(vectors.round(12), axis=0))
            seeded = KMeans(n_clusters=min(n_clusters, distinct), n_init=10, random_state=seed).fit(vectors)
            centroids = np.zeros((n_clusters, dims))
            centroids[: seeded.n_clusters] = seeded.cluster_centers_
            weights[: seeded.n_clusters] = np.bincount(seeded.labels_, minlength=seeded.n_clusters)
            _revive_dying(centroids, weights, rng)
        elif centroids is not None and len(texts):
            assigned = _assign(vectors, centroids)
            for cluster in range(n_clusters):
                members = vectors[assigned == cluster]
                if len(members) == 0:
                    continue
                total = weights[cluster] + len(members)
                centroids[cluster] = (centroids[cluster] * weights[cluster] + members.sum(axis=0)) / total
                weights[cluster] = total
            _revive_dying(centroids, weights, rng)
        labels = _assign(vectors, centroids) if centroids is not None else np.zeros(0, dtype=np.int64)
        results.append(
            BatchClusters(
                key=key,
                labels=labels,
                centroids=(centroids if centroids is not None else np.zeros((n_clusters, dims))).copy(),
                weights=weights.copy(),
                sizes=_sizes(labels, n_clusters),
                top_terms=_top_terms(texts, labels, range(n_clusters)),
                vectors=vectors,
            )
        )
    return StreamResult(results, n_clusters, float(half_life_batches), decay)


def mutation_graph(stream_result: StreamResult, min_similarity: float = 0.5) -> pd.DataFrame:
    """Edges from each cluster of a batch to the clusters of the next batch whose centres are cosine-similar.

    Only clusters holding stories in their batch are nodes. ``shared_stories`` is the chapter's evidence: how
    many of the batch's stories the next batch's centres would put in ``to_cluster``."""
    if not -1.0 <= min_similarity <= 1.0:
        raise ValueError(f"min_similarity must lie in [-1, 1], got {min_similarity!r}")
    rows = []
    batches = stream_result.batches
    for before, after in zip(batches, batches[1:], strict=False):
        alive_before = [c for c, n in before.sizes.items() if n > 0]
        alive_after = [c for c, n in after.sizes.items() if n > 0]
        if not alive_before or not alive_after:
            continue
        similarity = normalize(before.centroids) @ normalize(after.centroids).T
        moved = _assign(before.vectors, after.centroids)
        for i in alive_before:
            members = moved[before.labels == i]
            for j in alive_after:
                if similarity[i, j] >= min_similarity:
                    rows.append(
                        (before.key, i, after.key, j, float(similarity[i, j]), int((members == j).sum()))
                    )
    return pd.DataFrame(rows, columns=MUTATION_COLUMNS).astype(
        {"from_cluster": "int64", "to_cluster": "int64", "similarity": "float64", "shared_stories": "int64"}
    )


# --------------------------------------------------------------------------------------------- picture


def render_cluster_timeline(
    stream_result: StreamResult, mutation_edges: pd.DataFrame, path_png: str | Path
) -> Path:
    """Batches left to right, clusters as nodes sized by their stories, mutation edges, top terms as labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    batches = stream_result.batches
    column = {b.key: x for x, b in enumerate(batches)}
    largest = max([n for b in batches for n in b.sizes.values()] + [1])
    width = min(4 + 2.2 * len(batches), 40)
    height = min(2 + 0.8 * stream_result.n_clusters, 20)
    figure, axes = plt.subplots(figsize=(width, height))
    try:
        for edge in mutation_edges.itertuples(index=False):
            if edge.from_batch not in column or edge.to_batch not in column:
                continue
            axes.plot(
                [column[edge.from_batch], column[edge.to_batch]],
                [edge.from_cluster, edge.to_cluster],
                color="tab:gray",
                linewidth=0.5 + 2.5 * max(edge.similarity, 0.0),
                alpha=0.3 + 0.6 * max(edge.similarity, 0.0),
                zorder=1,
            )
        for x, batch in enumerate(batches):
            alive = [c for c, n in batch.sizes.items() if n > 0]
            axes.scatter(
                [x] * len(alive),
                alive,
                s=[40 + 900 * batch.sizes[c] / largest for c in alive],
                c=[f"C{c % 10}" for c in alive],
                zorder=2,
                edgecolors="black",
                linewidths=0.5,
            )
            for c in alive:
                label = ", ".join(batch.top_terms.get(c, [])[:3])
                axes.annotate(label, (x, c), xytext=(8, 6), textcoords="offset points", fontsize=7)
        axes.set_xticks(range(len(batches)), [b.key for b in batches], rotation=45, ha="right", fontsize=8)
        axes.set_yticks(range(stream_result.n_clusters))
        axes.set_xlim(-0.5, max(len(batches) - 0.5, 0.5) + 0.6)
        axes.set_ylim(-0.7, stream_result.n_clusters - 0.3)
        axes.set_xlabel("batch")
        axes.set_ylabel("cluster")
        axes.set_title(f"Story clusters over time (half-life {stream_result.half_life_batches:g} batches)")
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path
