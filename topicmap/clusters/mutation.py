"""Story mutation, the chapter's way: a streaming KMeans stepped batch by batch, and the stories that move.

After each batch updates the model, the stories of the last ``window`` batches (the chapter: four) are predicted
again, with the model as it was before the update and as it is after it; wherever stories changed cluster an
edge (batch, from cluster, to cluster, stories) is recorded. The chapter compares with the cluster each story was
given when it arrived (its stored ``topic``); comparing with the model just before the update counts each move
once, in the batch that caused it, instead of again in every later batch of the window.

The edge runs from the node (previous batch, from cluster) to the node (batch, to cluster): a graph of batch x
cluster nodes, where stories that stayed draw the chapter's straight lines and stories that moved draw branches
(a dying cluster re-seeded by splitting the largest shows as stories moving from the largest to the reborn one).

State carried from batch to batch (``StreamState``): the model, the k choice, and the document frequencies so a
new batch is weighed by everything seen so far and nothing after it.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from topicmap.clusters.model import (
    DIMS,
    HASH_FEATURES,
    KChoice,
    choose_k,
    cluster_label,
    document_frequency,
    embed,
    kmeans_fit,
    nearest_titles,
    smoothed_idf,
    term_counts,
    tokenize,
    top_terms,
)
from topicmap.clusters.streaming import TIME_UNITS, StreamingKMeans, TimeUnit

#: the chapter re-predicts the last four batches
WINDOW_BATCHES = 4
TRANSITION_COLUMNS = ["batch", "from_batch", "from_cluster", "to_cluster", "stories"]
EDGE_COLUMNS = ["batch", "from_cluster", "to_cluster", "stories"]
NODE_COLUMNS = ["batch", "cluster", "stories", "window_stories", "label", "top_terms", "titles"]
STORY_COLUMNS = ["stories_id", "title", "cluster_before", "cluster", "distance"]


@dataclass(frozen=True)
class StreamConfig:
    """How a stream is clustered. The chapter: 15 clusters, a half-life of two batches."""

    k_min: int = 2
    k_max: int = 15
    half_life: float = 2.0
    time_unit: TimeUnit = "batches"
    #: the model starts when a batch and the window before it hold this many stories (the SSE curve of a handful
    #: of stories says little about k)
    min_stories: int = 50
    window: int = WINDOW_BATCHES
    dims: int = DIMS
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.k_min <= self.k_max:
            raise ValueError(f"k bounds must satisfy 1 <= k_min <= k_max, got {self.k_min}, {self.k_max}")
        if not self.half_life > 0:
            raise ValueError(f"half_life must be positive, got {self.half_life!r}")
        if self.time_unit not in TIME_UNITS:
            raise ValueError(f"time_unit must be one of {TIME_UNITS}, got {self.time_unit!r}")
        if self.min_stories < 2 or self.window < 1:
            raise ValueError("min_stories must be at least 2 and window at least 1")

    def as_dict(self) -> dict:
        return {
            "k_min": self.k_min,
            "k_max": self.k_max,
            "half_life": self.half_life,
            "time_unit": self.time_unit,
            "min_stories": self.min_stories,
            "window": self.window,
            "dims": self.dims,
            "seed": self.seed,
        }


@dataclass
class StreamState:
    """What one batch leaves for the next."""

    batches: int = 0
    last_key: str | None = None
    documents: int = 0
    frequency: np.ndarray = field(default_factory=lambda: np.zeros(HASH_FEATURES, dtype=np.int64))
    model: StreamingKMeans | None = None
    choice: KChoice | None = None
    config: dict = field(default_factory=dict)

    def _meta(self) -> dict:
        return {
            "batches": self.batches,
            "last_key": self.last_key,
            "documents": self.documents,
            "decay_factor": None if self.model is None else self.model.decay_factor,
            "time_unit": None if self.model is None else self.model.time_unit,
            "choice": None if self.choice is None else self.choice.as_dict(),
            "config": self.config,
        }

    def fingerprint(self) -> str:
        """A digest of the content (not of the files, whose zip headers carry times): equal state, equal digest."""
        digest = hashlib.sha256(json.dumps(self._meta(), sort_keys=True).encode())
        digest.update(np.ascontiguousarray(self.frequency, dtype=np.int64).tobytes())
        if self.model is not None:
            digest.update(self.model.centers.tobytes())
            digest.update(self.model.weights.tobytes())
        return digest.hexdigest()[:16]

    def save(self, folder: Path) -> None:
        """state.npz (arrays) and state.json (the rest) in ``folder``. The document frequencies are stored as
        their non-zero buckets and counts: the dense 2 MB array took 0.14 s a week to compress with numpy's
        default, more than the week's stream step on an 800-week topic."""
        buckets = np.flatnonzero(self.frequency)
        arrays: dict[str, np.ndarray] = {
            "hash_features": np.array(len(self.frequency)),
            "frequency_buckets": buckets.astype(np.int32),
            "frequency_counts": self.frequency[buckets],
        }
        if self.model is not None:
            arrays["centers"] = self.model.centers
            arrays["weights"] = self.model.weights
        with zipfile.ZipFile(folder / "state.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, array in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
        (folder / "state.json").write_text(json.dumps(self._meta(), indent=1))

    @classmethod
    def load(cls, folder: Path) -> StreamState:
        meta = json.loads((folder / "state.json").read_text())
        with np.load(folder / "state.npz") as arrays:
            if "frequency" in arrays:  # weeks written before the frequencies were stored sparse
                frequency = arrays["frequency"]
            else:
                frequency = np.zeros(int(arrays["hash_features"]), dtype=np.int64)
                frequency[arrays["frequency_buckets"]] = arrays["frequency_counts"]
            model = None
            if "centers" in arrays:
                model = StreamingKMeans(
                    arrays["centers"], arrays["weights"], meta["decay_factor"], meta["time_unit"]
                )
        if frequency.shape != (HASH_FEATURES,):
            raise ValueError(f"{folder}: state was written with another hash size ({frequency.shape[0]})")
        choice = KChoice(**meta["choice"]) if meta["choice"] else None
        return cls(
            meta["batches"], meta["last_key"], meta["documents"], frequency, model, choice, meta["config"]
        )


@dataclass
class WindowBatch:
    """An earlier batch's stories as they were embedded then (the chapter re-reads stored vectors)."""

    key: str
    stories_id: np.ndarray
    vectors: np.ndarray


@dataclass
class BatchStep:
    """One batch through the stream: the new state, the batch's stories, the mutation edges and nodes."""

    key: str
    state: StreamState
    stories: pd.DataFrame  # STORY_COLUMNS
    vectors: np.ndarray  # float32, as stored and re-read by later batches
    transitions: pd.DataFrame  # TRANSITION_COLUMNS, stayed (from == to) and moved
    nodes: pd.DataFrame  # NODE_COLUMNS

    @property
    def edges(self) -> pd.DataFrame:
        """The chapter's mutation edges: stories that changed cluster in this batch's update."""
        moved = self.transitions[self.transitions.from_cluster != self.transitions.to_cluster]
        return moved[EDGE_COLUMNS].reset_index(drop=True)

    def window_batch(self) -> WindowBatch:
        return WindowBatch(self.key, self.stories["stories_id"].to_numpy(), self.vectors.astype(np.float64))


def advance(
    state: StreamState,
    key: str,
    stories_id: Sequence[int],
    titles: Sequence[str],
    texts: Sequence[str],
    window: Sequence[WindowBatch] = (),
    config: StreamConfig | None = None,
    languages: Sequence[str | None] | None = None,
) -> BatchStep:
    """Run one batch: embed (IDF over all batches so far), update the model, re-predict the window."""
    config = config or StreamConfig()
    stories_id = np.asarray(stories_id, dtype=np.int64)
    titles, texts = list(titles), list(texts)
    if not len(stories_id) == len(titles) == len(texts):
        raise ValueError(
            f"batch {key!r}: {len(stories_id)} stories_id, {len(titles)} titles, {len(texts)} texts"
        )
    if state.last_key is not None and str(key) <= state.last_key:
        raise ValueError(f"batch {key!r} does not come after the state's last batch {state.last_key!r}")
    tokens = tokenize(texts)
    counts = term_counts(tokens)
    frequency = state.frequency + document_frequency(counts)
    documents = state.documents + len(texts)
    # stored as float32; the model sees exactly what later batches will re-read
    vectors32 = embed(counts, smoothed_idf(frequency, documents), config.dims, config.seed).astype(np.float32)
    vectors = vectors32.astype(np.float64)

    before = state.model.copy() if state.model is not None else None
    model, choice = (state.model.copy() if state.model is not None else None), state.choice
    recent = list(window)[-(config.window - 1) :] if config.window > 1 else []
    if model is None:
        # the model starts once this batch and the window's (still unclustered) batches hold min_stories: KMeans
        # on them seeds it, k read from their SSE curve. The chapter starts from random centres of weight 0,
        # which Spark's update then drags onto whichever points come nearest; this is that start done well.
        pooled = np.vstack([w.vectors for w in recent if len(w.vectors)] + [vectors])
        if len(pooled) >= config.min_stories:
            choice = choose_k(pooled, config.k_min, config.k_max, config.seed)
            seeded = kmeans_fit(pooled, choice.k, config.seed)
            weights = np.bincount(seeded.labels_, minlength=choice.k).astype(np.float64)
            model = StreamingKMeans.half_life(
                seeded.cluster_centers_, weights, config.half_life, config.time_unit
            )
    else:
        model.update(vectors)

    n = len(texts)
    no_cluster = np.full(n, -1, dtype=np.int64)
    cluster_before = before.predict(vectors) if before is not None and n else no_cluster
    cluster, distance = no_cluster, np.full(n, np.nan)
    if model is not None and n:
        cluster, distance = model.nearest(vectors)
        distance = np.sqrt(np.maximum(distance, 0.0))
    stories = pd.DataFrame(
        {
            "stories_id": stories_id,
            "title": pd.Series(titles, dtype="string"),
            "cluster_before": cluster_before,
            "cluster": cluster,
            "distance": distance,
        }
    )

    transitions = pd.DataFrame(columns=TRANSITION_COLUMNS)
    if before is not None and model is not None:
        pooled = [w.vectors for w in recent if len(w.vectors)] + ([vectors] if n else [])
        if pooled:
            every = np.vstack(pooled)
            pairs = pd.DataFrame({"from_cluster": before.predict(every), "to_cluster": model.predict(every)})
            transitions = pairs.groupby(["from_cluster", "to_cluster"]).size().rename("stories").reset_index()
            transitions.insert(0, "from_batch", state.last_key)
            transitions.insert(0, "batch", str(key))
            transitions = transitions[TRANSITION_COLUMNS]
    transitions = transitions.astype(
        {
            "batch": "string",
            "from_batch": "string",
            "from_cluster": "int64",
            "to_cluster": "int64",
            "stories": "int64",
        }
    )

    nodes = pd.DataFrame(columns=NODE_COLUMNS)
    if model is not None:
        window_labels = [model.predict(w.vectors) for w in recent if len(w.vectors)]
        window_sizes = np.bincount(np.concatenate([*window_labels, cluster]), minlength=model.k)
        alive = sorted(set(np.flatnonzero(window_sizes).tolist()) | set(cluster[cluster >= 0].tolist()))
        terms = top_terms(counts, tokens, cluster, alive, languages)
        near = nearest_titles(vectors, cluster, model.centers, titles, alive)
        own = np.bincount(cluster[cluster >= 0], minlength=model.k)
        nodes = pd.DataFrame(
            {
                "batch": pd.Series([str(key)] * len(alive), dtype="string"),
                "cluster": np.asarray(alive, dtype=np.int64),
                "stories": np.asarray([own[c] for c in alive], dtype=np.int64),
                "window_stories": np.asarray([window_sizes[c] for c in alive], dtype=np.int64),
                "label": [cluster_label(terms[c], near[c]) for c in alive],
                "top_terms": [terms[c] for c in alive],
                "titles": [near[c] for c in alive],
            }
        )

    new_state = StreamState(
        batches=state.batches + 1,
        last_key=str(key),
        documents=documents,
        frequency=frequency,
        model=model,
        choice=choice,
        config=config.as_dict(),
    )
    return BatchStep(str(key), new_state, stories, vectors32, transitions, nodes)


def stream_batches(
    batches: Sequence[tuple[str, Sequence[int], Sequence[str], Sequence[str]]],
    config: StreamConfig | None = None,
    state: StreamState | None = None,
) -> list[BatchStep]:
    """Every batch (key, stories_id, titles, texts) in order, in memory: what the weekly partitions do on disk."""
    config = config or StreamConfig()
    state = state or StreamState()
    steps: list[BatchStep] = []
    for key, ids, titles, texts in batches:
        window = [s.window_batch() for s in steps[-(config.window - 1) :]] if config.window > 1 else []
        step = advance(state, key, ids, titles, texts, window, config)
        steps.append(step)
        state = step.state
    return steps


# --------------------------------------------------------------------------------------------- graph


def mutation_graph(nodes: pd.DataFrame, transitions: pd.DataFrame):  # noqa: ANN201  (networkx.DiGraph)
    """Batch x cluster nodes (size: stories, top terms, the titles nearest the centre) and edges of stories
    that stayed (``kind`` "stayed") or moved ("moved"), weighted by how many."""
    import networkx as nx

    graph = nx.DiGraph()
    largest = max([1, *nodes["stories"].tolist()]) if len(nodes) else 1

    def add_node(batch: str, cluster: int, row: dict | None) -> str:
        node = f"{batch}:{cluster}"
        if node in graph:
            return node
        row = row or {"stories": 0, "window_stories": 0, "label": "", "top_terms": [], "titles": []}
        graph.add_node(
            node,
            label=f"{batch} #{cluster} {row['label']}".strip(),
            batch=str(batch),
            cluster=int(cluster),
            stories=int(row["stories"]),
            window_stories=int(row["window_stories"]),
            top_terms=", ".join(row["top_terms"]),
            titles=" | ".join(row["titles"]),
            viz={"size": float(4 + 36 * int(row["stories"]) / largest)},
        )
        return node

    for row in nodes.to_dict("records"):
        add_node(row["batch"], row["cluster"], row)
    for row in transitions.to_dict("records"):
        if row["from_batch"] is None or pd.isna(row["from_batch"]):
            continue
        source = add_node(row["from_batch"], row["from_cluster"], None)
        target = add_node(row["batch"], row["to_cluster"], None)
        kind = "stayed" if row["from_cluster"] == row["to_cluster"] else "moved"
        graph.add_edge(source, target, weight=float(row["stories"]), stories=int(row["stories"]), kind=kind)
    return graph


def write_gexf(nodes: pd.DataFrame, transitions: pd.DataFrame, path: Path) -> Path:
    import networkx as nx

    nx.write_gexf(mutation_graph(nodes, transitions), path)
    return path
