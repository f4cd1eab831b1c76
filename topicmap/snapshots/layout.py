"""The link map's force-directed layout: networkx's spring layout, computed faster, to the same bits.

networkx's dense Fruchterman-Reingold loop (graphs under 500 nodes) takes each distance with
``np.linalg.norm(..., axis=-1)``: a reduction over an axis of two values, most of the loop's time. Here the
same distances come from ``sqrt(x * x + y * y)``, the very operations that reduction performs, in the same
order, so every position is bit for bit networkx's (the pictures keep their bytes); the rest of the loop is
networkx's own, step for step. Other graphs go to ``nx.spring_layout`` itself.
"""

from __future__ import annotations

from collections.abc import Hashable

import networkx as nx
import numpy as np

# networkx switches to its sparse solver from this many nodes on.
_DENSE_BELOW = 500
# networkx's default: stop when the mean step is this small.
_THRESHOLD = 1e-4


def spring_layout(
    graph: nx.Graph, weight: str, seed: int, iterations: int, k: float
) -> dict[Hashable, np.ndarray]:
    """``nx.spring_layout(graph, weight=weight, seed=seed, iterations=iterations, k=k)``, the same positions."""
    nodes = graph.number_of_nodes()
    if not 2 <= nodes < _DENSE_BELOW:
        return nx.spring_layout(graph, weight=weight, seed=seed, iterations=iterations, k=k)
    adjacency = nx.to_numpy_array(graph, weight=weight)
    pos = np.random.RandomState(seed).rand(nodes, 2)
    # the initial temperature, cooled linearly to one step of dt
    t = max(max(pos.T[0]) - min(pos.T[0]), max(pos.T[1]) - min(pos.T[1])) * 0.1
    dt = t / (iterations + 1)
    for _ in range(iterations):
        delta = pos[:, np.newaxis, :] - pos[np.newaxis, :, :]
        distance = _lengths(delta)
        np.clip(distance, 0.01, None, out=distance)
        displacement = np.einsum("ijk,ij->ik", delta, (k * k / distance**2 - adjacency * distance / k))
        length = np.clip(_lengths(displacement), a_min=0.01, a_max=None)
        delta_pos = np.einsum("ij,i->ij", displacement, t / length)
        pos += delta_pos
        t -= dt
        if (np.linalg.norm(delta_pos) / nodes) < _THRESHOLD:
            break
    pos = nx.rescale_layout(pos, scale=1) + np.zeros(2)
    return dict(zip(graph, pos, strict=True))


def _lengths(vectors: np.ndarray) -> np.ndarray:
    """The Euclidean length along the last axis of two: what ``np.linalg.norm(vectors, axis=-1)`` computes."""
    x, y = vectors[..., 0], vectors[..., 1]
    return np.sqrt(x * x + y * y)
